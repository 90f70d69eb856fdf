//! Completion queues: poll, or wait with a timeout.

use crate::device::lock;
use rddp_proto::cq::CqLedger;
use rddp_proto::rdmap::Completion;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One completion, with the queue pair it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkCompletion {
    pub qp_num: u32,
    pub c: Completion,
}

impl std::ops::Deref for WorkCompletion {
    type Target = Completion;
    fn deref(&self) -> &Completion {
        &self.c
    }
}

struct CqInner {
    q: Mutex<VecDeque<WorkCompletion>>,
    ready: Condvar,
    #[cfg(feature = "tokio")]
    notify: tokio::sync::Notify,
    /// Capacity and the worst cases reserved by attached queue pairs (seed 003):
    /// attaching more than the queue can hold is refused.
    ledger: CqLedger,
    /// Completions that did not fit (never silent: see [`CompletionQueue::overflows`]).
    overflows: AtomicU64,
    /// Completions in the queue, not yet polled, per (queue pair, send side):
    /// they still hold their work request's slot (as in verbs, a slot is free
    /// once its completion is polled), so a queue pair cannot overflow a CQ
    /// sized for its depths by posting without polling.
    unpolled: Mutex<HashMap<(u32, bool), u32>>,
}

fn side(wc: &WorkCompletion) -> (u32, bool) {
    (wc.qp_num, wc.c.opcode != rddp_proto::rdmap::WcOpcode::Recv)
}

/// A completion queue of bounded capacity, shared by any number of queue pairs.
/// Each queue pair reserves its worst case when it attaches (its send queue depth,
/// its receive queue depth, or its shared receive queue's whole pool), so a CQ that
/// accepted its queue pairs cannot overflow; overflows are still counted.
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
}

impl CompletionQueue {
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(CqInner {
                q: Mutex::new(VecDeque::new()),
                ready: Condvar::new(),
                #[cfg(feature = "tokio")]
                notify: tokio::sync::Notify::new(),
                ledger: CqLedger::new(capacity),
                overflows: AtomicU64::new(0),
                unpolled: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn capacity(&self) -> usize {
        self.inner.ledger.capacity()
    }

    /// Completions reserved by attached queue pairs and receive queues.
    pub fn reserved(&self) -> usize {
        self.inner.ledger.reserved()
    }

    /// Take up to `max` completions, oldest first, without waiting.
    pub fn poll(&self, max: usize) -> Vec<WorkCompletion> {
        let mut q = lock(&self.inner.q);
        let n = max.min(q.len());
        self.taken(q.drain(..n).collect())
    }

    /// Polled completions give their work requests' slots back.
    fn taken(&self, got: Vec<WorkCompletion>) -> Vec<WorkCompletion> {
        let mut u = lock(&self.inner.unpolled);
        for wc in &got {
            if let Some(n) = u.get_mut(&side(wc)) {
                *n = n.saturating_sub(1);
            }
        }
        got
    }

    /// Completions of `qp_num`'s send side (`send`) or receive side waiting in
    /// the queue.
    pub(crate) fn unpolled(&self, qp_num: u32, send: bool) -> u32 {
        lock(&self.inner.unpolled)
            .get(&(qp_num, send))
            .copied()
            .unwrap_or(0)
    }

    /// Wait up to `timeout` for at least one completion, then take up to `max`.
    pub fn wait(&self, max: usize, timeout: Duration) -> Vec<WorkCompletion> {
        let deadline = Instant::now() + timeout;
        let mut q = lock(&self.inner.q);
        while q.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return Vec::new();
            }
            q = self
                .inner
                .ready
                .wait_timeout(q, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let n = max.min(q.len());
        self.taken(q.drain(..n).collect())
    }

    /// Wait (asynchronously) for at least one completion, then take up to `max`.
    /// Wrap it in `tokio::time::timeout` for a deadline.
    #[cfg(feature = "tokio")]
    pub async fn wait_async(&self, max: usize) -> Vec<WorkCompletion> {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            // Register interest before looking, so a push in between is not missed.
            notified.as_mut().enable();
            let got = self.poll(max);
            if !got.is_empty() {
                return got;
            }
            notified.await;
        }
    }

    /// How many completions were lost because the queue was full. Non-zero means
    /// the queue was sized too small for the work posted against it.
    pub fn overflows(&self) -> u64 {
        self.inner.overflows.load(Ordering::Relaxed)
    }

    /// Add a completion; false (and counted) if the queue is full.
    pub(crate) fn push(&self, wc: WorkCompletion) -> bool {
        let mut q = lock(&self.inner.q);
        if q.len() >= self.inner.ledger.capacity() {
            self.inner.overflows.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        *lock(&self.inner.unpolled).entry(side(&wc)).or_insert(0) += 1;
        q.push_back(wc);
        self.inner.ready.notify_all();
        #[cfg(feature = "tokio")]
        self.inner.notify.notify_waiters();
        true
    }
}

impl AsRef<CqLedger> for CompletionQueue {
    fn as_ref(&self) -> &CqLedger {
        &self.inner.ledger
    }
}
