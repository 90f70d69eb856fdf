//! The sans-IO engines in memory: setup split at every byte boundary, deadlines
//! driven by the caller's clock, FPDU streams split at every byte boundary and
//! delivered many FPDUs per read, MULPDU re-set from a new EMSS.

use crate::common::rdmap_conn::Feed;
use crate::common::{BASE_TO, RdmapConn, pattern, send, table, write};
use rddp_mpa::fpdu::Progress;
use rddp_mpa::{Initiator, MpaError, MpaOptions, Negotiated, Responder, SetupStatus};
use rddp_proto::mem::{MemoryTable, Stag};
use rddp_proto::rdmap::{WcOpcode, WcStatus};
use rddp_wire::{FpduDecoder, TerminateCode, mulpdu};
use std::time::{Duration, Instant};

/// Run setup in memory, delivering each side's octets split at `cut`.
fn setup(iopts: &MpaOptions, ropts: &MpaOptions, cut: usize) -> (Negotiated, Negotiated) {
    let now = Instant::now();
    let mut i = Initiator::new(iopts, now).unwrap();
    let mut r = Responder::new(ropts, now);
    let req = i.poll_transmit().unwrap();
    let c = cut.min(req.len());
    assert_eq!(r.on_bytes(&req[..c]), c);
    assert_eq!(r.on_bytes(&req[c..]), req.len() - c);
    assert_eq!(r.status(), SetupStatus::Requested);
    r.accept().unwrap();
    let rep = r.poll_transmit().unwrap();
    let c = cut.min(rep.len());
    assert_eq!(i.on_bytes(&rep[..c]), c);
    assert_eq!(i.on_bytes(&rep[c..]), rep.len() - c);
    assert_eq!(i.status(), SetupStatus::Established);
    (
        i.take_result().unwrap().unwrap(),
        r.take_result().unwrap().unwrap(),
    )
}

#[test]
fn setup_split_at_every_byte() {
    let io = MpaOptions {
        private_data: pattern(300, 3),
        ..MpaOptions::default()
    };
    let ro = MpaOptions {
        private_data: pattern(200, 4),
        markers: true,
        ..MpaOptions::default()
    };
    let first = setup(&io, &ro, 0);
    for cut in 1..340 {
        assert_eq!(setup(&io, &ro, cut), first, "cut {cut}");
    }
    assert_eq!(first.0.peer_private_data, pattern(200, 4));
    assert_eq!(first.1.peer_private_data, pattern(300, 3));
    assert!(first.0.markers_tx && !first.0.markers_rx);
}

#[test]
fn deadlines_come_from_the_caller() {
    let t0 = Instant::now();
    let o = MpaOptions {
        reply_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(5),
        ..MpaOptions::default()
    };
    let mut i = Initiator::new(&o, t0).unwrap();
    assert_eq!(i.deadline(), Some(t0 + Duration::from_secs(10)));
    i.on_timeout(t0 + Duration::from_secs(9));
    assert_eq!(i.status(), SetupStatus::Pending);
    i.on_timeout(t0 + Duration::from_secs(10));
    assert_eq!(i.status(), SetupStatus::Failed);
    assert!(matches!(i.take_result(), Some(Err(MpaError::Timeout))));
    let mut r = Responder::new(&o, t0);
    r.on_timeout(t0 + Duration::from_millis(4999));
    assert_eq!(r.status(), SetupStatus::Pending);
    r.on_timeout(t0 + Duration::from_secs(6));
    assert!(matches!(r.take_result(), Some(Err(MpaError::Timeout))));
}

#[test]
fn ulp_reject_sends_r1_with_private_data() {
    let o = MpaOptions::rev1();
    let mut i = Initiator::new(&o, Instant::now()).unwrap();
    let mut r = Responder::new(&o, Instant::now());
    r.on_bytes(&i.poll_transmit().unwrap());
    r.reject(b"busy".to_vec()).unwrap();
    let rep = r.poll_transmit().unwrap();
    assert_eq!(&rep[16..20], &[0x60, 1, 0, 4]);
    i.on_bytes(&rep);
    assert!(
        matches!(i.take_result(), Some(Err(MpaError::Rejected { private_data })) if private_data == b"busy")
    );
}

