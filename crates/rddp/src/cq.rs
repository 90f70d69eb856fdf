//! Completion queues: poll, or wait with a timeout.

use crate::device::lock;
use crate::qp::Driven;
use rddp_proto::cq::CqLedger;
use rddp_proto::rdmap::Completion;
use rddp_proto::wq::Held;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

mod spin;
pub use spin::Spin;

/// [`CompletionQueue::poll_busy`] reads the sockets of at most this many queue
/// pairs itself; a queue shared by more leaves them to the I/O threads (one
/// thread looking at many sockets in turn is what those threads are for).
const MAX_DRIVEN: usize = 4;

/// `CqInner::armed`: no notify pending.
const DISARMED: u8 = 0;
/// Notify on the next solicited or unsuccessful completion
/// ([`CompletionQueue::arm_solicited`]).
const ARMED_SOLICITED: u8 = 1;
/// Notify on the next completion of any kind ([`CompletionQueue::arm`]).
const ARMED_ANY: u8 = 2;

/// One completion, with the queue pair it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The queue pair it came from ([`crate::QueuePair::qp_num`]).
    pub qp_num: u32,
    /// The completion itself; `WorkCompletion` dereferences to it.
    pub c: Completion,
}

impl std::ops::Deref for WorkCompletion {
    type Target = Completion;
    fn deref(&self) -> &Completion {
        &self.c
    }
}

struct CqInner {
    /// Each completion with the queue slots it holds until it is taken.
    q: Mutex<VecDeque<(WorkCompletion, Held)>>,
    ready: Condvar,
    /// Threads in [`CompletionQueue::wait`] (changed with `q` locked): a push
    /// signals `ready` only when one waits, so a busy data path that nobody
    /// waits on pays no futex call per completion.
    waiters: AtomicUsize,
    /// How many pushes signalled `ready` (for the test of that rule).
    signals: AtomicU64,
    /// Called once by the next push after [`CompletionQueue::arm`] (verbs'
    /// completion channel: `ibv_req_notify_cq`), so that one thread can serve
    /// many queues without a thread waiting on each.
    on_arm: Mutex<Option<Notify>>,
    /// [`DISARMED`], [`ARMED_SOLICITED`] or [`ARMED_ANY`].
    armed: AtomicU8,
    #[cfg(feature = "tokio")]
    notify: tokio::sync::Notify,
    /// Tasks in [`CompletionQueue::wait_async`]: a push notifies only when
    /// one waits (the notify takes a lock of its own, on every push before).
    #[cfg(feature = "tokio")]
    async_waiters: AtomicUsize,
    /// Capacity and the worst cases reserved by attached queue pairs (docs/receive-strategies.md):
    /// attaching more than the queue can hold is refused.
    ledger: CqLedger,
    /// The ledger's capacity, fixed at creation: read on every push without
    /// the ledger's lock.
    capacity: usize,
    /// Completions queued past the capacity (see [`CompletionQueue::overflows`]).
    overflows: AtomicU64,
    /// What to call when a push takes the queue past `overrun_depth`
    /// ([`CompletionQueue::set_overrun`]).
    overrun: std::sync::OnceLock<Notify>,
    /// The depth past which `overrun` is called (a verbs CQ's `cqe`, which
    /// `ibv_resize_cq` changes).
    overrun_depth: AtomicUsize,
    /// The queue pairs whose completions come here and whose sockets a busy
    /// poll may read (MPA queue pairs on the event loop).
    driven: Mutex<Vec<Weak<dyn Driven>>>,
    /// Busy-poll looks that saw a message arriving (see [`Spin`]).
    arriving: AtomicU64,
    /// `q`'s length, stored under its lock after each change: a busy poll
    /// that finds it 0 takes no lock ([`CompletionQueue::try_poll_into`]).
    queued: AtomicUsize,
}

/// A function a completion queue calls (arm, overrun).
type Notify = Arc<dyn Fn() + Send + Sync>;

