//! A fenced RDMA Write (`WriteFlags::fence`) leaves only once every earlier
//! RDMA Read has its response (RFC 5040 §5.5; verbs' IBV_SEND_FENCE). The
//! peer is a raw MPA initiator that holds the Read Response back and watches
//! the wire: no Write may reach it before it answers.

mod common;
#[path = "common/raw_peer.rs"]
mod raw_peer;

use raw_peer::RawPeer;
use rddp::{Access, CompletionQueue, Device, RemoteBuf, WcOpcode, WcStatus, WriteFlags};
use std::time::Duration;

/// RDMAP opcodes in the second octet of a DDP segment (RFC 5040 §4.2).
const OP_WRITE: u8 = 0;
const OP_READ_REQUEST: u8 = 1;

fn opcode(seg: &[u8]) -> u8 {
    seg[1] & 0x0F
}

fn fenced_or_not(fence: bool) -> (bool, Vec<u8>) {
    let dev = Device::new();
    let pd = common::pd(&dev, "responder");
    let cq = CompletionQueue::new(64);
    let (mut raw, qp) = RawPeer::responder_qp(&pd, &cq, 8);
    let sink = pd.register(vec![0; 4], Access::REMOTE_WRITE).unwrap();
    let src = pd.register(b"late".to_vec(), Access::NONE).unwrap();
    // The raw peer's STags: nothing checks them but the raw peer itself.
    let peer = |stag| RemoteBuf {
        stag,
        to: 0,
        len: 4,
    };
    qp.post_read(1, &sink, 0, 4, peer(0x100), 0).unwrap();
    let flags = WriteFlags {
        fence,
        ..WriteFlags::default()
    };
    qp.post_write_with(2, &src, 0, 4, peer(0x200), 0, flags)
        .unwrap();

    let (segs, _) = raw.read_all(Duration::from_millis(300));
    let req = segs
        .iter()
        .find(|s| s[0] & 0x80 == 0 && opcode(s) == OP_READ_REQUEST)
        .unwrap_or_else(|| panic!("no Read Request in {segs:02x?}"));
    let write_early = segs
        .iter()
        .any(|s| s[0] & 0x80 != 0 && opcode(s) == OP_WRITE);
    // Read Request (RFC 5040 §4.4): sink STag and TO after the 18-octet
    // untagged header; answered with a tagged Read Response (opcode 2, L=1).
    let mut resp = vec![0xC1, 0x42];
    resp.extend_from_slice(&req[18..22]);
    resp.extend_from_slice(&req[22..30]);
    resp.extend_from_slice(b"read");
    raw.send_segment(&resp);

    let done = common::wait(&cq, 2);
    let mut got: Vec<_> = done.iter().map(|w| (w.wr_id, w.opcode, w.status)).collect();
    got.sort_by_key(|c| c.0);
    assert_eq!(
        got,
        [
            (1, WcOpcode::RdmaRead, WcStatus::Success),
            (2, WcOpcode::RdmaWrite, WcStatus::Success)
        ]
    );
    if !write_early {
        let (segs, _) = raw.read_all(Duration::from_millis(300));
        assert!(
            segs.iter()
                .any(|s| s[0] & 0x80 != 0 && opcode(s) == OP_WRITE),
            "the fenced Write never left after the Read's response"
        );
    }
    (write_early, sink.read(0, 4).unwrap())
}

#[test]
fn a_fenced_write_waits_for_the_earlier_reads_response() {
    let (early, read) = fenced_or_not(true);
    assert!(
        !early,
        "the fenced Write left before the Read had its response"
    );
    assert_eq!(read, b"read");
}

/// The control: without the fence the Write goes at once (else the test above
/// could not tell a fence from a slow queue pair).
#[test]
fn an_unfenced_write_does_not_wait_for_reads() {
    let (early, read) = fenced_or_not(false);
    assert!(early, "the unfenced Write waited for the Read");
    assert_eq!(read, b"read");
}
