//! Queue pairs over the in-memory LLP: every operation, errors, flush, quotas.

use crate::common;

use common::{terminate_received, terminate_sent, wait};
use rddp::transport::memory_pair;
use rddp::{
    Access, CompletionQueue, Device, ProtectionDomain, QueuePair, QueuePairBuilder, Quota,
    SendFlags, TerminateCode, WcOpcode, WcStatus,
};

struct Side {
    pd: ProtectionDomain,
    cq: CompletionQueue,
    qp: QueuePair,
}

fn pair_with(quota: Quota) -> (Side, Side) {
    let dev = Device::new();
    let (ca, cb) = memory_pair(256);
    let side = |name: &str, conn| {
        let pd = dev.consumer(name, quota).unwrap().alloc_pd().unwrap();
        let cq = CompletionQueue::new(64);
        let qp = QueuePairBuilder::new(&pd, &cq, &cq)
            .build()
            .unwrap()
            .attach(conn)
            .unwrap();
        Side { pd, cq, qp }
    };
    (side("a", ca), side("b", cb))
}

fn pair() -> (Side, Side) {
    pair_with(Quota::default())
}

#[test]
fn write_read_send_recv() {
    let (a, b) = pair();
    let target =
        b.pd.register(vec![0; 1000], Access::REMOTE_WRITE | Access::REMOTE_READ)
            .unwrap();
    let src =
        a.pd.register((0..1000u32).map(|i| i as u8).collect(), Access::NONE)
            .unwrap();
    let back = a.pd.register(vec![0; 1000], Access::REMOTE_WRITE).unwrap();
    b.qp.post_recv(7, 64).unwrap();
    a.qp.post_write(1, &src, 0, 1000, target.remote(), 0)
        .unwrap();
    a.qp.post_read(2, &back, 0, 1000, target.remote(), 0)
        .unwrap();
    a.qp.post_send(
        3,
        &src,
        10,
        5,
        SendFlags {
            solicited: true,
            ..Default::default()
        },
    )
    .unwrap();
    let c = wait(&a.cq, 3);
    assert!(c.iter().all(|c| c.status == WcStatus::Success), "{c:?}");
    assert_eq!(back.read(0, 1000).unwrap(), src.read(0, 1000).unwrap());
    assert_eq!(target.read(0, 1000).unwrap(), src.read(0, 1000).unwrap());
    let r = wait(&b.cq, 1);
    assert_eq!(
        (r[0].wr_id, r[0].opcode, r[0].byte_len, r[0].solicited),
        (7, WcOpcode::Recv, 5, true)
    );
    assert_eq!(
        &r[0].buffer.as_ref().unwrap()[..5],
        &src.read(10, 5).unwrap()[..]
    );
}

#[test]
fn send_with_invalidate_then_write_fails_as_invalid_stag() {
    let (a, b) = pair();
    // Remote invalidation is a right of its own (RFC 5042 §5), off unless asked.
    let access = Access::REMOTE_WRITE | Access::REMOTE_INVALIDATE;
    let target = b.pd.register(vec![0; 16], access).unwrap();
    let src = a.pd.register(b"payload".to_vec(), Access::NONE).unwrap();
    b.qp.post_recv(1, 16).unwrap();
    let inv = SendFlags {
        invalidate: Some(target.stag()),
        ..Default::default()
    };
    a.qp.post_send(1, &src, 0, 7, inv).unwrap();
    let r = wait(&b.cq, 1);
    assert_eq!(r[0].invalidated_stag, Some(target.stag()));
    assert!(!target.is_valid());
    a.qp.post_write(2, &src, 0, 7, target.remote(), 0).unwrap();
    // B refuses with Invalid STag and says so to A; A learns it as an async event.
    assert_eq!(
        terminate_received(&a.qp),
        Some(TerminateCode::DDP_INVALID_STAG)
    );
    assert_eq!(target.read(0, 7).unwrap(), vec![0; 7]);
}

#[test]
fn work_posted_after_an_error_completes_as_flushed() {
    let (a, b) = pair();
    let small = b.pd.register(vec![0; 4], Access::REMOTE_WRITE).unwrap();
    let src = a.pd.register(vec![9; 64], Access::NONE).unwrap();
    a.qp.post_write(1, &src, 0, 64, small.remote(), 0).unwrap();
    wait(&a.cq, 1);
    // Wait for B's Terminate to reach A.
    assert!(terminate_received(&a.qp).is_some());
    a.qp.post_send(2, &src, 0, 1, SendFlags::default()).unwrap();
    a.qp.post_recv(3, 8).unwrap();
    let c = wait(&a.cq, 2);
    assert!(c.iter().all(|c| c.status == WcStatus::Flushed), "{c:?}");
    assert_eq!(small.read(0, 4).unwrap(), vec![0; 4]);
    drop(b);
}