/// A completion queue of bounded capacity, shared by any number of queue pairs.
/// Each queue pair reserves its worst case when it attaches (its send queue depth,
/// its receive queue depth or credit limit, or its shared receive queue's whole
/// pool), and a queue slot stays taken until its completion has been taken from
/// here (docs/receive-strategies.md), so a CQ that accepted its queue pairs cannot overflow: posting
/// beyond a queue's depth fails instead. A queue pair's reservation outlives it
/// until its last completion is taken.
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
}

impl CompletionQueue {
    /// A queue of `capacity` completions (`ibv_create_cq`'s `cqe`). Queue pairs and
    /// shared receive queues reserve their worst case on it when they attach, and
    /// one that would not fit is refused, so it never overflows.
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(CqInner {
                q: Mutex::new(VecDeque::new()),
                ready: Condvar::new(),
                waiters: AtomicUsize::new(0),
                signals: AtomicU64::new(0),
                on_arm: Mutex::new(None),
                armed: AtomicU8::new(DISARMED),
                #[cfg(feature = "tokio")]
                notify: tokio::sync::Notify::new(),
                #[cfg(feature = "tokio")]
                async_waiters: AtomicUsize::new(0),
                ledger: CqLedger::new(capacity),
                capacity,
                overflows: AtomicU64::new(0),
                overrun: std::sync::OnceLock::new(),
                overrun_depth: AtomicUsize::new(usize::MAX),
                driven: Mutex::new(Vec::new()),
                arriving: AtomicU64::new(0),
                queued: AtomicUsize::new(0),
            }),
        }
    }

    /// Its size in completions.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Completions reserved by attached queue pairs and receive queues.
    pub fn reserved(&self) -> usize {
        self.inner.ledger.reserved()
    }

    /// Completions waiting to be taken.
    pub fn len(&self) -> usize {
        lock(&self.inner.q).len()
    }

    /// Whether no completion is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Take up to `max` completions, oldest first, without waiting
    /// (`ibv_poll_cq`). Each frees the queue slot it held.
    #[must_use = "the completions taken are gone from the queue"]
    pub fn poll(&self, max: usize) -> Vec<WorkCompletion> {
        let mut got = Vec::new();
        self.poll_into(max, &mut got);
        got
    }

    /// [`Self::poll`] into `out` (appended; as `ibv_poll_cq` fills the
    /// caller's array): a poller that keeps its `out` allocates nothing per
    /// poll. Returns how many were taken.
    pub fn poll_into(&self, max: usize, out: &mut impl Extend<WorkCompletion>) -> usize {
        let mut q = lock(&self.inner.q);
        self.inner.take(&mut q, max, out)
    }

    /// [`Self::poll_into`] for a loop that looks again (a busy poll): when the
    /// queue looked empty it returns 0 without taking the queue's lock (a
    /// lock and an unlock are two locked instructions, about 40 cycles, and a
    /// ping-pong's waits made two such empty polls a message on each side).
    /// A completion pushed at that very moment is found by the next look;
    /// a wait that sleeps after its busy looks ([`Self::wait`], and
    /// `wait_async` with the `tokio` feature) looks under the lock.
    pub fn try_poll_into(&self, max: usize, out: &mut impl Extend<WorkCompletion>) -> usize {
        if self.inner.queued.load(Ordering::Acquire) == 0 {
            return 0;
        }
        self.poll_into(max, out)
    }

    /// [`Self::poll`], and when nothing is there, read the sockets of the queue
    /// pairs whose completions come here on this thread (at most 4 of them,
    /// MPA only), then poll again: busy polling. The
    /// I/O thread stops reading those sockets while a thread polls like this
    /// (no hand-over between threads per message, the larger part of a
    /// ping-pong's round trip) and takes them back 1 ms after the last look,
    /// or at once with [`Self::end_busy`]: call that before doing anything
    /// else for long, so that the queue pairs go on receiving meanwhile.
    #[must_use = "the completions taken are gone from the queue"]
    pub fn poll_busy(&self, max: usize) -> Vec<WorkCompletion> {
        let mut got = Vec::new();
        self.poll_busy_into(max, &mut got);
        got
    }

    /// [`Self::poll_busy`] into `out` (see [`Self::poll_into`]).
    pub fn poll_busy_into(&self, max: usize, out: &mut impl Extend<WorkCompletion>) -> usize {
        let n = self.try_poll_into(max, out);
        if n > 0 {
            // Queued before this look (by an I/O thread, likely): the socket
            // is asked for all the same, so the next message is read here.
            self.claim_busy();
            return n;
        }
        let mut arriving = false;
        if !self.drive(|d| arriving |= d.progress()) {
            return n;
        }
        if arriving {
            self.inner.arriving.fetch_add(1, Ordering::Relaxed);
        }
        self.try_poll_into(max, out)
    }

    /// Ask for the receive sides of this queue's queue pairs as a busy poll
    /// does (renewing a lease this thread holds), without reading now: for a
    /// thread about to busy-poll that found its completion already queued by
    /// an I/O thread. Without it a ping-pong could settle into the I/O thread
    /// reading every message, each waiter finding its completion queued at
    /// its first look: a wake-up and two thread switches a message
    /// (docs/journal.md, "Who reads a ping-pong's message").
    pub fn claim_busy(&self) {
        self.drive(|d| d.claim());
    }

    /// Give the sockets that [`Self::poll_busy`] read back to the I/O threads
    /// now (not after the lease).
    pub fn end_busy(&self) {
        self.drive(|d| d.release());
    }

    /// Run `f` on each queue pair a busy poll may drive; false if there are
    /// none or too many (or this thread is already in here: a notify function).
    fn drive(&self, mut f: impl FnMut(&dyn Driven)) -> bool {
        let Ok(v) = self.inner.driven.try_lock() else {
            return false;
        };
        if v.is_empty() || v.len() > MAX_DRIVEN {
            return false;
        }
        for d in v.iter().filter_map(Weak::upgrade) {
            f(&*d);
        }
        true
    }

    /// A queue pair whose completions come here (see [`Self::poll_busy`]).
    pub(crate) fn add_driven(&self, d: Weak<dyn Driven>) {
        let mut v = lock(&self.inner.driven);
        v.retain(|w| w.strong_count() > 0);
        v.push(d);
    }

    /// Whether both are the same queue.
    pub(crate) fn same(&self, other: &CompletionQueue) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Wait up to `timeout` for at least one completion, then take up to `max`.
    /// It busy-polls for a few microseconds first (see [`Self::poll_busy`]),
    /// then sleeps until a completion comes.
    #[must_use = "the completions taken are gone from the queue"]
    pub fn wait(&self, max: usize, timeout: Duration) -> Vec<WorkCompletion> {
        let deadline = Instant::now() + timeout;
        // A completion is often a few microseconds away (an answer on its way):
        // read for it on this thread, briefly (longer while a message is
        // arriving: `spin.rs`), before going to sleep on the condvar (a futex
        // wake and a switch back).
        // At least one look, also with no time to wait (as `poll_busy`).
        let mut spin = self.spin(timeout);
        let mut got = Vec::new();
        loop {
            if spin.look_into(max, &mut got) > 0 {
                return got;
            }
            if !spin.going() {
                break;
            }
            std::thread::yield_now();
        }
        // The I/O threads read while this one sleeps.
        self.end_busy();
        let mut q = lock(&self.inner.q);
        while q.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return Vec::new();
            }
            self.inner.waiters.fetch_add(1, Ordering::Relaxed);
            q = self
                .inner
                .ready
                .wait_timeout(q, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
            self.inner.waiters.fetch_sub(1, Ordering::Relaxed);
        }
        let mut got = Vec::new();
        self.inner.take(&mut q, max, &mut got);
        got
    }

    /// Wait (asynchronously) for at least one completion, then take up to `max`.
    /// Wrap it in `tokio::time::timeout` for a deadline.
    #[cfg(feature = "tokio")]
    #[must_use = "the completions taken are gone from the queue"]
    pub async fn wait_async(&self, max: usize) -> Vec<WorkCompletion> {
        // Counted before the first look (under the queue's lock): a push after
        // that look finds the count raised, one before it is found by the look.
        let _waiting = AsyncWaiter::new(&self.inner.async_waiters);
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

    /// What [`Self::arm`] calls on the next completion (replacing any earlier).
    /// It runs on the thread that pushed the completion (often an I/O thread):
    /// keep it short (e.g. send a message to the thread that serves the queue).
    pub fn set_notify(&self, f: impl Fn() + Send + Sync + 'static) {
        *lock(&self.inner.on_arm) = Some(Arc::new(f));
    }

    /// Call the notify function once, on the next completion pushed
    /// (`ibv_req_notify_cq(cq, 0)`). A completion already queued does not
    /// call it: arm, then poll once more.
    pub fn arm(&self) {
        self.inner.armed.store(ARMED_ANY, Ordering::SeqCst);
    }

    /// [`Self::arm`] for the next *solicited* completion only
    /// (`ibv_req_notify_cq(cq, 1)`): a receive of a Send with Solicited
    /// Event, or any unsuccessful completion (as rdma_rxe and siw count
    /// them). A queue already armed for any completion stays so: a request
    /// for solicited events never narrows one for every event.
    pub fn arm_solicited(&self) {
        let _ = self
            .inner
            .armed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| {
                (a != ARMED_ANY).then_some(ARMED_SOLICITED)
            });
    }

    /// Have `f` called each time a completion takes the number waiting past
    /// `depth` (from `depth` to `depth + 1`): a verbs layer whose application
    /// sized its CQ below what its queues can complete raises
    /// `IBV_EVENT_CQ_ERR` then (the completions are kept all the same). `f`
    /// runs on the pushing thread, after the queue's lock is released: keep
    /// it short. Set once: `false` if a function was set before.
    pub fn set_overrun(&self, depth: usize, f: impl Fn() + Send + Sync + 'static) -> bool {
        let set = self.inner.overrun.set(Arc::new(f)).is_ok();
        if set {
            self.inner.overrun_depth.store(depth, Ordering::Relaxed);
        }
        set
    }

    /// A new depth for the function of [`Self::set_overrun`] (`ibv_resize_cq`):
    /// the next push that takes the queue from `depth` to `depth + 1` calls it.
    pub fn set_overrun_depth(&self, depth: usize) {
        self.inner.overrun_depth.store(depth, Ordering::Relaxed);
    }

    /// How many completions were queued while the queue already held its capacity.
    /// The slot accounting keeps this at zero; a completion is never dropped.
    pub fn overflows(&self) -> u64 {
        self.inner.overflows.load(Ordering::Relaxed)
    }

    /// Queue a completion that no queue pair's engine made: one that a verbs
    /// layer over rddp decides at posting (a work request whose scatter/gather
    /// element fails its local checks completes with
    /// [`crate::WcStatus::LocalProtection`]; work posted to a queue pair in
    /// the error state completes as [`crate::WcStatus::Flushed`]). It holds
    /// no queue slot, wakes waiters and fires an armed notify as any
    /// completion does (an unsuccessful one ends a solicited-only arm too).
    pub fn push_local(
        &self,
        qp_num: u32,
        wr_id: u64,
        opcode: rddp_proto::rdmap::WcOpcode,
        status: rddp_proto::rdmap::WcStatus,
    ) {
        let c = Completion {
            wr_id,
            opcode,
            status,
            byte_len: 0,
            solicited: false,
            invalidated_stag: None,
            buffer: None,
            qn_msn: None,
            signaled: true,
        };
        self.push(WorkCompletion { qp_num, c }, Held::default());
    }

    /// Add a completion with the slots it holds until taken. Never dropped: past
    /// the capacity (which the accounting rules out) it is kept and counted.
    pub(crate) fn push(&self, wc: WorkCompletion, held: Held) {
        // Whether this completion ends a solicited-only arm (read before the
        // completion moves into the queue).
        let solicits = wc.solicited || wc.status != rddp_proto::rdmap::WcStatus::Success;
        let mut q = lock(&self.inner.q);
        if q.len() >= self.inner.capacity {
            self.inner.overflows.fetch_add(1, Ordering::Relaxed);
        }
        q.push_back((wc, held));
        let len = q.len();
        self.inner.queued.store(len, Ordering::Release);
        if self.inner.waiters.load(Ordering::Relaxed) > 0 {
            self.inner.signals.fetch_add(1, Ordering::Relaxed);
            self.inner.ready.notify_all();
        }
        drop(q);
        if let Some(f) = self.inner.overrun.get()
            && len
                == self
                    .inner
                    .overrun_depth
                    .load(Ordering::Relaxed)
                    .saturating_add(1)
        {
            f();
        }
        let armed = self.inner.armed.load(Ordering::Relaxed);
        if (armed == ARMED_ANY || (armed == ARMED_SOLICITED && solicits))
            && self.inner.armed.swap(DISARMED, Ordering::SeqCst) != DISARMED
        {
            let f = lock(&self.inner.on_arm).clone();
            if let Some(f) = f {
                f();
            }
        }
        #[cfg(feature = "tokio")]
        if self.inner.async_waiters.load(Ordering::Relaxed) > 0 {
            self.inner.notify.notify_waiters();
        }
    }
}

