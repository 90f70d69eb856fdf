//! A fenced work request (`WriteFlags::fence`, `ReadFlags::fence`;
//! verbs' IBV_SEND_FENCE) leaves only once every earlier RDMA Read has its
//! response (RFC 5040 §5.5). The peer is a raw MPA initiator that holds the
//! first Read's response back and watches the wire: nothing fenced may reach
//! it before it answers. Each case has its control: unfenced, it goes at once
//! (else the test could not tell a fence from a slow queue pair).

mod common;
#[path = "common/raw_peer.rs"]
mod raw_peer;

use raw_peer::RawPeer;
use rddp::{Access, CompletionQueue, Device, ReadFlags, RemoteBuf, WcOpcode, WcStatus, WriteFlags};
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

/// The tagged Read Response (T=L=1, DV=1) to the Read Request `req`: its
/// sink STag and TO follow the 18-octet untagged header (RFC 5040 §4.4).
fn response(req: &[u8], data: &[u8]) -> Vec<u8> {
    let mut resp = vec![0xC1, RdmapControl::new(Opcode::READ_RESPONSE).0];
    resp.extend_from_slice(&req[18..30]);
    resp.extend_from_slice(data);
    resp
}

/// Post a Read, then `second` (fenced or not); returns whether `second`
/// reached the wire before the Read had its response, what the Reads
/// placed, and the work requests in the order they completed.
fn run(second: Second, fence: bool) -> (bool, Vec<u8>, Vec<u64>) {
    let dev = Device::new();
    let pd = common::pd(&dev, "responder");
    let cq = CompletionQueue::new(64);
    let (mut raw, qp) = RawPeer::responder_qp(&pd, &cq, 8);
    assert!(qp.ird_ord().1 >= 2, "ORD lets both Reads go unfenced");
    let sink = pd.register(vec![0; 8], Access::REMOTE_WRITE).unwrap();
    let src = pd.register(b"late".to_vec(), Access::NONE).unwrap();
    // The raw peer's STags: nothing checks them but the raw peer itself.
    let peer = |stag| RemoteBuf {
        stag,
        to: 0,
        len: 4,
    };
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
            let flags = ReadFlags { fence };
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
    (early, sink.read(0, 8).unwrap(), order)
}

#[test]
fn a_fenced_write_waits_for_the_earlier_reads_response() {
    let (early, read, order) = run(Second::Write, true);
    assert!(
        !early,
        "the fenced Write left before the Read had its response"
    );
    assert_eq!(&read[..4], b"read");
    assert_eq!(order, [1, 2]);
}

#[test]
fn an_unfenced_write_does_not_wait_for_reads() {
    let (early, read, order) = run(Second::Write, false);
    assert!(early, "the unfenced Write waited for the Read");
    assert_eq!(&read[..4], b"read");
    // A Write completes once the LLP took it: before the earlier Read,
    // whose response had not come (README, "Known limits").
    assert_eq!(order, [2, 1]);
}

#[test]
fn a_fenced_read_waits_for_the_earlier_reads_response() {
    let (early, read, _) = run(Second::Read, true);
    assert!(
        !early,
        "the fenced Read left before the first had its response"
    );
    assert_eq!(read, b"readmore");
}

#[test]
fn an_unfenced_read_does_not_wait_for_reads() {
    let (early, read, _) = run(Second::Read, false);
    assert!(early, "the unfenced Read waited for the first");
    assert_eq!(read, b"readmore");
}