#[test]
fn extra_octets_before_the_reply_are_refused() {
    let o = MpaOptions::rev1();
    let mut i = Initiator::new(&o, Instant::now()).unwrap();
    let mut r = Responder::new(&o, Instant::now());
    let mut req = i.poll_transmit().unwrap();
    req.extend_from_slice(&[0, 14]);
    r.on_bytes(&req);
    assert_eq!(r.status(), SetupStatus::Failed);
}

/// Everything `c` has to send, concatenated.
fn drain(c: &mut RdmapConn) -> Vec<u8> {
    let mut w = Vec::new();
    while let Some(f) = c.poll_transmit() {
        w.extend_from_slice(&f.to_vec());
    }
    w
}

struct Pair {
    i: RdmapConn,
    r: RdmapConn,
}

fn pair(io: MpaOptions, ro: MpaOptions, emss: usize) -> Pair {
    let (ni, nr) = setup(&io, &ro, 0);
    Pair {
        i: RdmapConn::new(ni, emss, Vec::new()).unwrap(),
        r: RdmapConn::new(nr, emss, Vec::new()).unwrap(),
    }
}

/// The one completion of `c`: a Recv of `len` octets, successful.
fn one_recv(c: &mut RdmapConn, len: u32) -> Vec<u8> {
    let got = c.rdmap.poll_completion().expect("no completion");
    assert_eq!(
        (got.opcode, got.status, got.byte_len),
        (WcOpcode::Recv, WcStatus::Success, len)
    );
    assert!(c.rdmap.poll_completion().is_none());
    got.buffer.unwrap()
}

/// The initiator's RTR + an RDMA Write + a Send, fed to the responder in
/// the pieces `chunks` cuts.
fn deliver(markers: bool, crc: bool, chunks: &dyn Fn(&[u8]) -> Vec<Vec<u8>>) {
    let o = MpaOptions {
        markers,
        crc,
        ..MpaOptions::default()
    };
    let mut p = pair(o.clone(), o, 600);
    let (mem, stag) = table(3000);
    p.r.rdmap.post_recv(1, vec![0; 2000]).unwrap();
    p.i.rdmap
        .post(&mem, write(1, stag, BASE_TO, pattern(3000, 5)));
    p.i.rdmap.post(&mem, send(2, pattern(2000, 6)));
    // The responder may not send before the initiator's first FPDU.
    p.r.rdmap.post(&mem, send(3, b"x".to_vec()));
    assert!(p.r.poll_transmit().is_none());
    let wire = drain(&mut p.i);
    for c in chunks(&wire) {
        p.r.on_bytes(&mem, &c);
    }
    assert!(p.r.take_error().is_none());
    assert!(p.r.gate_open(), "the RTR was taken");
    // The Send completes after the Write before it was placed (RFC 5040 §5.5).
    assert_eq!(one_recv(&mut p.r, 2000), pattern(2000, 6));
    assert_eq!(mem.region(stag).unwrap().data(), &pattern(3000, 5)[..]);
    assert!(
        !drain(&mut p.r).is_empty(),
        "the held Send leaves after the first FPDU"
    );
}

#[test]
fn fpdu_stream_split_at_every_byte_boundary() {
    for (markers, crc) in [(false, true), (true, true), (true, false)] {
        // The stream is ~5 KiB; every cut point, two reads each.
        let probe = std::cell::Cell::new(0usize);
        deliver(markers, crc, &|w| {
            probe.set(w.len());
            vec![w.to_vec()]
        });
        for cut in 0..=probe.get() {
            deliver(markers, crc, &|w| {
                vec![w[..cut].to_vec(), w[cut..].to_vec()]
            });
        }
    }
}

#[test]
fn fpdu_stream_in_tiny_and_whole_reads() {
    for markers in [false, true] {
        for step in [1, 2, 3, 7, 4096] {
            deliver(markers, true, &|w| {
                w.chunks(step).map(|c| c.to_vec()).collect()
            });
        }
    }
}

