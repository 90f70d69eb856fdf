//! Transmit (docs/data-path.md): a Send or Write completes when the LLP accepted
//! its last octet, not when it was queued, and a peer that stops reading holds
//! the queue pair's sending back instead of letting octets pile up in user space.

use crate::common;
use crate::common::raw_peer;

use raw_peer::RawPeer;
use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, RemoteBuf, WcStatus};
use rddp_mpa::MpaOptions;
use std::io::Read;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;
const WRITES: usize = 64;

/// Completions that arrive within `quiet` of each other, from now on.
fn drain_until_quiet(cq: &CompletionQueue, quiet: Duration) -> Vec<rddp::WorkCompletion> {
    let mut got = Vec::new();
    let mut last = Instant::now();
    while last.elapsed() < quiet {
        let more = cq.wait(WRITES, Duration::from_millis(50));
        if !more.is_empty() {
            last = Instant::now();
            got.extend(more);
        }
    }
    got
}

#[test]
fn writes_to_a_peer_that_does_not_read_wait_for_the_socket() {
    let dev = Device::new();
    let pd = common::pd(&dev, "sender");
    let cq = CompletionQueue::new(4 * WRITES);
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::rev1()).unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = std::thread::spawn(move || listener.accept());
    let mut raw = RawPeer::connect(addr, true);
    let conn = accept.join().unwrap().unwrap();
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(WRITES as u32)
        .build()
        .unwrap()
        .attach(conn)
        .unwrap();
    // The initiator's first FPDU (a zero-length Write) lets the responder send.
    raw.send_segment(&[0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);

    let src = pd.register(vec![0x5A; MIB], Access::NONE).unwrap();
    let sink = RemoteBuf {
        stag: 0x0000_1000,
        to: 0,
        len: MIB as u64,
    };
    for i in 0..WRITES {
        qp.post_write(i as u64, &src, 0, MIB as u64, sink, 0)
            .unwrap();
    }
    // The peer reads nothing: the socket buffers fill, and what did not fit into
    // them must not count as sent. 64 MiB is far beyond any loopback buffer.
    let early = drain_until_quiet(&cq, Duration::from_millis(700));
    assert!(
        early.len() < WRITES / 2,
        "{} of {WRITES} one-MiB Writes completed while the peer read nothing",
        early.len()
    );

    // Once the peer reads, every Write completes, in order, successfully.
    let mut sock = raw.sock.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        while let Ok(n) = sock.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    });
    let mut all = early;
    all.extend(common::wait(&cq, WRITES - all.len()));
    let ids: Vec<u64> = all.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (0..WRITES as u64).collect::<Vec<_>>());
    assert!(all.iter().all(|w| w.status == WcStatus::Success));
    drop(qp);
    assert!(reader.join().unwrap() >= WRITES * MIB);
}
