//! The perf tool's own threads: a few workers for every queue pair (issue 11
//! point 6), never one per connection. Each queue pair's run (client or server,
//! every op) is one task on a tokio runtime of `min(cores, 4)` worker threads;
//! a task waits on its completion queue (`CompletionQueue::wait_async`, woken by
//! the push that the event loop makes) or on a timer, and steps from there.

use rddp::{CompletionQueue, WorkCompletion};
use std::future::Future;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// Worker threads at most, whatever the cores.
const MAX_WORKERS: usize = 4;

/// How long a wait on a CQ keeps looking before it sleeps, when there are no
/// more queue pairs than workers (as [`CompletionQueue::wait`] does: a
/// completion is often microseconds away, and a wake-up costs more).
const SPIN: Duration = Duration::from_micros(20);

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

static WORKERS: OnceLock<usize> = OnceLock::new();

/// Worker threads of the runtime (asked once: `available_parallelism` reads
/// cgroup files, too slow for every wait).
pub fn workers() -> usize {
    *WORKERS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_WORKERS)
    })
}

/// The process's runtime, started on first use.
pub fn runtime() -> &'static Runtime {
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
pub fn block_on<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}

/// Set by [`serve_open_ended`]: connections come and go, how many is unknown.
static OPEN_ENDED: AtomicBool = AtomicBool::new(false);

/// This process serves connections as they come (`perf server --forever`,
/// `rddp target --perf-listen`): never assume there are few.
pub fn serve_open_ended() {
    OPEN_ENDED.store(true, Ordering::Relaxed);
}

/// True when there are no more connections than workers: then a waiting task
/// may keep its worker (spin, or sleep the thread) as a thread of its own did.
fn few() -> bool {
    !OPEN_ENDED.load(Ordering::Relaxed) && super::chan::parallel() <= workers() as u64
}

/// Up to `max` completions of `cq`, waiting up to `limit` for the first. With
/// `spin` (ping-pong: one message in flight) and few connections the wait first
/// spins [`SPIN`]; a stream does not, as its yields take the CPU from the peer
/// and the I/O threads that bring the next burst.
pub async fn wait_cq(
    cq: &CompletionQueue,
    max: usize,
    limit: Duration,
    spin: bool,
) -> Vec<WorkCompletion> {
    let got = cq.poll(max);
    if !got.is_empty() {
        return got;
    }
    if spin && few() {
        let until = Instant::now() + SPIN.min(limit);
        while Instant::now() < until {
            yield_now().await;
            let got = cq.poll(max);
            if !got.is_empty() {
                return got;
            }
        }
    }
    tokio::time::timeout(limit, cq.wait_async(max))
        .await
        .unwrap_or_default()
}

/// Let others run between two looks at something: the other tasks, and with
/// few connections also the other threads (`sched_yield`, as a thread of its
/// own did): the peer or the I/O thread that brings the awaited octets may be
/// on this very core, and a task that only yields to tokio would keep it.
pub async fn yield_now() {
    if few() {
        std::thread::yield_now();
    }
    tokio::task::yield_now().await;
}

/// Wait `d` between two looks at something that comes without a completion
/// (the credit mailbox). Timers are millisecond-grained: with few connections
/// a short pause sleeps the worker instead, as the thread of its own did.
pub async fn pause(d: Duration) {
    if few() && d < Duration::from_millis(1) {
        std::thread::sleep(d);
    } else {
        tokio::time::sleep(d).await;
    }
}
