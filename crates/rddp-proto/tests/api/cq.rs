//! Completion queues refuse attachments whose completions they could not hold,
//! except where per-stream credits bound them (docs/receive-strategies.md); overflow is never silent.

use crate::common::*;
use rddp_proto::cq::{Completion, CompletionQueue, CompletionStatus, CqError, CqSource};
use rddp_proto::ddp::{
    BufferOrdering, BufferPool, DdpConfig, DdpStream, PoolConfig, RecvBuffer, RecvModel,
    SourceError, StreamError,
};
use rddp_proto::mem::{MemoryTable, StreamId};

fn buf(id: u64) -> RecvBuffer {
    RecvBuffer {
        id,
        data: vec![0; 8],
    }
}

fn stream_n(id: u32) -> DdpStream {
    DdpStream::new(StreamId(id), PD, DdpConfig::default()).unwrap()
}

#[test]
fn ordered_queues_reserve_their_depth() {
    let cq = CompletionQueue::new(10);
    let mut a = stream_n(1);
    let mut b = stream_n(2);
    a.bind_cq(0, &cq, 8).unwrap();
    assert_eq!(cq.reserved(), 8);
    assert!(matches!(
        b.bind_cq(0, &cq, 8),
        Err(CqError::WouldOverflow {
            need: 8,
            free: 2,
            ..
        })
    ));
    b.bind_cq(0, &cq, 2).unwrap();
    // The depth is enforced: the queue cannot outgrow its reservation.
    for id in 0..2 {
        b.post_recv(0, buf(id)).unwrap();
    }
    assert_eq!(
        b.post_recv(0, buf(9)),
        Err(StreamError::Source(SourceError::RecvQueueFull {
            qn: 0,
            limit: 2
        }))
    );
    drop(b);
    assert_eq!(
        cq.reserved(),
        8,
        "a dropped stream releases its reservation"
    );
}

#[test]
fn shared_pool_streams_reserve_the_whole_pool_once() {
    let pool = BufferPool::new(PoolConfig::shared(BufferOrdering::Arrival, 64, 8));
    let other = BufferPool::new(PoolConfig::shared(BufferOrdering::Arrival, 64, 8));
    // A CQ scoped to one stream of the SRQ must still hold the whole pool: that
    // stream's peer may complete every buffer.
    let small = CompletionQueue::new(32);
    let mut a = stream_n(1);
    a.set_recv_pool(0, &pool).unwrap();
    assert!(matches!(
        a.bind_cq(0, &small, 0),
        Err(CqError::WouldOverflow { need: 64, .. })
    ));
    // A CQ with the pool's scope pays for it once, however many streams attach.
    let cq = CompletionQueue::new(100);
    let mut streams: Vec<DdpStream> = (0..50)
        .map(|i| {
            let mut s = stream_n(i);
            s.set_recv_pool(0, &pool).unwrap();
            s.bind_cq(0, &cq, 0).unwrap();
            s
        })
        .collect();
    assert_eq!(cq.reserved(), 64);
    let mut c = stream_n(99);
    c.set_recv_pool(0, &other).unwrap();
    assert!(c.bind_cq(0, &cq, 0).is_err(), "a second pool does not fit");
    streams.clear();
    assert_eq!(cq.reserved(), 0);
}

#[test]
fn per_stream_credits_make_a_pooled_cq_safe() {
    // 1,024 buffers shared, but each stream may have at most 8 MSNs enabled: a CQ
    // of 100 can serve 12 streams without matching the pool's scope.
    let pool = BufferPool::new(PoolConfig::credits(BufferOrdering::Arrival, 1024));
    let cq = CompletionQueue::new(100);
    let mut streams: Vec<DdpStream> = (0..12)
        .map(|i| {
            let mut s = stream_n(i);
            s.set_recv_pool(0, &pool).unwrap();
            s.bind_cq(0, &cq, 8).unwrap();
            s
        })
        .collect();
    assert_eq!(cq.reserved(), 96);
    let mut s = stream_n(12);
    s.set_recv_pool(0, &pool).unwrap();
    assert!(s.bind_cq(0, &cq, 8).is_err());
    // The credit limit is hard: grants beyond it are refused.
    assert!(streams[0].grant_credits(0, 8));
    assert!(!streams[0].grant_credits(0, 1));
    assert_eq!(streams[0].sink().credits(0), 8);
}

#[test]
fn binding_refuses_a_queue_already_past_its_limit() {
    let cq = CompletionQueue::new(100);
    let mut s = stream_n(1);
    s.set_recv_model(0, RecvModel::Credits).unwrap();
    s.grant_credits(0, 10);
    assert!(matches!(
        s.bind_cq(0, &cq, 4),
        Err(CqError::AboveLimit {
            now: 10,
            limit: 4,
            ..
        })
    ));
    assert_eq!(cq.reserved(), 0);
    assert!(matches!(s.bind_cq(7, &cq, 4), Err(CqError::InvalidQn(7))));
}

#[test]
fn overflow_is_reported_never_silent() {
    let cq = CompletionQueue::new(2);
    let c = Completion {
        wr_id: 1,
        status: CompletionStatus::Success,
        opcode: 0x43,
        byte_len: 1,
        qn: 0,
        msn: 1,
        stream: StreamId(1),
    };
    cq.push(c).unwrap();
    cq.push(c).unwrap();
    assert_eq!(cq.push(c), Err(CqError::Overflow { capacity: 2 }));
    assert_eq!(cq.overflows(), 1);
    assert_eq!(cq.len(), 2);
    assert_eq!(cq.poll(), Some(c));
    cq.push(c).unwrap();
}

#[test]
fn ulp_sources_share_the_same_accounting() {
    let cq = CompletionQueue::new(10);
    let sq = cq.reserve(CqSource::Ulp(1), 6).unwrap();
    assert!(cq.reserve(CqSource::Ulp(2), 6).is_err());
    assert!(matches!(
        cq.reserve(CqSource::Ulp(1), 5),
        Err(CqError::Mismatch { .. })
    ));
    drop(sq);
    assert_eq!(cq.reserved(), 0);
}

#[test]
fn receive_completion_from_a_delivery() {
    let mem = MemoryTable::with_seed(3);
    let mut s = stream_n(5);
    s.post_recv(0, buf(77)).unwrap();
    assert_eq!(
        feed(&mut s, &mem, 0, &untagged(true, 0, 1, 0, b"abc")),
        None
    );
    let d = s.poll_delivery().unwrap();
    let c = Completion::recv(s.id(), &d).unwrap();
    assert_eq!(
        (c.wr_id, c.byte_len, c.msn, c.stream),
        (77, 3, 1, StreamId(5))
    );
    assert_eq!(c.opcode, 0x43);
}
