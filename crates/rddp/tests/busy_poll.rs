//! Busy polling (issue 11, point 5: a ping-pong with no hand-over between
//! threads): a thread in `CompletionQueue::poll_busy` reads its MPA queue pair's
//! socket itself, so the receive completions are pushed on that thread (seen by
//! the CQ's notify function, which runs on the pushing thread), and once it
//! stops, the I/O thread takes the socket back: after `end_busy` at once, and
//! after the lease without it, so a queue pair nobody polls goes on receiving.

mod common;

use rddp::transport::mpa::{self, Listener};
use rddp::{CompletionQueue, Device, QueuePair, QueuePairBuilder, SendFlags, WcOpcode, WcStatus};
use rddp_mpa::MpaOptions;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

const MSGS: u64 = 200;

struct Pair {
    client: QueuePair,
    client_cq: CompletionQueue,
    _server: QueuePair,
    server_cq: CompletionQueue,
    _dev: Device,
}

/// A client and a server queue pair over MPA/TCP (CRC on), the server with
/// `recvs` receives of 64 octets posted.
fn pair(recvs: u64) -> Pair {
    let dev = Device::new();
    let opts = MpaOptions {
        crc: true,
        ..MpaOptions::default()
    };
    let listener = Listener::bind("127.0.0.1:0", opts.clone()).unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = std::thread::spawn(move || listener.accept().unwrap());
    let cconn = mpa::connect(addr, &opts).unwrap();
    let sconn = accept.join().unwrap();
    let spd = common::pd(&dev, "server");
    let server_cq = CompletionQueue::new(1024);
    let mut prepared = QueuePairBuilder::new(&spd, &server_cq, &server_cq)
        .max_recv_wr(512)
        .build()
        .unwrap();
    for i in 0..recvs {
        prepared.post_recv(i, 64).unwrap();
    }
    let server = prepared.attach(sconn).unwrap();
    let (_cpd, client_cq, client) = common::endpoint(&dev, "client", 1024, cconn);
    Pair {
        client,
        client_cq,
        _server: server,
        server_cq,
        _dev: dev,
    }
}

/// Take send completions off the client's CQ (so its slots come back).
fn reap(p: &Pair) {
    for wc in p.client_cq.poll(64) {
        assert_eq!(wc.status, WcStatus::Success);
    }
}

/// Wait for one receive completion without busy polling (the I/O thread must
/// bring it), up to 5 s.
fn recv_by_the_loop(cq: &CompletionQueue) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if let Some(wc) = cq.poll(1).pop() {
            assert_eq!(wc.opcode, WcOpcode::Recv);
            assert_eq!(wc.status, WcStatus::Success);
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn a_busy_polling_thread_reads_its_queue_pairs_socket_itself() {
    let p = pair(MSGS + 1);
    let pushers: Arc<Mutex<Vec<ThreadId>>> = Arc::default();
    let log = pushers.clone();
    p.server_cq.set_notify(move || {
        log.lock().unwrap().push(std::thread::current().id());
    });
    let me = std::thread::current().id();
    for i in 0..MSGS {
        p.server_cq.arm();
        p.client
            .post_send_inline(i, &[i as u8; 64], SendFlags::default())
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        let wc = loop {
            if let Some(wc) = p.server_cq.poll_busy(1).pop() {
                break wc;
            }
            assert!(Instant::now() < until, "message {i} never came");
            std::thread::yield_now();
        };
        assert_eq!((wc.opcode, wc.wr_id, wc.byte_len), (WcOpcode::Recv, i, 64));
        reap(&p);
    }
    let pushers = pushers.lock().unwrap();
    let here = pushers.iter().filter(|t| **t == me).count();
    // The first messages may come through the I/O thread (it hands the socket
    // over at its next run); under load a lease may run out now and then. But
    // without busy polling every completion is pushed by an I/O thread.
    assert!(
        here > 0,
        "all {} receive completions were pushed by another thread",
        pushers.len()
    );
    p.server_cq.end_busy();
    // The loop reads again.
    p.client
        .post_send_inline(MSGS, &[1; 64], SendFlags::default())
        .unwrap();
    assert!(
        recv_by_the_loop(&p.server_cq),
        "after end_busy nothing read the socket"
    );
}

#[test]
fn a_lease_that_runs_out_gives_the_socket_back_to_the_loop() {
    let p = pair(8);
    // Take the receive side (the task hands it over at its next run), then
    // leave without end_busy.
    let until = Instant::now() + Duration::from_millis(50);
    while Instant::now() < until {
        assert!(p.server_cq.poll_busy(1).is_empty());
        std::thread::yield_now();
    }
    p.client
        .post_send_inline(7, &[7; 64], SendFlags::default())
        .unwrap();
    assert!(
        recv_by_the_loop(&p.server_cq),
        "nobody read the socket after the lease"
    );
}
