//! Data Source segmentation rules (RFC 5041 §5).

use bytes::Bytes;
use proptest::prelude::*;
use rddp_proto::ddp::{DdpSource, OutSegment, SourceError};
use rddp_wire::DdpHeader;

fn drain(s: &mut DdpSource) -> Vec<OutSegment> {
    std::iter::from_fn(|| s.poll_segment()).collect()
}

#[test]
fn tagged_message_is_cut_to_mulpdu_with_advancing_to() {
    let mut s = DdpSource::new(3, 14 + 10).unwrap();
    let data: Vec<u8> = (0..25).collect();
    s.submit_tagged(0x40, 0x1234, 0x1000, Bytes::from(data.clone()))
        .unwrap();
    let segs = drain(&mut s);
    assert_eq!(segs.len(), 3);
    for (i, seg) in segs.iter().enumerate() {
        let DdpHeader::Tagged(h) = seg.header else {
            panic!("tagged expected")
        };
        assert_eq!(h.stag, 0x1234);
        assert_eq!(h.to, 0x1000 + 10 * i as u64);
        assert_eq!(h.rsvd_ulp, 0x40);
        assert_eq!(h.ctrl.last(), i == 2, "L=1 on the last segment only");
        assert!(seg.len() <= 24);
        assert_eq!(
            &seg.payload.to_vec()[..],
            &data[10 * i..(10 * i + 10).min(25)]
        );
    }
}

#[test]
fn untagged_message_keeps_qn_msn_and_advances_mo() {
    let mut s = DdpSource::new(3, 18 + 4).unwrap();
    let msn = s
        .submit_untagged(0, [0x43, 0, 0, 0, 0], Bytes::from_static(b"0123456789"))
        .unwrap();
    assert_eq!(msn, 1);
    let segs = drain(&mut s);
    assert_eq!(segs.len(), 3);
    for (i, seg) in segs.iter().enumerate() {
        let DdpHeader::Untagged(h) = seg.header else {
            panic!("untagged expected")
        };
        assert_eq!((h.qn, h.msn, h.mo), (0, 1, 4 * i as u32));
        assert_eq!(h.ctrl.last(), i == 2);
    }
}

#[test]
fn zero_length_message_is_exactly_one_segment() {
    let mut s = DdpSource::new(3, 100).unwrap();
    s.submit_tagged(0x40, 1, 0, Bytes::new()).unwrap();
    s.submit_untagged(0, [0; 5], Bytes::new()).unwrap();
    let segs = drain(&mut s);
    assert_eq!(segs.len(), 2);
    assert!(segs.iter().all(|g| g.header.last() && g.payload.is_empty()));
}

#[test]
fn messages_leave_in_submission_order() {
    let mut s = DdpSource::new(3, 30).unwrap();
    s.submit_untagged(0, [0; 5], Bytes::from(vec![1; 30]))
        .unwrap();
    s.submit_tagged(0, 7, 0, Bytes::from(vec![2; 30])).unwrap();
    s.submit_untagged(1, [0; 5], Bytes::from(vec![3; 5]))
        .unwrap();
    let kinds: Vec<u8> = drain(&mut s)
        .iter()
        .map(|g| g.payload.to_vec()[0])
        .collect();
    let mut sorted = kinds.clone();
    sorted.sort();
    assert_eq!(kinds, sorted);
}

#[test]
fn mulpdu_change_affects_only_later_segments() {
    let mut s = DdpSource::new(3, 14 + 8).unwrap();
    s.submit_tagged(0, 9, 0, Bytes::from(vec![0; 40])).unwrap();
    let first = s.poll_segment().unwrap();
    assert_eq!(first.payload.len(), 8);
    s.set_mulpdu(14 + 16).unwrap();
    let rest = drain(&mut s);
    assert_eq!(
        first.len(),
        22,
        "a segment already handed out is never re-cut"
    );
    let lens: Vec<usize> = rest.iter().map(|g| g.payload.len()).collect();
    assert_eq!(lens, vec![16, 16]);
    let DdpHeader::Tagged(h) = rest[0].header else {
        panic!()
    };
    assert_eq!(h.to, 8);
}

#[test]
fn bad_requests_are_refused() {
    assert_eq!(
        DdpSource::new(3, 18).unwrap_err(),
        SourceError::MulpduTooSmall(18)
    );
    let mut s = DdpSource::new(3, 100).unwrap();
    assert!(matches!(
        s.submit_untagged(3, [0; 5], Bytes::new()),
        Err(SourceError::InvalidQn { qn: 3, .. })
    ));
    assert!(matches!(
        s.submit_tagged(0, 1, u64::MAX, Bytes::from_static(b"x")),
        Err(SourceError::ToWrap { .. })
    ));
}

proptest! {
    /// Any message at any MULPDU: segments fit, cover the payload exactly in order,
    /// and L=1 is on the last one only.
    #[test]
    fn segmentation_covers_payload(len in 0usize..5000, mulpdu in 19usize..2000, tagged: bool) {
        let mut s = DdpSource::new(3, mulpdu).unwrap();
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        if tagged {
            s.submit_tagged(0, 5, 100, Bytes::from(data.clone())).unwrap();
        } else {
            s.submit_untagged(0, [0; 5], Bytes::from(data.clone())).unwrap();
        }
        let segs = drain(&mut s);
        prop_assert!(!segs.is_empty());
        let mut joined = Vec::new();
        for (i, g) in segs.iter().enumerate() {
            prop_assert!(g.len() <= mulpdu);
            prop_assert_eq!(g.header.last(), i + 1 == segs.len());
            let off = match g.header {
                DdpHeader::Tagged(h) => (h.to - 100) as usize,
                DdpHeader::Untagged(h) => h.mo as usize,
            };
            prop_assert_eq!(off, joined.len());
            joined.extend_from_slice(&g.payload.to_vec());
        }
        prop_assert_eq!(joined, data);
    }
}
