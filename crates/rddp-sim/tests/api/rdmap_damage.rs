//! A damaged FPDU on the link (RFC 5044 §4.4, §8; RFC 5040 §4.8): the
//! receiver sends the right Terminate, the sender hears it, both close, and
//! no octet outside the damaged message's target changes.

use crate::rdmap_fixture::{mpa_pair, octets, pattern, region, send, write};
use rddp_proto::mem::Access;
use rddp_proto::rdmap::WcStatus;
use rddp_sim::{Chunking, Dir, Llp, PairConfig, RdmapPair};
use rddp_wire::TerminateCode;

/// A Write of 3000 octets from A with CRC (Markers off) and one octet of its
/// FPDUs flipped on the way, anywhere past the first ULPDU_Length (which
/// would announce a different length: see below): B sends 2/0/0x02 (a bad
/// header's own refusal waits for the CRC, RFC 5041 §7.1), A receives it,
/// both close; B's other region, its receive buffer and the octets around
/// the Write's target stay as they were.
#[test]
fn a_flipped_octet_in_a_write_is_an_mpa_crc_error_and_changes_nothing_outside() {
    for seed in 0..200 {
        let what = format!("seed {seed}");
        let mut p = mpa_pair(true, false, seed);
        p.set_delay(Dir::AtoB, 1);
        let b = p.b_mut();
        let sink = region(&b.mem, Access::REMOTE_WRITE, vec![0xEE; 8192]);
        let other = region(&b.mem, Access::REMOTE_WRITE, vec![0x11; 4096]);
        b.post_recv(7, 4096).unwrap();
        let data = pattern(3000, 9);
        p.a_mut().post(write(1, &data, sink, 1000));
        // Sent, on the way.
        assert!(p.step().unwrap(), "{what}: nothing on the way");
        let mut len = 0;
        p.tamper(Dir::AtoB, |w| len = w.len());
        let at = 2 + (seed as usize * 7919) % (len - 2);
        p.tamper(Dir::AtoB, |w| w[at] ^= 1 << (seed % 8));
        p.run_until_idle().unwrap();

        let (a, b) = (p.a(), p.b());
        assert_eq!(
            b.terminate_sent(),
            Some(TerminateCode::MPA_CRC_ERROR),
            "{what}: flipped octet {at} of {len}: {:?}",
            b.events()
        );
        let t = a.terminate_received().expect("A heard the Terminate");
        assert_eq!(t.code, TerminateCode::MPA_CRC_ERROR, "{what}");
        assert!(
            !t.m && !t.d() && !t.r,
            "{what}: LLP errors carry no headers"
        );
        assert!(a.llp_closed() && b.llp_closed(), "{what}: both close");
        // Nothing delivered: the receive is flushed, never a success.
        assert!(
            b.completions()
                .iter()
                .all(|c| c.status != WcStatus::Success),
            "{what}: {:?}",
            b.completions()
        );
        // The Write's own range may hold its octets (undefined after a CRC
        // failure); every other octet is as it was.
        let got = octets(&b.mem, sink);
        assert!(got[..1000].iter().all(|&o| o == 0xEE), "{what}: before");
        assert!(got[4000..].iter().all(|&o| o == 0xEE), "{what}: after");
        assert_eq!(octets(&b.mem, other), vec![0x11; 4096], "{what}");
        assert!(b.mem.all_guards_intact(), "{what}");
    }
}

