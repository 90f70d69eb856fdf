//! Every session rule of RFC 5043, sans-IO: two
//! adaptation layers joined by a chunk queue the test controls.

use crate::common::sides::*;
use bytes::Bytes;
use rddp_proto::ddp::{Delivery, RecvBuffer};
use rddp_proto::mem::{PdId, StreamId};
use rddp_sctp::{CloseReason, Config, Event, max_segment_for};
use rddp_wire::sctp::SessionFunction;

#[test]
fn ddp_ssn_is_the_sctp_ssn_per_stream_without_gaps() {
    let (mut a, mut b) = pair();
    open(&mut a, &mut b, 2);
    open(&mut a, &mut b, 5);
    let stag = register(&mut b, 4000);
    a.ad.stream(2)
        .unwrap()
        .send_tagged(0, stag.0, 0x1000, Bytes::from(vec![1; 2000]))
        .unwrap();
    a.ad.stream(5)
        .unwrap()
        .send_tagged(0, stag.0, 0x1000, Bytes::from(vec![2; 1000]))
        .unwrap();
    let c = drain(&mut a);
    for sid in [2u16, 5] {
        let ssns: Vec<u16> = c
            .iter()
            .filter(|c| c.sid == sid)
            .map(|c| u16::from_be_bytes([c.head[0], c.head[1]]))
            .collect();
        // The Initiate took DDP-SSN 0 on each stream; segments follow with no gap.
        assert_eq!(
            ssns,
            (1..=ssns.len() as u16).collect::<Vec<_>>(),
            "stream {sid}"
        );
    }
    assert!(c.iter().all(|c| c.ppid == 16 && c.len() - 2 <= 598));
}

#[test]
fn accepted_session_carries_tagged_and_untagged_then_terminates() {
    let (mut a, mut b) = pair();
    open(&mut a, &mut b, 1);
    let stag = register(&mut b, 3000);
    let data: Vec<u8> = (0..3000).map(|i| (i % 251) as u8).collect();
    a.ad.stream(1)
        .unwrap()
        .send_tagged(0, stag.0, 0x1000, Bytes::from(data.clone()))
        .unwrap();
    b.ad.stream(1)
        .unwrap()
        .post_recv(
            0,
            RecvBuffer {
                id: 9,
                data: vec![0; 64],
            },
        )
        .unwrap();
    a.ad.stream(1)
        .unwrap()
        .send_untagged(0, [0; 5], Bytes::from_static(b"untagged"))
        .unwrap();
    let mut c = drain(&mut a);
    c.reverse(); // out of order: placed as they arrive
    feed(&mut b, &c);
    assert_eq!(b.mem.region(stag).unwrap().data(), &data[..]);
    let d: Vec<_> = std::iter::from_fn(|| b.ad.stream(1).unwrap().poll_delivery()).collect();
    assert!(matches!(d[0], Delivery::Tagged { len: 3000, .. }));
    assert!(
        matches!(&d[1], Delivery::Untagged { len: 8, buffer, .. } if &buffer.data[..8] == b"untagged")
    );
    assert!(b.ad.stream(1).unwrap().sink_stats().placed_out_of_order > 0);
    // Terminate from A (its Initiate is confirmed by the Accept), answered by B.
    a.ad.terminate(1).unwrap();
    let t = drain(&mut a);
    assert_eq!(ctl(t.last().unwrap()).function, SessionFunction::Terminate);
    feed(&mut b, &t);
    let r = drain(&mut b);
    assert_eq!(ctl(&r[0]).function, SessionFunction::Terminate);
    feed(&mut a, &r);
    assert_eq!(closed(&events(&mut a), 1), Some(CloseReason::Terminated));
    assert_eq!(closed(&events(&mut b), 1), Some(CloseReason::Terminated));
}

