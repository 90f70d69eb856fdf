//! docs/event-loop.md: DDP over SCTP queue pairs run on the event loop's few
//! threads, never threads per queue pair or per association. 200 associations
//! (both ends in this process, 400 queue pairs), one Send each: the process's
//! thread count does not grow with them. (One test in this binary: the thread
//! figures are this test's alone.)

use crate::common::sctp_llp as llp;

use crate::common::many;
use llp::{free_addr, library};
use rddp::transport::sctp::{Listener, SctpOptions, connect};

use many::{quota, status};
use rddp::{CompletionQueue, Device, QueuePairBuilder, SendFlags, WcOpcode, WcStatus};
use std::time::{Duration, Instant};

/// Associations (two queue pairs each).
const ASSOCIATIONS: usize = 200;

#[test]
fn two_hundred_sctp_associations_on_a_few_threads() {
    if !llp::own_process(
        module_path!(),
        "two_hundred_sctp_associations_on_a_few_threads",
    ) {
        return;
    }
    if !library() {
        return;
    }
    let n = ASSOCIATIONS;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get()) as u64;
    let dev = Device::new();
    let addr = free_addr();
    // Starts the process's usrsctp stack (its own threads are in the baseline).
    let listener = Listener::bind(addr, SctpOptions::default()).unwrap();
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
    let server_cq = CompletionQueue::new(2 * n);
    let client_cq = CompletionQueue::new(2 * n);

    // The acceptor is spawned before the baseline is taken.
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
                let conn = listener.accept(Duration::from_secs(20), b"").unwrap();
                qps.push(p.attach(conn).unwrap());
            }
            qps
        })
    };
    let threads_before = status("Threads");

    let start = Instant::now();
    go_tx.send(()).unwrap();
    let mut clients = Vec::with_capacity(n);
    let mut peak = threads_before;
    for i in 0..n {
        let p = QueuePairBuilder::new(&client_pd, &client_cq, &client_cq)
            .max_send_wr(1)
            .max_recv_wr(1)
            .build()
            .unwrap();
        let conn = connect(addr, SctpOptions::default(), b"").unwrap();
        let qp = p.attach(conn).unwrap();
        qp.post_send_inline(
            i as u64,
            b"one small Send per queue pair",
            SendFlags::default(),
        )
        .unwrap();
        clients.push(qp);
        peak = peak.max(status("Threads"));
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

    let threads = status("Threads");
    peak = peak.max(threads);
    let qps = clients.len() + servers.len();
    eprintln!(
        "{qps} SCTP queue pairs ({n} associations) set up and exchanged a Send in {setup:?}: \
         {threads} threads, at most {peak} (baseline {threads_before}, {cores} cores)"
    );
    // The event loop's I/O threads (at most one per core) and a few more, never
    // one per queue pair or association.
    assert!(
        peak <= threads_before + cores + 8,
        "{peak} threads with {qps} SCTP queue pairs (baseline {threads_before}, {cores} cores)"
    );
    drop(clients);
    drop(servers);
}
