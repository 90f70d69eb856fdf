//! The wire check shared by the AF_CONN and the UDP-encapsulation captures
//! (RFC 5043): a scripted session, and tshark checks of its capture
//! with the project's own Lua dissector (tests/wire/rddp_sctp.lua).

use super::{drive, pattern};
use bytes::Bytes;
use rddp_proto::ddp::RecvBuffer;
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_sctp::driver::SctpConnection;
use rddp_sctp::{OutChunk, SessionState};
use rddp_wire::DdpHeader;
use rddp_wire::sctp::SessionControl;
use std::collections::BTreeSet;
use std::process::Command;

pub(crate) fn tshark_present() -> bool {
    match Command::new("tshark").arg("-v").output() {
        Ok(o) if o.status.success() => true,
        _ if std::env::var_os("CI").is_none() => {
            eprintln!("\n*** SKIPPED: the wire check needs tshark (CI unset)\n");
            false
        }
        _ => panic!("CI is set and tshark is missing"),
    }
}

/// The line the Lua dissector renders for a chunk, from what rddp sent.
pub(crate) fn summary(c: &OutChunk) -> String {
    let octets = c.to_vec();
    let ssn = u16::from_be_bytes([octets[0], octets[1]]);
    if c.ppid == 17 {
        let s = SessionControl::parse(&octets).unwrap();
        return format!(
            "ctl ssn={ssn} fc={} pd={}",
            s.function.code(),
            s.private_data.len()
        );
    }
    let seg = &octets[2..];
    match DdpHeader::parse(seg).unwrap() {
        DdpHeader::Tagged(h) => format!(
            "seg ssn={ssn} T=1 L={} dv={} stag={:08x} to={:016x} len={}",
            u8::from(h.ctrl.last()),
            h.ctrl.dv(),
            h.stag,
            h.to,
            seg.len() - 14
        ),
        DdpHeader::Untagged(h) => format!(
            "seg ssn={ssn} T=0 L={} dv={} qn={} msn={} mo={} len={}",
            u8::from(h.ctrl.last()),
            h.ctrl.dv(),
            h.qn,
            h.msn,
            h.mo,
            seg.len() - 18
        ),
    }
}

