//! The session rules of RFC 5043 as a peer sees them (docs/data-path.md), sans-IO:
//! chunks that fit no session, oversized private data, repeated Terminates, stream
//! reuse after a violation, the maximum segment size on receive, and what a session
//! may hold while its Accept is missing.

use crate::common::sides::*;
use bytes::Bytes;
use rddp_proto::mem::{PdId, StreamId};
use rddp_sctp::{Adaptation, CloseReason, Config, Event, OutChunk, SessionState};
use rddp_wire::sctp::SessionFunction;
use rddp_wire::{Opcode, RdmapControl, TaggedHeader};

/// A PPID 16 payload: DDP-SSN, then a one-segment RDMA Write of `payload`.
fn write_chunk(ssn: u16, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let rdmap = RdmapControl::new(Opcode::RDMA_WRITE).0;
    let mut v = ssn.to_be_bytes().to_vec();
    v.extend_from_slice(&TaggedHeader::new(true, rdmap, stag, to).to_bytes());
    v.extend_from_slice(payload);
    v
}

fn functions(c: &[OutChunk], sid: u16) -> Vec<SessionFunction> {
    c.iter()
        .filter(|c| c.sid == sid && c.ppid == 17)
        .map(|c| ctl(c).function)
        .collect()
}

/// The session on `sid` still carries a message from A to B.
fn carries_on(a: &mut Side, b: &mut Side, sid: u16) {
    post_recv16(b, sid);
    a.ad.stream(sid)
        .unwrap()
        .send_untagged(0, [0; 5], Bytes::from_static(b"still here"))
        .unwrap();
    feed(b, &drain(a));
    assert!(b.ad.stream(sid).unwrap().poll_delivery().is_some());
}

/// RFC 5043: a chunk that fits no legal sequence terminates the session; a DDP
/// segment on a stream without a session is such a chunk. One Terminate per bogus
/// session, whatever the peer floods; the other sessions carry on.
#[test]
fn segment_on_a_stream_without_a_session_is_answered_with_terminate() {
    let (mut a, mut b) = pair();
    open(&mut a, &mut b, 1);
    let stag = register(&mut b, 64);
    for ssn in 0..3 {
        b.ad.on_chunk(&b.mem, 2, 16, &write_chunk(ssn, stag.0, 0x1000, b"x"))
            .unwrap();
    }
    assert_eq!(b.mem.region(stag).unwrap().data(), &[0; 64][..]);
    let out = drain(&mut b);
    assert_eq!(functions(&out, 2), [SessionFunction::Terminate]);
    assert!(ctl(&out[0]).private_data.is_empty());
    assert_eq!(b.ad.session_state(1), Some(SessionState::Established));
    carries_on(&mut a, &mut b, 1);
}

/// RFC 5043: private data never exceeds 512 octets. Such an Initiate never reaches
/// the ULP and is answered with Terminate (Initiate, Terminate), never with Reject
/// (only the ULP rejects). The stream then takes a proper Initiate.
#[test]
fn initiate_with_too_much_private_data_gets_terminate_and_never_reaches_the_ulp() {
    let (_, mut b) = pair();
    b.ad.on_chunk(&b.mem, 3, 17, &raw_ctl(0, 1, &[7; 513]))
        .unwrap();
    let e = events(&mut b);
    assert!(
        !e.iter().any(|e| matches!(e, Event::InitiateRequest { .. })),
        "{e:?}"
    );
    assert_eq!(b.ad.pending_initiates(), 0);
    let out = drain(&mut b);
    assert_eq!(functions(&out, 3), [SessionFunction::Terminate]);
    assert_eq!(out.len(), 1);
    b.ad.on_chunk(&b.mem, 3, 17, &raw_ctl(1, 1, &[7; 512]))
        .unwrap();
    assert_eq!(
        events(&mut b),
        [Event::InitiateRequest {
            sid: 3,
            private_data: vec![7; 512]
        }]
    );
}

/// RFC 5043: "at least one Terminate". A second Terminate from the peer, in order
/// or arriving before the first, is no violation: the session ends as Terminated
/// and we answer once.
#[test]
fn a_second_terminate_from_the_peer_is_legal() {
    for swapped in [false, true] {
        let (mut a, mut b) = pair();
        open(&mut a, &mut b, 0);
        open(&mut a, &mut b, 1);
        a.ad.terminate(0).unwrap();
        let mut c = drain(&mut a);
        assert_eq!(functions(&c, 0), [SessionFunction::Terminate]);
        // A's Terminate took DDP-SSN 1 (after its Initiate); the second one 2.
        let second = OutChunk::whole(0, 17, raw_ctl(2, 4, b""));
        if swapped {
            c.insert(0, second);
        } else {
            c.push(second);
        }
        feed(&mut b, &c);
        let out = drain(&mut b);
        assert_eq!(
            functions(&out, 0),
            [SessionFunction::Terminate],
            "{swapped}"
        );
        assert_eq!(
            closed(&events(&mut b), 0),
            Some(CloseReason::Terminated),
            "swapped: {swapped}"
        );
        carries_on(&mut a, &mut b, 1);
    }
}