#[test]
fn terminate_waits_for_segments_it_overtook() {
    let (mut a, mut b) = pair();
    open(&mut a, &mut b, 0);
    let stag = register(&mut b, 2000);
    a.ad.stream(0)
        .unwrap()
        .send_tagged(0, stag.0, 0x1000, Bytes::from(vec![7; 2000]))
        .unwrap();
    a.ad.terminate(0).unwrap();
    let mut c = drain(&mut a);
    let first = c.remove(0);
    c.push(first); // the first segment arrives after the Terminate
    feed(&mut b, &c[..c.len() - 1]);
    // B's answer may go, but the session is not over until the segment arrives.
    let r = drain(&mut b);
    assert_eq!(closed(&events(&mut b), 0), None);
    feed(&mut b, &c[c.len() - 1..]);
    assert_eq!(closed(&events(&mut b), 0), Some(CloseReason::Terminated));
    assert_eq!(b.mem.region(stag).unwrap().data(), &[7; 2000][..]);
    feed(&mut a, &r);
}

#[test]
fn reject_only_at_the_ulps_direction() {
    let (mut a, mut b) = pair();
    a.ad.initiate(3, StreamId(3), PdId(1), &[1; 512]).unwrap();
    feed(&mut b, &drain(&mut a));
    // Without a ULP decision nothing is sent: no automatic Reject.
    assert!(drain(&mut b).is_empty());
    assert_eq!(b.ad.pending_initiates(), 1);
    b.ad.reject(3, b"no").unwrap();
    let r = drain(&mut b);
    assert_eq!(ctl(&r[0]).function, SessionFunction::Reject);
    feed(&mut a, &r);
    assert_eq!(
        closed(&events(&mut a), 3),
        Some(CloseReason::Rejected(b"no".to_vec()))
    );
    assert!(a.ad.stream(3).is_some_and(|s| s.poll_segment().is_none()));
}

#[test]
fn bounded_initiate_queue_answers_overflow_with_terminate() {
    let mut a = side(Config::default());
    let mut b = side(Config {
        max_pending_initiates: 2,
        ..Config::default()
    });
    for sid in 0..3 {
        a.ad.initiate(sid, StreamId(u32::from(sid)), PdId(1), b"")
            .unwrap();
    }
    feed(&mut b, &drain(&mut a));
    assert_eq!(b.ad.pending_initiates(), 2);
    let r = drain(&mut b);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].sid, ctl(&r[0]).function),
        (2, SessionFunction::Terminate)
    );
    assert!(ctl(&r[0]).private_data.is_empty());
    feed(&mut a, &r);
    assert_eq!(closed(&events(&mut a), 2), Some(CloseReason::Refused));
}

#[test]
fn no_ddp_segment_before_accept() {
    let (mut a, mut b) = pair();
    a.ad.initiate(0, StreamId(0), PdId(1), b"").unwrap();
    a.ad.stream(0)
        .unwrap()
        .send_untagged(0, [0; 5], Bytes::from_static(b"early"))
        .unwrap();
    let c = drain(&mut a);
    assert_eq!(c.len(), 1, "only the Initiate leaves");
    assert_eq!(ctl(&c[0]).function, SessionFunction::Initiate);
    feed(&mut b, &c);
    b.ad.stream(0); // no stream before accept
    b.ad.accept(0, StreamId(9), PdId(1), b"").unwrap();
    post_recv16(&mut b, 0);
    feed(&mut a, &drain(&mut b));
    let c = drain(&mut a);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].ppid, 16);
    feed(&mut b, &c);
    assert!(b.ad.stream(0).unwrap().poll_delivery().is_some());
}

