//! Every DDP error code, provoked by a crafted segment, places nothing (RFC 5041 §7.1,
//! §7.2), and the validation order of RFC 5041 §7.1 holds.

use crate::common::*;
use rddp_proto::ddp::{RecvBuffer, StreamEvent, StreamState};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_wire::TerminateCode as T;

/// Run one crafted segment against a fresh stream with one region and one buffer;
/// check the code, that nothing changed, and that guards hold.
fn provoke(build: impl Fn(u32) -> Vec<u8>) -> T {
    let mem = MemoryTable::with_seed(1);
    let stag = region(&mem);
    let mut s = stream();
    s.post_recv(
        0,
        RecvBuffer {
            id: 1,
            data: vec![0; 16],
        },
    )
    .unwrap();
    let code = feed(&mut s, &mem, 0, &build(stag.0)).expect("segment must be refused");
    assert!(
        mem.region(stag).unwrap().data().iter().all(|&b| b == 0),
        "nothing placed"
    );
    assert!(mem.all_guards_intact());
    assert_eq!(s.state(), &StreamState::Erroneous(code));
    let mut flushed = false;
    s.abort();
    while let Some(e) = s.poll_event() {
        if let StreamEvent::Flushed(b) = e {
            assert!(
                b.data.iter().all(|&x| x == 0),
                "nothing placed in the receive buffer"
            );
            flushed = true;
        }
    }
    assert!(flushed);
    code
}

#[test]
fn each_ddp_error_code() {
    let other_pd = |_| {
        let mut v = tagged(true, 0, 0x1000, b"x");
        v[2..6].copy_from_slice(&0u32.to_be_bytes());
        v
    };
    type Build = Box<dyn Fn(u32) -> Vec<u8>>;
    let cases: Vec<(T, Build)> = vec![
        (
            T::DDP_LOCAL_CATASTROPHIC,
            Box::new(|_| vec![0xC1, 0x40, 0, 0]),
        ),
        (
            T::DDP_INVALID_STAG,
            Box::new(|s| tagged(true, s ^ 0x100, 0x1000, b"x")),
        ),
        (T::DDP_INVALID_STAG, Box::new(other_pd)),
        (
            T::DDP_BASE_BOUNDS,
            Box::new(|s| tagged(true, s, 0x1000 + 60, b"12345")),
        ),
        (
            T::DDP_BASE_BOUNDS,
            Box::new(|s| tagged(true, s, 0xFFF, b"1")),
        ),
        (
            T::DDP_TO_WRAP,
            Box::new(|s| tagged(true, s, u64::MAX - 1, b"123")),
        ),
        (
            T::DDP_TAGGED_INVALID_VERSION,
            Box::new(|s| {
                let mut v = tagged(true, s, 0x1000, b"x");
                v[0] = 0xC2;
                v
            }),
        ),
        (
            T::DDP_INVALID_QN,
            Box::new(|_| untagged(true, 3, 1, 0, b"x")),
        ),
        (
            T::DDP_INVALID_MSN_NO_BUFFER,
            Box::new(|_| untagged(true, 0, 2, 0, b"x")),
        ),
        (
            T::DDP_INVALID_MSN_NO_BUFFER,
            Box::new(|_| untagged(true, 0, 0, 0, b"x")),
        ),
        (
            T::DDP_INVALID_MO,
            Box::new(|_| untagged(true, 0, 1, 17, b"x")),
        ),
        (
            T::DDP_MSG_TOO_LONG,
            Box::new(|_| untagged(true, 0, 1, 10, b"1234567")),
        ),
        (
            T::DDP_UNTAGGED_INVALID_VERSION,
            Box::new(|_| {
                let mut v = untagged(true, 0, 1, 0, b"x");
                v[0] = 0x40;
                v
            }),
        ),
    ];
    for (want, build) in cases {
        assert_eq!(provoke(build), want);
    }
}