/// Fuzz finding of the retired `mpa_fpdu` target (the queue pair's path has
/// its own regression input, fuzz/regressions/mpa_setup/read-rtr-then-bad-ulpdu-length):
/// octets right behind the RTR (RFC 6581), here an impossible ULPDU_Length,
/// fed with the RTR in one piece or an octet at a time, end alike: the RTR
/// taken, then Terminate 2/0/0x02 as the last FPDU.
#[test]
fn octets_after_the_rtr_are_seen_in_the_same_feed() {
    let o = MpaOptions::default();
    let mut ends = Vec::new();
    for step in [usize::MAX, 1] {
        let mut p = pair(o.clone(), o.clone(), 1460);
        assert!(!p.r.gate_open(), "the RTR is expected");
        let (mem, _) = table(100);
        let mut wire = drain(&mut p.i);
        // ULPDU_Length 0xFFFF > MULPDU: a framing error (RFC 5044 §4).
        wire.extend_from_slice(&[0xFF, 0xFF, 0, 0, 0, 0]);
        for chunk in wire.chunks(step) {
            p.r.on_bytes(&mem, chunk);
        }
        assert!(p.r.is_dead(), "step {step}: the bad ULPDU_Length was seen");
        let code = p.r.take_error().and_then(|e| e.terminate_code());
        assert_eq!(code, Some(TerminateCode::MPA_CRC_ERROR), "step {step}");
        let sent = drain(&mut p.r);
        assert!(!sent.is_empty(), "step {step}: the Terminate is sent");
        ends.push(sent);
    }
    assert_eq!(ends[0], ends[1], "whole and octet-by-octet feeds end alike");
}

#[test]
fn mulpdu_follows_the_emss() {
    let o = MpaOptions {
        markers: true,
        ..MpaOptions::rev1()
    };
    let mut p = pair(o.clone(), o, 1448);
    assert_eq!(p.i.rdmap.ddp().mulpdu(), mulpdu(1448, true));
    // An FPDU built for EMSS 1448 stays acceptable after the receiver's EMSS
    // drops to 536 (RFC 5044 §4): the receive limit never shrinks.
    let mem = MemoryTable::new();
    p.r.rdmap.post_recv(1, vec![0; 1400]).unwrap();
    p.i.rdmap.post(&mem, send(1, pattern(1400, 2)));
    let big = drain(&mut p.i);
    p.r.set_emss(536).unwrap();
    p.r.on_bytes(&mem, &big);
    assert!(p.r.take_error().is_none());
    assert_eq!(one_recv(&mut p.r, 1400), pattern(1400, 2));
    p.i.set_emss(536).unwrap();
    assert_eq!(p.i.rdmap.ddp().mulpdu(), 522);
    p.i.rdmap.post(&mem, send(2, pattern(5000, 1)));
    let wire = drain(&mut p.i);
    // Every FPDU (with its Markers) fits one 536-octet segment.
    let mut d = FpduDecoder::with_offset(true, true, 65535, big.len() as u32);
    let mut rest = &wire[..];
    let mut n = 0;
    while !rest.is_empty() {
        let before = d.offset();
        let (used, u) = d.decode(rest).unwrap();
        rest = &rest[used..];
        if let Some(u) = u {
            assert!(u.len() <= 522);
            n += 1;
        }
        assert!(d.offset().wrapping_sub(before) as usize <= 536);
    }
    assert_eq!(n, 5000usize.div_ceil(522 - 18));
    // A tiny EMSS cannot carry DDP: refused, not a panic.
    assert!(p.i.set_emss(20).is_err());
}

/// Direct placement from a reader: the receiver reads the FPDU from a
/// source that hands out 100 octets and then 7 at a time (short reads, as a
/// socket), the payload straight into the region.
fn direct_once(corrupt: bool) -> (RdmapConn, MemoryTable, Stag) {
    let o = MpaOptions::rev1();
    let mut p = pair(o.clone(), o, 65_000);
    let (mem, stag) = table(10_000);
    p.i.rdmap
        .post(&mem, write(1, stag, BASE_TO + 1000, pattern(9000, 8)));
    let mut wire = drain(&mut p.i);
    if corrupt {
        let n = wire.len();
        wire[n - 1] ^= 1;
    }
    struct Short<'a>(Feed<'a>, usize);
    impl std::io::Read for Short<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let k = if self.1 == 0 { 100 } else { 7 };
            self.1 += 1;
            let n = k.min(buf.len());
            self.0.read(&mut buf[..n])
        }
    }
    let got = p.r.drive(&mem, &mut Short(Feed(&wire), 0)).unwrap();
    let want = if corrupt {
        Progress::Stopped
    } else {
        Progress::WouldBlock
    };
    assert_eq!(got, want);
    (p.r, mem, stag)
}

