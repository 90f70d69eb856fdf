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
