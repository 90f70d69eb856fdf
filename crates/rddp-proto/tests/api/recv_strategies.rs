//! The untagged receive strategies of docs/receive-strategies.md on shared pools: MSN validation,
//! buffer association, sequential and arrival ordering, the soft limit and the
//! arrival-ordering hazard.

use crate::common::*;
use rddp_proto::ddp::{
    BufferOrdering, BufferPool, DdpConfig, DdpStream, Delivery, PoolConfig, PoolEvent, RecvBuffer,
    StreamState,
};
use rddp_proto::mem::{MemoryTable, StreamId};
use rddp_wire::TerminateCode as T;

fn buf(id: u64) -> RecvBuffer {
    RecvBuffer {
        id,
        data: vec![0; 16],
    }
}

fn pool_with(cfg: PoolConfig, n: u64) -> BufferPool {
    let p = BufferPool::new(cfg);
    for id in 0..n {
        p.post(buf(id)).unwrap();
    }
    p
}

fn on(pool: &BufferPool, id: u32) -> DdpStream {
    let mut s = DdpStream::new(StreamId(id), PD, DdpConfig::default()).unwrap();
    s.set_recv_pool(0, pool).unwrap();
    s
}

fn events(pool: &BufferPool) -> Vec<PoolEvent> {
    std::iter::from_fn(|| pool.poll_event()).collect()
}

#[test]
fn shared_pool_serves_many_streams_and_presumes_msns_valid() {
    let mem = MemoryTable::with_seed(1);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 8, 4), 3);
    let mut a = on(&pool, 1);
    let mut b = on(&pool, 2);
    // No credits were granted: strategy 2 presumes every new MSN valid.
    assert_eq!(feed(&mut a, &mem, 0, &untagged(true, 0, 1, 0, b"a1")), None);
    assert_eq!(feed(&mut b, &mem, 0, &untagged(true, 0, 1, 0, b"b1")), None);
    assert_eq!(pool.free(), 1);
    assert!(matches!(
        a.poll_delivery(),
        Some(Delivery::Untagged { msn: 1, len: 2, .. })
    ));
    assert!(matches!(
        b.poll_delivery(),
        Some(Delivery::Untagged { msn: 1, len: 2, .. })
    ));
    assert_eq!(feed(&mut b, &mem, 1, &untagged(true, 0, 2, 0, b"b2")), None);
    // The pool is empty: 1/2/0x02 on the stream that needed a buffer, and only it.
    assert_eq!(
        feed(&mut a, &mem, 1, &untagged(true, 0, 2, 0, b"a2")),
        Some(T::DDP_INVALID_MSN_NO_BUFFER)
    );
    assert_eq!(b.state(), &StreamState::Open);
    assert_eq!(pool.stats().empty, 1);
}

#[test]
fn shared_sequential_takes_buffers_for_every_earlier_msn() {
    let mem = MemoryTable::with_seed(2);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Sequential, 16, 3), 8);
    let mut a = on(&pool, 1);
    // MSN 5 first: MSNs 1..=5 all take a buffer.
    assert_eq!(feed(&mut a, &mem, 0, &untagged(true, 0, 5, 0, b"x")), None);
    assert_eq!(pool.free(), 3);
    assert_eq!(a.sink().posted(0), 5);
    // The soft limit (3) was crossed once, naming the stream.
    assert_eq!(
        events(&pool),
        vec![PoolEvent::SoftLimit {
            stream: StreamId(1),
            qn: 0,
            held: 5,
            limit: 3
        }]
    );
    // MSN 9 would need 4 more buffers; only 3 are left: nothing is taken (all or
    // none) and the stream gets 1/2/0x02.
    assert_eq!(
        feed(&mut a, &mem, 1, &untagged(true, 0, 9, 0, b"y")),
        Some(T::DDP_INVALID_MSN_NO_BUFFER)
    );
    assert_eq!(pool.free(), 3);
}

#[test]
fn shared_arrival_takes_one_buffer_per_new_msn() {
    let mem = MemoryTable::with_seed(3);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 16, 8), 8);
    let mut a = on(&pool, 1);
    assert_eq!(
        feed(&mut a, &mem, 0, &untagged(true, 0, 5, 0, b"five")),
        None
    );
    assert_eq!(pool.free(), 7);
    // A far MSN holds one entry, not the gap before it.
    assert_eq!(
        feed(
            &mut a,
            &mem,
            1,
            &untagged(true, 0, 2_000_000_000, 0, b"far")
        ),
        None
    );
    assert_eq!(pool.free(), 6);
    assert!(a.poll_delivery().is_none());
    // MSNs 1..=4 arrive: all five complete messages are delivered in order.
    for (seq, msn) in (2..).zip(1..=4) {
        assert_eq!(
            feed(&mut a, &mem, seq, &untagged(true, 0, msn, 0, b"m")),
            None
        );
    }
    let msns: Vec<u32> = std::iter::from_fn(|| a.poll_delivery())
        .map(|d| match d {
            Delivery::Untagged { msn, .. } => msn,
            Delivery::Tagged { .. } => 0,
        })
        .collect();
    assert_eq!(msns, vec![1, 2, 3, 4, 5]);
}