#[test]
fn passive_side_terminates_on_a_segment_before_accept() {
    let (mut a, mut b) = pair();
    a.ad.initiate(0, StreamId(0), PdId(1), b"").unwrap();
    feed(&mut b, &drain(&mut a));
    let mut seg = 1u16.to_be_bytes().to_vec();
    seg.extend_from_slice(&[0x41, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    b.ad.on_chunk(&b.mem, 0, 16, &seg).unwrap();
    assert!(matches!(
        closed(&events(&mut b), 0),
        Some(CloseReason::Violation(_))
    ));
    let r = drain(&mut b);
    assert_eq!(ctl(&r[0]).function, SessionFunction::Terminate);
    assert_eq!(b.ad.pending_initiates(), 0);
}

#[test]
fn illegal_sequences_terminate_the_session() {
    // Each case: an established session on stream 0, then one bad control chunk
    // from A (DDP-SSN 1, the next after its Initiate).
    for (code, pd) in [(1u16, &b""[..]), (2, b""), (3, b""), (4, b"x"), (9, b"")] {
        let (mut a, mut b) = pair();
        open(&mut a, &mut b, 0);
        b.ad.on_chunk(&b.mem, 0, 17, &raw_ctl(1, code, pd)).unwrap();
        let e = events(&mut b);
        assert!(
            matches!(closed(&e, 0), Some(CloseReason::Violation(_))),
            "code {code}: {e:?}"
        );
        // B's Accept is confirmed only by sender-dry here: the Terminate waits.
        assert!(drain(&mut b).is_empty());
        b.ad.on_sender_dry();
        let r = drain(&mut b);
        assert_eq!(
            ctl(&r[0]).function,
            SessionFunction::Terminate,
            "code {code}"
        );
    }
    // Private data over 512 octets on an Initiate: refused with Terminate, never
    // handed to the ULP (session_rules.rs has the details).
    let (_, mut b) = pair();
    b.ad.on_chunk(&b.mem, 0, 17, &raw_ctl(0, 1, &[0; 513]))
        .unwrap();
    assert!(matches!(
        closed(&events(&mut b), 0),
        Some(CloseReason::Violation(_))
    ));
    assert_eq!(ctl(&drain(&mut b)[0]).function, SessionFunction::Terminate);
    // An Accept with no session fits no legal sequence either: the session it
    // claims is terminated at once (RFC 5043).
    let (_, mut b) = pair();
    b.ad.on_chunk(&b.mem, 4, 17, &raw_ctl(0, 2, b"")).unwrap();
    assert!(matches!(events(&mut b)[0], Event::Stray { sid: 4, .. }));
    let r = drain(&mut b);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].sid, ctl(&r[0]).function),
        (4, SessionFunction::Terminate)
    );
}

#[test]
fn control_never_overtakes_the_previous_one() {
    let (mut a, mut b) = pair();
    open(&mut a, &mut b, 0);
    // B (passive) wants to end at once: its Accept may still be in flight.
    b.ad.terminate(0).unwrap();
    assert!(drain(&mut b).is_empty());
    // A segment from A proves the Accept arrived (A sends only after Accept).
    a.ad.stream(0)
        .unwrap()
        .send_untagged(1, [0; 5], Bytes::new())
        .unwrap();
    b.ad.stream(0)
        .unwrap()
        .post_recv(
            1,
            RecvBuffer {
                id: 1,
                data: vec![],
            },
        )
        .unwrap();
    feed(&mut b, &drain(&mut a));
    let r = drain(&mut b);
    assert_eq!(ctl(&r[0]).function, SessionFunction::Terminate);
    // And the active side may not Terminate before Accept: terminate() refuses.
    let (mut a, _) = pair();
    a.ad.initiate(1, StreamId(1), PdId(1), b"").unwrap();
    assert_eq!(
        a.ad.terminate(1),
        Err(rddp_sctp::SessionError::NotEstablished(1))
    );
}

