//! Receives posted into a region (`RdmapStream::post_recv_in_region`, an
//! ordered receive queue's slot naming a `RegionSpan`): the Send's segments
//! target the span (header first: `Target::Region` at span offset + MO; whole
//! segments, also out of order, copied there), the span's length bounds the
//! message as a receive buffer's does, and a span outside its region or a
//! queue on a pool is refused at posting.

// Shared with the other engine tests; this one needs only part of it.
#[allow(dead_code)]
#[path = "common/host.rs"]
mod host;
use host::*;

use rddp_proto::ddp::{RegionSpan, SourceError, StreamError, Target};
use rddp_proto::mem::Access;
use rddp_proto::rdmap::{WcOpcode, WcStatus};
use rddp_wire::TerminateCode as T;

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
    let t = h.s.begin_segment(&h.mem, 0, &seg[..18], 100).unwrap();
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
    let t = h.s.begin_segment(&h.mem, 1, &seg[..18], 50).unwrap();
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

/// A batch (`begin_more`) reads into one region, for its tagged segments: a
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
    let first = send(true, 1, 0, &[1; 10]);
    let t = h.s.begin_segment(&h.mem, 0, &first[..18], 10).unwrap();
    assert!(matches!(t, Target::Buffer { len: 10 }), "{t:?}");
    let with_payload = send(true, 2, 0, &[2; 10]);
    assert!(
        h.s.begin_more(&h.mem, 1, &with_payload[..18], 10).is_none(),
        "a region receive joined a batch"
    );
    h.s.segment_buffers().unwrap()[0].copy_from_slice(&[1; 10]);
    h.s.finish_segment(&h.mem, true).unwrap();
    // Alone, header first: the span.
    let t =
        h.s.begin_segment(&h.mem, 1, &with_payload[..18], 10)
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
    // Behind a Send in a batch, a Send of nothing into a region receive.
    let third = send(true, 3, 0, &[3; 5]);
    let empty = send(true, 4, 0, &[]);
    let t = h.s.begin_segment(&h.mem, 2, &third[..18], 5).unwrap();
    assert!(matches!(t, Target::Buffer { len: 5 }), "{t:?}");
    let t = h.s.begin_more(&h.mem, 3, &empty[..18], 0);
    assert!(matches!(t, Some(Target::Nothing)), "{t:?}");
    h.s.segment_buffers().unwrap()[0].copy_from_slice(&[3; 5]);
    h.s.finish_segment(&h.mem, true).unwrap();
    h.s.finish_segment(&h.mem, true).unwrap();
    let c = h.completions();
    let got: Vec<(u64, u32)> = c.iter().map(|c| (c.wr_id, c.byte_len)).collect();
    assert_eq!(got, [(1, 10), (2, 10), (3, 5), (4, 0)], "{c:?}");
    assert!(c.iter().all(|c| c.status == WcStatus::Success), "{c:?}");
    assert_eq!(&region.data()[1000..1010], &[2; 10]);
}
