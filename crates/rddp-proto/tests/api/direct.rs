//! Header-first receive at the DDP level (ddp/sink.rs) agrees with on_segment:
//! same checks, same codes, same deliveries.

use rddp_proto::ddp::{Begin, DdpConfig, DdpStream, Delivery, StreamEvent, Target};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_wire::{TaggedHeader, TerminateCode};

fn setup() -> (DdpStream, MemoryTable, u32) {
    let mem = MemoryTable::with_seed(3);
    let stag = mem
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            0x100,
            vec![0; 64],
        )
        .unwrap();
    let s = DdpStream::new(StreamId(1), PdId(1), DdpConfig::default()).unwrap();
    (s, mem, stag.0)
}

#[test]
fn direct_write_is_delivered_like_on_segment() {
    let (mut s, mem, stag) = setup();
    let h = TaggedHeader::new(false, 0x40, stag, 0x110);
    let Target::Region {
        region,
        offset,
        len,
    } = s
        .begin_segment(&mem, 0, &h.to_bytes(), 8, Begin::Alone)
        .unwrap()
    else {
        panic!("not a region target")
    };
    assert_eq!((offset, len), (0x10, 8));
    region.data_mut()[offset..offset + 8].copy_from_slice(b"directly");
    s.finish_segment(true).unwrap();
    // The message ends with an ordinary segment.
    let mut seg = TaggedHeader::new(true, 0x40, stag, 0x118)
        .to_bytes()
        .to_vec();
    seg.extend_from_slice(b"!");
    s.on_segment(&mem, 1, &seg).unwrap();
    assert_eq!(
        s.poll_delivery(),
        Some(Delivery::Tagged {
            rsvd_ulp: 0x40,
            stag,
            to: 0x110,
            len: 9
        })
    );
    assert_eq!(
        &mem.region(rddp_proto::mem::Stag(stag)).unwrap().data()[0x10..0x19],
        b"directly!"
    );
    assert_eq!(s.sink_stats().bytes_placed, 9);
}

#[test]
fn direct_checks_give_the_same_codes() {
    for (stag_off, to, len, code) in [
        (1u32, 0x100u64, 8usize, TerminateCode::DDP_INVALID_STAG),
        (0, 0x140, 1, TerminateCode::DDP_BASE_BOUNDS),
        (0, u64::MAX - 2, 8, TerminateCode::DDP_TO_WRAP),
    ] {
        let (mut s, mem, stag) = setup();
        let h = TaggedHeader::new(true, 0x40, stag + stag_off, to);
        assert!(
            s.begin_segment(&mem, 0, &h.to_bytes(), len, Begin::Alone)
                .is_err()
        );
        // Held until the LLP's check of the segment passed.
        assert!(s.poll_event().is_none(), "reported before the LLP's check");
        assert!(s.finish_segment(true).is_err());
        let Some(StreamEvent::Error(e)) = s.poll_event() else {
            panic!("no error event")
        };
        assert_eq!(e.code, code);
        assert_eq!(e.segment_len, 14 + len);
        // on_segment on a fresh stream says the same.
        let (mut s2, mem2, _) = setup();
        let mut seg = h.to_bytes().to_vec();
        seg.resize(14 + len, 0);
        assert!(s2.on_segment(&mem2, 0, &seg).is_err());
        let Some(StreamEvent::Error(e2)) = s2.poll_event() else {
            panic!()
        };
        assert_eq!(e2.code, code);
    }
    // Out of order for an in-order LLP: refused before the header is looked at.
    let (mut s, mem, stag) = setup();
    let h = TaggedHeader::new(true, 0x40, stag, 0x100);
    assert!(
        s.begin_segment(&mem, 5000, &h.to_bytes(), 4, Begin::Alone)
            .is_err()
    );
}
