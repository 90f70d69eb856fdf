//! docs/event-loop.md: `rddp target --transport sctp` serves its associations and
//! queue pairs on the event loop, never a thread per queue pair or association.
//! 200 queue pairs (verbs API, one association each) connect, each gets the
//! advertisement and the echo of one Send, then all stay connected: the
//! target's thread count does not grow with them.

use crate::common;

use common::Target;
use rddp::transport::sctp::{SctpOptions, connect};
use rddp::{CompletionQueue, Device, QueuePairBuilder, Quota, SendFlags, WcOpcode, WcStatus};
use std::net::SocketAddr;
use std::time::Duration;

const QPS: usize = 200;

fn status(pid: u32, key: &str) -> u64 {
    crate::common::proc_status(pid, key).unwrap()
}

fn usrsctp_missing() -> bool {
    match rddp::transport::sctp::available() {
        Ok(()) => false,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("*** SKIPPED: SCTP target test needs libusrsctp (CI unset): {e}");
            true
        }
        Err(e) => panic!("CI is set and libusrsctp is missing: {e}"),
    }
}

#[test]
fn two_hundred_sctp_queue_pairs_cost_the_target_no_threads() {
    if usrsctp_missing() {
        return;
    }
    let t = Target::start(&[
        "--transport",
        "sctp",
        "--buffer-size",
        "4096",
        "--recv-count",
        "2",
        "--recv-size",
        "4096",
    ]);
    let SocketAddr::V4(addr) = t.addr else {
        panic!("IPv4 expected")
    };
    let pid = t.pid();
    let threads_idle = status(pid, "Threads");
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get()) as u64;

    let dev = Device::new();
    let quota = Quota {
        queue_pairs: QPS as u64,
        receive_buffers: 2 * QPS as u64,
        ..Quota::default()
    };
    let pd = dev.consumer("client", quota).unwrap().alloc_pd().unwrap();
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
        let qp = p
            .attach(connect(addr, SctpOptions::default(), &[]).unwrap())
            .unwrap();
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
    eprintln!(
        "rddp target --transport sctp with {QPS} connected queue pairs: {threads} threads \
         (idle {threads_idle}, {cores} cores)"
    );
    // The event loop's I/O threads start with the first connection.
    assert!(
        threads <= threads_idle + cores + 4,
        "the target runs {threads} threads for {QPS} SCTP queue pairs (idle {threads_idle})"
    );
    drop(qps);
}