#[test]
fn soft_limit_event_fires_once_per_crossing() {
    let mem = MemoryTable::with_seed(4);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 64, 2), 16);
    let mut a = on(&pool, 9);
    // Segment 0 never arrives (an SCTP peer): nothing is processed in sender
    // order. (In sender order, first segments of several MSNs of one queue are
    // interleaved messages, refused with 1/2/0x03.)
    let mut seq = 1;
    let mut first = |a: &mut DdpStream, msn| {
        // First segments only: each message holds its buffer.
        let r = feed(a, &mem, seq, &untagged(false, 0, msn, 0, b"p"));
        seq += 1;
        r
    };
    for msn in 1..=2 {
        assert_eq!(first(&mut a, msn), None);
    }
    assert!(events(&pool).is_empty(), "at the limit, not above it");
    assert_eq!(first(&mut a, 3), None);
    let ev = events(&pool);
    assert_eq!(ev.len(), 1);
    assert!(matches!(
        ev[0],
        PoolEvent::SoftLimit {
            stream: StreamId(9),
            held: 3,
            limit: 2,
            ..
        }
    ));
    for msn in 4..=6 {
        assert_eq!(first(&mut a, msn), None);
    }
    assert!(
        events(&pool).is_empty(),
        "no second event within one crossing"
    );
    assert_eq!(pool.stats().soft_limit_events, 1);
}

#[test]
fn soft_limit_rearms_after_dropping_back() {
    let mem = MemoryTable::with_seed(5);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 64, 1), 16);
    let mut a = on(&pool, 3);
    // MSN 2 and 3 held (MSN 1 missing): 2 > 1.
    assert_eq!(feed(&mut a, &mem, 0, &untagged(true, 0, 2, 0, b"2")), None);
    assert_eq!(feed(&mut a, &mem, 1, &untagged(true, 0, 3, 0, b"3")), None);
    assert_eq!(events(&pool).len(), 1);
    // MSN 1 completes: 1, 2, 3 delivered, nothing held.
    assert_eq!(feed(&mut a, &mem, 2, &untagged(true, 0, 1, 0, b"1")), None);
    assert_eq!(a.sink().posted(0), 0);
    // Crossing again raises a second event.
    assert_eq!(feed(&mut a, &mem, 3, &untagged(true, 0, 5, 0, b"5")), None);
    assert_eq!(feed(&mut a, &mem, 4, &untagged(true, 0, 6, 0, b"6")), None);
    assert_eq!(events(&pool).len(), 1);
    assert_eq!(pool.stats().soft_limit_events, 2);
}

/// The RDDP working group's note on sharing buffers and credits: "with
/// arrival-ordering ... all available buffers are being held by later MSNs". SCTP may hand MSNs 2..=5 up before MSN 1; they take the whole pool
/// and MSN 1 can never be received. The ULP is told, naming the stream.
#[test]
fn arrival_ordering_hazard_is_detected_and_reported() {
    let mem = MemoryTable::with_seed(6);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 4, 100), 4);
    let mut a = on(&pool, 42);
    // The sender sent MSN m as segment m - 1; the LLP hands up segments 1..=4 first.
    for msn in 2..=5 {
        let seq = u64::from(msn) - 1;
        assert_eq!(
            feed(&mut a, &mem, seq, &untagged(true, 0, msn, 0, b"later")),
            None
        );
    }
    assert_eq!(pool.free(), 0);
    assert!(
        a.poll_delivery().is_none(),
        "nothing deliverable before MSN 1"
    );
    assert_eq!(
        events(&pool),
        vec![PoolEvent::Stranded {
            stream: StreamId(42),
            qn: 0,
            missing_msn: 1,
            held: 4,
            deadlock: true
        }]
    );
    // Had the ULP not acted, MSN 1 would fail for want of a buffer.
    assert_eq!(
        feed(&mut a, &mem, 0, &untagged(true, 0, 1, 0, b"first")),
        Some(T::DDP_INVALID_MSN_NO_BUFFER)
    );
}

