//! Receives posted into a region (`RdmapStream::post_recv_in_region`, an
//! ordered receive queue's slot naming a `RegionSpan`): the Send's segments
//! target the span (header first: `Target::Region` at span offset + MO; whole
//! segments, also out of order, copied there), the span's length bounds the
//! message as a receive buffer's does, and a span outside its region is
//! refused at posting. A pool (shared receive queue, credits) takes such
//! receives too: the message that takes one is placed in its span.

use crate::common::host::*;

use rddp_proto::ddp::{
    Begin, BufferOrdering, BufferPool, PoolConfig, PoolError, RecvBuffer, RegionSpan, SourceError,
    StreamError, Target,
};
use rddp_proto::mem::{Access, RegionRef};
use rddp_proto::rdmap::{WcOpcode, WcStatus};
use rddp_wire::TerminateCode as T;
use rddp_wire::rdmap::qn;

const FILL: u8 = 0x5A;

/// A host with a region of `len` FILL octets and its span `offset..+span`.
fn host_with(len: usize, offset: usize, span: usize) -> (Host, RegionSpan) {
    let mut h = Host::new();
    let stag = h.region(Access::NONE, len);
    let region = h.mem.region(stag).unwrap();
    region.data_mut().fill(FILL);
    let place = RegionSpan {
        region,
        offset,
        len: span,
    };
    (h, place)
}

#[test]
fn whole_segments_out_of_order_land_in_the_span() {
    let (mut h, place) = host_with(4096, 1000, 600);
    let region = place.region.clone();
    h.s.post_recv_in_region(7, place).unwrap();
    let msg: Vec<u8> = (0..500u32).map(|i| (i * 3) as u8).collect();
    // Three segments, the last first (an SCTP-like LLP reorders).
    assert!(h.feed_at(2, &send(true, 1, 400, &msg[400..])));
    assert!(h.feed_at(0, &send(false, 1, 0, &msg[..200])));
    assert!(h.completions().is_empty(), "delivered before it was whole");
    assert!(h.feed_at(1, &send(false, 1, 200, &msg[200..400])));
    let c = h.completions();
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(
        (c[0].wr_id, c[0].opcode, c[0].status, c[0].byte_len),
        (7, WcOpcode::Recv, WcStatus::Success, 500)
    );
    let d = region.data().to_vec();
    assert_eq!(&d[1000..1500], &msg[..]);
    assert!(d[..1000].iter().chain(&d[1500..]).all(|&b| b == FILL));
}

#[test]
fn header_first_the_target_is_the_span_at_its_mo() {
    let (mut h, place) = host_with(4096, 1000, 600);
    h.s.post_recv_in_region(7, place).unwrap();
    let seg = send(false, 1, 0, &[1; 100]);
    let t =
        h.s.begin_segment(&h.mem, 0, &seg[..18], 100, Begin::Alone)
            .unwrap();
    assert!(
        matches!(
            t,
            Target::Region {
                offset: 1000,
                len: 100,
                ..
            }
        ),
        "{t:?}"
    );
    let _ = h.s.finish_segment(&h.mem, true);
    let seg = send(true, 1, 100, &[2; 50]);
    let t =
        h.s.begin_segment(&h.mem, 1, &seg[..18], 50, Begin::Alone)
            .unwrap();
    assert!(
        matches!(
            t,
            Target::Region {
                offset: 1100,
                len: 50,
                ..
            }
        ),
        "{t:?}"
    );
}

#[test]
fn a_send_longer_than_the_span_is_refused_and_placed_nowhere() {
    let (mut h, place) = host_with(4096, 1000, 64);
    let region = place.region.clone();
    h.s.post_recv_in_region(7, place).unwrap();
    assert!(!h.feed(&send(true, 1, 0, &[9; 65])));
    assert_eq!(h.terminate_sent(), Some(T::DDP_MSG_TOO_LONG));
    assert!(region.data().iter().all(|&b| b == FILL));
}

#[test]
fn a_span_past_its_region_is_refused_at_posting() {
    let (mut h, place) = host_with(4096, 4000, 97);
    let e = h.s.post_recv_in_region(7, place.clone()).unwrap_err();
    assert!(
        matches!(e, StreamError::Source(SourceError::OutsideRegion { .. })),
        "{e:?}"
    );
    let wraps = RegionSpan {
        offset: usize::MAX,
        len: 2,
        ..place.clone()
    };
    assert!(h.s.post_recv_in_region(8, wraps).is_err());
    // At the end exactly: taken.
    let end = RegionSpan { len: 96, ..place };
    h.s.post_recv_in_region(9, end).unwrap();
}