/// RFC 5043: a stream number is not reused while a chunk of the old session might
/// be outstanding, and is reusable once none can be: after a violation too, when
/// the peer's Terminate and everything before it have arrived and ours is acked.
#[test]
fn stream_reusable_after_a_violation_once_nothing_is_outstanding() {
    let (_, mut b) = pair();
    // A raw peer: Initiate (DDP-SSN 0), B accepts, then a second Initiate (1) on
    // the established session: a violation.
    b.ad.on_chunk(&b.mem, 0, 17, &raw_ctl(0, 1, b"")).unwrap();
    b.ad.accept(0, StreamId(9), PdId(1), b"").unwrap();
    assert_eq!(functions(&drain(&mut b), 0), [SessionFunction::Accept]);
    b.ad.on_chunk(&b.mem, 0, 17, &raw_ctl(1, 1, b"")).unwrap();
    assert!(matches!(
        closed(&events(&mut b), 0),
        Some(CloseReason::Violation(_))
    ));
    b.ad.on_sender_dry();
    assert_eq!(functions(&drain(&mut b), 0), [SessionFunction::Terminate]);
    b.ad.on_sender_dry();
    // The peer has not answered: its chunks may still be outstanding.
    assert_eq!(
        b.ad.initiate(0, StreamId(0), PdId(1), b""),
        Err(rddp_sctp::SessionError::Busy(0))
    );
    // Its Terminate (2) ends its side; everything before it has arrived.
    b.ad.on_chunk(&b.mem, 0, 17, &raw_ctl(2, 4, b"")).unwrap();
    b.ad.initiate(0, StreamId(0), PdId(1), b"again").unwrap();
    let c = drain(&mut b);
    assert_eq!(functions(&c, 0), [SessionFunction::Initiate]);
    // B's numbering goes on: Accept 0, Terminate 1, Initiate 2.
    assert_eq!(ctl(&c[0]).ssn, 2);
}

/// The same after the bogus session of a stray segment: its Terminate answered,
/// the stream takes a session we initiate.
#[test]
fn stream_reusable_after_a_stray_segment_once_the_peer_terminated() {
    let (_, mut b) = pair();
    b.ad.on_chunk(&b.mem, 5, 16, &write_chunk(0, 1, 0, b"x"))
        .unwrap();
    assert_eq!(functions(&drain(&mut b), 5), [SessionFunction::Terminate]);
    b.ad.on_sender_dry();
    assert!(b.ad.initiate(5, StreamId(5), PdId(1), b"").is_err());
    b.ad.on_chunk(&b.mem, 5, 17, &raw_ctl(1, 4, b"")).unwrap();
    b.ad.initiate(5, StreamId(5), PdId(1), b"").unwrap();
    assert_eq!(functions(&drain(&mut b), 5), [SessionFunction::Initiate]);
}

/// RFC 5043: the adaptation layer rejects DDP segments larger than the maximum
/// segment size, received ones included (they were fragmented by SCTP): that
/// session is terminated before any octet is placed; the others carry on.
#[test]
fn received_segment_above_the_maximum_terminates_its_session() {
    let (mut a, mut b) = pair();
    open(&mut a, &mut b, 0);
    open(&mut a, &mut b, 1);
    let stag = register(&mut b, 4096);
    let max = b.ad.max_segment();
    assert_eq!(b.ad.max_recv_segment(), max);
    let big = write_chunk(1, stag.0, 0x1000, &vec![9; max + 1 - 14]);
    assert_eq!(big.len(), 2 + max + 1);
    b.ad.on_chunk(&b.mem, 0, 16, &big).unwrap();
    assert_eq!(b.mem.region(stag).unwrap().data(), &[0; 4096][..]);
    assert!(matches!(
        closed(&events(&mut b), 0),
        Some(CloseReason::Violation(_))
    ));
    b.ad.on_sender_dry();
    assert_eq!(functions(&drain(&mut b), 0), [SessionFunction::Terminate]);
    carries_on(&mut a, &mut b, 1);
    // Exactly the maximum is fine.
    let fits = write_chunk(2, stag.0, 0x1000, &vec![9; max - 14]);
    b.ad.on_chunk(&b.mem, 1, 16, &fits).unwrap();
    assert_eq!(
        b.mem.region(stag).unwrap().data()[..max - 14],
        vec![9; max - 14]
    );
}

/// What the active side holds while its Accept is missing (segments that overtook
/// it) is bounded in octets: a peer that sends more before its Accept arrives has
/// its session terminated, and nothing it sent is placed.
#[test]
fn segments_held_before_the_accept_are_bounded_in_octets() {
    // A large fragmentation point, so that each held segment is large.
    let fp = 65_536;
    let mut a = Side {
        ad: Adaptation::new(Config::default(), fp),
        mem: rddp_proto::mem::MemoryTable::with_seed(3),
    };
    a.ad.initiate(0, StreamId(0), PdId(1), b"").unwrap();
    drain(&mut a);
    let stag = register(&mut a, 1 << 20);
    let seg = vec![1; 60_000];
    let limit = Config::default().max_held_octets;
    let n = limit / seg.len() + 1;
    assert!(n < 1024, "the old bound was 1024 segments of any size");
    // B's Accept is DDP-SSN 0; its segments 1..=n arrive first.
    for ssn in 1..=n as u16 {
        let to = 0x1000 + u64::from(ssn - 1) * seg.len() as u64;
        a.ad.on_chunk(&a.mem, 0, 16, &write_chunk(ssn, stag.0, to, &seg))
            .unwrap();
    }
    assert!(matches!(
        closed(&events(&mut a), 0),
        Some(CloseReason::Violation(_))
    ));
    a.ad.on_chunk(&a.mem, 0, 17, &raw_ctl(0, 2, b"")).unwrap();
    assert!(
        !events(&mut a)
            .iter()
            .any(|e| matches!(e, Event::Accepted { .. }))
    );
    assert!(a.mem.region(stag).unwrap().data().iter().all(|&b| b == 0));
}
