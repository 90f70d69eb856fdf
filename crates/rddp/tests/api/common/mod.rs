//! Helpers shared by the queue pair tests.
#![allow(dead_code)]

pub(crate) mod held_peer;
pub(crate) mod llp;
pub(crate) mod many;
pub(crate) mod raw_peer;
pub(crate) mod sctp_llp;

use rddp::transport::Connection;
use rddp::{
    AsyncEvent, CompletionQueue, Device, ProtectionDomain, QueuePair, QueuePairBuilder, Quota,
    TerminateCode, WorkCompletion,
};
use std::time::Duration;

/// A protection domain of a new consumer `name` with the default quota.
pub(crate) fn pd(dev: &Device, name: &str) -> ProtectionDomain {
    dev.consumer(name, Quota::default())
        .unwrap()
        .alloc_pd()
        .unwrap()
}

/// A queue pair of `pd` with the default builder, `cq` for both queues, attached
/// to `conn`.
pub(crate) fn attach(pd: &ProtectionDomain, cq: &CompletionQueue, conn: Connection) -> QueuePair {
    QueuePairBuilder::new(pd, cq, cq)
        .build()
        .unwrap()
        .attach(conn)
        .unwrap()
}

/// A queue pair (CQ of `depth`) on a new consumer `name`, over `conn`.
pub(crate) fn endpoint(
    dev: &Device,
    name: &str,
    depth: usize,
    conn: Connection,
) -> (ProtectionDomain, CompletionQueue, QueuePair) {
    let pd = pd(dev, name);
    let cq = CompletionQueue::new(depth);
    let qp = attach(&pd, &cq, conn);
    (pd, cq, qp)
}

/// Wait for `n` completions (10 s at most for each batch).
pub(crate) fn wait(cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    while got.len() < n {
        let more = cq.wait(n - got.len(), Duration::from_secs(10));
        assert!(!more.is_empty(), "timed out with {got:?}");
        got.extend(more);
    }
    got
}

/// The code of the first Terminate `qp` received, waiting up to 5 s.
pub(crate) fn terminate_received(qp: &QueuePair) -> Option<TerminateCode> {
    poll_event(qp, |e| match e {
        AsyncEvent::TerminateReceived { code, .. } => *code,
        _ => None,
    })
}

/// The code of the first Terminate `qp` sent, waiting up to 5 s.
pub(crate) fn terminate_sent(qp: &QueuePair) -> Option<TerminateCode> {
    poll_event(qp, |e| match e {
        AsyncEvent::TerminateSent { code, .. } => Some(*code),
        _ => None,
    })
}

/// The first asynchronous event of `qp` that `f` picks, waiting up to 5 s.
pub(crate) fn poll_event<T>(qp: &QueuePair, f: impl Fn(&AsyncEvent) -> Option<T>) -> Option<T> {
    for _ in 0..250 {
        if let Some(c) = qp.async_events().iter().find_map(&f) {
            return Some(c);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Wait until `f` holds, looking every millisecond; fails the test naming
/// `what` after 20 s (a bound, not a pace: a loaded machine takes longer).
pub(crate) fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "not within 20 s: {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
