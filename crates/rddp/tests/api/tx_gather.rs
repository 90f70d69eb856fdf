//! Several FPDUs in one `sendmsg` (docs/data-path.md): over a real MPA/TCP queue
//! pair (CRC on), 16 Sends of 64 octets posted one by one take 16 `sendmsg`
//! calls (each is written as it is posted, the socket having room), and the
//! same 16 posted as one list (`QueuePair::post_list`) take one: their FPDUs
//! are gathered. Every Send arrives, in order. One test in this binary, so no
//! other queue pair moves the process-wide counter.

use crate::common;

use common::wait;
use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue, Device, PostWr, QueuePairBuilder, SendFlags, WcStatus};
use rddp_mpa::MpaOptions;

const N: usize = 16;

fn opts() -> MpaOptions {
    MpaOptions {
        crc: true,
        ..MpaOptions::default()
    }
}

#[test]
fn a_posted_list_leaves_in_one_sendmsg() {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", opts()).unwrap();
    let addr = listener.local_addr().unwrap();
    let spd = common::pd(&dev, "server");
    let (go, ready) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let cq = CompletionQueue::new(256);
        let mut prepared = QueuePairBuilder::new(&spd, &cq, &cq)
            .max_recv_wr(2 * N as u32)
            .build()
            .unwrap();
        for i in 0..2 * N {
            prepared.post_recv(i as u64, 64).unwrap();
        }
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        // The responder's first FPDU (RFC 5044 §7.1.2: the initiator's gate): a Send
        // the client receives before it measures.
        qp.post_send_inline(0, b"ready", SendFlags::default())
            .unwrap();
        let mut got = Vec::new();
        while got.len() < 2 * N {
            for w in wait(&cq, 1) {
                if w.opcode == rddp::WcOpcode::Recv {
                    assert_eq!(w.status, WcStatus::Success, "{w:?}");
                    got.push(w.buffer.clone().unwrap()[..w.byte_len as usize].to_vec());
                }
            }
        }
        ready.recv().unwrap();
        got
    });

    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(256);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(2 * N as u32)
        .build()
        .unwrap();
    prepared.post_recv(100, 64).unwrap();
    let qp = prepared.connect_mpa(addr, opts()).unwrap();
    assert_eq!(wait(&cq, 1)[0].wr_id, 100, "the server's first Send");
    let msgs: Vec<Vec<u8>> = (0..2 * N).map(|i| vec![i as u8; 64]).collect();
    // One region (a gathered sendmsg holds one region's lock: a batch stops
    // at another region's lease), each Send from its own offset.
    let mr = pd.register(msgs.concat(), Access::NONE).unwrap();
    let at = |i: usize| (i * 64) as u64;

    // One by one: each is written as it is posted.
    let before = qp.stats().llp_writes;
    for i in 0..N {
        qp.post_send(i as u64, &mr, at(i), 64, SendFlags::default())
            .unwrap();
    }
    let one_by_one = qp.stats().llp_writes - before;
    for w in wait(&cq, N) {
        assert_eq!(w.status, WcStatus::Success, "{w:?}");
    }

    // As one list: gathered.
    let list: Vec<PostWr<'_>> = (N..2 * N)
        .map(|i| PostWr::Send {
            wr_id: i as u64,
            mr: &mr,
            offset: at(i),
            len: 64,
            flags: SendFlags::default(),
        })
        .collect();
    let before = qp.stats().llp_writes;
    qp.post_list(&list).unwrap();
    let listed = qp.stats().llp_writes - before;
    let done = wait(&cq, N);
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?}"
    );
    let mut ids: Vec<u64> = done.iter().map(|w| w.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (N as u64..2 * N as u64).collect::<Vec<_>>());

    go.send(()).unwrap();
    let got = server.join().unwrap();
    assert!(got == msgs, "every Send arrives, in order");
    assert_eq!(one_by_one, N as u64, "posted one by one: one sendmsg each");
    assert_eq!(listed, 1, "posted as a list: {N} FPDUs in one sendmsg");
    drop(qp);
}
