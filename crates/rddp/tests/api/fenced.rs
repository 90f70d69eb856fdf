//! A fenced work request (`WriteFlags::fence`, `ReadFlags::fence`;
//! verbs' IBV_SEND_FENCE) leaves only once every earlier RDMA Read has its
//! response (RFC 5040 §5.5). The peer is a raw MPA initiator that holds the
//! first Read's response back and watches the wire: nothing fenced may reach
//! it before it answers. Each case has its control: unfenced, it goes at once
//! (else the test could not tell a fence from a slow queue pair).
//!
//! Fenced or not, the send queue completes in posting order: a completion
//! says every request before it is done (ibv_poll_cq(3)), so a Write that
//! left before an earlier Read's response does not complete before the Read,
//! and an unsignaled Read (`ReadFlags::unsignaled`) is covered by the next
//! signaled completion.

use crate::common;
use crate::common::raw_peer;

use raw_peer::RawPeer;
use rddp::{
    Access, CompletionQueue, Device, Quota, ReadFlags, RemoteBuf, WcOpcode, WcStatus, WriteFlags,
};
use rddp_wire::{Opcode, RdmapControl};
use std::time::Duration;

#[derive(Clone, Copy, PartialEq)]
enum Second {
    Write,
    Read,
}

/// The segment's RDMAP opcode (its second octet, RFC 5040 §4.2).
fn opcode(seg: &[u8]) -> Opcode {
    RdmapControl(seg[1]).opcode()
}

/// A tagged Write segment.
fn is_write(seg: &[u8]) -> bool {
    seg[0] & 0x80 != 0 && opcode(seg) == Opcode::RDMA_WRITE
}

/// An untagged Read Request segment.
fn is_read_request(seg: &[u8]) -> bool {
    seg[0] & 0x80 == 0 && opcode(seg) == Opcode::READ_REQUEST
}

/// Four octets of the raw peer at `stag`: nothing checks its STags but the
/// raw peer itself.
fn peer(stag: u32) -> RemoteBuf {
    RemoteBuf {
        stag,
        to: 0,
        len: 4,
    }
}

/// The tagged Read Response (T=L=1, DV=1) to the Read Request `req`: its
/// sink STag and TO follow the 18-octet untagged header (RFC 5040 §4.4).
fn response(req: &[u8], data: &[u8]) -> Vec<u8> {
    let mut resp = vec![0xC1, RdmapControl::new(Opcode::READ_RESPONSE).0];
    resp.extend_from_slice(&req[18..30]);
    resp.extend_from_slice(data);
    resp
}

/// What [`run`] saw.
struct Seen {
    /// The second request reached the wire before the Read had its response.
    early: bool,
    /// What the Reads placed.
    read: Vec<u8>,
    /// The work requests in the order they completed.
    order: Vec<u64>,
    /// Those completed before the Read's response was sent.
    before_response: Vec<u64>,
}

/// Post a Read, then `second` (fenced or not).
fn run(second: Second, fence: bool) -> Seen {
    let dev = Device::new();
    let pd = common::pd(&dev, "responder");
    let cq = CompletionQueue::new(64);
    let (mut raw, qp) = RawPeer::responder_qp(&pd, &cq, 8);
    assert!(qp.ird_ord().1 >= 2, "ORD lets both Reads go unfenced");
    let sink = pd.register(vec![0; 8], Access::REMOTE_WRITE).unwrap();
    let src = pd.register(b"late".to_vec(), Access::NONE).unwrap();
    qp.post_read(1, &sink, 0, 4, peer(0x100), 0).unwrap();
    let (opcode, is_second): (_, fn(&[u8]) -> bool) = match second {
        Second::Write => {
            let flags = WriteFlags {
                fence,
                ..WriteFlags::default()
            };
            qp.post_write_with(2, &src, 0, 4, peer(0x200), 0, flags)
                .unwrap();
            (WcOpcode::RdmaWrite, is_write)
        }
        Second::Read => {
            let flags = ReadFlags {
                fence,
                ..ReadFlags::default()
            };
            qp.post_read_with(2, &sink, 4, 4, peer(0x200), 0, flags)
                .unwrap();
            (WcOpcode::RdmaRead, is_read_request)
        }
    };

    let (mut segs, _) = raw.read_all(Duration::from_millis(300));
    let first = segs
        .iter()
        .position(|s| is_read_request(s))
        .unwrap_or_else(|| panic!("no Read Request in {segs:02x?}"));
    let first = segs.remove(first);
    let early = segs.iter().any(|s| is_second(s));
    let before_response = cq.poll(8).iter().map(|w| w.wr_id).collect();
    raw.send_segment(&response(&first, b"read"));
    if !early {
        let (more, _) = raw.read_all(Duration::from_millis(300));
        segs.extend(more);
    }
    let req2 = segs.iter().find(|s| is_second(s));
    assert!(
        req2.is_some(),
        "the second never left after the Read's response"
    );
    if second == Second::Read {
        raw.send_segment(&response(req2.unwrap(), b"more"));
    }

    let done = common::wait(&cq, 2);
    let order = done.iter().map(|w| w.wr_id).collect();
    let mut got: Vec<_> = done.iter().map(|w| (w.wr_id, w.opcode, w.status)).collect();
    got.sort_by_key(|c| c.0);
    assert_eq!(
        got,
        [
            (1, WcOpcode::RdmaRead, WcStatus::Success),
            (2, opcode, WcStatus::Success)
        ]
    );
    Seen {
        early,
        read: sink.read(0, 8).unwrap(),
        order,
        before_response,
    }
}