#[test]
fn receive_buffer_and_read_quotas() {
    let quota = Quota {
        receive_buffers: 2,
        outstanding_reads: 1,
        ..Quota::default()
    };
    let (a, b) = pair_with(quota);
    b.qp.post_recv(1, 8).unwrap();
    b.qp.post_recv(2, 8).unwrap();
    assert!(matches!(
        b.qp.post_recv(3, 8),
        Err(rddp::Error::Quota { .. })
    ));
    let src = a.pd.register(vec![1; 8], Access::NONE).unwrap();
    a.qp.post_send(1, &src, 0, 8, SendFlags::default()).unwrap();
    wait(&b.cq, 1);
    // The completed receive returned its quota.
    b.qp.post_recv(3, 8).unwrap();
    let target = b.pd.register(vec![0; 8], Access::REMOTE_READ).unwrap();
    let sink = a.pd.register(vec![0; 8], Access::REMOTE_WRITE).unwrap();
    a.qp.post_read(2, &sink, 0, 8, target.remote(), 0).unwrap();
    // Whether or not the first Read is back yet, the quota never lets two be charged
    // at once: either the second post fails, or the first had already completed.
    match a.qp.post_read(3, &sink, 0, 8, target.remote(), 0) {
        Err(rddp::Error::Quota { .. }) => {}
        Ok(()) => assert!(a.cq.poll(8).iter().any(|c| c.wr_id == 2)),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_region_of_another_pd_is_refused_locally() {
    let (a, b) = pair();
    let foreign = b.pd.register(vec![0; 8], Access::NONE).unwrap();
    assert!(matches!(
        a.qp.post_send(1, &foreign, 0, 8, SendFlags::default()),
        Err(rddp::Error::WrongPd)
    ));
    let src = a.pd.register(vec![0; 8], Access::NONE).unwrap();
    assert!(matches!(
        a.qp.post_send(1, &src, 4, 8, SendFlags::default()),
        Err(rddp::Error::OutOfRange { .. })
    ));
}

/// PD numbers are per device: the first PD of another device has the same
/// number as `a`'s, and its region is still another PD's.
#[test]
fn a_region_of_another_devices_pd_with_the_same_number_is_refused() {
    let (a, _b) = pair();
    let other = Device::new()
        .consumer("other", Quota::default())
        .unwrap()
        .alloc_pd()
        .unwrap();
    assert_eq!(other.id(), a.pd.id(), "both devices' first PD");
    assert!(!other.same(&a.pd));
    let foreign = other.register(vec![0; 64], Access::NONE).unwrap();
    assert!(matches!(
        a.qp.post_send(1, &foreign, 0, 8, SendFlags::default()),
        Err(rddp::Error::WrongPd)
    ));
    assert!(matches!(
        a.qp.post_recv_mr(2, &foreign, 0, 64),
        Err(rddp::Error::WrongPd)
    ));
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn completion_queue_async_wait() {
    let (a, b) = pair();
    let src = a.pd.register(vec![5; 8], Access::NONE).unwrap();
    b.qp.post_recv(1, 8).unwrap();
    let waiter = {
        let cq = b.cq.clone();
        tokio::spawn(async move { cq.wait_async(4).await })
    };
    a.qp.post_send(9, &src, 0, 8, SendFlags::default()).unwrap();
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got[0].wr_id, 1);
}

#[test]
fn a_cq_too_small_for_its_queue_pairs_is_refused() {
    let dev = Device::new();
    let pd = common::pd(&dev, "x");
    let cq = CompletionQueue::new(40);
    let (c1, _k1) = memory_pair(256);
    let (c2, _k2) = memory_pair(256);
    let qp1 = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(10)
        .max_recv_wr(10)
        .build()
        .unwrap()
        .attach(c1)
        .unwrap();
    assert_eq!(cq.reserved(), 20);
    let err = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(10)
        .max_recv_wr(11)
        .build()
        .unwrap()
        .attach(c2);
    assert!(
        matches!(err, Err(rddp::Error::Cq(_))),
        "the second QP would let the CQ overflow"
    );
    drop(qp1);
}

#[test]
fn the_send_queue_depth_is_enforced() {
    let dev = Device::new();
    let pd = common::pd(&dev, "x");
    let cq = CompletionQueue::new(64);
    // The peer end is never attached: nothing completes.
    let (c, _peer) = memory_pair(256);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(2)
        .build()
        .unwrap()
        .attach(c)
        .unwrap();
    let sink = pd.register(vec![0; 8], Access::REMOTE_WRITE).unwrap();
    let remote = rddp::RemoteBuf {
        stag: 1,
        to: 0,
        len: 8,
    };
    qp.post_read(1, &sink, 0, 8, remote, 0).unwrap();
    qp.post_read(2, &sink, 0, 8, remote, 0).unwrap();
    assert!(matches!(
        qp.post_read(3, &sink, 0, 8, remote, 0),
        Err(rddp::Error::SendQueueFull { depth: 2 })
    ));
}

#[test]
fn queue_pairs_share_a_receive_queue() {
    use rddp::{BufferOrdering, SharedReceiveQueue, SrqMode};
    let dev = Device::new();
    let pd = common::pd(&dev, "server");
    let client_pd = common::pd(&dev, "client");
    let srq = SharedReceiveQueue::new(
        &pd,
        SrqMode::Shared { soft_limit: 2 },
        BufferOrdering::Arrival,
        8,
    );
    let cq = CompletionQueue::new(64);
    let ccq = CompletionQueue::new(64);
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..2 {
        let (s, c) = memory_pair(256);
        servers.push(
            QueuePairBuilder::new(&pd, &cq, &cq)
                .srq(&srq)
                .build()
                .unwrap()
                .attach(s)
                .unwrap(),
        );
        clients.push(
            QueuePairBuilder::new(&client_pd, &ccq, &ccq)
                .build()
                .unwrap()
                .attach(c)
                .unwrap(),
        );
    }
    for id in 0..4 {
        srq.post_recv(id, 16).unwrap();
    }
    let src = client_pd
        .register(b"from client".to_vec(), Access::NONE)
        .unwrap();
    clients[0]
        .post_send(1, &src, 0, 11, SendFlags::default())
        .unwrap();
    clients[1]
        .post_send(2, &src, 0, 4, SendFlags::default())
        .unwrap();
    let got = wait(&cq, 2);
    let mut by_qp: Vec<(u32, u32)> = got.iter().map(|w| (w.qp_num, w.byte_len)).collect();
    by_qp.sort();
    let mut want = vec![(servers[0].qp_num(), 11), (servers[1].qp_num(), 4)];
    want.sort();
    assert_eq!(by_qp, want);
    assert_eq!(srq.free(), 2);
    // A QP of another PD cannot use this SRQ.
    assert!(matches!(
        QueuePairBuilder::new(&client_pd, &ccq, &ccq)
            .srq(&srq)
            .build(),
        Err(rddp::Error::SrqWrongPd)
    ));
}

#[test]
fn credits_mode_srq_only_accepts_granted_msns() {
    use rddp::{BufferOrdering, SharedReceiveQueue, SrqMode};
    let dev = Device::new();
    let pd = common::pd(&dev, "server");
    let cpd = common::pd(&dev, "client");
    let srq = SharedReceiveQueue::new(&pd, SrqMode::Credits, BufferOrdering::Arrival, 8);
    let (cq, ccq) = (CompletionQueue::new(64), CompletionQueue::new(64));
    let (s, c) = memory_pair(256);
    let server = QueuePairBuilder::new(&pd, &cq, &cq)
        .srq(&srq)
        .max_recv_wr(4)
        .build()
        .unwrap()
        .attach(s)
        .unwrap();
    let client = QueuePairBuilder::new(&cpd, &ccq, &ccq)
        .build()
        .unwrap()
        .attach(c)
        .unwrap();
    for id in 0..4 {
        srq.post_recv(id, 16).unwrap();
    }
    server.grant_credits(1).unwrap();
    let src = cpd.register(b"x".to_vec(), Access::NONE).unwrap();
    client
        .post_send(1, &src, 0, 1, SendFlags::default())
        .unwrap();
    assert_eq!(wait(&cq, 1)[0].status, WcStatus::Success);
    // A second Send without a credit: MSN 2 is outside the granted range.
    client
        .post_send(2, &src, 0, 1, SendFlags::default())
        .unwrap();
    assert_eq!(
        terminate_sent(&server),
        Some(TerminateCode::DDP_INVALID_MSN_RANGE)
    );
    let (c2, _k) = memory_pair(256);
    let plain = QueuePairBuilder::new(&cpd, &ccq, &ccq)
        .build()
        .unwrap()
        .attach(c2)
        .unwrap();
    assert!(matches!(
        plain.grant_credits(1),
        Err(rddp::Error::NotCredits)
    ));
}

#[test]
fn a_region_bound_to_one_queue_pair_refuses_the_others() {
    let dev = Device::new();
    let pd = common::pd(&dev, "server");
    let cpd = common::pd(&dev, "client");
    let (cq, ccq) = (CompletionQueue::new(64), CompletionQueue::new(64));
    let (s1, c1) = memory_pair(256);
    let (s2, c2) = memory_pair(256);
    let q1 = QueuePairBuilder::new(&pd, &cq, &cq)
        .build()
        .unwrap()
        .attach(s1)
        .unwrap();
    let _q2 = QueuePairBuilder::new(&pd, &cq, &cq)
        .build()
        .unwrap()
        .attach(s2)
        .unwrap();
    let k1 = QueuePairBuilder::new(&cpd, &ccq, &ccq)
        .build()
        .unwrap()
        .attach(c1)
        .unwrap();
    let k2 = QueuePairBuilder::new(&cpd, &ccq, &ccq)
        .build()
        .unwrap()
        .attach(c2)
        .unwrap();
    let bound = q1.register_bound(vec![0; 8], Access::REMOTE_WRITE).unwrap();
    let src = cpd.register(b"12345678".to_vec(), Access::NONE).unwrap();
    k1.post_write(1, &src, 0, 4, bound.remote(), 0).unwrap();
    k2.post_write(2, &src, 4, 4, bound.remote(), 4).unwrap();
    wait(&ccq, 2);
    assert_eq!(
        terminate_received(&k2),
        Some(TerminateCode::DDP_STAG_NOT_ASSOCIATED)
    );
    // A Write completes when the LLP took its last octet, not when the peer
    // placed it: wait (bounded) for k1's octets to land.
    let want = b"1234\0\0\0\0".to_vec();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while bound.read(0, 8).unwrap() != want && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(bound.read(0, 8).unwrap(), want);
}

/// After the peer closed gracefully, the queue pair is as a verbs queue pair in
/// the error state: every kind of work posted to it is taken and completes once,
/// as flushed (siw flushes such posts too). Before, a receive posted then was
/// refused with "the stream is closed" and a Send completed as LocalLength, so
/// a receiver that reposted after the peer's last message could fail with the
/// peer's close racing the repost (`rddp perf --perftest` against ib_send_bw).
#[test]
fn work_posted_after_the_peer_closed_completes_as_flushed() {
    let (a, b) = pair();
    a.qp.post_recv(1, 8).unwrap();
    b.qp.post_send_inline(1, b"bye", SendFlags::default())
        .unwrap();
    b.qp.disconnect();
    assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::Success);
    let graceful = common::poll_event(&a.qp, |e| match e {
        rddp::AsyncEvent::Closed { graceful } => Some(*graceful),
        _ => None,
    });
    assert_eq!(graceful, Some(true));
    let region = a.pd.register(vec![7; 64], Access::REMOTE_WRITE).unwrap();
    let remote =
        b.pd.register(vec![0; 64], Access::REMOTE_READ | Access::REMOTE_WRITE)
            .unwrap();
    a.qp.post_recv(2, 8).unwrap();
    a.qp.post_recv_mr(3, &region, 0, 16).unwrap();
    a.qp.post_send(4, &region, 0, 8, SendFlags::default())
        .unwrap();
    a.qp.post_write(5, &region, 0, 8, remote.remote(), 0)
        .unwrap();
    a.qp.post_read(6, &region, 8, 8, remote.remote(), 0)
        .unwrap();
    let mut done: Vec<_> = wait(&a.cq, 5)
        .into_iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    done.sort_by_key(|d| d.0);
    assert_eq!(
        done,
        (2..=6).map(|i| (i, WcStatus::Flushed)).collect::<Vec<_>>()
    );
    assert_eq!(region.read(0, 64).unwrap(), vec![7; 64]);
    assert_eq!(remote.read(0, 64).unwrap(), vec![0; 64]);
    // Each came back once, and its slot with it: the queues are free again.
    // The receives posted now are flushed at once, each completion queued
    // behind any earlier one: a second completion of 2 to 6 would come
    // first.
    for i in 0..4 {
        a.qp.post_recv(10 + i, 8).unwrap();
    }
    let again: Vec<_> = wait(&a.cq, 4).into_iter().map(|c| c.wr_id).collect();
    assert_eq!(again, vec![10, 11, 12, 13]);
    assert!(a.cq.poll(8).is_empty());
}
