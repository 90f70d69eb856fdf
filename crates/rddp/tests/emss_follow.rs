//! MULPDU follows TCP's EMSS (spec §4.5: "Recompute MULPDU when EMSS
//! changes"). Over loopback TCP_MAXSEG is 32,768 right after the handshake and
//! grows with the peer's window (up to 65,483); a queue pair that kept the
//! MULPDU of its setup cut every later FPDU to half the size TCP could carry.
//! After bulk Writes the queue pair's MULPDU is the one of TCP's EMSS now.

mod common;

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

#[test]
fn the_mulpdu_follows_tcps_emss() {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", opts()).unwrap();
    let addr = listener.local_addr().unwrap();
    let spd = common::pd(&dev, "server");
    let (sink_tx, sink_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let cq = CompletionQueue::new(64);
        let qp = QueuePairBuilder::new(&spd, &cq, &cq)
            .build()
            .unwrap()
            .attach(listener.accept().unwrap())
            .unwrap();
        let sink = spd.register(vec![0; MIB], Access::REMOTE_WRITE).unwrap();
        sink_tx.send(sink.remote()).unwrap();
        done_rx.recv().unwrap();
        drop(qp);
    });
    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(16)
        .build()
        .unwrap()
        .connect_mpa(addr, opts())
        .unwrap();
    let sink = sink_rx.recv().unwrap();
    let first = qp.llp_emss().expect("an MPA queue pair has an EMSS");
    assert_eq!(qp.mulpdu(), mulpdu(first, false), "the MULPDU of setup");
    let src = pd.register(vec![0x5A; MIB], Access::NONE).unwrap();
    // Bulk Writes: the window opens, TCP's EMSS grows (on loopback).
    for round in 0..32 {
        for i in 0..8 {
            qp.post_write(round * 8 + i, &src, 0, MIB as u64, sink, 0)
                .unwrap();
        }
        for w in wait(&cq, 8) {
            assert_eq!(w.status, WcStatus::Success, "{w:?}");
        }
    }
    // Then small ones, one at a time, past the next look at the EMSS.
    for i in 0..64 {
        qp.post_write(1000 + i, &src, 0, 64, sink, 0).unwrap();
        assert_eq!(wait(&cq, 1)[0].status, WcStatus::Success);
    }
    let now = qp.llp_emss().unwrap();
    eprintln!("EMSS {first} at setup, {now} after 256 MiB");
    assert_eq!(qp.mulpdu(), mulpdu(now, false), "EMSS {first} -> {now}");
    done_tx.send(()).unwrap();
    server.join().unwrap();
}
