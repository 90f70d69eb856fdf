//! The in-memory LLP's graceful close reaches the peer as a close while the
//! closing queue pair is still alive, as a TCP FIN does (before, the peer saw
//! nothing until that queue pair was dropped, and then a lost connection).

use crate::common;

use rddp::transport::memory_pair;
use rddp::{AsyncEvent, CompletionQueue, Device, QueuePairBuilder};
use std::time::{Duration, Instant};

#[test]
fn a_graceful_disconnect_is_seen_as_a_graceful_close() {
    let dev = Device::new();
    let (pda, pdb) = (common::pd(&dev, "a"), common::pd(&dev, "b"));
    let (a, b) = memory_pair(1024);
    let cq = || CompletionQueue::new(64);
    let (sa, ra, sb, rb) = (cq(), cq(), cq(), cq());
    let qa = QueuePairBuilder::new(&pda, &sa, &ra)
        .build()
        .unwrap()
        .attach(a)
        .unwrap();
    let qb = QueuePairBuilder::new(&pdb, &sb, &rb)
        .build()
        .unwrap()
        .attach(b)
        .unwrap();
    qa.disconnect();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = Vec::new();
    while Instant::now() < deadline && seen.is_empty() {
        seen = qb.async_events();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(seen, vec![AsyncEvent::Closed { graceful: true }]);
    // The closing side hears its peer close in turn.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut back = Vec::new();
    while Instant::now() < deadline && back.is_empty() {
        back = qa.async_events();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(back, vec![AsyncEvent::Closed { graceful: true }]);
    drop((qa, qb));
}
