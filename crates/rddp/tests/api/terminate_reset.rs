//! A peer that sends a Terminate and then closes with our output unread (so
//! its kernel answers with a reset) must be reported as what it is: the
//! Terminate first (RFC 5040 §5.4: the Terminate says why the stream ends),
//! not only a lost connection. Linux keeps received octets readable after a
//! reset, so the Terminate is still there when the write fails; the queue
//! pair must read it before it calls the connection lost, also while a
//! busy-polling thread holds its receive side between two looks.
//!
//! `rddp perf`'s fault test (scripts/faults.sh, corrupted Read Responses) met
//! this under load: the responder reported a lost connection instead of the
//! requester's Terminate 2/0/0x02.

use crate::common;
use crate::common::raw_peer;

use raw_peer::RawPeer;
use rddp::{Access, AsyncEvent, CompletionQueue, Device, RemoteBuf};
use rddp_wire::{Terminate, TerminateCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// One round: the first event the queue pair reports after the peer's
/// Terminate and reset.
fn one_round() -> Vec<AsyncEvent> {
    let dev = Device::new();
    let pd = common::pd(&dev, "responder");
    let cq = CompletionQueue::new(64);
    // The raw peer's first FPDU lets the queue pair send.
    let (mut raw, qp) = RawPeer::responder_qp(&pd, &cq, 16);
    // Output the peer never reads: the queue pair waits to write.
    let src = pd.register(vec![0x5A; 4 * MIB], Access::NONE).unwrap();
    let sink = RemoteBuf {
        stag: 0x0000_1000,
        to: 0,
        len: (4 * MIB) as u64,
    };
    for i in 0..4 {
        qp.post_write(i, &src, 0, (4 * MIB) as u64, sink, 0)
            .unwrap();
    }
    // A thread that busy-polls the queue pair's CQ now and then: it holds
    // the receive side (its lease) but does not look all the time.
    let stop = Arc::new(AtomicBool::new(false));
    let polled = Arc::new(AtomicBool::new(false));
    let poller = {
        let (cq, stop, polled) = (cq.clone(), stop.clone(), polled.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = cq.poll_busy(16);
                polled.store(true, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(400));
            }
            cq.end_busy();
        })
    };
    // The poller has started (its first busy poll asks for the receive
    // side) before the Terminate comes.
    common::wait_until("the first busy poll", || polled.load(Ordering::Relaxed));
    // The Terminate, then a close with the queue pair's Writes unread: a reset.
    let term = Terminate::bare(TerminateCode::MPA_CRC_ERROR);
    raw.send_segment(&term.to_segment().unwrap());
    drop(raw);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut events = qp.async_events();
    while events.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        events = qp.async_events();
    }
    stop.store(true, Ordering::Relaxed);
    poller.join().unwrap();
    events
}

#[test]
fn a_terminate_followed_by_a_reset_is_reported_before_the_loss() {
    // Several rounds: before the fix most rounds reported only the loss.
    for round in 0..6 {
        let events = one_round();
        match events.first() {
            Some(AsyncEvent::TerminateReceived { code, .. }) => {
                assert_eq!(*code, Some(TerminateCode::MPA_CRC_ERROR), "round {round}");
            }
            other => panic!("round {round}: the first event was {other:?}, not the Terminate"),
        }
    }
}