#[test]
fn stag_not_associated_other_pd_and_other_stream() {
    for scope in [StagScope::Pd, StagScope::Stream(StreamId(99))] {
        let mem = MemoryTable::with_seed(2);
        let pd = if scope == StagScope::Pd { PdId(2) } else { PD };
        let stag = mem.register(pd, scope, rw(), 0, vec![0; 8]).unwrap();
        let mut s = stream();
        assert_eq!(
            feed(&mut s, &mem, 0, &tagged(true, stag.0, 0, b"x")),
            Some(T::DDP_STAG_NOT_ASSOCIATED)
        );
        assert_eq!(mem.region(stag).unwrap().data(), &[0; 8]);
    }
}

#[test]
fn stream_bound_stag_works_on_its_stream_only() {
    let mem = MemoryTable::with_seed(3);
    let stag = mem
        .register(PD, StagScope::Stream(STREAM), rw(), 0, vec![0; 8])
        .unwrap();
    let mut s = stream();
    assert_eq!(feed(&mut s, &mem, 0, &tagged(true, stag.0, 2, b"ab")), None);
    assert_eq!(&mem.region(stag).unwrap().data()[..4], b"\0\0ab");
}

#[test]
fn missing_remote_write_right_is_an_access_violation() {
    let mem = MemoryTable::with_seed(4);
    let stag = mem
        .register(PD, StagScope::Pd, Access::REMOTE_READ, 0, vec![0; 8])
        .unwrap();
    let mut s = stream();
    assert_eq!(
        feed(&mut s, &mem, 0, &tagged(true, stag.0, 0, b"x")),
        Some(T::RDMAP_ACCESS_VIOLATION)
    );
}

#[test]
fn validation_order_follows_spec() {
    // TO wrap is reported before bounds (a wrapped sum can look in bounds).
    let mem = MemoryTable::with_seed(5);
    let stag = mem
        .register(PD, StagScope::Pd, rw(), u64::MAX - 15, vec![0; 8])
        .unwrap();
    let mut s = stream();
    assert_eq!(
        feed(&mut s, &mem, 0, &tagged(true, stag.0, u64::MAX - 1, b"abc")),
        Some(T::DDP_TO_WRAP)
    );
    // Not associated beats rights; rights beat bounds.
    let mem = MemoryTable::with_seed(6);
    let stag = mem
        .register(PdId(9), StagScope::Pd, Access::NONE, 0, vec![0; 1])
        .unwrap();
    let mut s = stream();
    assert_eq!(
        feed(&mut s, &mem, 0, &tagged(true, stag.0, 5, b"abc")),
        Some(T::DDP_STAG_NOT_ASSOCIATED)
    );
    let stag = mem
        .register(PD, StagScope::Pd, Access::NONE, 0, vec![0; 1])
        .unwrap();
    let mut s = stream();
    assert_eq!(
        feed(&mut s, &mem, 0, &tagged(true, stag.0, 5, b"abc")),
        Some(T::RDMAP_ACCESS_VIOLATION)
    );
    // Untagged: QN before MSN, MSN before MO.
    let mut s = stream();
    assert_eq!(
        feed(&mut s, &mem, 0, &untagged(true, 7, 9, 1000, b"x")),
        Some(T::DDP_INVALID_QN)
    );
    let mut s = stream();
    assert_eq!(
        feed(&mut s, &mem, 0, &untagged(true, 0, 9, 1000, b"x")),
        Some(T::DDP_INVALID_MSN_NO_BUFFER)
    );
}

#[test]
fn zero_length_tagged_segment_is_not_checked() {
    let mem = MemoryTable::with_seed(7);
    let mut s = stream();
    // STag 0 and a TO that would wrap: no check, nothing placed, delivered as tagged.
    assert_eq!(feed(&mut s, &mem, 0, &tagged(true, 0, u64::MAX, b"")), None);
    assert!(matches!(
        s.poll_delivery(),
        Some(rddp_proto::ddp::Delivery::Tagged { len: 0, .. })
    ));
}

