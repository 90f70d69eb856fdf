//! A bad CRC is refused with Terminate 2/0/0x02 and the queue pair says which FPDU
//! it was (counted from 0 after MPA setup), so a fault test can match the refused
//! FPDU against the one its impairing bridge corrupted (scripts/faults.sh).

mod common;
#[path = "common/raw_peer.rs"]
mod raw_peer;

use raw_peer::RawPeer;
use rddp::transport::mpa::Listener;
use rddp::{AsyncEvent, CompletionQueue, Device, QueuePairBuilder, TerminateCode};
use rddp_mpa::MpaOptions;
use rddp_wire::FpduEncoder;
use std::time::Duration;

/// A zero-length RDMA Write to STag 0 (places nothing; spec §7.8's RTR shape).
fn empty_write() -> Vec<u8> {
    let mut s = vec![0xC1, 0x40];
    s.extend_from_slice(&[0; 12]);
    s
}

/// The detail of the first Terminate the queue pair sent, waiting up to 5 s.
fn sent_detail(qp: &rddp::QueuePair) -> Option<(TerminateCode, String)> {
    for _ in 0..250 {
        for e in qp.async_events() {
            if let AsyncEvent::TerminateSent { code, detail } = e {
                return Some((code, detail));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn refused_after(good: usize) -> (TerminateCode, String) {
    let dev = Device::new();
    let pd = common::pd(&dev, "server");
    let cq = CompletionQueue::new(64);
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::rev1()).unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = std::thread::spawn(move || listener.accept());
    let mut raw = RawPeer::connect(addr, true);
    let conn = accept.join().unwrap().unwrap();
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .build()
        .unwrap()
        .attach(conn)
        .unwrap();
    for _ in 0..good {
        raw.send_segment(&empty_write());
    }
    let mut bad = Vec::new();
    FpduEncoder::new(true, false)
        .encode(&empty_write(), &mut bad)
        .unwrap();
    *bad.last_mut().unwrap() ^= 0x01;
    raw.send_raw(&bad);
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