/// Ported from rddp-mpa's socket test, which wrote the first 16 octets,
/// slept, then wrote the rest: header first, the payload read straight into
/// the region later, a bad CRC: 2/0/0x02, nothing delivered, the octets
/// landed (undefined after a CRC failure) and none outside the target.
#[test]
fn a_bad_crc_on_a_directly_placed_fpdu_arriving_after_its_header() {
    for reader in [
        rddp_sim::Reader::HeaderFirst,
        rddp_sim::Reader::Buffered,
        rddp_sim::Reader::BufferedStream,
    ] {
        let mut cfg = PairConfig::mpa(true, false);
        if let Llp::Mpa(m) = &mut cfg.llp {
            m.emss = 9000;
            m.chunking = Chunking::SplitAt(16);
            m.reader = reader;
        }
        cfg.delay_ab = 1;
        let mut p = RdmapPair::new(cfg, 5).unwrap();
        let sink = region(&p.b().mem, Access::REMOTE_WRITE, vec![0; 4096]);
        p.a_mut().post(write(1, &[0x77; 4000], sink, 0));
        assert!(p.step().unwrap());
        p.tamper(Dir::AtoB, |w| {
            let n = w.len();
            w[n - 2] ^= 1;
        });
        p.run_until_idle().unwrap();
        let b = p.b();
        assert_eq!(
            b.terminate_sent(),
            Some(TerminateCode::MPA_CRC_ERROR),
            "{reader:?}"
        );
        assert_eq!(b.rdmap.stats().crc_errors, 1, "{reader:?}");
        assert_eq!(b.rdmap.stats().messages_delivered, 0, "{reader:?}");
        let got = octets(&b.mem, sink);
        assert_eq!(&got[..4000], &[0x77; 4000][..], "{reader:?}: placed");
        assert_eq!(&got[4000..], &[0; 96][..], "{reader:?}");
        assert_eq!(
            p.a().terminate_received().map(|t| t.code),
            Some(TerminateCode::MPA_CRC_ERROR)
        );
    }
}

/// Ported from rddp's socket test (a raw peer, then a two-second sleep to
/// keep the queue pair): with Markers, a first FPDU whose leading Marker
/// carries FPDUPTR 8 instead of 0 (the CRC recomputed, so only the Marker is
/// wrong) is 2/0/0x03, with no headers, and the connection closes (RFC 5044
/// §4.3, §8).
#[test]
fn a_marker_that_disagrees_with_the_framing_is_2_0_3() {
    let mut cfg = PairConfig::mpa(true, true);
    cfg.delay_ab = 1;
    let mut p = RdmapPair::new(cfg, 1).unwrap();
    let sink = region(&p.b().mem, Access::REMOTE_WRITE, vec![0; 64]);
    p.a_mut().post(write(1, &[], sink, 0));
    assert!(p.step().unwrap());
    p.tamper(Dir::AtoB, |f| {
        assert_eq!(&f[..4], &[0, 0, 0, 0], "a leading Marker with FPDUPTR 0");
        f[3] = 8;
        let n = f.len();
        let crc = rddp_wire::crc32c(&f[..n - 4]);
        f[n - 4..].copy_from_slice(&crc.to_le_bytes());
    });
    p.run_until_idle().unwrap();
    let t = p.a().terminate_received().expect("a Terminate");
    assert_eq!(t.code, TerminateCode::MPA_MARKER_MISMATCH);
    assert!(
        !t.m && !t.d() && !t.r,
        "LLP errors carry no headers (RFC 5040 §4.8)"
    );
    assert!(p.a().llp_closed() && p.b().llp_closed(), "closed after it");
}

/// The same flip with Markers on, in a Send's payload: 2/0/0x02, the receive
/// buffer never completes with data.
#[test]
fn a_flipped_payload_octet_between_markers_is_an_mpa_crc_error() {
    let mut cfg = PairConfig::mpa(true, true);
    cfg.delay_ab = 1;
    let mut p = RdmapPair::new(cfg, 2).unwrap();
    p.b_mut().post_recv(7, 2048).unwrap();
    p.a_mut().post(send(1, &pattern(1200, 4)));
    assert!(p.step().unwrap());
    // Octet 300: past the leading Marker and the headers, before the
    // Marker at 512 (RFC 5044 §4.3).
    p.tamper(Dir::AtoB, |w| w[300] ^= 0x40);
    p.run_until_idle().unwrap();
    assert_eq!(p.b().terminate_sent(), Some(TerminateCode::MPA_CRC_ERROR));
    let c = p.b().completions();
    assert!(c.iter().all(|c| c.status != WcStatus::Success), "{c:?}");
}
