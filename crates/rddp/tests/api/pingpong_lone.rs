//! A Send ping-pong on the product path (the ping-pong row of docs/benchmarks.md): over
//! real MPA/TCP queue pairs (CRC on), each side busy-polls its CQ and answers
//! every 64-octet Send with one of its own. Each Send then arrives alone, and
//! after a few the receiver reads each in one system call into its scratch
//! (rddp-mpa's `fpdu/rx_direct/lone.rs`), where a batch costs a peek and a
//! read, and copies the payload into the posted receive buffer once its checks
//! passed. Every octet arrives as sent, each payload is copied once at most
//! (`QpStats::rx_copied_octets`), and the receive system calls that returned
//! octets (`QpStats::llp_reads`) stay near one per message; with a peek and a
//! read each they were two. Every tenth Send is shorter (as a ping-pong's
//! control messages are): read the same way, not a missed guess that costs a
//! second system call.

use crate::common;

use rddp::transport::mpa::Listener;
use rddp::{CompletionQueue, Device, QueuePair, QueuePairBuilder, SendFlags, WcOpcode, WcStatus};
use rddp_mpa::MpaOptions;
use std::time::{Duration, Instant};

const ROUNDS: usize = 400;
/// Round trips before the counters are read (the receiver learns that Sends
/// of one length come alone).
const WARM: usize = 20;
const LEN: usize = 64;
const RECVS: u64 = 8;

fn opts() -> MpaOptions {
    MpaOptions {
        crc: true,
        ..MpaOptions::default()
    }
}

/// Every tenth message after the warm-up is shorter than `LEN`.
fn message(side: u8, i: usize) -> Vec<u8> {
    let len = match i % 10 {
        9 if i > WARM => [1, 29, 60, 63][i / 10 % 4],
        _ => LEN,
    };
    (0..len).map(|k| (i * 7 + k) as u8 ^ side).collect()
}

/// Busy-poll `cq` for the next receive (Send completions are passed over);
/// repost its buffer.
fn next_recv(cq: &CompletionQueue, qp: &QueuePair) -> Vec<u8> {
    let start = Instant::now();
    loop {
        for wc in cq.poll_busy(4) {
            assert_eq!(
                wc.status,
                WcStatus::Success,
                "{wc:?} {:?}",
                qp.async_events()
            );
            if wc.opcode == WcOpcode::Recv {
                let (id, len) = (wc.wr_id, wc.byte_len as usize);
                let mut buf = wc.c.buffer.unwrap();
                buf.truncate(len);
                qp.post_recv(id, LEN).unwrap();
                return buf;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no Send came: {:?}",
            qp.async_events()
        );
        std::thread::yield_now();
    }
}

fn side(dev: &Device, name: &str) -> (CompletionQueue, rddp::PreparedQueuePair) {
    let pd = common::pd(dev, name);
    let cq = CompletionQueue::new(256);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    for i in 0..RECVS {
        prepared.post_recv(i, LEN).unwrap();
    }
    (cq, prepared)
}

#[test]
fn lone_sends_of_a_ping_pong_take_one_read_each() {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", opts()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    let (done, client_done) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (cq, prepared) = side(&sdev, "server");
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        for i in 0..WARM + ROUNDS {
            let got = next_recv(&cq, &qp);
            assert!(got == message(1, i), "ping {i} arrived changed");
            qp.post_send_inline(i as u64, &message(2, i), SendFlags::default())
                .unwrap();
        }
        cq.end_busy();
        // Until the client has the last answer.
        client_done
            .recv_timeout(Duration::from_secs(30))
            .expect("the client took the last answer");
        drop(qp);
    });
    let (cq, prepared) = side(&dev, "client");
    let qp = prepared.connect_mpa(addr, opts()).unwrap();
    let (mut calls, mut copied, mut received) = (0, 0, 0);
    for i in 0..WARM + ROUNDS {
        if i == WARM {
            (calls, copied) = (qp.stats().llp_reads, dev.stats().totals.rx_copied_octets);
        }
        qp.post_send_inline(i as u64, &message(1, i), SendFlags::default())
            .unwrap();
        let got = next_recv(&cq, &qp);
        assert!(got == message(2, i), "pong {i} arrived changed");
        if i >= WARM {
            received += got.len() as u64;
        }
    }
    let (calls, copied) = (
        qp.stats().llp_reads - calls,
        dev.stats().totals.rx_copied_octets - copied,
    );
    cq.end_busy();
    done.send(()).unwrap();
    server.join().unwrap();
    // The device's count covers both ends, each receiving messages of the
    // same lengths.
    let received = 2 * received;
    assert!(
        copied <= received,
        "{copied} payload octets copied on receive for {received} received"
    );
    // The client received ROUNDS Sends in the window.
    let msgs = ROUNDS as u64;
    assert!(
        calls <= msgs + msgs / 4,
        "{calls} receive system calls returned octets for {msgs} lone Sends"
    );
}