#[test]
fn hazard_resolved_by_the_ulp_posting_a_buffer() {
    let mem = MemoryTable::with_seed(7);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 8, 100), 2);
    let mut a = on(&pool, 1);
    let mut b = on(&pool, 2);
    // B holds MSN 1 (deliverable once complete); A holds MSN 2 with MSN 1 missing.
    assert_eq!(feed(&mut b, &mem, 0, &untagged(false, 0, 1, 0, b"b")), None);
    assert_eq!(feed(&mut a, &mem, 0, &untagged(true, 0, 2, 0, b"a")), None);
    // Only A is stranded, and it is no deadlock: B's buffer can still come back.
    assert_eq!(
        events(&pool),
        vec![PoolEvent::Stranded {
            stream: StreamId(1),
            qn: 0,
            missing_msn: 1,
            held: 1,
            deadlock: false
        }]
    );
    pool.post(buf(99)).unwrap();
    assert_eq!(feed(&mut a, &mem, 1, &untagged(true, 0, 1, 0, b"a")), None);
    assert_eq!(std::iter::from_fn(|| a.poll_delivery()).count(), 2);
}

#[test]
fn shared_pool_refuses_an_msn_behind_the_next_expected() {
    let mem = MemoryTable::with_seed(13);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 8, 8), 8);
    let mut a = on(&pool, 1);
    assert_eq!(feed(&mut a, &mem, 0, &untagged(true, 0, 1, 0, b"1")), None);
    // MSN 1 again: already delivered, not a new MSN to presume valid.
    assert_eq!(
        feed(&mut a, &mem, 1, &untagged(true, 0, 1, 0, b"1")),
        Some(T::DDP_INVALID_MSN_RANGE)
    );
    assert_eq!(pool.free(), 7);
}

#[test]
fn stranded_is_reported_once_per_empty_spell() {
    let mem = MemoryTable::with_seed(14);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 8, 100), 1);
    let mut a = on(&pool, 1);
    let mut b = on(&pool, 2);
    assert_eq!(feed(&mut a, &mem, 0, &untagged(true, 0, 3, 0, b"3")), None);
    assert_eq!(events(&pool).len(), 1);
    // A new buffer ends the empty spell; B takes it, the pool is empty again and
    // A, still stranded, is reported again (B holds its oldest MSN: no deadlock).
    pool.post(buf(7)).unwrap();
    assert!(events(&pool).is_empty());
    assert_eq!(feed(&mut b, &mem, 0, &untagged(false, 0, 1, 0, b"b")), None);
    let ev = events(&pool);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(matches!(
        ev[0],
        PoolEvent::Stranded {
            stream: StreamId(1),
            deadlock: false,
            ..
        }
    ));
    // B completes and delivers its message within the same spell: A is not
    // repeated.
    assert_eq!(feed(&mut b, &mem, 1, &untagged(true, 0, 1, 1, b"b")), None);
    assert!(b.poll_delivery().is_some());
    assert!(events(&pool).is_empty());
    assert_eq!(pool.stats().stranded_events, 2);
}

#[test]
fn sequential_ordering_never_strands() {
    let mem = MemoryTable::with_seed(8);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Sequential, 4, 100), 4);
    let mut a = on(&pool, 1);
    assert_eq!(feed(&mut a, &mem, 0, &untagged(true, 0, 4, 0, b"4")), None);
    assert_eq!(pool.free(), 0);
    assert!(
        events(&pool).is_empty(),
        "every earlier MSN already has its buffer"
    );
    for (seq, msn) in (1..).zip(1..=3) {
        assert_eq!(
            feed(&mut a, &mem, seq, &untagged(true, 0, msn, 0, b"m")),
            None
        );
    }
    assert_eq!(std::iter::from_fn(|| a.poll_delivery()).count(), 4);
}

#[test]
fn pooled_credits_validate_per_stream_and_share_buffers() {
    let mem = MemoryTable::with_seed(9);
    let pool = pool_with(PoolConfig::credits(BufferOrdering::Arrival, 8), 2);
    let mut a = on(&pool, 1);
    let mut b = on(&pool, 2);
    assert!(a.grant_credits(0, 1));
    assert!(b.grant_credits(0, 1));
    // MSN 2 of A is outside A's range: 1/2/0x03, whatever the pool holds.
    assert_eq!(
        feed(&mut a, &mem, 0, &untagged(true, 0, 2, 0, b"x")),
        Some(T::DDP_INVALID_MSN_RANGE)
    );
    assert_eq!(pool.free(), 2);
    assert_eq!(feed(&mut b, &mem, 0, &untagged(true, 0, 1, 0, b"b")), None);
    assert_eq!(pool.free(), 1);
}

