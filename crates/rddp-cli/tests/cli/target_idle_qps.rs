//! docs/target.md: `rddp target` serves its connections on the event loop and
//! one service thread, never a thread per connection. 1,000 queue pairs (verbs
//! API, MPA) connect, each gets the advertisement and the echo of one Send, then
//! all stay connected and idle: the target's thread count stays small.

use crate::common;

use common::Target;
use rddp::{CompletionQueue, Device, QueuePairBuilder, Quota, SendFlags, WcOpcode, WcStatus};
use rddp_mpa::MpaOptions;
use std::time::Duration;

const QPS: usize = 1000;
/// main, two acceptors, the service thread, the I/O threads (at most 4), and
/// a little room; a thread per connection would be over a thousand.
const TARGET_THREADS_MAX: u64 = 12;

fn status(pid: u32, key: &str) -> u64 {
    crate::common::proc_status(pid, key).unwrap()
}

#[test]
fn a_thousand_idle_queue_pairs_cost_the_target_no_threads() {
    let _machine = crate::common::heavy();
    crate::common::raise_nofile(QPS as u64 + 200);
    let t = Target::start(&[
        "--buffer-size",
        "4096",
        "--recv-count",
        "2",
        "--recv-size",
        "4096",
    ]);
    let pid = t.pid();
    let threads_idle = status(pid, "Threads");
    let rss_idle = status(pid, "VmRSS");

    let dev = Device::new();
    let quota = Quota {
        queue_pairs: QPS as u64,
        receive_buffers: 2 * QPS as u64,
        ..Quota::default()
    };
    let pd = dev.consumer("client", quota).unwrap().alloc_pd().unwrap();
    // Each queue pair reserves 2 send and 2 receive completions.
    let cq = CompletionQueue::new(4 * QPS);
    let mut qps = Vec::with_capacity(QPS);
    for i in 0..QPS as u64 {
        let mut p = QueuePairBuilder::new(&pd, &cq, &cq)
            .max_send_wr(2)
            .max_recv_wr(2)
            .build()
            .unwrap();
        p.post_recv(2 * i, 64).unwrap();
        p.post_recv(2 * i + 1, 64).unwrap();
        let qp = p.connect_mpa(t.addr, MpaOptions::default()).unwrap();
        qp.post_send_inline(i, b"idle soon", SendFlags::default())
            .unwrap();
        qps.push(qp);
    }
    // Per queue pair: the advertisement, the echo, our Send's completion.
    let (mut recvs, mut sends) = (0, 0);
    while recvs < 2 * QPS || sends < QPS {
        let wcs = cq.wait(4 * QPS, Duration::from_secs(20));
        assert!(
            !wcs.is_empty(),
            "{recvs} receives and {sends} sends completed"
        );
        for wc in wcs {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            match wc.opcode {
                WcOpcode::Recv => recvs += 1,
                WcOpcode::Send => sends += 1,
                other => panic!("{other:?}"),
            }
        }
    }
    let threads = status(pid, "Threads");
    let rss = status(pid, "VmRSS");
    eprintln!(
        "rddp target with {QPS} connected idle queue pairs: {threads} threads (idle {threads_idle}), \
         VmRSS {rss_idle} -> {rss} kB ({} octets per connection, buffers of 12 KiB included)",
        (rss.saturating_sub(rss_idle) * 1024) / QPS as u64
    );
    assert!(
        threads <= TARGET_THREADS_MAX,
        "the target runs {threads} threads for {QPS} connections"
    );
    drop(qps);
}