/// tshark field values, one Vec per frame (aggregated occurrences split on '|').
pub(crate) fn fields(
    pcap: &str,
    decode_as: &[String],
    filter: &str,
    names: &[&str],
) -> Vec<Vec<String>> {
    let lua = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/wire/rddp_sctp.lua");
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r", pcap, "-o", "sctp.checksum:CRC-32C"])
        .args(decode_as)
        .arg("-X")
        .arg(format!("lua_script:{lua}"))
        .args([
            "-Y",
            filter,
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-E",
            "aggregator=|",
        ]);
    for n in names {
        cmd.args(["-e", n]);
    }
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

pub(crate) fn split(v: &str) -> Vec<&str> {
    v.split('|').filter(|s| !s.is_empty()).collect()
}

/// Initiate with private data, Accept carrying the STag, a tagged write, two
/// untagged sends, an RDMA Read (Request and Response), Terminate both ways;
/// returns every chunk both sides sent.
pub(crate) fn session(
    a: &mut SctpConnection,
    ma: &MemoryTable,
    b: &mut SctpConnection,
    mb: &MemoryTable,
) -> Vec<OutChunk> {
    a.record_sent();
    b.record_sent();

    a.adaptation()
        .initiate(1, StreamId(0), PdId(1), b"wire check")
        .unwrap();
    drive(a, ma, b, mb, |_, b| b.adaptation().pending_initiates() == 1);
    let stag = mb
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            0x5000,
            vec![0; 6000],
        )
        .unwrap();
    b.adaptation()
        .accept(1, StreamId(1), PdId(1), &stag.0.to_be_bytes())
        .unwrap();
    for i in 0..2 {
        b.stream(1)
            .unwrap()
            .post_recv(
                0,
                RecvBuffer {
                    id: i,
                    data: vec![0; 4000],
                },
            )
            .unwrap();
    }
    drive(a, ma, b, mb, |a, _| {
        a.adaptation().session_state(1) == Some(SessionState::Established)
    });
    let s = a.stream(1).unwrap();
    s.send_tagged(0, stag.0, 0x5000, Bytes::from(pattern(1, 6000)))
        .unwrap();
    s.send_untagged(0, [0; 5], Bytes::from(pattern(2, 3000)))
        .unwrap();
    s.send_untagged(0, [0; 5], Bytes::new()).unwrap();
    let mut n = 0;
    drive(a, ma, b, mb, |_, b| {
        n += std::iter::from_fn(|| b.stream(1).unwrap().poll_delivery()).count();
        n == 3
    });
    // An RDMA Read in RDMAP framing: A's Read Request on QN 1, B's Read Response
    // as a tagged message into A's sink (RFC 5040 §4.4, §5.2).
    let src = mb
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_READ,
            0x9000,
            pattern(3, 1000),
        )
        .unwrap();
    let sink = ma
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            0x7000,
            vec![0; 1000],
        )
        .unwrap();
    b.stream(1)
        .unwrap()
        .post_recv(
            1,
            RecvBuffer {
                id: 9,
                data: vec![0; 28],
            },
        )
        .unwrap();
    let rr = rddp_wire::ReadRequestHeader {
        sink_stag: sink.0,
        sink_to: 0x7000,
        size: 1000,
        src_stag: src.0,
        src_to: 0x9000,
    };
    a.stream(1)
        .unwrap()
        .send_untagged(
            1,
            [0x41, 0, 0, 0, 0],
            Bytes::copy_from_slice(&rr.to_bytes()),
        )
        .unwrap();
    let mut req = None;
    drive(a, ma, b, mb, |_, b| {
        req = req.take().or_else(|| b.stream(1).unwrap().poll_delivery());
        req.is_some()
    });
    assert!(
        matches!(
            req,
            Some(rddp_proto::ddp::Delivery::Untagged { qn: 1, len: 28, .. })
        ),
        "{req:?}"
    );
    let data = Bytes::copy_from_slice(&mb.region(src).unwrap().data());
    b.stream(1)
        .unwrap()
        .send_tagged(0x42, sink.0, 0x7000, data)
        .unwrap();
    let mut resp = None;
    drive(a, ma, b, mb, |a, _| {
        resp = resp.take().or_else(|| a.stream(1).unwrap().poll_delivery());
        resp.is_some()
    });
    assert_eq!(ma.region(sink).unwrap().data(), &pattern(3, 1000)[..]);
    a.adaptation().terminate(1).unwrap();
    drive(a, ma, b, mb, |a, b| {
        a.adaptation().session_state(1) == Some(SessionState::Closed)
            && b.adaptation().session_state(1) == Some(SessionState::Closed)
    });
    let mut sent: Vec<OutChunk> = a.take_recorded();
    sent.extend(b.take_recorded());
    sent
}

/// Check a capture; `decode_as` are extra tshark arguments (e.g. `-d udp.port==P,sctp`).
pub(crate) fn check_capture(pcap_s: &str, decode_as: &[String], sent: &[OutChunk]) {
    // 0xC006 = 1 in INIT (chunk type 1) and INIT-ACK (2).
    let inits = fields(
        pcap_s,
        decode_as,
        "sctp.chunk_type == 1 || sctp.chunk_type == 2",
        &["sctp.chunk_type", "sctp.adaptation_layer_indication"],
    );
    assert_eq!(inits.len(), 2, "{inits:?}");
    for f in &inits {
        let v = u32::from_str_radix(f[1].trim_start_matches("0x"), 16);
        assert_eq!(v, Ok(1), "adaptation indication in {f:?}");
    }
    // Every DATA chunk: U=1, B=E=1, PPID 16 or 17.
    let data = fields(
        pcap_s,
        decode_as,
        "sctp.chunk_type == 0",
        &[
            "sctp.data_u_bit",
            "sctp.data_b_bit",
            "sctp.data_e_bit",
            "sctp.data_payload_proto_id",
            "rddp_sctp.summary",
        ],
    );
    let mut seen = BTreeSet::new();
    for f in &data {
        for bit in f[..3].iter().flat_map(|v| split(v)) {
            assert!(bit == "1" || bit == "True", "flag {bit} in {f:?}");
        }
        for ppid in split(&f[3]) {
            assert!(ppid == "16" || ppid == "17", "PPID {ppid}");
        }
        seen.extend(split(&f[4]).into_iter().map(str::to_string));
    }
    // Good CRC32c on every packet (status 1 = good).
    let all = fields(pcap_s, decode_as, "sctp", &["sctp.checksum.status"]);
    assert!(!all.is_empty());
    for f in &all {
        assert_eq!(f[0], "1", "checksum status {f:?}");
    }
    // The DDP inside equals what was sent.
    let expected: BTreeSet<String> = sent.iter().map(summary).collect();
    assert_eq!(seen, expected);
    eprintln!(
        "wire check: {} packets, {} DATA chunks decoded",
        all.len(),
        expected.len()
    );
}