#[test]
fn direct_placement_by_hand() {
    let (mut r, mem, stag) = direct_once(false);
    assert!(r.take_error().is_none());
    assert_eq!(r.direct_bytes(), 9000);
    // An RDMA Write completes nothing at the data sink (RFC 5040 §5.5).
    assert_eq!(r.rdmap.stats().messages_delivered, 1);
    assert_eq!(
        &mem.region(stag).unwrap().data()[1000..],
        &pattern(9000, 8)[..]
    );
    assert!(mem.all_guards_intact());
    let (mut r, _, _) = direct_once(true);
    assert_eq!(r.rdmap.stats().messages_delivered, 0);
    assert_eq!(
        r.take_error().and_then(|e| e.terminate_code()),
        Some(TerminateCode::MPA_CRC_ERROR)
    );
    assert!(r.poll_transmit().is_some(), "the Terminate is sent");
}

/// A Reply frame (C=1, E=1, Rev 2) carrying `blk`.
fn reply_with(blk: rddp_wire::EnhancedBlock) -> Vec<u8> {
    use rddp_wire::{FrameKind, MpaFlags, MpaFrame};
    let flags = MpaFlags::new(false, true, false, true);
    MpaFrame::new(FrameKind::Reply, flags, 2, Some(blk), Vec::new())
        .to_vec()
        .unwrap()
}

/// Feed `reply` to an initiator built from `o`; returns its error and the one
/// Terminate FPDU it queued (decoded), if any.
fn initiator_refusal(
    o: &MpaOptions,
    reply: &[u8],
) -> (Option<MpaError>, Option<rddp_wire::Terminate>) {
    let mut i = Initiator::new(o, Instant::now()).unwrap();
    let _request = i.poll_transmit().unwrap();
    assert_eq!(i.on_bytes(reply), reply.len());
    let err = match i.take_result() {
        Some(Err(e)) => Some(e),
        _ => None,
    };
    let term = i.poll_transmit().map(|wire| {
        let mut segs = Vec::new();
        FpduDecoder::new(true, false, 65535)
            .feed(&wire, &mut segs)
            .unwrap();
        assert_eq!(segs.len(), 1, "one Terminate FPDU, nothing else");
        rddp_wire::Terminate::parse(&segs[0][18..]).unwrap()
    });
    (err, term)
}

fn blk(p2p: bool, b: bool, c: bool, d: bool, ird: u16, ord: u16) -> rddp_wire::EnhancedBlock {
    rddp_wire::EnhancedBlock {
        p2p,
        rtr_send: b,
        ird,
        rtr_write: c,
        rtr_read: d,
        ord,
    }
}

/// RFC 6581: an initiator that did not offer peer-to-peer mode (A=0 in its
/// Request) and gets a Reply with A=1 or any RTR type set sends Terminate 2/0/0x07
/// as its only FPDU and fails, instead of sending an RTR it never offered.
#[test]
fn reply_with_p2p_we_did_not_offer_is_terminated() {
    let o = MpaOptions {
        p2p: false,
        ..MpaOptions::default()
    };
    // Our Request offers no peer-to-peer mode and no RTR type.
    let mut i = Initiator::new(&o, Instant::now()).unwrap();
    let req = rddp_wire::MpaFrame::parse(&i.poll_transmit().unwrap()).unwrap();
    let offered = req.enhanced.unwrap();
    assert!(!offered.p2p && !offered.rtr_send && !offered.rtr_write && !offered.rtr_read);
    for (name, b) in [
        ("A=1, Write RTR", blk(true, false, true, false, 4, 4)),
        ("A=1, Read RTR", blk(true, false, false, true, 4, 4)),
        ("A=1, no RTR type", blk(true, false, false, false, 4, 4)),
        ("A=0, Write RTR bit", blk(false, false, true, false, 4, 4)),
    ] {
        let (err, term) = initiator_refusal(&o, &reply_with(b));
        let err = err.unwrap_or_else(|| panic!("{name}: the Reply was accepted"));
        assert_eq!(
            err.terminate_code(),
            Some(TerminateCode::MPA_NO_MATCHING_RTR),
            "{name}: {err}"
        );
        let term = term.unwrap_or_else(|| panic!("{name}: no Terminate queued"));
        assert_eq!(term.code, TerminateCode::MPA_NO_MATCHING_RTR, "{name}");
    }
    // A=0 without RTR bits is the normal answer: no RTR, IRD/ORD negotiated.
    let mut i = Initiator::new(&o, Instant::now()).unwrap();
    i.poll_transmit().unwrap();
    i.on_bytes(&reply_with(blk(false, false, false, false, 4, 4)));
    let neg = i.take_result().unwrap().unwrap();
    assert_eq!((neg.rtr, neg.ird_ord), (None, Some((16, 4))));
}

