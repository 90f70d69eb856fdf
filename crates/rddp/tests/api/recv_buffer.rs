//! Receive buffers the application owns (`QueuePair::post_recv_buffer`,
//! `post_recv_buffers`): over a real MPA/TCP queue pair (CRC on) a Send lands in
//! the very allocation that was posted, the completion hands that allocation
//! back at its full length, and reposting it takes a second Send, so a receiver
//! that keeps its buffers allocates and zeroes nothing per message.

use crate::common;

use common::wait;
use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, SendFlags, WcOpcode, WcStatus};
use rddp_mpa::MpaOptions;

const LEN: usize = 4096;

fn opts() -> MpaOptions {
    MpaOptions {
        crc: true,
        ..MpaOptions::default()
    }
}

#[test]
fn a_posted_buffer_comes_back_as_the_same_allocation_and_can_be_reposted() {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", opts()).unwrap();
    let addr = listener.local_addr().unwrap();

    let pd = common::pd(&dev, "client");
    let ccq = CompletionQueue::new(64);
    // The client sends once the server has posted (no buffer: a Terminate).
    let (go, ready) = std::sync::mpsc::channel::<()>();
    let client = std::thread::spawn(move || {
        let qp = QueuePairBuilder::new(&pd, &ccq, &ccq)
            .build()
            .unwrap()
            .connect_mpa(addr, opts())
            .unwrap();
        let msgs: Vec<Vec<u8>> = (0..3u8)
            .map(|i| vec![i + 1; 100 + usize::from(i)])
            .collect();
        for (i, m) in msgs.iter().enumerate() {
            if i != 1 {
                // Two buffers are posted, then the first again.
                ready.recv().unwrap();
            }
            let mr = pd.register(m.clone(), Access::NONE).unwrap();
            qp.post_send(i as u64, &mr, 0, m.len() as u64, SendFlags::default())
                .unwrap();
            assert_eq!(wait(&ccq, 1)[0].status, WcStatus::Success);
            drop(mr);
        }
        // Held until the server has taken all three.
        (qp, ccq)
    });

    let spd = common::pd(&dev, "server");
    let cq = CompletionQueue::new(64);
    let qp = QueuePairBuilder::new(&spd, &cq, &cq)
        .build()
        .unwrap()
        .attach(listener.accept().unwrap())
        .unwrap();
    // Two buffers in one call, marked so a fresh buffer would show.
    let a = vec![0xa5u8; LEN];
    let b = vec![0x5au8; LEN];
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut list = vec![(1, a), (2, b)];
    qp.post_recv_buffers(&mut list).unwrap();
    assert!(list.is_empty(), "both posted");
    go.send(()).unwrap();

    let mut got = wait(&cq, 2);
    got.sort_by_key(|w| w.wr_id);
    for (w, (posted, fill, n)) in got
        .iter_mut()
        .zip([(pa, 0xa5u8, 100usize), (pb, 0x5a, 101)])
    {
        assert_eq!(w.status, WcStatus::Success, "{w:?}");
        assert_eq!(w.opcode, WcOpcode::Recv);
        assert_eq!(w.byte_len as usize, n);
        // The same allocation, not a copy, at its full length.
        let buf = w.c.buffer.as_ref().unwrap();
        assert_eq!(
            buf.as_ptr(),
            posted,
            "the completion holds the posted allocation"
        );
        assert_eq!(buf.len(), LEN, "handed back at its full length");
        assert_eq!(&buf[..n], &vec![(n - 99) as u8; n][..], "the Send's octets");
        assert!(buf[n..].iter().all(|&x| x == fill), "the rest untouched");
    }
    let back = got[0].c.buffer.take().unwrap();

    // Reposted as it came back: it takes the third Send.
    qp.post_recv_buffer(3, back).unwrap();
    go.send(()).unwrap();
    let mut third = wait(&cq, 1);
    let w = &mut third[0];
    assert_eq!((w.wr_id, w.status, w.byte_len), (3, WcStatus::Success, 102));
    let buf = w.c.buffer.take().unwrap();
    assert_eq!(
        buf.as_ptr(),
        pa,
        "reposted, received into, handed back again"
    );
    assert_eq!(&buf[..102], &[3u8; 102][..]);
    drop(client.join().unwrap());
}
