//! The send queue of a queue pair completes in posting order: a completion
//! says every request before it is done (ibv_poll_cq(3)), so an unsignaled
//! Read (`ReadFlags::unsignaled`) is covered by the next signaled
//! completion, and gives its send-queue slot and its outstanding-Read quota
//! back once placed. The peer is a raw MPA initiator that answers each Read
//! Request by hand. The Read fence itself (RFC 5040 §5.5, an engine rule) is
//! tested without sockets in rddp-sim's RDMAP pair (`rdmap_fence`).

use crate::common;
use crate::common::raw_peer;

use raw_peer::RawPeer;
use rddp::{
    Access, CompletionQueue, Device, Quota, ReadFlags, RemoteBuf, WcOpcode, WcStatus, WriteFlags,
};
use rddp_wire::{Opcode, RdmapControl};
use std::time::Duration;

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

/// Six unsignaled Reads, each answered, with a send queue of 3 and an
/// outstanding-Read quota of 3 and the CQ never polled: each gives its slot
/// and its charge back once placed (each is placed before the next is posted;
/// 3, not 2, leaves room for the release to follow the placement); none
/// completes; the signaled Write after the last completes only once that
/// Read's data is in place.
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
        let segs = raw.read_until("a Read Request", |s| s.iter().any(|s| is_read_request(s)));
        let req = segs.iter().find(|s| is_read_request(s)).unwrap();
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
        // Placed before the next is posted: the Read's slot and charge come
        // back with (or just after) its placement, and a quota of 3 leaves
        // room for that one to lag.
        let at = u64::from(i) * 4;
        common::wait_until(&format!("Read {i} placed"), || {
            sink.read(at, 4).unwrap() == [b'a' + i; 4]
        });
    }
    // The sixth is held back: the Write posted after it must not complete
    // before its response.
    qp.post_read_with(5, &sink, 20, 4, peer(0x100), 0, unsignaled)
        .unwrap();
    qp.post_write_with(9, &src, 0, 4, peer(0x200), 0, WriteFlags::default())
        .unwrap();
    let mut segs = raw.read_until("the Write and the last Read Request", |s| {
        s.iter().any(|s| is_write(s)) && s.iter().any(|s| is_read_request(s))
    });
    // A negative check: no sign marks "the Write will not complete", so a
    // Write completed early (as it leaves) is given 300 ms to show.
    segs.extend(raw.read_all(Duration::from_millis(300)).0);
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
    // The send queue completes in posting order: a completion of any Read
    // would have come before the Write's (the first taken above), so what
    // is queued now shows it.
    assert!(cq.poll(8).is_empty(), "an unsignaled Read completed");
    assert_eq!(consumer.usage().outstanding_reads, 0);
}
