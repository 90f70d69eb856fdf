//! docs/event-loop.md: one process serves 10,000 queue pairs (5,000 MPA
//! connections, both ends in this process) on the event loop's few threads, and
//! an idle queue pair costs at most 32 KiB of memory beyond registered memory.
//! Each queue pair sends one small Send and gets its completion. (One test in
//! this binary: the thread and memory figures are this test's alone.)

use crate::common::many;
use rddp::transport::mpa::Listener;

use many::{quota, status};
use rddp::{CompletionQueue, Device, QueuePairBuilder, SendFlags, WcOpcode, WcStatus};
use rddp_mpa::MpaOptions;
use std::time::{Duration, Instant};

/// Connections wanted (two queue pairs each).
const CONNECTIONS: usize = 5_000;

/// Memory an idle queue pair may cost, beyond registered memory.
const PER_QP_MAX: u64 = 32 * 1024;

#[test]
fn ten_thousand_queue_pairs_on_a_few_threads() {
    let fds = rddp::raise_open_file_limit().expect("the open-file limit raised to the hard one");
    // Two sockets per connection, and some room for the rest.
    let n = CONNECTIONS.min((fds.saturating_sub(200) / 2) as usize);
    assert!(
        n >= 1000,
        "RLIMIT_NOFILE {fds} leaves room for {n} connections only"
    );
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get()) as u64;

    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let server_pd = dev
        .consumer("server", quota(n))
        .unwrap()
        .alloc_pd()
        .unwrap();
    let client_pd = dev
        .consumer("client", quota(n))
        .unwrap()
        .alloc_pd()
        .unwrap();
    // Each queue pair reserves one send and one receive completion.
    let server_cq = CompletionQueue::new(2 * n);
    let client_cq = CompletionQueue::new(2 * n);

    // The test's own threads: the harness's, this one, and the acceptor below
    // (spawned first, so that it is in the baseline).
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let acceptor = {
        let (pd, cq) = (server_pd.clone(), server_cq.clone());
        std::thread::spawn(move || {
            go_rx.recv().unwrap();
            let mut qps = Vec::with_capacity(n);
            for i in 0..n {
                let mut p = QueuePairBuilder::new(&pd, &cq, &cq)
                    .max_send_wr(1)
                    .max_recv_wr(1)
                    .build()
                    .unwrap();
                p.post_recv(i as u64, 64).unwrap();
                qps.push(p.accept_mpa(&listener).unwrap());
            }
            qps
        })
    };
    let threads_before = status("Threads");
    let rss_before = status("VmRSS");

    let start = Instant::now();
    go_tx.send(()).unwrap();
    let mut clients = Vec::with_capacity(n);
    for i in 0..n {
        let p = QueuePairBuilder::new(&client_pd, &client_cq, &client_cq)
            .max_send_wr(1)
            .max_recv_wr(1)
            .build()
            .unwrap();
        let qp = p.connect_mpa(addr, MpaOptions::default()).unwrap();
        qp.post_send_inline(
            i as u64,
            b"one small Send per queue pair",
            SendFlags::default(),
        )
        .unwrap();
        clients.push(qp);
    }
    let servers = acceptor.join().unwrap();
    let setup = start.elapsed();

    // Every Send completes at its sender and arrives at its receiver.
    let collect = |cq: &CompletionQueue, want: WcOpcode| {
        let mut ids = vec![false; n];
        let mut got = 0;
        while got < n {
            let wcs = cq.wait(n, Duration::from_secs(30));
            assert!(!wcs.is_empty(), "{got} of {n} {want:?} completions");
            for wc in wcs {
                assert_eq!((wc.opcode, wc.status), (want, WcStatus::Success), "{wc:?}");
                assert!(!std::mem::replace(&mut ids[wc.wr_id as usize], true));
                got += 1;
            }
        }
    };
    collect(&client_cq, WcOpcode::Send);
    collect(&server_cq, WcOpcode::Recv);

    let qps = (clients.len() + servers.len()) as u64;
    let threads = status("Threads");
    let rss = status("VmRSS");
    let per_qp = (rss.saturating_sub(rss_before) * 1024) / qps;
    eprintln!(
        "{qps} queue pairs ({n} connections) set up and exchanged a Send in {setup:?}: \
         {threads} threads (baseline {threads_before}, {cores} cores), \
         VmRSS {rss_before} -> {rss} kB: {per_qp} octets per queue pair"
    );
    assert!(
        threads <= threads_before + cores + 4,
        "{threads} threads for {qps} queue pairs (baseline {threads_before}, {cores} cores)"
    );
    assert!(
        per_qp <= PER_QP_MAX,
        "{per_qp} octets of memory per idle queue pair (at most {PER_QP_MAX})"
    );
    drop(clients);
    drop(servers);
}
