//! No completion is ever lost or invented (docs/data-path.md): a queue slot counts
//! until its completion is taken from the CQ, the RFC 6581 Read RTR stays
//! internal, every posted receive comes back exactly once, and a failed attach
//! returns what it was charged.

use crate::common;

use common::{terminate_sent, wait};
use rddp::transport::{
    Connection, Inbound, Llp, LlpInfo, SegmentReader, SegmentWriter, memory_pair,
};
use rddp::{
    Access, AsyncEvent, BufferOrdering, CompletionQueue, Device, ProtectionDomain, QueuePair,
    QueuePairBuilder, Quota, SendFlags, SharedReceiveQueue, SrqMode, WcOpcode, WcStatus,
    WorkCompletion,
};
use rddp_proto::ddp::OutSegment;
use rddp_wire::rdmap::qn;
use rddp_wire::{Opcode, RdmapControl, UntaggedHeader};
use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

/// A client queue pair (CQ of 64) on a new consumer, over `conn`.
fn client(dev: &Device, conn: Connection) -> (ProtectionDomain, CompletionQueue, QueuePair) {
    common::endpoint(dev, "client", 64, conn)
}

/// `client` RDMA-Reads 1 octet of `region` (a region of the peer): once it
/// completes, the peer has handled everything `client` sent before (one stream,
/// in order), without the peer's ULP polling anything.
fn sync_through_read(
    pd: &ProtectionDomain,
    cq: &CompletionQueue,
    qp: &QueuePair,
    remote: rddp::RemoteBuf,
) {
    let sink = pd.register(vec![0; 1], Access::REMOTE_WRITE).unwrap();
    qp.post_read(900, &sink, 0, 1, remote, 0).unwrap();
    let got = wait(cq, 1);
    assert_eq!((got[0].wr_id, got[0].status), (900, WcStatus::Success));
}

/// The first `Closed` event of `qp` within 5 s: whether it was graceful.
fn closed(qp: &QueuePair) -> Option<bool> {
    common::poll_event(qp, |e| match e {
        AsyncEvent::Closed { graceful } => Some(*graceful),
        _ => None,
    })
}

/// `client` sends one inline Send (`m`) for each of `ids`, waits for their
/// completions, then syncs through a Read of `region` of the peer: the peer has
/// handled every Send.
fn deliver_sends(
    (pd, cq, qp): (&ProtectionDomain, &CompletionQueue, &QueuePair),
    ids: std::ops::Range<u64>,
    region: rddp::RemoteBuf,
) {
    let n = ids.end.saturating_sub(ids.start) as usize;
    for i in ids {
        qp.post_send_inline(i, b"m", SendFlags::default()).unwrap();
    }
    wait(cq, n);
    sync_through_read(pd, cq, qp, region);
}

/// Completions that come within 100 ms of the last expected one: none may.
/// A negative check, kept because no later sign can stand for "nothing more
/// comes" where it is used (the queue pair is gone or its peer died, so no
/// later work can fence the CQ); a late extra completion shows here when it
/// comes this soon, and is never mistaken for a pass otherwise.
fn no_more(cq: &CompletionQueue) -> Vec<WorkCompletion> {
    std::thread::sleep(Duration::from_millis(100));
    cq.poll(64)
}

/// A queue pair with a send queue of 16 on a new memory pair: what attach
/// returned, and the peer's end (kept, so that the pair stays up).
fn attach_send_queue_of_16(
    pd: &ProtectionDomain,
    send_cq: &CompletionQueue,
    recv_cq: &CompletionQueue,
) -> (Result<QueuePair, rddp::Error>, Connection) {
    let (c, peer) = memory_pair(256);
    let qp = QueuePairBuilder::new(pd, send_cq, recv_cq)
        .max_send_wr(16)
        .build()
        .unwrap()
        .attach(c);
    (qp, peer)
}

/// `attach_send_queue_of_16`, then 16 inline Sends nobody polls: inline Sends
/// complete as they leave, so their 16 completions wait unpolled (returns once
/// all 16 are in `send_cq`).
fn sixteen_unpolled_sends(
    pd: &ProtectionDomain,
    send_cq: &CompletionQueue,
    recv_cq: &CompletionQueue,
) -> (QueuePair, Connection) {
    let (qp, peer) = attach_send_queue_of_16(pd, send_cq, recv_cq);
    let qp = qp.unwrap();
    for i in 0..16 {
        qp.post_send_inline(i, b"x", SendFlags::default()).unwrap();
    }
    common::wait_until("16 Send completions queued", || send_cq.len() == 16);
    (qp, peer)
}

