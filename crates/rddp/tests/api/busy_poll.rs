//! Busy polling (docs/event-loop.md: a ping-pong with no hand-over between
//! threads): a thread in `CompletionQueue::poll_busy` reads its MPA queue pair's
//! socket itself, so the receive completions are pushed on that thread (seen by
//! the CQ's notify function, which runs on the pushing thread), and once it
//! stops, the I/O thread takes the socket back: after `end_busy` at once, and
//! after the lease without it, so a queue pair nobody polls goes on receiving.
//! A look that reads part of a message counts as one that saw a message
//! arriving (`CompletionQueue::busy_arrivals`: a wait goes on looking then).

use crate::common;

use crate::common::raw_peer;
use raw_peer::RawPeer;

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

/// The threads that push `cq`'s completions, as its notify function logs
/// them (it runs on the pushing thread; each push after an `arm`).
fn log_pushers(cq: &CompletionQueue) -> Arc<Mutex<Vec<ThreadId>>> {
    let pushers: Arc<Mutex<Vec<ThreadId>>> = Arc::default();
    let log = pushers.clone();
    cq.set_notify(move || log.lock().unwrap().push(std::thread::current().id()));
    pushers
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
    let pushers = log_pushers(&p.server_cq);
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

/// A busy poll that finds its completion already queued (the I/O thread
/// read the message) asks for the socket all the same, so the next message
/// is read by the polling thread. Before, such a poll only took the
/// completion, and a ping-pong could settle into the I/O thread reading every
/// message (a wake-up and two switches each; CompletionQueue::claim_busy).
#[test]
fn a_busy_poll_that_finds_a_completion_queued_takes_the_socket_over() {
    const ROUNDS: u64 = 20;
    let p = pair(2 * ROUNDS);
    let pushers = log_pushers(&p.server_cq);
    let me = std::thread::current().id();
    for i in 0..ROUNDS {
        // The loop reads this one...
        p.server_cq.end_busy();
        p.client
            .post_send_inline(2 * i, &[1; 64], SendFlags::default())
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while p.server_cq.is_empty() {
            assert!(Instant::now() < until, "message {} never came", 2 * i);
            std::thread::sleep(Duration::from_micros(100));
        }
        // ...and this poll finds it queued.
        let wc = p.server_cq.poll_busy(1).pop().expect("queued");
        assert_eq!(wc.wr_id, 2 * i);
        // The next one comes while nobody looks (well within the lease).
        p.server_cq.arm();
        p.client
            .post_send_inline(2 * i + 1, &[2; 64], SendFlags::default())
            .unwrap();
        // No synchronisation: the pause only lets the message arrive while
        // nobody polls. Longer (a loaded machine), the lease may run out and
        // the loop read it, which the count below allows for.
        std::thread::sleep(Duration::from_micros(300));
        let wc = loop {
            if let Some(wc) = p.server_cq.poll_busy(1).pop() {
                break wc;
            }
            assert!(Instant::now() < until, "message {} never came", 2 * i + 1);
            std::thread::yield_now();
        };
        assert_eq!(wc.wr_id, 2 * i + 1);
        reap(&p);
    }
    let pushers = pushers.lock().unwrap();
    let here = pushers.iter().filter(|t| **t == me).count();
    // Under load a lease may run out before the poll (then the loop reads
    // it); without the claim the loop reads every one.
    assert!(
        here as u64 >= ROUNDS / 2,
        "{here} of {ROUNDS} messages after a queued completion were read by the polling thread"
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

/// A Send's segment (QN 0) of MSN `msn`, `len` octets at `mo`; `last`: L=1.
fn send_segment(msn: u32, last: bool, mo: u32, len: usize) -> Vec<u8> {
    let mut s = vec![if last { 0x41 } else { 0x01 }, 0x43, 0, 0, 0, 0];
    for v in [0, msn, mo] {
        s.extend_from_slice(&v.to_be_bytes());
    }
    s.extend(std::iter::repeat_n(0x5A, len));
    s
}

/// Busy-poll `cq` until `done` holds or `limit` passed; whether it held.
fn poll_until(
    cq: &CompletionQueue,
    got: &mut Vec<rddp::WorkCompletion>,
    limit: Duration,
    done: impl Fn(&[rddp::WorkCompletion]) -> bool,
) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        cq.poll_busy_into(4, got);
        if done(got) {
            return true;
        }
        std::thread::yield_now();
    }
    false
}

/// Sends of two FPDUs each, the second written once the first was read: a
/// look that reads the first (the message not yet whole) counts as arriving,
/// one that reads the last does not. Under load a lease may run out and the
/// I/O thread read an FPDU instead, so each rule is checked where this
/// thread's look did the reading, and each must have been seen at least once.
#[test]
fn a_look_that_reads_part_of_a_message_counts_as_arriving() {
    const SENDS: u32 = 20;
    let dev = Device::new();
    let pd = common::pd(&dev, "server");
    let cq = CompletionQueue::new(1024);
    let (mut raw, conn) = RawPeer::accepted_rev1();
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_recv_wr(SENDS)
        .build()
        .unwrap();
    for i in 0..u64::from(SENDS) {
        prepared.post_recv(i, 256).unwrap();
    }
    let _qp = prepared.attach(conn).unwrap();
    let pushers = log_pushers(&cq);
    let me = std::thread::current().id();
    let mut got = Vec::new();
    // Take the receive side first (the task hands it over at its next run).
    poll_until(&cq, &mut got, Duration::from_millis(20), |_| false);
    let (mut firsts_seen, mut lasts_here) = (0, 0);
    for msn in 1..=SENDS {
        let before = cq.busy_arrivals();
        raw.send_segment(&send_segment(msn, false, 0, 100));
        if poll_until(&cq, &mut got, Duration::from_millis(50), |_| {
            cq.busy_arrivals() > before
        }) {
            firsts_seen += 1;
        }
        assert!(got.is_empty(), "completed after half the message: {got:?}");
        let before = cq.busy_arrivals();
        pushers.lock().unwrap().clear();
        cq.arm();
        raw.send_segment(&send_segment(msn, true, 100, 50));
        assert!(
            poll_until(&cq, &mut got, Duration::from_secs(5), |g| !g.is_empty()),
            "Send {msn} never completed"
        );
        let wc = got.remove(0);
        assert_eq!(
            (wc.wr_id, wc.status, wc.byte_len),
            (u64::from(msn) - 1, WcStatus::Success, 150)
        );
        if pushers.lock().unwrap().first() == Some(&me) {
            lasts_here += 1;
            assert_eq!(
                cq.busy_arrivals(),
                before,
                "the look that read Send {msn}'s last FPDU counted it as arriving"
            );
        }
    }
    assert!(firsts_seen > 0, "no look saw a first FPDU arrive");
    assert!(lasts_here > 0, "no last FPDU was read by this thread");
}

/// `wait` with no time to wait still looks once, as `poll_busy` does: with
/// the receive side taken by this thread (within its lease nobody else reads),
/// a message already in the socket is read and completed by that one call.
/// Under load a lease may run out and the I/O thread read a message instead,
/// so it must happen at least once in 20 tries (never without the look).
#[test]
fn a_wait_of_no_time_still_reads_the_socket() {
    let p = pair(MSGS + 1);
    let pushers = log_pushers(&p.server_cq);
    let me = std::thread::current().id();
    let mut read_here = 0;
    for i in 0..20 {
        // Take the receive side (the task hands it over at its next run).
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(20) {
            assert!(p.server_cq.poll_busy(1).is_empty());
            std::thread::yield_now();
        }
        pushers.lock().unwrap().clear();
        p.server_cq.arm();
        p.client
            .post_send_inline(i, &[i as u8; 64], SendFlags::default())
            .unwrap();
        // On loopback the octets are in the socket once the send completed.
        let until = Instant::now() + Duration::from_secs(5);
        while p.client_cq.poll(1).is_empty() {
            assert!(Instant::now() < until, "send {i} never completed");
        }
        let got = p.server_cq.wait(1, Duration::ZERO);
        if got.len() == 1 && pushers.lock().unwrap().first() == Some(&me) {
            read_here += 1;
        }
        // wait() gave the socket back; the rest comes through the I/O thread.
        let wc = match got.into_iter().next() {
            Some(wc) => wc,
            None => common::wait(&p.server_cq, 1).remove(0),
        };
        assert_eq!((wc.opcode, wc.wr_id), (WcOpcode::Recv, i));
    }
    assert!(read_here > 0, "no wait of no time read a message itself");
}
