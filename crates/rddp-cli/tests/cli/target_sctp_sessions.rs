//! `rddp target --transport sctp` seen from a raw usrsctp peer: the DDP Stream
//! Session rules of RFC 5043 (docs/data-path.md) against the real binary. The peer
//! sends chunks of its own making, DDP-SSNs included, and checks what comes back.

use crate::common;

use common::Target;
use common::raw_sctp::{self, PPID_SEGMENT, RawSctp};
use rddp_wire::sctp::SessionFunction::{self, Accept, Initiate, Terminate};
use rddp_wire::{Opcode, RdmapControl, TaggedHeader};
use serde_json::json;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

fn usrsctp_missing() -> bool {
    !rddp_testkit::usrsctp_present("the SCTP target tests", usrsctp_ffi::available())
}

fn target(args: &[&str]) -> (Target, SocketAddrV4) {
    let t = Target::start(&[&["--transport", "sctp"], args].concat());
    let SocketAddr::V4(addr) = t.addr else {
        panic!("IPv4 expected")
    };
    (t, addr)
}

/// The session on `sid` still works: a Send (MSN `msn`) comes back as the echo.
fn echoes(p: &mut RawSctp, sid: u16, msn: u32) {
    p.send_message(sid, msn, b"still here");
    assert_eq!(p.expect_send(sid), (msn + 1, b"still here".to_vec()));
}

fn functions(chunks: &[raw_sctp::Chunk]) -> Vec<Option<SessionFunction>> {
    chunks.iter().map(|c| c.control()).collect()
}

/// A DDP segment (PPID 16) on a stream without a session: the target terminates
/// that stream's session with one Session Terminate; the others carry on.
#[test]
fn segment_on_a_stream_without_a_session_gets_terminate_and_others_carry_on() {
    if usrsctp_missing() {
        return;
    }
    let (mut t, addr) = target(&[]);
    let mut p = RawSctp::connect(addr);
    p.open(1);
    t.expect("connected", json!({ "conn": 1 }));
    for _ in 0..3 {
        p.send_message(2, 1, b"no session here");
    }
    let back = p.collect_on(2, Duration::from_millis(800));
    assert_eq!(functions(&back), [Some(Terminate)], "{back:?}");
    assert!(
        back[0].body.len() == 2,
        "a Terminate carries no private data"
    );
    echoes(&mut p, 1, 1);
}

/// An Initiate with more than 512 octets of private data is answered with a
/// Session Terminate (not a Reject: only the ULP rejects) and never reaches the
/// target's ULP; a proper Initiate on the same stream is then served.
#[test]
fn initiate_with_oversized_private_data_gets_terminate_and_never_reaches_the_ulp() {
    if usrsctp_missing() {
        return;
    }
    let (mut t, addr) = target(&[]);
    let mut p = RawSctp::connect(addr);
    p.control(3, Initiate.code(), &[0x55; 513]);
    let back = p.collect_on(3, Duration::from_millis(800));
    assert_eq!(functions(&back), [Some(Terminate)], "{back:?}");
    t.drain_for(Duration::from_millis(200));
    assert!(
        !t.seen.iter().any(|e| e["event"] == "connected"),
        "{:?}",
        t.seen
    );
    p.wait_dry();
    p.open(3);
    t.expect("connected", json!({ "conn": 1 }));
    echoes(&mut p, 3, 1);
}

/// Initiates waiting for the ULP are decided independently: with a ULP that
/// takes 2 s over each, two Initiates sent together are both accepted after about
/// 2 s, not 4 s.
#[test]
fn pending_initiates_are_decided_independently() {
    if usrsctp_missing() {
        return;
    }
    let (mut t, addr) = target(&["--sctp-accept-delay", "2000"]);
    let mut p = RawSctp::connect(addr);
    let start = Instant::now();
    p.control(1, Initiate.code(), b"");
    p.control(2, Initiate.code(), b"");
    for sid in [1, 2] {
        p.expect_control(sid, Accept);
    }
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(3500),
        "both accepted after {took:?}"
    );
    t.expect("connected", json!({ "conn": 2 }));
    eprintln!("two Initiates, 2 s each, accepted after {took:?}");
}

/// "At least one Terminate" (RFC 5043): a second Session Terminate from the peer
/// is legal, also when it arrives before the first. The target ends the session
/// gracefully and answers once.
#[test]
fn a_second_terminate_from_the_peer_is_legal() {
    if usrsctp_missing() {
        return;
    }
    let (mut t, addr) = target(&[]);
    let mut p = RawSctp::connect(addr);
    p.open(1);
    p.open(2);
    echoes(&mut p, 1, 1);
    let (first, second) = (p.take_ssn(1), p.take_ssn(1));
    let term = Terminate.code().to_be_bytes();
    p.send_ssn(1, 17, second, &term);
    // The target's SCTP has the second (acknowledged) before the first leaves.
    p.wait_dry();
    p.send_ssn(1, 17, first, &term);
    let back = p.collect_on(1, Duration::from_millis(800));
    assert_eq!(functions(&back), [Some(Terminate)], "{back:?}");
    let closed = t.expect("closed", json!({ "conn": 1 }));
    assert_eq!(closed["reason"], "peer closed", "{closed}");
    echoes(&mut p, 2, 1);
}

/// A stream number is reusable once its old session can have nothing
/// outstanding, also after a violation: the target terminates a session that
/// broke the rules (a second Initiate on it), the peer answers with its own
/// Terminate, and a new Initiate on the same stream is a new connection.
#[test]
fn stream_reusable_after_a_violation() {
    if usrsctp_missing() {
        return;
    }
    let (mut t, addr) = target(&[]);
    let mut p = RawSctp::connect(addr);
    p.open(4);
    t.expect("connected", json!({ "conn": 1 }));
    p.control(4, Initiate.code(), b"");
    p.expect_control(4, Terminate);
    t.expect("closed", json!({ "conn": 1 }));
    p.control(4, Terminate.code(), b"");
    p.wait_dry();
    let ad = p.open(4);
    assert_eq!(ad.len(), 16);
    t.expect("connected", json!({ "conn": 2 }));
    echoes(&mut p, 4, 1);
}

/// Segments received are checked against the maximum segment size: one above it
/// (SCTP fragmented it) terminates its session before placement; the others
/// carry on.
#[test]
fn segment_above_the_maximum_terminates_its_session() {
    if usrsctp_missing() {
        return;
    }
    let (mut t, addr) = target(&[]);
    let mut p = RawSctp::connect(addr);
    let ad = p.open(1);
    p.open(2);
    let stag = u32::from_be_bytes(ad[..4].try_into().unwrap());
    // One octet more than fits one DATA chunk (the DDP-SSN takes 2 of them).
    let len = p.fragmentation_point() + 1 - 2 - 14;
    let mut seg = TaggedHeader::new(true, RdmapControl::new(Opcode::RDMA_WRITE).0, stag, 0)
        .to_bytes()
        .to_vec();
    seg.extend(std::iter::repeat_n(0xAB, len));
    p.send(1, PPID_SEGMENT, &seg);
    p.expect_control(1, Terminate);
    t.expect("closed", json!({ "conn": 1 }));
    echoes(&mut p, 2, 1);
}
