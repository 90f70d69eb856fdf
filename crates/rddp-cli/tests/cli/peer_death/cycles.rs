//! Peer death, 1,000 times (docs/reliability.md): connect a verbs queue pair to a
//! fresh `rddp target` process, put Writes, Reads, Sends and receives in flight,
//! SIGKILL the target once the first Read is back, take every completion, drop
//! everything. After the last cycle this process holds the same number of
//! threads and file descriptors as after the first, and no more memory: heap
//! (counted by an instrumented allocator) and VmRSS, each within a stated slack.
//!
//! The test runs in a process of its own (`rddp_testkit::own_process`), so
//! nothing else runs in it meanwhile; the binary's allocator is instrumented
//! for it (main.rs). Then the same over SCTP (100 cycles: each waits for SCTP's dead-peer
//! timeout). `RDDP_PEER_DEATH_CYCLES=N` and `RDDP_PEER_DEATH_SCTP_CYCLES=N` run
//! N cycles instead (scripts/peer-death.sh).

use super::peer::Peer;
use super::procstat::{self, ProcStat};
use super::survivor::{Llp, Load, QUOTA, Survivor};
use crate::GLOBAL;
use rddp::{Device, DeviceLimits, Quota, Usage};
use std::time::{Duration, Instant};

/// SIGKILL to last completion.
const KILL_BOUND: Duration = Duration::from_secs(3);
/// Heap that may be live after the last cycle beyond what was live after the
/// first: 100 octets a cycle (the STag table retires an index after 256 keys,
/// by design, so a few slots are added over 1,000 cycles).
const HEAP_SLACK_PER_CYCLE: i64 = 100;
/// VmRSS that may be resident beyond the first cycle's: allocator arenas and
/// fragmentation, far below what one leaked queue pair a cycle would add
/// (its 64 KiB regions alone: 125 MiB over 1,000 cycles).
const RSS_SLACK_KIB: u64 = 8 << 10;

const LOAD: Load = Load {
    writes: 4,
    reads: 8,
    sends: 2,
    size: 64 << 10,
};

/// Octets allocated and not freed. (stats_alloc already counts a realloc's
/// growth or shrinkage in bytes_allocated or bytes_deallocated; its
/// bytes_reallocated repeats that and is not added.)
fn heap_live() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

/// SCTP's dead-peer timeout in the SCTP cycles: a killed peer over SCTP sends
/// nothing, so each cycle waits for SCTP's failure detection.
const SCTP_DEAD: Duration = Duration::from_millis(300);

/// One cycle over `llp`; returns (how long the completions took, flushed or
/// failed ones).
fn cycle(dev: &Device, llp: Llp, i: u64) -> (Duration, usize) {
    let mut args = vec!["--recv-count", "16", "--buffer-size", "65536"];
    let (dead_peer, bound) = match llp {
        Llp::Mpa => (None, KILL_BOUND),
        Llp::Sctp => {
            args.extend(["--transport", "sctp"]);
            let bound = rddp::transport::sctp::dead_peer_bound(SCTP_DEAD);
            // Slack for a loaded machine, generous next to a 0.3 s timeout:
            // the check is that every cycle ends, not how fast.
            (Some(SCTP_DEAD), bound + Duration::from_secs(2))
        }
    };
    let mut peer = Peer::start(&[], "127.0.0.1:0", &args);
    let mut s = Survivor::connect_over(dev, peer.addr, llp, dead_peer);
    s.start(LOAD);
    let in_flight = s.reads_in_flight();
    let died = peer.kill();
    let o = s.collect(died, bound + Duration::from_secs(10), in_flight);
    assert_eq!(
        o.missing, 0,
        "{llp:?} cycle {i}: work requests never completed: {o:?}"
    );
    assert_eq!(
        o.unexpected, 0,
        "{llp:?} cycle {i}: completions invented: {o:?}"
    );
    assert!(
        o.elapsed <= bound,
        "{llp:?} cycle {i}: took {:?}",
        o.elapsed
    );
    let (live, after) = s.close();
    assert_eq!(
        (live.receive_buffers, live.outstanding_reads),
        (0, 0),
        "{llp:?} cycle {i}: quota still charged after every completion: {live:?}"
    );
    assert_eq!(
        after,
        Usage::default(),
        "{llp:?} cycle {i}: quota not returned"
    );
    (o.elapsed, o.not_success())
}

/// `cycles` cycles over `llp`, then the leak checks: the same threads and
/// file descriptors as after the first cycle, and no more memory than the
/// slack allows.
fn cycles(dev: &Device, llp: Llp, cycles: u64) {
    assert!(cycles >= 2);
    let started = Instant::now();
    let (mut worst, mut flushed) = (Duration::ZERO, 0);
    let mut first: Option<(ProcStat, i64)> = None;
    for i in 1..=cycles {
        let (took, f) = cycle(dev, llp, i);
        worst = worst.max(took);
        flushed += f;
        if i == 1 || i % 100 == 0 || i == cycles {
            let (p, h) = (procstat::now(), heap_live());
            println!("{llp:?} after cycle {i}: {p}, heap {h} B");
            first.get_or_insert((p, h));
        }
    }
    let (p1, h1) = first.unwrap();
    let (p, h) = (procstat::now(), heap_live());
    println!(
        "{llp:?}: {cycles} cycles in {:?}: slowest death-to-last-completion {worst:?}, \
         {flushed} work requests flushed or failed",
        started.elapsed()
    );
    assert_eq!(
        p.threads, p1.threads,
        "{llp:?} threads: first {p1}, last {p}"
    );
    assert_eq!(
        p.fds, p1.fds,
        "{llp:?} file descriptors: first {p1}, last {p}"
    );
    let heap_slack = HEAP_SLACK_PER_CYCLE * cycles as i64;
    assert!(
        h <= h1 + heap_slack,
        "{llp:?} heap: {h1} B live after the first cycle, {h} B after {cycles} (slack {heap_slack} B)"
    );
    assert!(
        p.rss_kib <= p1.rss_kib + RSS_SLACK_KIB,
        "{llp:?} VmRSS: first {p1}, last {p} (slack {RSS_SLACK_KIB} KiB)"
    );
}

fn env_cycles(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn a_thousand_peer_deaths_leak_no_thread_fd_or_memory() {
    let _machine = crate::common::heavy();
    if !rddp_testkit::own_process(
        module_path!(),
        "a_thousand_peer_deaths_leak_no_thread_fd_or_memory",
        || true,
    ) {
        return;
    }
    // Room for two consumers at once: a consumer whose reservation is never
    // returned makes the third cycle fail with DeviceFull.
    let twice = |q: u64| 2 * q;
    let dev = Device::with_limits(DeviceLimits {
        capacity: Quota {
            queue_pairs: twice(QUOTA.queue_pairs),
            memory_regions: twice(QUOTA.memory_regions),
            registered_bytes: twice(QUOTA.registered_bytes),
            receive_buffers: twice(QUOTA.receive_buffers),
            outstanding_reads: twice(QUOTA.outstanding_reads),
        },
    });
    cycles(&dev, Llp::Mpa, env_cycles("RDDP_PEER_DEATH_CYCLES", 1000));
    // Over SCTP each cycle waits for the dead-peer timeout: fewer by default
    // (scripts/peer-death.sh runs as many as over MPA).
    if usrsctp_ffi::available().is_ok() || std::env::var_os("CI").is_some() {
        cycles(
            &dev,
            Llp::Sctp,
            env_cycles("RDDP_PEER_DEATH_SCTP_CYCLES", 100),
        );
    }
}
