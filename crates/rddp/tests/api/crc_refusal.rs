//! A bad CRC is refused with Terminate 2/0/0x02 and the queue pair says which FPDU
//! it was (counted from 0 after MPA setup), so a fault test can match the refused
//! FPDU against the one its impairing bridge corrupted (scripts/faults.sh).

use crate::common;
use crate::common::raw_peer;

use raw_peer::RawPeer;
use rddp::{AsyncEvent, CompletionQueue, Device, TerminateCode};

/// A zero-length RDMA Write to STag 0 (places nothing; RFC 6581's RTR shape).
fn empty_write() -> Vec<u8> {
    let mut s = vec![0xC1, 0x40];
    s.extend_from_slice(&[0; 12]);
    s
}

/// The detail of the first Terminate the queue pair sent, waiting up to 5 s.
fn sent_detail(qp: &rddp::QueuePair) -> Option<(TerminateCode, String)> {
    common::poll_event(qp, |e| match e {
        AsyncEvent::TerminateSent { code, detail } => Some((*code, detail.clone())),
        _ => None,
    })
}

fn refused_after(good: usize) -> (TerminateCode, String) {
    let dev = Device::new();
    let pd = common::pd(&dev, "server");
    let cq = CompletionQueue::new(64);
    let (mut raw, conn) = RawPeer::accepted_rev1();
    let qp = common::attach(&pd, &cq, conn);
    for _ in 0..good {
        raw.send_segment(&empty_write());
    }
    raw.send_bad_crc(&empty_write(), 0x01);
    let (term, _) = raw.terminate();
    assert_eq!(
        term.expect("no Terminate on the wire").code,
        TerminateCode::MPA_CRC_ERROR
    );
    sent_detail(&qp).expect("no TerminateSent event")
}

#[test]
fn the_refused_fpdu_is_named_by_its_index() {
    for good in [0, 3, 17] {
        let (code, detail) = refused_after(good);
        assert_eq!(code, TerminateCode::MPA_CRC_ERROR);
        assert!(detail.contains("CRC"), "{detail}");
        assert!(
            detail.contains(&format!("(FPDU {good} after setup)")),
            "{good} good FPDUs before the bad one: {detail}"
        );
    }
}