#[test]
fn a_fenced_write_waits_for_the_earlier_reads_response() {
    let s = run(Second::Write, true);
    assert!(
        !s.early,
        "the fenced Write left before the Read had its response"
    );
    assert_eq!(&s.read[..4], b"read");
    assert_eq!(s.order, [1, 2]);
}

#[test]
fn an_unfenced_write_does_not_wait_for_reads() {
    let s = run(Second::Write, false);
    assert!(s.early, "the unfenced Write waited for the Read");
    assert_eq!(&s.read[..4], b"read");
    // The Write left, but its completion would say the Read is done too:
    // it waits for the Read's.
    assert_eq!(
        s.before_response,
        [] as [u64; 0],
        "completed before the Read's response"
    );
    assert_eq!(s.order, [1, 2]);
}

#[test]
fn a_fenced_read_waits_for_the_earlier_reads_response() {
    let s = run(Second::Read, true);
    assert!(
        !s.early,
        "the fenced Read left before the first had its response"
    );
    assert_eq!(s.read, b"readmore");
    assert_eq!(s.order, [1, 2]);
}

#[test]
fn an_unfenced_read_does_not_wait_for_reads() {
    let s = run(Second::Read, false);
    assert!(s.early, "the unfenced Read waited for the first");
    assert_eq!(s.read, b"readmore");
    assert_eq!(s.order, [1, 2]);
}

/// Six unsignaled Reads, each answered, with a send queue of 3 and an
/// outstanding-Read quota of 3 and the CQ never polled: each gives its slot
/// and its charge back once placed (the previous one's response may still be
/// on its way when the next is posted: 3, not 2); none completes; the
/// signaled Write after the last completes only once that Read's data is in
/// place.
#[test]
fn unsignaled_reads_complete_nothing_and_the_next_completion_covers_them() {
    let dev = Device::new();
    let quota = Quota {
        outstanding_reads: 3,
        ..Quota::default()
    };
    let consumer = dev.consumer("reader", quota).unwrap();
    let pd = consumer.alloc_pd().unwrap();
    let cq = CompletionQueue::new(64);
    let (mut raw, qp) = RawPeer::responder_qp(&pd, &cq, 3);
    let sink = pd.register(vec![0; 24], Access::REMOTE_WRITE).unwrap();
    let src = pd.register(b"done".to_vec(), Access::NONE).unwrap();
    let unsignaled = ReadFlags {
        unsignaled: true,
        ..ReadFlags::default()
    };
    let answer = |raw: &mut RawPeer, data: &[u8]| {
        let (segs, _) = raw.read_all(Duration::from_millis(200));
        let req = segs
            .iter()
            .find(|s| is_read_request(s))
            .unwrap_or_else(|| panic!("no Read Request in {segs:02x?}"));
        raw.send_segment(&response(req, data));
    };
    for i in 0..5u8 {
        qp.post_read_with(
            u64::from(i),
            &sink,
            u64::from(i) * 4,
            4,
            peer(0x100),
            0,
            unsignaled,
        )
        .unwrap_or_else(|e| panic!("Read {i}: {e}"));
        answer(&mut raw, &[b'a' + i; 4]);
    }
    // The sixth is held back: the Write posted after it must not complete
    // before its response.
    qp.post_read_with(5, &sink, 20, 4, peer(0x100), 0, unsignaled)
        .unwrap();
    qp.post_write_with(9, &src, 0, 4, peer(0x200), 0, WriteFlags::default())
        .unwrap();
    let (segs, _) = raw.read_all(Duration::from_millis(300));
    assert!(segs.iter().any(|s| is_write(s)), "the Write did not leave");
    assert!(
        cq.poll(8).is_empty(),
        "a completion before the last Read's response"
    );
    let req = segs.iter().find(|s| is_read_request(s)).unwrap();
    raw.send_segment(&response(req, b"ffff"));
    let done = common::wait(&cq, 1);
    assert_eq!(
        (done[0].wr_id, done[0].opcode, done[0].status),
        (9, WcOpcode::RdmaWrite, WcStatus::Success)
    );
    // It covers the Reads: their data is in place.
    assert_eq!(sink.read(0, 24).unwrap(), b"aaaabbbbccccddddeeeeffff");
    std::thread::sleep(Duration::from_millis(100));
    assert!(cq.poll(8).is_empty(), "an unsignaled Read completed");
    assert_eq!(consumer.usage().outstanding_reads, 0);
}