/// One task in `wait_async`, counted until its wait ends or is dropped (a
/// timeout around it).
#[cfg(feature = "tokio")]
struct AsyncWaiter<'a>(&'a AtomicUsize);

#[cfg(feature = "tokio")]
impl<'a> AsyncWaiter<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Self(n)
    }
}

#[cfg(feature = "tokio")]
impl Drop for AsyncWaiter<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl CqInner {
    /// Take up to `max` entries of `q` (this queue's, locked) into `out`;
    /// their slots are given back as they are dropped. Returns how many.
    fn take(
        &self,
        q: &mut VecDeque<(WorkCompletion, Held)>,
        max: usize,
        out: &mut impl Extend<WorkCompletion>,
    ) -> usize {
        let n = max.min(q.len());
        if n > 0 {
            // Most polls of a busy poll find nothing: no drain set up for them.
            out.extend(q.drain(..n).map(|(wc, _held)| wc));
            self.queued.store(q.len(), Ordering::Release);
        }
        n
    }
}

impl AsRef<CqLedger> for CompletionQueue {
    fn as_ref(&self) -> &CqLedger {
        &self.inner.ledger
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rddp_proto::rdmap::{WcOpcode, WcStatus};

    fn wc(id: u64) -> WorkCompletion {
        WorkCompletion {
            qp_num: 1,
            c: Completion {
                wr_id: id,
                status: WcStatus::Success,
                opcode: WcOpcode::Send,
                byte_len: 0,
                solicited: false,
                invalidated_stag: None,
                buffer: None,
                qn_msn: None,
                signaled: true,
            },
        }
    }

    #[test]
    fn poll_into_appends_at_most_max_oldest_first() {
        let cq = CompletionQueue::new(8);
        for id in 1..=5 {
            cq.push(wc(id), Held::default());
        }
        let mut out = vec![wc(99)];
        assert_eq!(cq.poll_into(3, &mut out), 3);
        let ids: Vec<u64> = out.iter().map(|w| w.wr_id).collect();
        assert_eq!(ids, vec![99, 1, 2, 3], "appended, oldest first");
        let mut more = VecDeque::new();
        assert_eq!(cq.poll_into(10, &mut more), 2);
        assert_eq!(more.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![4, 5]);
        assert_eq!(cq.poll_into(10, &mut more), 0, "nothing left");
        assert_eq!(more.len(), 2);
        assert!(cq.is_empty());
    }

    /// `try_poll_into` finds what a push queued, and after the queue was
    /// emptied (by it or by `poll_into`, `wait`) finds nothing without the lock.
    #[test]
    fn try_poll_into_sees_what_is_queued_and_nothing_once_taken() {
        let cq = CompletionQueue::new(8);
        let mut out = Vec::new();
        assert_eq!(cq.try_poll_into(4, &mut out), 0);
        cq.push(wc(1), Held::default());
        cq.push(wc(2), Held::default());
        assert_eq!(cq.try_poll_into(1, &mut out), 1);
        assert_eq!(cq.inner.queued.load(Ordering::Relaxed), 1);
        assert_eq!(cq.try_poll_into(4, &mut out), 1);
        assert_eq!(cq.inner.queued.load(Ordering::Relaxed), 0);
        cq.push(wc(3), Held::default());
        assert_eq!(cq.wait(4, Duration::ZERO).len(), 1);
        assert_eq!(cq.inner.queued.load(Ordering::Relaxed), 0, "wait took it");
        assert_eq!(cq.try_poll_into(4, &mut out), 0);
        assert_eq!(out.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![1, 2]);
    }

    /// A push notifies only while a task waits (`async_waiters`): one that
    /// comes while a task is parked in `wait_async` wakes it, and a wait given
    /// up (a timeout dropping it) is no longer counted.
    #[cfg(feature = "tokio")]
    #[test]
    fn an_async_waiter_is_woken_and_uncounted_when_it_gives_up() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let cq = CompletionQueue::new(8);
        rt.block_on(async {
            let gave_up = tokio::time::timeout(Duration::from_millis(20), cq.wait_async(4)).await;
            assert!(gave_up.is_err(), "nothing pushed");
            assert_eq!(cq.inner.async_waiters.load(Ordering::Relaxed), 0);
            let pusher = cq.clone();
            let t = std::thread::spawn(move || {
                // Push only once the task waits.
                while pusher.inner.async_waiters.load(Ordering::Relaxed) == 0 {
                    std::thread::yield_now();
                }
                // No synchronisation: the push must wake the task whether it
                // has parked yet or not (a counted waiter sees every push);
                // the pause only makes the parked case the likely one.
                std::thread::sleep(Duration::from_millis(20));
                pusher.push(wc(7), Held::default());
            });
            let got = tokio::time::timeout(Duration::from_secs(10), cq.wait_async(4))
                .await
                .expect("the push woke the waiter");
            assert_eq!(got.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![7]);
            t.join().unwrap();
        });
        assert_eq!(cq.inner.async_waiters.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_armed_queue_calls_its_notify_once() {
        let cq = CompletionQueue::new(16);
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        cq.set_notify(move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        cq.push(wc(1), Held::default());
        assert_eq!(calls.load(Ordering::SeqCst), 0, "not armed");
        cq.arm();
        cq.push(wc(2), Held::default());
        cq.push(wc(3), Held::default());
        assert_eq!(calls.load(Ordering::SeqCst), 1, "once per arm");
    }

    #[test]
    fn a_solicited_arm_waits_for_a_solicited_or_failed_completion() {
        let cq = CompletionQueue::new(16);
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        cq.set_notify(move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        cq.arm_solicited();
        cq.push(wc(1), Held::default());
        assert_eq!(calls.load(Ordering::SeqCst), 0, "an ordinary completion");
        let mut se = wc(2);
        se.c.solicited = true;
        cq.push(se, Held::default());
        assert_eq!(calls.load(Ordering::SeqCst), 1, "a solicited one");
        cq.push(wc(3), Held::default());
        assert_eq!(calls.load(Ordering::SeqCst), 1, "disarmed by it");

        cq.arm_solicited();
        let mut failed = wc(4);
        failed.c.status = rddp_proto::rdmap::WcStatus::Flushed;
        cq.push(failed, Held::default());
        assert_eq!(calls.load(Ordering::SeqCst), 2, "an error notifies too");

        // Arming for any completion is not narrowed by a solicited request.
        cq.arm();
        cq.arm_solicited();
        cq.push(wc(5), Held::default());
        assert_eq!(calls.load(Ordering::SeqCst), 3, "still armed for any");
        // A solicited arm widened by a later arm() fires on any completion.
        cq.arm_solicited();
        cq.arm();
        cq.push(wc(6), Held::default());
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn a_push_signals_only_when_someone_waits() {
        let cq = CompletionQueue::new(1024);
        for i in 0..100 {
            cq.push(wc(i), Held::default());
        }
        assert_eq!(cq.inner.signals.load(Ordering::Relaxed), 0, "nobody waited");
        assert_eq!(cq.poll(1000).len(), 100);
        let waiter = {
            let cq = cq.clone();
            std::thread::spawn(move || cq.wait(10, Duration::from_secs(30)))
        };
        // Push once the waiter is waiting.
        while cq.inner.waiters.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        cq.push(wc(100), Held::default());
        let got = waiter.join().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(cq.inner.signals.load(Ordering::Relaxed), 1);
    }
}