/// MSN 1 (10 octets of 1) begun into its own buffer; MSN 2 (10 octets of 2),
/// whose receive is the span at 1000 of `region`, not begun in that batch;
/// then taken alone, header first, targeting the span. Both finished.
fn batch_leaves_the_region_send_alone(h: &mut Host, region: &RegionRef) {
    let first = send(true, 1, 0, &[1; 10]);
    let t =
        h.s.begin_segment(&h.mem, 0, &first[..18], 10, Begin::Alone)
            .unwrap();
    assert!(matches!(t, Target::Buffer { len: 10 }), "{t:?}");
    let second = send(true, 2, 0, &[2; 10]);
    assert!(
        matches!(
            h.s.begin_segment(&h.mem, 1, &second[..18], 10, Begin::Ahead(&mut |_| true)),
            Err(StreamError::NotAhead)
        ),
        "a region receive joined a batch"
    );
    h.s.segment_buffers(|b| b[0].copy_from_slice(&[1; 10]))
        .unwrap();
    h.s.finish_segment(&h.mem, true).unwrap();
    let t =
        h.s.begin_segment(&h.mem, 1, &second[..18], 10, Begin::Alone)
            .unwrap();
    assert!(
        matches!(
            t,
            Target::Region {
                offset: 1000,
                len: 10,
                ..
            }
        ),
        "{t:?}"
    );
    region.data_mut()[1000..1010].copy_from_slice(&[2; 10]);
    h.s.finish_segment(&h.mem, true).unwrap();
}

/// A batch (`Begin::Ahead`) reads into one region, for its tagged segments: a
/// Send with payload for a receive in a region is left to be taken alone,
/// header first, and nothing of it is begun. One without payload reads
/// nothing and may join.
#[test]
fn a_batch_leaves_a_region_receive_with_payload_alone() {
    let (mut h, place) = host_with(4096, 1000, 600);
    let region = place.region.clone();
    h.s.post_recv(1, vec![0; 64]).unwrap();
    h.s.post_recv_in_region(2, place.clone()).unwrap();
    h.s.post_recv(3, vec![0; 64]).unwrap();
    h.s.post_recv_in_region(4, place).unwrap();
    batch_leaves_the_region_send_alone(&mut h, &region);
    // Behind a Send in a batch, a Send of nothing into a region receive.
    let third = send(true, 3, 0, &[3; 5]);
    let empty = send(true, 4, 0, &[]);
    let t =
        h.s.begin_segment(&h.mem, 2, &third[..18], 5, Begin::Alone)
            .unwrap();
    assert!(matches!(t, Target::Buffer { len: 5 }), "{t:?}");
    let t =
        h.s.begin_segment(&h.mem, 3, &empty[..18], 0, Begin::Ahead(&mut |_| true));
    assert!(matches!(t, Ok(Target::Nothing)), "{t:?}");
    h.s.segment_buffers(|b| b[0].copy_from_slice(&[3; 5]))
        .unwrap();
    h.s.finish_segment(&h.mem, true).unwrap();
    h.s.finish_segment(&h.mem, true).unwrap();
    let c = h.completions();
    let got: Vec<(u64, u32)> = c.iter().map(|c| (c.wr_id, c.byte_len)).collect();
    assert_eq!(got, [(1, 10), (2, 10), (3, 5), (4, 0)], "{c:?}");
    assert!(c.iter().all(|c| c.status == WcStatus::Success), "{c:?}");
    assert_eq!(&region.data()[1000..1010], &[2; 10]);
}

/// A shared pool (strategy 2, arrival ordering) on the host's Send queue.
fn pooled(h: &mut Host) -> BufferPool {
    let pool = BufferPool::new(PoolConfig::shared(BufferOrdering::Arrival, 8, 8));
    h.s.ddp_mut().set_recv_pool(qn::SEND, &pool).unwrap();
    pool
}

/// A shared pool holding a 64-octet buffer (id 1), then a receive (id 2)
/// into 600 octets at 1000 of the returned region.
fn buffer_then_span_in_a_pool() -> (Host, BufferPool, RegionRef) {
    let (mut h, place) = host_with(4096, 1000, 600);
    let region = place.region.clone();
    let pool = pooled(&mut h);
    pool.post(RecvBuffer {
        id: 1,
        data: vec![0; 64],
    })
    .unwrap();
    pool.post_in_region(2, place).unwrap();
    (h, pool, region)
}