/// RFC 6581: the Read RTR takes one of the responder's IRD slots, so a Reply
/// that picks it with IRD 0 is answered with Terminate 2/0/0x06 (insufficient IRD),
/// relaxed or strict, instead of leaving our ORD at 0 and the RTR waiting forever.
#[test]
fn read_rtr_reply_with_ird_0_gets_terminate_0x06() {
    for strict in [false, true] {
        let o = MpaOptions {
            strict_ird: strict,
            ..MpaOptions::default()
        };
        let (err, term) = initiator_refusal(&o, &reply_with(blk(true, false, false, true, 0, 1)));
        let err = err.unwrap_or_else(|| panic!("strict {strict}: the Reply was accepted"));
        assert_eq!(
            err.terminate_code(),
            Some(TerminateCode::MPA_INSUFFICIENT_IRD),
            "{err}"
        );
        assert_eq!(term.unwrap().code, TerminateCode::MPA_INSUFFICIENT_IRD);
    }
    // The Write RTR uses no slot: IRD 0 only leaves us ORD 0 (Reads fail at once).
    let mut i = Initiator::new(&MpaOptions::default(), Instant::now()).unwrap();
    i.poll_transmit().unwrap();
    i.on_bytes(&reply_with(blk(true, false, true, false, 0, 1)));
    assert_eq!(i.take_result().unwrap().unwrap().ird_ord, Some((16, 0)));
}

/// With ORD 0 we cannot send the zero-length Read RTR (it needs an ORD slot), so
/// we do not offer it; offering nothing else in peer-to-peer mode is a local error.
#[test]
fn ord_0_offers_no_read_rtr() {
    let o = MpaOptions {
        ord: 0,
        ..MpaOptions::default()
    };
    let mut i = Initiator::new(&o, Instant::now()).unwrap();
    let req = rddp_wire::MpaFrame::parse(&i.poll_transmit().unwrap()).unwrap();
    let offered = req.enhanced.unwrap();
    assert!(
        offered.p2p && offered.rtr_write && !offered.rtr_read,
        "{offered:?}"
    );
    let read_only = MpaOptions {
        ord: 0,
        rtr: rddp_mpa::RtrTypes {
            write: false,
            read: true,
        },
        ..MpaOptions::default()
    };
    let e = Initiator::new(&read_only, Instant::now()).unwrap_err();
    assert!(matches!(e, MpaError::Options(_)), "{e}");
}

/// IRD and ORD are 14-bit fields (RFC 6581): a larger value is refused at once on
/// either side instead of being announced as 0x3FFF and used as is locally.
#[test]
fn ird_ord_above_14_bits_are_refused() {
    for (ird, ord) in [(0x4000, 4), (4, 0x4000), (u16::MAX, u16::MAX)] {
        let o = MpaOptions {
            ird,
            ord,
            ..MpaOptions::default()
        };
        let e = Initiator::new(&o, Instant::now()).unwrap_err();
        assert!(matches!(e, MpaError::Options(_)), "{ird}/{ord}: {e}");
        // The responder finds out when it answers (it has nothing to say before).
        let mut i = Initiator::new(&MpaOptions::default(), Instant::now()).unwrap();
        let mut r = Responder::new(&o, Instant::now());
        r.on_bytes(&i.poll_transmit().unwrap());
        let e = r.accept().unwrap_err();
        assert!(matches!(e, MpaError::Options(_)), "{ird}/{ord}: {e}");
        assert!(r.poll_transmit().is_none(), "{ird}/{ord}: a Reply went out");
    }
    // 0x3FFF itself fits the field.
    let o = MpaOptions {
        ird: 0x3FFF,
        ord: 0x3FFF,
        ..MpaOptions::default()
    };
    assert!(Initiator::new(&o, Instant::now()).is_ok());
}
