//! Graceful disconnect over real loopback TCP with MPA (RFC 5041: "all in-progress
//! DDP Messages complete before the LLP Stream is closed; further ULP requests MUST
//! return error").

use crate::common;

use common::wait;
use rddp::transport::mpa::Listener;
use rddp::{
    Access, AsyncEvent, CompletionQueue, Device, QueuePair, QueuePairBuilder, RemoteBuf, SendFlags,
    WcOpcode, WcStatus,
};
use rddp_mpa::MpaOptions;
use std::time::{Duration, Instant};

/// The first `Closed` event of `qp` within 5 s: whether it was graceful.
fn closed(qp: &QueuePair) -> Option<bool> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        // The first event decides: a Terminate on either side is a failure.
        match qp.async_events().into_iter().next() {
            Some(AsyncEvent::Closed { graceful }) => return Some(graceful),
            Some(e) => panic!("no Terminate on a graceful disconnect: {e:?}"),
            None => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// ORD 1 holds back the second and third Reads, and a fence holds back the Send
/// behind them, when disconnect() is called. All of it finishes, in order, before
/// the LLP closes; nothing completes as LocalLength; work posted after the call
/// is refused.
#[test]
fn work_held_back_by_ord_or_a_fence_finishes_before_the_close() {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let pattern: Vec<u8> = (0..3072u32).map(|i| (i * 13 + i / 7) as u8).collect();
    let (advert_tx, advert_rx) = std::sync::mpsc::channel::<RemoteBuf>();
    let sdev = dev.clone();
    let served = pattern.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        prepared.post_recv(1, 64).unwrap();
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        let region = pd.register(served, Access::REMOTE_READ).unwrap();
        advert_tx.send(region.remote()).unwrap();
        let got = wait(&cq, 1);
        let recv = &got[0];
        assert_eq!(
            (recv.opcode, recv.status),
            (WcOpcode::Recv, WcStatus::Success)
        );
        let text = recv.buffer.as_ref().unwrap()[..recv.byte_len as usize].to_vec();
        // The client's graceful close reaches us after its fenced Send.
        let graceful = closed(&qp);
        (text, graceful)
    });

    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .ord(1)
        .build()
        .unwrap()
        .connect_mpa(addr, MpaOptions::default())
        .unwrap();
    assert_eq!(qp.ird_ord().1, 1, "ORD 1 is what holds the Reads back");
    let remote = advert_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let sinks: Vec<_> = (0..3)
        .map(|_| pd.register(vec![0; 1024], Access::REMOTE_WRITE).unwrap())
        .collect();
    for (i, sink) in sinks.iter().enumerate() {
        qp.post_read(i as u64 + 1, sink, 0, 1024, remote, 1024 * i as u64)
            .unwrap();
    }
    let fenced = SendFlags {
        fence: true,
        ..SendFlags::default()
    };
    qp.post_send_inline(4, b"fenced", fenced).unwrap();
    qp.disconnect();
    let late = qp.post_send_inline(5, b"late", SendFlags::default());
    let done = wait(&cq, 4);
    let ids: Vec<_> = done.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        ids,
        (1..=4).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>(),
        "{done:?}"
    );
    assert!(
        late.as_ref()
            .is_err_and(|e| e.to_string().contains("disconnecting")),
        "work posted after disconnect() is refused: {late:?}"
    );
    for (i, sink) in sinks.iter().enumerate() {
        assert_eq!(
            sink.read(0, 1024).unwrap(),
            pattern[1024 * i..1024 * (i + 1)]
        );
    }
    let (text, graceful) = server.join().unwrap();
    assert_eq!(text, b"fenced");
    assert_eq!(graceful, Some(true), "the server saw a graceful close");
    assert_eq!(closed(&qp), Some(true));
    assert!(cq.poll(8).is_empty());
}

/// The peer answers and closes at once, as perftest's server does after its
/// last exchange: the receiver that reposts its receive after taking the
/// answer is not refused, whether or not the close was read first (here it
/// was, deliberately). The repost completes as flushed, once.
#[test]
fn a_receive_reposted_after_the_peers_last_message_and_close_is_flushed() {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let qp = common::attach(&pd, &cq, listener.accept().unwrap());
        qp.post_send_inline(1, b"last answer", SendFlags::default())
            .unwrap();
        qp.disconnect();
        assert_eq!(wait(&cq, 1)[0].status, WcStatus::Success);
        // Gone once the client closed too.
        closed(&qp)
    });
    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_recv(1, 64).unwrap();
    let qp = prepared.connect_mpa(addr, MpaOptions::default()).unwrap();
    let got = wait(&cq, 1);
    assert_eq!(
        (got[0].opcode, got[0].status),
        (WcOpcode::Recv, WcStatus::Success)
    );
    assert_eq!(closed(&qp), Some(true), "the server's close was read");
    qp.post_recv(2, 64)
        .expect("a receive posted after the peer closed is taken");
    let flushed = wait(&cq, 1);
    assert_eq!(
        (flushed[0].wr_id, flushed[0].status),
        (2, WcStatus::Flushed)
    );
    drop(qp);
    assert_eq!(server.join().unwrap(), Some(true));
    assert!(cq.poll(8).is_empty());
}
