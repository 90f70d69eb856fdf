//! Runs the real `rddp target` as a process and attacks it with a raw MPA peer:
//! every protocol error gets its Terminate on the wire and as an event, closes
//! that connection only; the receive strategies' limits.

use crate::common;

use common::client::{Client, opts, pattern};
use common::raw_peer::{RawPeer, untagged};
use common::{Target, check_terminate, int, raw};
use rddp_wire::rdmap::qn;
use rddp_wire::{Opcode, ReadRequestHeader, Terminate, TerminateCode};
use serde_json::json;
use std::time::Duration;

#[test]
fn placement_errors_terminate_one_connection_only() {
    let mut t = Target::start(&["--buffer-size", "4096"]);
    let (mut a, (a_stag, a_to, a_len)) = raw(&t);
    let good = Client::connect(t.addr, opts(2, true, false));
    let good_buf = good.advert();
    let (mut c, _) = raw(&t);
    assert_eq!(a_len, 4096);
    // C uses A's STag: valid, but not on C's connection.
    c.write(a_stag, a_to, b"not yours");
    let term = c.terminate().expect("no Terminate for a foreign STag");
    assert_eq!(term.code, TerminateCode::DDP_STAG_NOT_ASSOCIATED);
    check_terminate(&mut t, 3, "sent", TerminateCode::DDP_STAG_NOT_ASSOCIATED);
    // A writes across the end of its own buffer.
    a.write(a_stag, a_to + 4092, b"12345678");
    let term: Terminate = a.terminate().expect("no Terminate for base/bounds");
    assert_eq!(term.code, TerminateCode::DDP_BASE_BOUNDS);
    assert!(
        term.ddp_hdr.is_some(),
        "the offending DDP header is carried"
    );
    check_terminate(&mut t, 1, "sent", TerminateCode::DDP_BASE_BOUNDS);
    // A TO whose TO + length wraps 2^64.
    let (mut d, (d_stag, _, _)) = raw(&t);
    d.write(d_stag, u64::MAX - 3, b"12345678");
    let term = d.terminate().expect("no Terminate for a wrapping TO");
    assert_eq!(term.code, TerminateCode::DDP_TO_WRAP);
    check_terminate(&mut t, 4, "sent", TerminateCode::DDP_TO_WRAP);
    // The well-behaved connection carries on.
    good.write_read(good_buf, 0, &pattern(4096));
    good.send(b"still here");
    assert_eq!(good.recv(), (2, b"still here".to_vec()));
}

#[test]
fn received_terminate_is_reported_not_answered() {
    let mut t = Target::start(&[]);
    let (mut p, _) = raw(&t);
    let code = TerminateCode::RDMAP_CATASTROPHIC_STREAM;
    p.send_segment(&Terminate::bare(code).to_segment().unwrap());
    check_terminate(&mut t, 1, "received", code);
    assert!(p.terminate().is_none(), "a Terminate was answered");
    t.drain_for(Duration::from_millis(200));
    let sent = t.seen.iter().any(|v| v["direction"] == "sent");
    assert!(!sent, "{:?}", t.seen);
}

#[test]
fn shared_rq_soft_limit_event() {
    let mut t = Target::start(&["--rq", "shared", "--recv-count", "8", "--soft-limit", "2"]);
    let (mut p, _) = raw(&t);
    // Three whole messages after a missing one (MSN 2): three buffers held, as
    // they cannot be delivered before MSN 2. (First segments of several MSNs
    // would be interleaved messages of one queue, refused with 1/2/0x03.)
    for msn in 3..6 {
        p.send(msn, b"whole", true);
    }
    let v = t.expect("async", json!({ "conn": 1, "kind": "srq_limit_reached" }));
    int(&v, "conn");
    // Nothing is wrong with that: once MSN 2 arrives they are delivered in
    // order, and echoed.
    p.send(2, b"whole", true);
    for msn in 2..6 {
        t.expect("completion", json!({ "conn": 1, "msn": msn, "bytes": 5 }));
        assert_eq!(p.next_untagged(), (0, msn + 1, b"whole".to_vec()));
    }
}

