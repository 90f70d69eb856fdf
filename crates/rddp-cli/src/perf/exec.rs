//! The perf tool's own threads: a few workers for every queue pair,
//! never one per connection. Each queue pair's run (client or server,
//! every op) is one task on a tokio runtime of `min(cores, 4, queue pairs)`
//! worker threads;
//! a task waits on its completion queue (`CompletionQueue::wait_async`, woken by
//! the push that the event loop makes) or on a timer, and steps from there.

use rddp::{CompletionQueue, WorkCompletion};
use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::runtime::Runtime;

/// Worker threads at most, whatever the cores.
const MAX_WORKERS: usize = 4;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

static WORKERS: OnceLock<usize> = OnceLock::new();

/// Worker threads of the runtime: one per queue pair the process drives
/// ([`super::chan::set_parallel`], set first thing), at most the cores and
/// [`MAX_WORKERS`]; an open-ended server ([`serve_open_ended`], set before
/// the runtime starts) takes the cores. More workers than queue pairs only let
/// tokio hand a task from thread to thread: with one queue pair, two workers
/// took turns reading its socket and ran beside the I/O thread, a third busy
/// thread on two cores (RDMA Read 1 MiB: median 37.4 against 45.6 Gbit/s with
/// one worker, 5 rounds alternately; docs/journal.md, "One worker a queue pair").
/// Asked once: `available_parallelism` reads cgroup files, too slow for every
/// wait.
pub(crate) fn workers() -> usize {
    *WORKERS.get_or_init(|| {
        let cores = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_WORKERS);
        if OPEN_ENDED.load(Ordering::Relaxed) {
            cores
        } else {
            cores.min(usize::try_from(super::chan::parallel()).unwrap_or(usize::MAX))
        }
    })
}

/// The process's runtime, started on first use.
pub(crate) fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers())
            .thread_name("perf-worker")
            .enable_time()
            .build()
            .expect("start the perf tool's worker threads")
    })
}

/// Run `f` to its end on this thread (the runtime drives its timers): for the
/// paths that still run a thread of their own per connection (`--op mixed`,
/// `perf server --forever`).
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}

/// Set by [`serve_open_ended`]: connections come and go, how many is unknown.
static OPEN_ENDED: AtomicBool = AtomicBool::new(false);

/// This process serves connections as they come (`perf server --forever`,
/// `rddp target --perf-listen`): never assume there are few.
pub(crate) fn serve_open_ended() {
    OPEN_ENDED.store(true, Ordering::Relaxed);
}

/// Connections an open-ended server runs now ([`Live`]).
static LIVE: AtomicU64 = AtomicU64::new(0);

/// One running connection of an open-ended server, counted while it lives.
pub(crate) struct Live(());

impl Live {
    pub(crate) fn start() -> Self {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Self(())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// True when there are no more connections than workers: then a waiting task
/// may keep its worker (spin and busy-poll, or sleep the thread) as a thread
/// of its own did. An open-ended server counts the connections it runs now.
fn few() -> bool {
    let n = if OPEN_ENDED.load(Ordering::Relaxed) {
        LIVE.load(Ordering::Relaxed)
    } else {
        super::chan::parallel()
    };
    n <= workers() as u64
}

/// How a wait for a completion uses its thread (with few connections; with
/// many every wait sleeps and the I/O threads read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    /// Sleep at once; the I/O thread reads (a stream of small messages:
    /// docs/journal.md, "Small Sends in a stream").
    Sleep,
    /// Busy-poll first (`rddp::Spin`), reading the socket on this thread.
    Spin,
    /// An answer is due (a ping-pong): busy-poll, and take the socket over
    /// even when the completion was already queued by the I/O thread
    /// (`CompletionQueue::claim_busy`), so the next answer is read here too.
    Answer,
}

/// Up to `max` completions of `cq` into `out` (appended; kept by the caller,
/// so no allocation a wait), waiting up to `limit` for the first. Returns how
/// many came.
pub(crate) async fn wait_cq(
    cq: &CompletionQueue,
    max: usize,
    limit: Duration,
    look: Look,
    out: &mut impl Extend<WorkCompletion>,
) -> usize {
    let spin = look != Look::Sleep;
    // Without the queue's lock when it looks empty: a completion pushed at
    // this moment is found by the busy looks or by wait_async's locked poll.
    let got = cq.try_poll_into(max, out);
    if got > 0 {
        if look == Look::Answer && few() {
            // Read by the I/O thread before this wait looked.
            cq.claim_busy();
        }
        return got;
    }
    if spin && few() {
        // Busy polling: this thread reads the queue pair's socket itself, no
        // hand-over from the I/O thread (CompletionQueue::poll_busy), for as
        // long as CompletionQueue::wait would look (`rddp::Spin`: briefly,
        // longer while a message is arriving), as a thread of its own did.
        // (The spin's clock starts after the first look that found nothing:
        // a wait answered at its first look, as a ping-pong's, reads none.)
        let mut spin = cq.spin(limit);
        loop {
            // The peer or the I/O thread that brings the completion may be on
            // this very core: let it run. This worker's other tasks get their
            // turn every 16 looks; a tokio yield each look cost a ping-pong
            // 0.45 us a message (7.8 against 7.35 us, docs/journal.md).
            std::thread::yield_now();
            // Before the 16th look, the 32nd, ... (not the first).
            if (spin.looks() + 1).is_multiple_of(16) {
                tokio::task::yield_now().await;
            }
            let got = spin.look_into(max, out);
            if got > 0 {
                return got;
            }
            if !spin.going() {
                break;
            }
        }
        // The I/O threads read while this task sleeps.
        cq.end_busy();
    }
    let got = tokio::time::timeout(limit, cq.wait_async(max))
        .await
        .unwrap_or_default();
    let n = got.len();
    out.extend(got);
    n
}

/// Take up to `max` completions of `cq` now; with few connections this
/// thread also reads the queue pairs' sockets for them
/// (`CompletionQueue::poll_busy`; `cq.end_busy()` when done looking).
pub(crate) fn poll_cq(
    cq: &CompletionQueue,
    max: usize,
    out: &mut impl Extend<WorkCompletion>,
) -> usize {
    if few() {
        cq.poll_busy_into(max, out)
    } else {
        cq.poll_into(max, out)
    }
}

/// Let others run between two looks at something: the other tasks, and with
/// few connections also the other threads (`sched_yield`, as a thread of its
/// own did): the peer or the I/O thread that brings the awaited octets may be
/// on this very core, and a task that only yields to tokio would keep it.
pub(crate) async fn yield_now() {
    if few() {
        std::thread::yield_now();
    }
    tokio::task::yield_now().await;
}

/// Wait `d` between two looks at something that comes without a completion
/// (the credit mailbox). Timers are millisecond-grained: with few connections
/// a short pause sleeps the worker instead, as the thread of its own did.
pub(crate) async fn pause(d: Duration) {
    if few() && d < Duration::from_millis(1) {
        std::thread::sleep(d);
    } else {
        tokio::time::sleep(d).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_ended_server_busy_polls_while_it_runs_few_connections() {
        serve_open_ended();
        // `rddp target --perf-listen` with one honest client: its waits spin
        // and busy-poll as a stand-alone server's do (not: always sleep).
        let one = Live::start();
        assert!(few(), "one connection of an open-ended server");
        let more: Vec<_> = (0..workers()).map(|_| Live::start()).collect();
        assert!(!few(), "more connections than workers");
        drop(more);
        assert!(few());
        drop(one);
    }
}