#[test]
fn pooled_credits_sequential_takes_only_authorised_buffers() {
    let mem = MemoryTable::with_seed(10);
    let pool = pool_with(PoolConfig::credits(BufferOrdering::Sequential, 8), 8);
    let mut a = on(&pool, 1);
    a.grant_credits(0, 3);
    assert_eq!(feed(&mut a, &mem, 0, &untagged(true, 0, 3, 0, b"x")), None);
    assert_eq!(pool.free(), 5, "MSNs 1..=3, all within the granted range");
}

#[test]
fn pooled_credits_without_a_buffer_end_only_that_stream() {
    let mem = MemoryTable::with_seed(11);
    // Under-provisioned: 2 credits each, 1 buffer.
    let pool = pool_with(PoolConfig::credits(BufferOrdering::Arrival, 8), 1);
    let mut a = on(&pool, 1);
    let mut b = on(&pool, 2);
    a.grant_credits(0, 2);
    b.grant_credits(0, 2);
    assert_eq!(feed(&mut b, &mem, 0, &untagged(false, 0, 1, 0, b"b")), None);
    assert_eq!(
        feed(&mut a, &mem, 0, &untagged(true, 0, 1, 0, b"a")),
        Some(T::DDP_INVALID_MSN_NO_BUFFER)
    );
    assert_eq!(
        a.state(),
        &StreamState::Erroneous(T::DDP_INVALID_MSN_NO_BUFFER)
    );
    assert_eq!(b.state(), &StreamState::Open);
    assert_eq!(feed(&mut b, &mem, 1, &untagged(true, 0, 1, 1, b"b")), None);
    assert!(b.poll_delivery().is_some());
}

#[test]
fn flush_returns_held_buffers_but_not_the_shared_pool() {
    let mem = MemoryTable::with_seed(12);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 8, 8), 4);
    let mut a = on(&pool, 1);
    assert_eq!(feed(&mut a, &mem, 0, &untagged(false, 0, 1, 0, b"a")), None);
    a.abort();
    let flushed = std::iter::from_fn(|| a.poll_event())
        .filter(|e| matches!(e, rddp_proto::ddp::StreamEvent::Flushed(_)))
        .count();
    assert_eq!(flushed, 1);
    assert_eq!(pool.free(), 3);
}

#[test]
fn pool_refuses_posts_beyond_its_maximum() {
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 2, 1), 2);
    assert!(pool.post(buf(5)).is_err());
    let mut a = on(&pool, 1);
    assert!(a.post_recv(0, buf(6)).is_err());
}

#[test]
fn an_armed_limit_is_raised_once_by_the_take_that_crosses_it() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mem = MemoryTable::with_seed(7);
    let pool = pool_with(PoolConfig::shared(BufferOrdering::Arrival, 16, 8), 4);
    let hooked = Arc::new(AtomicUsize::new(0));
    let h = hooked.clone();
    pool.set_low_water_hook(move || {
        h.fetch_add(1, Ordering::Relaxed);
    });
    // Armed at 3 with 4 free: not raised at arming, nor by the take to 3.
    pool.arm_limit(3);
    assert_eq!(pool.armed_limit(), 3);
    let mut a = on(&pool, 1);
    assert_eq!(feed(&mut a, &mem, 0, &untagged(true, 0, 1, 0, b"1")), None);
    assert_eq!((pool.free(), hooked.load(Ordering::Relaxed)), (3, 0));
    assert_eq!(events(&pool), vec![]);
    // The take to 2 crosses it: one event, the hook once, disarmed.
    assert_eq!(feed(&mut a, &mem, 1, &untagged(true, 0, 2, 0, b"2")), None);
    assert_eq!(
        events(&pool),
        vec![PoolEvent::LowWater { free: 2, limit: 3 }]
    );
    assert_eq!((pool.armed_limit(), hooked.load(Ordering::Relaxed)), (0, 1));
    // Disarmed: the next take raises nothing until it is armed again.
    assert_eq!(feed(&mut a, &mem, 2, &untagged(true, 0, 3, 0, b"3")), None);
    assert_eq!(events(&pool), vec![]);
    pool.arm_limit(2);
    assert_eq!(feed(&mut a, &mem, 3, &untagged(true, 0, 4, 0, b"4")), None);
    assert_eq!(
        events(&pool),
        vec![PoolEvent::LowWater { free: 0, limit: 2 }]
    );
    assert_eq!(hooked.load(Ordering::Relaxed), 2);
}
