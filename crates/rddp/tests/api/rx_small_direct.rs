//! Small payloads straight into place on the product path (docs/data-path.md
//! and 8): over real MPA/TCP queue pairs (CRC on) a client posts hundreds of
//! small Sends and RDMA Writes in lists (many FPDUs per `sendmsg`, so the
//! receiver meets runs of small FPDUs and takes them in batches: one peek,
//! one vectored read). Sends go into posted receive buffers, or into a shared
//! receive queue's buffers; Writes go to offsets of their own, and some again
//! over a range an earlier one wrote. Every octet arrives where and as it
//! should, and the device's receive copy counter (`QpStats::rx_copied_octets`
//! summed over its queue pairs) does not move.
//! Before the batches, the payloads of such runs were copied out of a
//! read-ahead buffer (counted: this test failed).

use crate::common;

use common::wait;
use rddp::transport::mpa::Listener;
use rddp::{
    Access, BufferOrdering, CompletionQueue, Device, PostWr, QueuePairBuilder, RemoteBuf,
    SendFlags, SharedReceiveQueue, SrqMode, WcOpcode, WcStatus, WriteFlags,
};
use rddp_mpa::MpaOptions;
use std::sync::mpsc::channel;

const SENDS: usize = 600;
const WRITES: usize = 300;
/// Each Write's slot in the server's region.
const SLOT: usize = 256;
const LIST: usize = 32;

fn send_len(i: usize) -> usize {
    1 + (i * 37) % 200
}

fn send_data(i: usize) -> Vec<u8> {
    (0..send_len(i)).map(|k| (i * 7 + k) as u8).collect()
}

/// Write `i` goes to slot `i`, except every fifth, which writes again over
/// the slot of the Write before it (a later Write covering an earlier one).
fn write_slot(i: usize) -> usize {
    if i % 5 == 4 { i - 1 } else { i }
}

fn write_data(i: usize) -> Vec<u8> {
    (0..SLOT).map(|k| (i * 13 + k * 3) as u8 ^ 0x5a).collect()
}

fn opts() -> MpaOptions {
    MpaOptions {
        crc: true,
        ..MpaOptions::default()
    }
}

/// One pair of queue pairs; returns the receive copies during the data.
fn round(srq: bool) -> u64 {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", opts()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    let (res_tx, res) = channel();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(SENDS + 64);
        let pool = srq.then(|| {
            SharedReceiveQueue::new(
                &pd,
                SrqMode::Shared { soft_limit: 4 },
                BufferOrdering::Arrival,
                SENDS + 1,
            )
        });
        let mut b = QueuePairBuilder::new(&pd, &cq, &cq).max_recv_wr(SENDS as u32 + 1);
        if let Some(p) = &pool {
            b = b.srq(p);
        }
        let mut prepared = b.build().unwrap();
        for i in 0..=SENDS {
            match &pool {
                Some(p) => p.post_recv(i as u64, 256).unwrap(),
                None => prepared.post_recv(i as u64, 256).unwrap(),
            }
        }
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        let buf = qp
            .register_bound(vec![0; WRITES * SLOT], Access::REMOTE_WRITE)
            .unwrap();
        qp.post_send_inline(0, &buf.remote().to_bytes(), SendFlags::default())
            .unwrap();
        // The advertisement's completion, then every Send and the last one.
        let got = wait(&cq, SENDS + 2);
        let mut recvs: Vec<_> = got
            .into_iter()
            .filter(|w| w.opcode == WcOpcode::Recv)
            .collect();
        for w in &recvs {
            assert_eq!(w.status, WcStatus::Success, "{w:?} {:?}", qp.async_events());
        }
        recvs.sort_by_key(|w| w.wr_id);
        let sends: Vec<Vec<u8>> = recvs
            .iter()
            .map(|w| w.buffer.clone().unwrap()[..w.byte_len as usize].to_vec())
            .collect();
        // The last Send came after every Write (one ordered stream).
        let written = buf.read(0, (WRITES * SLOT) as u64).unwrap();
        res_tx.send((sends, written)).unwrap();
        drop(qp);
    });

    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(4096);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(2048)
        .build()
        .unwrap();
    prepared.post_recv(1, 64).unwrap();
    let qp = prepared.connect_mpa(addr, opts()).unwrap();
    let ad = wait(&cq, 1).pop().unwrap();
    let remote = RemoteBuf::from_bytes(ad.buffer.as_ref().unwrap()).unwrap();
    let send_src: Vec<u8> = (0..SENDS).flat_map(send_data).collect();
    let write_src: Vec<u8> = (0..WRITES).flat_map(write_data).collect();
    let smr = pd.register(send_src, Access::NONE).unwrap();
    let wmr = pd.register(write_src, Access::NONE).unwrap();

    let before = dev.stats().totals.rx_copied_octets;
    // Sends and Writes interleaved, LIST per post (one gathered sendmsg).
    let mut wrs = Vec::new();
    let (mut s_at, mut w) = (0u64, 0usize);
    for i in 0..SENDS {
        let len = send_len(i) as u64;
        wrs.push(PostWr::Send {
            wr_id: i as u64,
            mr: &smr,
            offset: s_at,
            len,
            flags: SendFlags::default(),
        });
        s_at += len;
        if i % 2 == 1 && w < WRITES {
            wrs.push(PostWr::Write {
                wr_id: 10_000 + w as u64,
                mr: &wmr,
                offset: (w * SLOT) as u64,
                len: SLOT as u64,
                remote,
                remote_offset: (write_slot(w) * SLOT) as u64,
                flags: WriteFlags::default(),
            });
            w += 1;
        }
    }
    let total = wrs.len();
    for chunk in wrs.chunks(LIST) {
        qp.post_list(chunk).unwrap();
    }
    let got = wait(&cq, total);
    for c in &got {
        assert_eq!(c.status, WcStatus::Success, "{c:?} {:?}", qp.async_events());
    }
    qp.post_send_inline(SENDS as u64, b"end", SendFlags::default())
        .unwrap();
    let (sends, written) = res.recv().unwrap();
    let copied = dev.stats().totals.rx_copied_octets - before;
    assert_eq!(sends.len(), SENDS + 1, "srq {srq}");
    for (i, s) in sends.iter().take(SENDS).enumerate() {
        assert!(*s == send_data(i), "srq {srq}: Send {i} arrived changed");
    }
    assert_eq!(sends[SENDS], b"end");
    let mut want = vec![0u8; WRITES * SLOT];
    for i in 0..WRITES {
        let at = write_slot(i) * SLOT;
        want[at..at + SLOT].copy_from_slice(&write_data(i));
    }
    assert!(written == want, "srq {srq}: the Writes left other octets");
    server.join().unwrap();
    drop(qp);
    copied
}

#[test]
fn small_sends_and_writes_in_runs_are_placed_without_a_copy() {
    for srq in [false, true] {
        let copied = round(srq);
        assert_eq!(
            copied, 0,
            "srq {srq}: {copied} payload octets copied on receive"
        );
    }
}