/// A pool hands a receive posted into a region to the message that takes it
/// (in posting order here): its segments target the span, header first, and
/// the span bounds the message.
#[test]
fn a_pool_receive_in_a_region_gets_the_message_that_takes_it() {
    let (mut h, pool, region) = buffer_then_span_in_a_pool();
    assert!(h.feed(&send(true, 1, 0, &[1; 10])));
    // MSN 2 takes the span: two segments, header first.
    let seg = send(false, 2, 0, &[2; 300]);
    let t =
        h.s.begin_segment(&h.mem, 1, &seg[..18], 300, Begin::Alone)
            .unwrap();
    assert!(
        matches!(
            t,
            Target::Region {
                offset: 1000,
                len: 300,
                ..
            }
        ),
        "{t:?}"
    );
    region.data_mut()[1000..1300].copy_from_slice(&seg[18..]);
    h.s.finish_segment(&h.mem, true).unwrap();
    let seg = send(true, 2, 300, &[3; 200]);
    let t =
        h.s.begin_segment(&h.mem, 2, &seg[..18], 200, Begin::Alone)
            .unwrap();
    assert!(matches!(t, Target::Region { offset: 1300, .. }), "{t:?}");
    region.data_mut()[1300..1500].copy_from_slice(&seg[18..]);
    h.s.finish_segment(&h.mem, true).unwrap();
    let c = h.completions();
    let got: Vec<_> = c.iter().map(|c| (c.wr_id, c.status, c.byte_len)).collect();
    assert_eq!(
        got,
        [(1, WcStatus::Success, 10), (2, WcStatus::Success, 500)],
        "{c:?}"
    );
    assert_eq!(
        c[1].buffer.as_deref(),
        Some(&[][..]),
        "no buffer of its own"
    );
    let d = region.data().to_vec();
    assert!(d[1000..1300].iter().all(|&b| b == 2));
    assert!(d[1300..1500].iter().all(|&b| b == 3));
    assert!(d[..1000].iter().chain(&d[1500..]).all(|&b| b == FILL));
    assert_eq!((pool.free(), pool.held()), (0, 0));
}

#[test]
fn a_send_longer_than_a_pool_span_is_refused_and_placed_nowhere() {
    let (mut h, place) = host_with(4096, 1000, 64);
    let region = place.region.clone();
    let pool = pooled(&mut h);
    pool.post_in_region(2, place).unwrap();
    assert!(!h.feed(&send(true, 1, 0, &[9; 65])));
    assert_eq!(h.terminate_sent(), Some(T::DDP_MSG_TOO_LONG));
    assert!(region.data().iter().all(|&b| b == FILL));
}

#[test]
fn a_pool_refuses_a_span_past_its_region() {
    let (mut h, place) = host_with(4096, 4000, 97);
    let pool = pooled(&mut h);
    assert_eq!(
        pool.post_in_region(7, place.clone()),
        Err(PoolError::OutsideRegion)
    );
    // Through the stream's queue on the pool, as an ordered queue's refusal.
    let e = h.s.post_recv_in_region(7, place.clone()).unwrap_err();
    assert!(
        matches!(e, StreamError::Source(SourceError::OutsideRegion { .. })),
        "{e:?}"
    );
    assert_eq!(pool.free(), 0);
    h.s.post_recv_in_region(8, RegionSpan { len: 96, ..place })
        .unwrap();
    assert_eq!(pool.free(), 1);
}

/// In a batch, a Send whose pool receive is a region is not begun; the pool
/// took that receive for its MSN once, and taken alone the Send finds it
/// there (the pool counts two takes for two messages, not three).
#[test]
fn a_batch_leaves_a_pool_region_receive_to_be_taken_alone() {
    let (mut h, pool, region) = buffer_then_span_in_a_pool();
    batch_leaves_the_region_send_alone(&mut h, &region);
    let c = h.completions();
    let got: Vec<(u64, u32)> = c.iter().map(|c| (c.wr_id, c.byte_len)).collect();
    assert_eq!(got, [(1, 10), (2, 10)], "{c:?}");
    assert!(c.iter().all(|c| c.status == WcStatus::Success), "{c:?}");
    let st = pool.stats();
    assert_eq!((st.taken, st.empty), (2, 0), "{st:?}");
    assert_eq!(&region.data()[1000..1010], &[2; 10]);
}

/// A stream torn down hands back flushed the pool's region receive that its
/// message took, with an empty buffer, as any other; the pool keeps the rest.
#[test]
fn a_torn_down_stream_flushes_the_pool_region_receive_it_took() {
    let (mut h, place) = host_with(4096, 1000, 600);
    let pool = BufferPool::new(PoolConfig::credits(BufferOrdering::Sequential, 4));
    h.s.ddp_mut().set_recv_pool(qn::SEND, &pool).unwrap();
    assert!(h.s.ddp_mut().grant_credits(qn::SEND, 2));
    pool.post_in_region(3, place.clone()).unwrap();
    pool.post_in_region(4, place).unwrap();
    // MSN 1 takes the first; the stream dies mid-message.
    assert!(h.feed(&send(false, 1, 0, &[5; 100])));
    h.s.abort();
    let c = h.completions();
    let flushed: Vec<_> = c
        .iter()
        .filter(|c| c.opcode == WcOpcode::Recv)
        .map(|c| (c.wr_id, c.status, c.buffer.as_deref().map(<[u8]>::len)))
        .collect();
    assert_eq!(flushed, [(3, WcStatus::Flushed, Some(0))], "{c:?}");
    assert_eq!((pool.held(), pool.free()), (0, 1));
}