#[test]
fn invalidated_stag_fails_as_invalid_stag() {
    let mem = MemoryTable::with_seed(8);
    let stag = region(&mem);
    let mut s = stream();
    assert_eq!(
        feed(&mut s, &mem, 0, &tagged(true, stag.0, 0x1000, b"ok")),
        None
    );
    mem.invalidate(stag).unwrap();
    assert_eq!(
        feed(&mut s, &mem, 1, &tagged(true, stag.0, 0x1002, b"no")),
        Some(T::DDP_INVALID_STAG)
    );
    assert_eq!(&mem.region(stag).unwrap().data()[..4], b"ok\0\0");
}

#[test]
fn after_an_error_nothing_more_is_placed() {
    let mem = MemoryTable::with_seed(9);
    let stag = region(&mem);
    let mut s = stream();
    assert!(feed(&mut s, &mem, 0, &tagged(true, stag.0 ^ 1, 0x1000, b"x")).is_some());
    // A perfectly valid segment is now refused and not placed.
    assert!(feed(&mut s, &mem, 1, &tagged(true, stag.0, 0x1000, b"y")).is_some());
    assert_eq!(mem.region(stag).unwrap().data()[0], 0);
    // The error is reported once, and the stream stays until the ULP aborts.
    assert!(matches!(s.poll_event(), Some(StreamEvent::Error(_))));
    assert!(s.poll_event().is_none());
    assert!(matches!(s.state(), StreamState::Erroneous(_)));
    s.abort();
    assert_eq!(s.state(), &StreamState::Closed);
}

#[test]
fn credits_model_msn_range_and_missing_buffer() {
    use rddp_proto::ddp::RecvModel;
    let mem = MemoryTable::with_seed(10);
    let mut s = stream();
    s.set_recv_model(0, RecvModel::Credits).unwrap();
    s.post_recv(
        0,
        RecvBuffer {
            id: 1,
            data: vec![0; 8],
        },
    )
    .unwrap();
    assert!(s.grant_credits(0, 2));
    // MSN 3 lies outside the two granted MSNs: 1/2/0x03.
    assert_eq!(
        feed(&mut s, &mem, 0, &untagged(true, 0, 3, 0, b"x")),
        Some(T::DDP_INVALID_MSN_RANGE)
    );

    let mut s = stream();
    s.set_recv_model(0, RecvModel::Credits).unwrap();
    s.post_recv(
        0,
        RecvBuffer {
            id: 1,
            data: vec![0; 8],
        },
    )
    .unwrap();
    s.grant_credits(0, 2);
    // MSN 2 first: takes the only buffer (association on first arrival).
    assert_eq!(
        feed(&mut s, &mem, 0, &untagged(true, 0, 2, 0, b"two")),
        None
    );
    // MSN 1 is valid but no buffer is left: 1/2/0x02, a fault of this stream only.
    assert_eq!(
        feed(&mut s, &mem, 1, &untagged(true, 0, 1, 0, b"one")),
        Some(T::DDP_INVALID_MSN_NO_BUFFER)
    );
}

#[test]
fn credits_model_delivers_and_slides_the_window() {
    use rddp_proto::ddp::{Delivery, RecvModel};
    let mem = MemoryTable::with_seed(11);
    let mut s = stream();
    s.set_recv_model(0, RecvModel::Credits).unwrap();
    for id in 0..2 {
        s.post_recv(
            0,
            RecvBuffer {
                id,
                data: vec![0; 8],
            },
        )
        .unwrap();
    }
    s.grant_credits(0, 1);
    assert_eq!(feed(&mut s, &mem, 0, &untagged(true, 0, 1, 0, b"a")), None);
    assert!(matches!(
        s.poll_delivery(),
        Some(Delivery::Untagged { msn: 1, len: 1, .. })
    ));
    // The one credit was used: MSN 2 is out of range until the ULP grants again.
    s.grant_credits(0, 1);
    assert_eq!(feed(&mut s, &mem, 1, &untagged(true, 0, 2, 0, b"b")), None);
    assert!(matches!(
        s.poll_delivery(),
        Some(Delivery::Untagged { msn: 2, .. })
    ));
}