#[test]
fn pool_send_beyond_credits_is_terminated() {
    let mut t = Target::start(&["--rq", "pool", "--recv-count", "4", "--credits", "2"]);
    let mut p = RawPeer::connect(t.addr, true);
    // MSN 2 is held (MSN 1 missing); MSN 3 is beyond the 2 credits.
    p.send(2, b"whole", true);
    p.send(3, b"whole", true);
    let term = p.terminate().expect("no Terminate beyond the credits");
    assert_eq!(term.code, TerminateCode::DDP_INVALID_MSN_RANGE);
    check_terminate(&mut t, 1, "sent", TerminateCode::DDP_INVALID_MSN_RANGE);
}

#[test]
fn read_request_outside_the_buffer_is_terminated_with_its_header() {
    let mut t = Target::start(&["--buffer-size", "4096"]);
    let (mut p, (stag, to, _)) = raw(&t);
    let rr = ReadRequestHeader {
        sink_stag: 0x99,
        sink_to: 0,
        size: 16,
        src_stag: stag,
        src_to: to + 4090,
    };
    p.send_segment(&untagged(
        Opcode::READ_REQUEST,
        qn::READ_REQUEST,
        1,
        true,
        &rr.to_bytes(),
    ));
    let term = p
        .terminate()
        .expect("no Terminate for a Read Request out of bounds");
    assert_eq!(term.code, TerminateCode::RDMAP_BASE_BOUNDS);
    assert_eq!(
        term.rdmap_hdr,
        Some(rr),
        "the Read Request header is carried"
    );
    check_terminate(&mut t, 1, "sent", TerminateCode::RDMAP_BASE_BOUNDS);
}

#[test]
fn ordered_send_without_a_buffer_is_terminated() {
    let mut t = Target::start(&["--recv-count", "2"]);
    let mut p = RawPeer::connect(t.addr, true);
    // MSN 2 is held (MSN 1 missing); MSN 3 has none of the 2 buffers.
    p.send(2, b"whole", true);
    p.send(3, b"whole", true);
    let term = p
        .terminate()
        .expect("no Terminate for a Send beyond the buffers");
    assert_eq!(term.code, TerminateCode::DDP_INVALID_MSN_NO_BUFFER);
    check_terminate(&mut t, 1, "sent", TerminateCode::DDP_INVALID_MSN_NO_BUFFER);
}

/// Shared-pool buffers held by a connection that dies (messages never finished)
/// come back flushed and the target gives fresh ones back to the pool: the next
/// connection gets all four.
#[test]
fn shared_buffers_held_by_a_dead_connection_are_not_lost() {
    let mut t = Target::start(&["--rq", "shared", "--recv-count", "4", "--soft-limit", "2"]);
    let (mut a, _) = raw(&t);
    // Three messages held behind a missing MSN 2.
    for msn in 3..6 {
        a.send(msn, b"whole", true);
    }
    t.expect("async", json!({ "conn": 1, "kind": "srq_limit_reached" }));
    drop(a);
    t.expect("closed", json!({ "conn": 1 }));
    // All four buffers at once for the next connection: three held behind MSN
    // 2, then MSN 2 itself.
    let (mut b, _) = raw(&t);
    for msn in 3..6 {
        b.send(msn, b"whole", true);
    }
    b.send(2, b"whole", true);
    for msn in 2..6 {
        assert_eq!(b.next_untagged(), (0, msn + 1, b"whole".to_vec()));
    }
}

#[test]
fn a_dead_connection_holding_shared_buffers_does_not_stop_others() {
    let mut t = Target::start(&["--rq", "shared", "--recv-count", "4", "--soft-limit", "2"]);
    let (mut a, _) = raw(&t);
    for msn in 3..6 {
        a.send(msn, b"whole", true);
    }
    t.expect("async", json!({ "conn": 1, "kind": "srq_limit_reached" }));
    drop(a);
    t.expect("closed", json!({ "conn": 1 }));
    // What is left of the pool serves the next connection, over and over.
    let (mut b, _) = raw(&t);
    for msn in 2..12 {
        b.send(msn, b"whole", true);
        assert_eq!(b.next_untagged(), (0, msn + 1, b"whole".to_vec()));
    }
}
