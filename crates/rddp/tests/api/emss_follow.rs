//! MULPDU follows TCP's EMSS (RFC 5044 §4: "Recompute MULPDU when EMSS
//! changes"). Over loopback TCP_MAXSEG is 32,768 right after the handshake and
//! grows with the peer's window (up to 65,483); a queue pair that kept the
//! MULPDU of its setup cut every later FPDU to half the size TCP could carry.
//! After bulk Writes the queue pair's MULPDU is the one of TCP's EMSS now.

use crate::common;

use common::wait;
use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, WcStatus};
use rddp_mpa::MpaOptions;
use rddp_wire::mulpdu;

const MIB: usize = 1 << 20;

fn opts() -> MpaOptions {
    MpaOptions {
        crc: true,
        ..MpaOptions::default()
    }
}

/// A connected pair (the client's queue pair and CQ, the server's sink), the
/// server kept until `done` is sent.
struct Pair {
    qp: rddp::QueuePair,
    cq: CompletionQueue,
    pd: rddp::ProtectionDomain,
    sink: rddp::RemoteBuf,
    done: std::sync::mpsc::Sender<()>,
    /// At the end: the server's MULPDU and TCP's EMSS then.
    server: std::thread::JoinHandle<(usize, usize)>,
}

fn pair(dev: &Device, sink_len: usize) -> Pair {
    let listener = Listener::bind("127.0.0.1:0", opts()).unwrap();
    let addr = listener.local_addr().unwrap();
    let spd = common::pd(dev, "server");
    let (sink_tx, sink_rx) = std::sync::mpsc::channel();
    let (done, done_rx) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let cq = CompletionQueue::new(64);
        let qp = QueuePairBuilder::new(&spd, &cq, &cq)
            .build()
            .unwrap()
            .attach(listener.accept().unwrap())
            .unwrap();
        let sink = spd
            .register(
                vec![0; sink_len],
                Access::REMOTE_WRITE | Access::REMOTE_READ,
            )
            .unwrap();
        sink_tx.send(sink.remote()).unwrap();
        done_rx.recv().unwrap();
        (qp.mulpdu(), qp.llp_emss().unwrap())
    });
    let pd = common::pd(dev, "client");
    let cq = CompletionQueue::new(64);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(16)
        .build()
        .unwrap()
        .connect_mpa(addr, opts())
        .unwrap();
    let sink = sink_rx.recv().unwrap();
    Pair {
        qp,
        cq,
        pd,
        sink,
        done,
        server,
    }
}

/// A queue pair that posts only a few messages follows too: the EMSS is
/// looked at often at first (posts 1, 2, 4, 8, ...), not only every 64th.
#[test]
fn a_queue_pair_that_posts_few_messages_follows_too() {
    let dev = Device::new();
    let p = pair(&dev, 4 * MIB);
    let first = p.qp.llp_emss().unwrap();
    let src = p.pd.register(vec![0x5A; 4 * MIB], Access::NONE).unwrap();
    // Seven 4 MiB Writes open the window; the eighth post looks again.
    for i in 0..8 {
        p.qp.post_write(i, &src, 0, (4 * MIB) as u64, p.sink, 0)
            .unwrap();
        assert_eq!(wait(&p.cq, 1)[0].status, WcStatus::Success);
    }
    let now = p.qp.llp_emss().unwrap();
    eprintln!("EMSS {first} at setup, {now} after 8 posts");
    assert_eq!(p.qp.mulpdu(), mulpdu(now, false), "EMSS {first} -> {now}");
    p.done.send(()).unwrap();
    let _ = p.server.join().unwrap();
}

#[test]
fn the_mulpdu_follows_tcps_emss() {
    let dev = Device::new();
    let p = pair(&dev, MIB);
    let (qp, cq, sink) = (&p.qp, &p.cq, p.sink);
    let first = qp.llp_emss().expect("an MPA queue pair has an EMSS");
    assert_eq!(qp.mulpdu(), mulpdu(first, false), "the MULPDU of setup");
    let src = p.pd.register(vec![0x5A; MIB], Access::NONE).unwrap();
    // Bulk Writes: the window opens, TCP's EMSS grows (on loopback).
    for round in 0..32 {
        for i in 0..8 {
            qp.post_write(round * 8 + i, &src, 0, MIB as u64, sink, 0)
                .unwrap();
        }
        for w in wait(cq, 8) {
            assert_eq!(w.status, WcStatus::Success, "{w:?}");
        }
    }
    // Then small ones, one at a time, past the next look at the EMSS.
    for i in 0..64 {
        qp.post_write(1000 + i, &src, 0, 64, sink, 0).unwrap();
        assert_eq!(wait(cq, 1)[0].status, WcStatus::Success);
    }
    let now = qp.llp_emss().unwrap();
    eprintln!("EMSS {first} at setup, {now} after 256 MiB");
    assert_eq!(qp.mulpdu(), mulpdu(now, false), "EMSS {first} -> {now}");
    p.done.send(()).unwrap();
    let _ = p.server.join().unwrap();
}

/// The responder of RDMA Reads follows too: it posts nothing, its Read
/// Responses are cut by its engine (the look is where segments are cut).
#[test]
fn a_read_responder_follows_too() {
    let dev = Device::new();
    let p = pair(&dev, 4 * MIB);
    let dst =
        p.pd.register(vec![0; 4 * MIB], Access::REMOTE_WRITE)
            .unwrap();
    for i in 0..8 {
        p.qp.post_read(i, &dst, 0, (4 * MIB) as u32, p.sink, 0)
            .unwrap();
        assert_eq!(wait(&p.cq, 1)[0].status, WcStatus::Success);
    }
    p.done.send(()).unwrap();
    let (mulpdu_now, emss) = p.server.join().unwrap();
    eprintln!("responder: EMSS {emss}, MULPDU {mulpdu_now}");
    assert_eq!(mulpdu_now, mulpdu(emss, false), "the responder's MULPDU");
}