/// A CQ of 16, a send queue of 16, 17 inline Sends nobody
/// polls. The 17th must be refused at posting, naming the limit, not completed
/// into a full CQ.
#[test]
fn a_send_slot_counts_until_its_completion_is_polled() {
    let dev = Device::new();
    let pd = common::pd(&dev, "x");
    let send_cq = CompletionQueue::new(16);
    let recv_cq = CompletionQueue::new(16);
    let (qp, _peer) = sixteen_unpolled_sends(&pd, &send_cq, &recv_cq);
    let err = qp
        .post_send_inline(16, b"x", SendFlags::default())
        .expect_err("a 17th Send while 16 completions are unpolled");
    assert!(
        matches!(err, rddp::Error::SendQueueFull { depth: 16 }),
        "{err}"
    );
    assert!(err.to_string().contains("16"), "{err}");
    // Taking one completion frees one slot.
    let first = send_cq.poll(1);
    assert_eq!(first[0].wr_id, 0);
    qp.post_send_inline(16, b"x", SendFlags::default()).unwrap();
    let rest = wait(&send_cq, 16);
    let ids: Vec<u64> = rest.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (1..17).collect::<Vec<_>>());
    assert!(rest.iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(send_cq.overflows(), 0);
}

/// A receive slot also counts until its completion is polled: four receives
/// delivered into a CQ of 4 and not polled leave no room for a fifth.
#[test]
fn a_receive_slot_counts_until_its_completion_is_polled() {
    let dev = Device::new();
    let (ca, cb) = memory_pair(256);
    let (apd, acq, a) = client(&dev, ca);
    let pd = common::pd(&dev, "server");
    let (send_cq, recv_cq) = (CompletionQueue::new(16), CompletionQueue::new(4));
    let b = QueuePairBuilder::new(&pd, &send_cq, &recv_cq)
        .max_recv_wr(4)
        .build()
        .unwrap()
        .attach(cb)
        .unwrap();
    let region = pd.register(vec![0; 1], Access::REMOTE_READ).unwrap();
    for i in 0..4 {
        b.post_recv(i, 8).unwrap();
    }
    deliver_sends((&apd, &acq, &a), 0..4, region.remote());
    let err = b
        .post_recv(4, 8)
        .expect_err("a 5th receive while 4 are unpolled");
    assert!(err.to_string().contains('4'), "{err}");
    // The Read shows the Sends handled, not that their completions are
    // queued yet: wait for the first.
    assert_eq!(wait(&recv_cq, 1)[0].wr_id, 0);
    b.post_recv(4, 8).unwrap();
    a.post_send_inline(4, b"m", SendFlags::default()).unwrap();
    let got = wait(&recv_cq, 4);
    assert_eq!(
        got.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert_eq!(recv_cq.overflows(), 0);
}

/// A shared receive queue of 2 buffers: held plus free plus completed-unpolled
/// never exceed the 2 its CQ reserved.
#[test]
fn a_shared_pool_buffer_counts_until_its_completion_is_polled() {
    let dev = Device::new();
    let (ca, cb) = memory_pair(256);
    let (apd, acq, a) = client(&dev, ca);
    let pd = common::pd(&dev, "server");
    let srq = SharedReceiveQueue::new(
        &pd,
        SrqMode::Shared { soft_limit: 2 },
        BufferOrdering::Arrival,
        2,
    );
    let (send_cq, recv_cq) = (CompletionQueue::new(16), CompletionQueue::new(2));
    let b = QueuePairBuilder::new(&pd, &send_cq, &recv_cq)
        .srq(&srq)
        .build()
        .unwrap()
        .attach(cb)
        .unwrap();
    assert_eq!(recv_cq.reserved(), 2);
    let region = pd.register(vec![0; 1], Access::REMOTE_READ).unwrap();
    srq.post_recv(0, 8).unwrap();
    srq.post_recv(1, 8).unwrap();
    deliver_sends((&apd, &acq, &a), 0..2, region.remote());
    assert_eq!(srq.free(), 0);
    let err = srq
        .post_recv(2, 8)
        .expect_err("a 3rd buffer while 2 completions are unpolled");
    assert!(err.to_string().contains('2'), "{err}");
    // The Read shows the Sends handled, not that their completions are
    // queued yet: wait for the first.
    assert_eq!(wait(&recv_cq, 1)[0].wr_id, 0);
    srq.post_recv(2, 8).unwrap();
    a.post_send_inline(2, b"m", SendFlags::default()).unwrap();
    let got = wait(&recv_cq, 2);
    assert_eq!(got.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(recv_cq.overflows(), 0);
    drop(b);
}

/// Strategy 3: a credit counts until the completion of the message it enabled is
/// polled, so per-stream credits keep a pooled CQ safe.
#[test]
fn a_credit_counts_until_its_completion_is_polled() {
    let dev = Device::new();
    let (ca, cb) = memory_pair(256);
    let (apd, acq, a) = client(&dev, ca);
    let pd = common::pd(&dev, "server");
    let srq = SharedReceiveQueue::new(&pd, SrqMode::Credits, BufferOrdering::Arrival, 8);
    let (send_cq, recv_cq) = (CompletionQueue::new(16), CompletionQueue::new(2));
    let b = QueuePairBuilder::new(&pd, &send_cq, &recv_cq)
        .srq(&srq)
        .max_recv_wr(2)
        .build()
        .unwrap()
        .attach(cb)
        .unwrap();
    let region = pd.register(vec![0; 1], Access::REMOTE_READ).unwrap();
    for i in 0..8 {
        srq.post_recv(i, 8).unwrap();
    }
    b.grant_credits(2).unwrap();
    deliver_sends((&apd, &acq, &a), 0..2, region.remote());
    let err = b
        .grant_credits(1)
        .expect_err("a 3rd credit while 2 completions are unpolled");
    assert!(err.to_string().contains('2'), "{err}");
    // Taken only to free its slot: the completion itself is not looked at.
    let _ = recv_cq.poll(1);
    b.grant_credits(1).unwrap();
    a.post_send_inline(2, b"m", SendFlags::default()).unwrap();
    assert_eq!(wait(&recv_cq, 2).len(), 2);
    assert_eq!(recv_cq.overflows(), 0);
}

/// A queue pair dropped with completions unpolled keeps its share of the CQ
/// until they are taken: another queue pair cannot reserve it meanwhile.
#[test]
fn a_dropped_queue_pair_keeps_its_cq_share_until_its_completions_are_polled() {
    let dev = Device::new();
    let pd = common::pd(&dev, "x");
    let send_cq = CompletionQueue::new(16);
    let recv_cq = CompletionQueue::new(64);
    let (qp1, _p1) = sixteen_unpolled_sends(&pd, &send_cq, &recv_cq);
    drop(qp1);
    let (refused, _p2) = attach_send_queue_of_16(&pd, &send_cq, &recv_cq);
    assert!(
        matches!(refused, Err(rddp::Error::Cq(_))),
        "16 completions still wait in the CQ of 16"
    );
    assert_eq!(wait(&send_cq, 16).len(), 16);
    assert_eq!(send_cq.reserved(), 0);
    let (qp3, _p3) = attach_send_queue_of_16(&pd, &send_cq, &recv_cq);
    qp3.unwrap();
}

/// RFC 6581: the Read RTR is the LLP's business. An application Read that fails
/// at once while the RTR is outstanding completes with its own error, and the
/// RTR's own completion never reaches the CQ.
#[test]
fn the_read_rtr_completion_is_never_the_applications() {
    let dev = Device::new();
    let (mut ca, cb) = memory_pair(256);
    ca.send_read_rtr = true;
    let (pd, cq, a) = client(&dev, ca);
    // Not remotely writable: a local protection error, before the RTR's answer
    // can arrive (the peer is not even attached yet).
    let bad_sink = pd.register(vec![0; 8], Access::NONE).unwrap();
    let remote = rddp::RemoteBuf {
        stag: 1,
        to: 0,
        len: 8,
    };
    a.post_read(5, &bad_sink, 0, 8, remote, 0).unwrap();
    let first = wait(&cq, 1);
    assert_eq!(
        (first[0].wr_id, first[0].opcode, first[0].status),
        (5, WcOpcode::RdmaRead, WcStatus::LocalProtection)
    );
    // Now the responder answers the RTR; a real Read after it completes in order.
    let (bpd, _bcq, _b) = client(&dev, cb);
    let region = bpd.register(vec![7; 8], Access::REMOTE_READ).unwrap();
    let sink = pd.register(vec![0; 8], Access::REMOTE_WRITE).unwrap();
    a.post_read(6, &sink, 0, 8, region.remote(), 0).unwrap();
    let got = wait(&cq, 1);
    assert_eq!(
        (got[0].wr_id, got[0].status),
        (6, WcStatus::Success),
        "{got:?}"
    );
    assert_eq!(no_more(&cq), vec![]);
}

/// An LLP driven by the test: it hands up the segments the test gives it, with
/// the sender positions the test chooses (SCTP may deliver out of order), and
/// says the peer died when the test drops its sender.
struct Scripted {
    rx: Receiver<(u64, Vec<u8>)>,
}

impl SegmentReader for Scripted {
    fn read(&mut self) -> std::io::Result<Inbound> {
        match self.rx.recv() {
            Ok((seq, bytes)) => Ok(Inbound::Segment { seq, bytes }),
            Err(_) => Err(std::io::ErrorKind::ConnectionReset.into()),
        }
    }
}

struct Sink;

impl SegmentWriter for Sink {
    fn write_segment(&mut self, _: &OutSegment) -> std::io::Result<()> {
        Ok(())
    }
    fn close(&mut self, _: bool) {}
}

fn scripted() -> (Connection, Sender<(u64, Vec<u8>)>) {
    let (tx, rx) = channel();
    let conn = Connection {
        llp: Llp::Threads {
            reader: Box::new(Scripted { rx }),
            writer: Box::new(Sink),
            abort: Box::new(|| {}),
        },
        mulpdu: 1024,
        ird: 16,
        ord: 16,
        ird_ord_negotiated: true,
        peer_private_data: Vec::new(),
        info: LlpInfo::default(),
        send_read_rtr: false,
    };
    (conn, tx)
}

fn send_segment(op: Opcode, inval: u32, msn: u32, payload: &[u8]) -> Vec<u8> {
    let s = inval.to_be_bytes();
    let rsvd = [RdmapControl::new(op).0, s[0], s[1], s[2], s[3]];
    let mut seg = UntaggedHeader::new(true, rsvd, qn::SEND, msn, 0)
        .to_bytes()
        .to_vec();
    seg.extend_from_slice(payload);
    seg
}

/// MSN 2 (a Send) arrives first, out of order; MSN 1, a Send with Invalidate of
/// an STag that cannot be invalidated, completes both and is a fatal error: `qp`
/// sends a Terminate. Then the peer dies.
fn fatal_batch_then_peer_dies(qp: &QueuePair, peer: Sender<(u64, Vec<u8>)>) {
    peer.send((1, send_segment(Opcode::SEND, 0, 2, b"second")))
        .unwrap();
    peer.send((
        0,
        send_segment(Opcode::SEND_INVALIDATE, 0x0bad_0001, 1, b"first"),
    ))
    .unwrap();
    assert!(terminate_sent(qp).is_some());
    drop(peer);
}

/// Every completion of each wr_id, in order.
fn by_id(got: &[WorkCompletion]) -> BTreeMap<u64, Vec<WcStatus>> {
    let mut m: BTreeMap<u64, Vec<WcStatus>> = BTreeMap::new();
    for w in got {
        m.entry(w.wr_id).or_default().push(w.status);
    }
    m
}

/// Two messages delivered by one segment (MSN 2 arrived first, out of order;
/// MSN 1 completes both): MSN 1 is a Send with Invalidate of an STag that cannot
/// be invalidated, a fatal error. MSN 2's receive, already filled, and an unused
/// one still come back, each exactly once.
#[test]
fn a_fatal_error_mid_batch_returns_every_receive_once() {
    let dev = Device::new();
    let consumer = dev.consumer("x", Quota::default()).unwrap();
    let pd = consumer.alloc_pd().unwrap();
    let cq = CompletionQueue::new(64);
    let (conn, peer) = scripted();
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .build()
        .unwrap()
        .attach(conn)
        .unwrap();
    for i in 1..=3 {
        qp.post_recv(i, 16).unwrap();
    }
    fatal_batch_then_peer_dies(&qp, peer);
    let got = wait(&cq, 3);
    let m = by_id(&got);
    assert_eq!(m[&1], vec![WcStatus::LocalProtection], "{got:?}");
    assert_eq!(m.get(&2).map(Vec::len), Some(1), "{got:?}");
    assert_eq!(m[&3], vec![WcStatus::Flushed], "{got:?}");
    drop(qp);
    assert_eq!(no_more(&cq), vec![]);
    assert_eq!(consumer.usage().receive_buffers, 0);
}

/// The peer dies while receives are posted and others completed unpolled:
/// every receive the queue pair accepted comes back exactly once.
#[test]
fn when_the_peer_dies_every_accepted_receive_comes_back_once() {
    let dev = Device::new();
    let (ca, cb) = memory_pair(256);
    let (apd, acq, a) = client(&dev, ca);
    let consumer = dev.consumer("server", Quota::default()).unwrap();
    let pd = consumer.alloc_pd().unwrap();
    let (send_cq, recv_cq) = (CompletionQueue::new(16), CompletionQueue::new(4));
    let b = QueuePairBuilder::new(&pd, &send_cq, &recv_cq)
        .max_recv_wr(4)
        .build()
        .unwrap()
        .attach(cb)
        .unwrap();
    let region = pd.register(vec![0; 1], Access::REMOTE_READ).unwrap();
    let mut accepted = Vec::new();
    for i in 0..4 {
        b.post_recv(i, 8).unwrap();
        accepted.push(i);
    }
    deliver_sends((&apd, &acq, &a), 0..2, region.remote());
    for i in 4..8 {
        if b.post_recv(i, 8).is_ok() {
            accepted.push(i);
        }
    }
    // A dies: an abortive close of its LLP. Nothing is polled until B has seen it.
    drop(a);
    assert_eq!(closed(&b), Some(false));
    // Every accepted receive comes back (the flushes may follow the event).
    let mut got = wait(&recv_cq, accepted.len());
    got.extend(no_more(&recv_cq));
    let m = by_id(&got);
    for id in &accepted {
        assert_eq!(m.get(id).map(Vec::len), Some(1), "wr {id}: {got:?}");
    }
    assert_eq!(got.len(), accepted.len(), "{got:?}");
    assert_eq!(recv_cq.overflows(), 0);
    drop(b);
    assert_eq!(consumer.usage().receive_buffers, 0);
}

/// attach() refused (more early receives than the receive queue holds): every
/// quota it was charged comes back, the early receives' included.
#[test]
fn a_failed_attach_returns_every_quota_it_was_charged() {
    let dev = Device::new();
    let consumer = dev.consumer("x", Quota::default()).unwrap();
    let pd = consumer.alloc_pd().unwrap();
    let cq = CompletionQueue::new(64);
    let (c, _peer) = memory_pair(256);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_recv_wr(2)
        .build()
        .unwrap();
    for i in 0..3 {
        prepared.post_recv(i, 8).unwrap();
    }
    assert_eq!(consumer.usage().receive_buffers, 3);
    assert!(prepared.attach(c).is_err());
    assert_eq!(consumer.usage(), rddp::Usage::default());
    assert_eq!(cq.reserved(), 0);
}

/// The same when early credits pass the credit limit.
#[test]
fn a_failed_attach_with_credits_returns_every_quota() {
    let dev = Device::new();
    let consumer = dev.consumer("x", Quota::default()).unwrap();
    let pd = consumer.alloc_pd().unwrap();
    let srq = SharedReceiveQueue::new(&pd, SrqMode::Credits, BufferOrdering::Arrival, 8);
    let cq = CompletionQueue::new(64);
    let (c, _peer) = memory_pair(256);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq)
        .srq(&srq)
        .max_recv_wr(2)
        .build()
        .unwrap();
    prepared.post_recv(0, 8).unwrap();
    prepared.grant_credits(3).unwrap();
    assert!(prepared.attach(c).is_err());
    assert_eq!(consumer.usage(), rddp::Usage::default());
    assert_eq!(cq.reserved(), 0);
}

/// The same batch on a queue pair drawing from a shared receive queue: both
/// buffers the two messages took come back once, and once their completions are
/// polled the pool takes its full size again (no buffer and no slot stranded).
#[test]
fn a_fatal_error_mid_batch_returns_every_shared_buffer_once() {
    let dev = Device::new();
    let consumer = dev.consumer("x", Quota::default()).unwrap();
    let pd = consumer.alloc_pd().unwrap();
    let srq = SharedReceiveQueue::new(
        &pd,
        SrqMode::Shared { soft_limit: 4 },
        BufferOrdering::Arrival,
        3,
    );
    let cq = CompletionQueue::new(64);
    let (conn, peer) = scripted();
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .srq(&srq)
        .build()
        .unwrap()
        .attach(conn)
        .unwrap();
    for i in 1..=3 {
        srq.post_recv(i, 16).unwrap();
    }
    fatal_batch_then_peer_dies(&qp, peer);
    let got = wait(&cq, 2);
    let m = by_id(&got);
    assert_eq!(m.values().map(Vec::len).sum::<usize>(), 2, "{got:?}");
    assert!(m.values().all(|v| v.len() == 1), "{got:?}");
    assert_eq!(no_more(&cq), vec![]);
    // The third buffer is still free in the pool; the two polled ones are back.
    assert_eq!(srq.free(), 1);
    srq.post_recv(4, 16).unwrap();
    srq.post_recv(5, 16).unwrap();
    assert!(srq.post_recv(6, 16).is_err(), "the pool holds 3");
    drop(qp);
    drop(srq);
    assert_eq!(consumer.usage().receive_buffers, 0);
}