#[test]
fn stream_number_reused_only_when_nothing_is_outstanding() {
    let (mut a, mut b) = pair();
    open(&mut a, &mut b, 0);
    assert!(
        a.ad.initiate(0, StreamId(0), PdId(1), b"").is_err(),
        "session open"
    );
    a.ad.terminate(0).unwrap();
    feed(&mut b, &drain(&mut a));
    feed(&mut a, &drain(&mut b));
    assert_eq!(closed(&events(&mut a), 0), Some(CloseReason::Terminated));
    // Our Terminate may be unacknowledged: not yet.
    assert!(a.ad.initiate(0, StreamId(0), PdId(1), b"").is_err());
    a.ad.on_sender_dry();
    a.ad.initiate(0, StreamId(0), PdId(1), b"again").unwrap();
    let c = drain(&mut a);
    // The numbering continues: Initiate 0, Terminate 1, new Initiate 2.
    assert_eq!(ctl(&c[0]).ssn, 2);
    feed(&mut b, &c);
    assert!(events(&mut b).contains(&Event::InitiateRequest {
        sid: 0,
        private_data: b"again".to_vec()
    }));
}

#[test]
fn private_data_limits() {
    let (mut a, _) = pair();
    assert!(a.ad.initiate(0, StreamId(0), PdId(1), &[0; 513]).is_err());
    assert!(a.ad.initiate(0, StreamId(0), PdId(1), &[0; 512]).is_ok());
}

#[test]
fn maximum_segment_and_mulpdu_changes() {
    assert_eq!(max_segment_for(1444), 1442);
    assert_eq!(max_segment_for(300), 516);
    let (mut a, mut b) = pair();
    open(&mut a, &mut b, 0);
    assert_eq!(a.ad.stream(0).unwrap().mulpdu(), 598);
    a.ad.set_fragmentation_point(1000);
    assert_eq!(a.ad.max_segment(), 998);
    assert_eq!(a.ad.stream(0).unwrap().mulpdu(), 998);
    let stag = register(&mut b, 5000);
    a.ad.stream(0)
        .unwrap()
        .send_tagged(0, stag.0, 0x1000, Bytes::from(vec![3; 5000]))
        .unwrap();
    assert!(drain(&mut a).iter().all(|c| c.len() - 2 <= 998));
}

#[test]
fn segments_that_overtake_the_accept_are_placed_after_it() {
    let (mut a, mut b) = pair();
    a.ad.initiate(0, StreamId(0), PdId(1), b"").unwrap();
    feed(&mut b, &drain(&mut a));
    b.ad.accept(0, StreamId(1), PdId(1), b"").unwrap();
    let stag = register(&mut a, 1500);
    b.ad.stream(0)
        .unwrap()
        .send_tagged(0, stag.0, 0x1000, Bytes::from(vec![5; 1500]))
        .unwrap();
    let mut c = drain(&mut b);
    c.rotate_left(1); // the Accept arrives last
    feed(&mut a, &c);
    assert_eq!(a.mem.region(stag).unwrap().data(), &[5; 1500][..]);
    assert!(a.ad.stream(0).unwrap().poll_delivery().is_some());
}

#[test]
fn association_errors_and_teardown_without_terminates() {
    let (mut a, mut b) = pair();
    open(&mut a, &mut b, 0);
    open(&mut a, &mut b, 1);
    assert!(
        b.ad.on_chunk(&b.mem, 0, 0, &[0, 1]).is_err(),
        "non-DDP PPID"
    );
    assert!(
        b.ad.on_chunk(&b.mem, 99, 16, &[0, 1]).is_err(),
        "stream beyond count"
    );
    assert!(b.ad.on_chunk(&b.mem, 0, 16, &[0]).is_err(), "no DDP-SSN");
    assert!(
        b.ad.on_chunk(&b.mem, 0, 16, &[0, 0]).is_err(),
        "duplicate DDP-SSN"
    );
    b.ad.on_association_lost();
    let e = events(&mut b);
    assert_eq!(closed(&e, 0), Some(CloseReason::AssociationLost));
    assert_eq!(closed(&e, 1), Some(CloseReason::AssociationLost));
    assert!(drain(&mut b).is_empty(), "no Terminate on each stream");
}
