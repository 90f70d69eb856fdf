//! Receive straight into place on the product path (docs/data-path.md): over
//! real MPA/TCP queue pairs (CRC on; Markers off, then towards both sides) a
//! 1 MiB RDMA Write, a 1 MiB Read Response, and a 64 KiB Send into a posted
//! receive buffer or into a shared receive queue's buffer go from the socket
//! into their final place: the receiving queue pair's copy counter
//! (`QpStats::rx_copied_octets`) does not move, and every octet arrives.

use crate::common;

use common::wait;
use rddp::transport::mpa::Listener;
use rddp::{
    Access, BufferOrdering, CompletionQueue, Device, QueuePairBuilder, RemoteBuf, SendFlags,
    SharedReceiveQueue, SrqMode, WcOpcode, WcStatus,
};
use rddp_mpa::MpaOptions;
use std::sync::mpsc::channel;

const MIB: usize = 1 << 20;
const SEND: usize = 64 * 1024;

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

fn opts(markers: bool) -> MpaOptions {
    MpaOptions {
        crc: true,
        markers,
        ..MpaOptions::default()
    }
}

/// One pair of queue pairs: the client Writes 1 MiB into the server's region,
/// Sends 64 KiB (into a posted buffer, or a shared pool's with `srq`) and
/// Reads 1 MiB back from the region; returns the receive copies meanwhile.
fn round(markers: bool, srq: bool) -> u64 {
    let what = format!("markers {markers}, srq {srq}");
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", opts(markers)).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    let (res_tx, res) = channel();
    let (done, done_rx) = channel::<()>();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let pool = srq.then(|| {
            SharedReceiveQueue::new(
                &pd,
                SrqMode::Shared { soft_limit: 4 },
                BufferOrdering::Arrival,
                4,
            )
        });
        let mut b = QueuePairBuilder::new(&pd, &cq, &cq);
        if let Some(p) = &pool {
            b = b.srq(p);
        }
        let mut prepared = b.build().unwrap();
        match &pool {
            Some(p) => p.post_recv(1, SEND).unwrap(),
            None => prepared.post_recv(1, SEND).unwrap(),
        }
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        let mut init = pattern(9, MIB);
        init.resize(2 * MIB, 0);
        let buf = qp
            .register_bound(init, Access::REMOTE_READ | Access::REMOTE_WRITE)
            .unwrap();
        qp.post_send_inline(0, &buf.remote().to_bytes(), SendFlags::default())
            .unwrap();
        let got = wait(&cq, 2);
        let recv = got
            .iter()
            .find(|w| w.opcode == WcOpcode::Recv)
            .expect("no receive completion");
        assert_eq!(recv.status, WcStatus::Success, "{:?}", qp.async_events());
        let sent = recv.buffer.clone().unwrap()[..recv.byte_len as usize].to_vec();
        // The Write was placed before the Send after it (one ordered stream).
        let written = buf.read(MIB as u64, MIB as u64).unwrap();
        res_tx.send((sent, written)).unwrap();
        // The queue pair answers the client's Read until it is done.
        let _ = done_rx.recv();
        drop(qp);
    });

    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_recv(1, 64).unwrap();
    let qp = prepared.connect_mpa(addr, opts(markers)).unwrap();
    assert_eq!(qp.llp_info().markers_rx, markers, "{what}");
    assert_eq!(qp.llp_info().markers_tx, markers, "{what}");
    assert!(qp.llp_info().crc);
    let ad = wait(&cq, 1).pop().unwrap();
    let remote = RemoteBuf::from_bytes(ad.buffer.as_ref().unwrap()).unwrap();
    let write = pattern(1, MIB);
    let send = pattern(5, SEND);
    let src = pd.register(write.clone(), Access::NONE).unwrap();
    let msg = pd.register(send.clone(), Access::NONE).unwrap();
    let sink = pd.register(vec![0; MIB], Access::REMOTE_WRITE).unwrap();

    let before = dev.stats().totals.rx_copied_octets;
    qp.post_write(10, &src, 0, MIB as u64, remote, MIB as u64)
        .unwrap();
    qp.post_send(11, &msg, 0, SEND as u64, SendFlags::default())
        .unwrap();
    qp.post_read(12, &sink, 0, MIB as u32, remote, 0).unwrap();
    let got = wait(&cq, 3);
    for w in &got {
        assert_eq!(
            w.status,
            WcStatus::Success,
            "{what}: {w:?}, {:?}",
            qp.async_events()
        );
    }
    let (sent, written) = res.recv().unwrap();
    let copied = dev.stats().totals.rx_copied_octets - before;
    assert!(sent == send, "{what}: the Send arrived changed");
    assert!(written == write, "{what}: the Write arrived changed");
    assert!(
        sink.read(0, MIB as u64).unwrap() == pattern(9, MIB),
        "{what}: the Read Response arrived changed"
    );
    done.send(()).unwrap();
    server.join().unwrap();
    drop(qp);
    copied
}

#[test]
fn every_payload_kind_goes_from_the_socket_straight_into_place() {
    for markers in [false, true] {
        for srq in [false, true] {
            let copied = round(markers, srq);
            assert_eq!(
                copied, 0,
                "markers {markers}, srq {srq}: {copied} payload octets copied on receive"
            );
        }
    }
}
