//! Regressions found by the fuzz targets (crates/rddp-fuzz, fuzz/regressions/).

use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_proto::rdmap::{RdmapConfig, RdmapStream, WcOpcode, WcStatus};
use rddp_wire::{Opcode, RdmapControl, UntaggedHeader};

fn send(op: Opcode, msn: u32, inval: u32, payload: &[u8]) -> Vec<u8> {
    let s = inval.to_be_bytes();
    let rsvd = [RdmapControl::new(op).0, s[0], s[1], s[2], s[3]];
    let mut v = UntaggedHeader::new(true, rsvd, 0, msn, 0)
        .to_bytes()
        .to_vec();
    v.extend_from_slice(payload);
    v
}

#[test]
fn a_message_delivered_after_a_fatal_one_still_completes() {
    // Found by rdmap_stream (lost completion): two Sends become deliverable in
    // one call (the second arrived first); the first is a Send with Invalidate
    // of an STag that cannot be invalidated, so the stream dies while handling
    // it, and the second Send's receive buffer was left in DDP's delivery queue:
    // never completed, not even flushed.
    let mem = MemoryTable::with_seed(1);
    let mut s = RdmapStream::new(StreamId(1), PdId(1), RdmapConfig::default()).unwrap();
    s.post_recv(1, vec![0; 16]).unwrap();
    s.post_recv(2, vec![0; 16]).unwrap();
    assert!(
        s.on_segment(&mem, 1, &send(Opcode::SEND, 2, 0, b"second"))
            .is_ok()
    );
    let _ = s.on_segment(
        &mem,
        0,
        &send(Opcode::SEND_INVALIDATE, 1, 0xDEAD_BEEF, b"first"),
    );
    s.abort();
    let done: Vec<_> = std::iter::from_fn(|| s.poll_completion()).collect();
    let of = |id| done.iter().filter(|c| c.wr_id == id).count();
    assert_eq!((of(1), of(2)), (1, 1), "{done:?}");
    let second = done.iter().find(|c| c.wr_id == 2).unwrap();
    assert_eq!(
        (second.opcode, second.status),
        (WcOpcode::Recv, WcStatus::Flushed)
    );
    assert!(second.buffer.is_some(), "the buffer is handed back");
}
