//! End-to-end DDP over the simulated LLPs: out-of-order placement, in-order
//! delivery, re-chunking at every offset (issue: DDP engine, point 7).

use bytes::Bytes;
use rddp_proto::ddp::{DdpConfig, Delivery, RecvBuffer};
use rddp_proto::mem::{Access, PdId, StagScope};
use rddp_sim::{Chunking, LinkMode, Pair};

fn cfg(mulpdu: usize) -> DdpConfig {
    DdpConfig {
        mulpdu,
        max_reorder: 1 << 17,
        ..DdpConfig::default()
    }
}

fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) ^ (i >> 8) as u8)
        .collect()
}

#[test]
fn one_mib_tagged_write_in_random_order_is_placed_exactly_and_delivered_once() {
    let mut p = Pair::new(42, LinkMode::Reorder { window: 1 << 16 }, cfg(1024));
    let stag =
        p.b.mem
            .register(
                PdId(1),
                StagScope::Pd,
                Access::REMOTE_WRITE,
                0x10_0000,
                vec![0; 1 << 20],
            )
            .unwrap();
    let data = pattern(1 << 20, 7);
    p.a.stream
        .send_tagged(0x40, stag.0, 0x10_0000, Bytes::from(data.clone()))
        .unwrap();
    p.run().unwrap();
    assert!(p.b.error().is_none(), "{:?}", p.b.error());
    assert_eq!(p.b.mem.region(stag).unwrap().data(), &data[..]);
    assert!(p.b.mem.all_guards_intact());
    let tagged: Vec<_> =
        p.b.delivered
            .iter()
            .filter(|d| matches!(d, Delivery::Tagged { .. }))
            .collect();
    assert_eq!(tagged.len(), 1, "delivered exactly once");
    assert_eq!(
        tagged[0],
        &Delivery::Tagged {
            rsvd_ulp: 0x40,
            stag: stag.0,
            to: 0x10_0000,
            len: 1 << 20
        }
    );
    let stats = p.b.stream.sink_stats();
    assert_eq!(stats.segments_placed, (1u64 << 20).div_ceil(1024 - 14));
    assert!(
        stats.placed_out_of_order > stats.segments_placed / 2,
        "really out of order: {stats:?}"
    );
}

#[test]
fn untagged_messages_arriving_out_of_order_are_delivered_in_msn_order() {
    let mut p = Pair::new(7, LinkMode::Reorder { window: 64 }, cfg(64));
    for id in 0..20 {
        p.b.stream
            .post_recv(
                0,
                RecvBuffer {
                    id,
                    data: vec![0; 300],
                },
            )
            .unwrap();
    }
    let msgs: Vec<Vec<u8>> = (0..20).map(|i| pattern(i * 13, i as u8)).collect();
    for m in &msgs {
        p.a.stream
            .send_untagged(0, [0x43, 0, 0, 0, 0], Bytes::from(m.clone()))
            .unwrap();
    }
    p.run().unwrap();
    assert!(p.b.error().is_none(), "{:?}", p.b.error());
    assert_eq!(p.b.delivered.len(), 20);
    for (i, d) in p.b.delivered.iter().enumerate() {
        let Delivery::Untagged {
            msn, len, buffer, ..
        } = d
        else {
            panic!("untagged expected")
        };
        assert_eq!(*msn, i as u32 + 1);
        assert_eq!(buffer.id, i as u64);
        assert_eq!(&buffer.data[..*len as usize], &msgs[i][..]);
    }
    assert!(p.b.stream.sink_stats().placed_out_of_order > 0);
}

#[test]
fn a_send_is_delivered_only_after_earlier_writes_are_placed() {
    // Reverse arrival: the Send's segment comes first, then the Write's, last first.
    let mut p = Pair::new(1, LinkMode::Reorder { window: 1 }, cfg(64));
    let stag =
        p.b.mem
            .register(
                PdId(1),
                StagScope::Pd,
                Access::REMOTE_WRITE,
                0,
                vec![0; 500],
            )
            .unwrap();
    p.b.stream
        .post_recv(
            0,
            RecvBuffer {
                id: 9,
                data: vec![0; 8],
            },
        )
        .unwrap();
    let data = pattern(500, 3);
    p.a.stream
        .send_tagged(0x40, stag.0, 0, Bytes::from(data.clone()))
        .unwrap();
    p.a.stream
        .send_untagged(0, [0x43, 0, 0, 0, 0], Bytes::from_static(b"done"))
        .unwrap();
    let mut segs = Vec::new();
    while let Some(s) = p.a.stream.poll_segment() {
        segs.push(s.to_vec());
    }
    let n = segs.len() as u64;
    for (seq, seg) in segs.iter().enumerate().rev() {
        p.b.stream.on_segment(&p.b.mem, seq as u64, seg).unwrap();
        let delivered = p.b.stream.poll_delivery();
        if seq > 0 {
            assert!(
                delivered.is_none(),
                "nothing delivered before segment 0 arrives"
            );
        } else {
            // Everything completes at once, the Write before the Send.
            assert!(matches!(delivered, Some(Delivery::Tagged { len: 500, .. })));
            assert!(matches!(
                p.b.stream.poll_delivery(),
                Some(Delivery::Untagged { len: 4, .. })
            ));
        }
    }
    assert_eq!(p.b.stream.sink_stats().segments_placed, n);
    assert_eq!(p.b.mem.region(stag).unwrap().data(), &data[..]);
}

/// Every split offset of a byte stream carrying a few messages of each model.
#[test]
fn byte_stream_split_at_every_offset() {
    let total = {
        let mut p = Pair::new(0, LinkMode::Stream(Chunking::Whole), cfg(40));
        load(&mut p);
        let mut n = 0;
        while let Some(s) = p.a.stream.poll_segment() {
            n += 4 + s.len();
        }
        n
    };
    for at in 0..=total {
        let mut p = Pair::new(0, LinkMode::Stream(Chunking::SplitAt(at)), cfg(40));
        let stag = load(&mut p);
        p.run().unwrap();
        check(&p, stag);
    }
    for n in 1..=9 {
        let mut p = Pair::new(n as u64, LinkMode::Stream(Chunking::Fixed(n)), cfg(40));
        let stag = load(&mut p);
        p.run().unwrap();
        check(&p, stag);
    }
    let mut p = Pair::new(5, LinkMode::Stream(Chunking::Random { max: 50 }), cfg(40));
    let stag = load(&mut p);
    p.run().unwrap();
    check(&p, stag);
}

fn load(p: &mut Pair) -> rddp_proto::mem::Stag {
    let stag =
        p.b.mem
            .register(
                PdId(1),
                StagScope::Pd,
                Access::REMOTE_WRITE,
                0,
                vec![0; 100],
            )
            .unwrap();
    for id in 0..3 {
        p.b.stream
            .post_recv(
                0,
                RecvBuffer {
                    id,
                    data: vec![0; 64],
                },
            )
            .unwrap();
    }
    p.a.stream
        .send_tagged(0x40, stag.0, 0, Bytes::from(pattern(100, 1)))
        .unwrap();
    p.a.stream
        .send_untagged(0, [0x43, 0, 0, 0, 0], Bytes::from(pattern(50, 2)))
        .unwrap();
    p.a.stream
        .send_untagged(0, [0x43, 0, 0, 0, 0], Bytes::new())
        .unwrap();
    p.a.stream
        .send_tagged(0x40, stag.0, 10, Bytes::new())
        .unwrap();
    p.a.stream
        .send_untagged(0, [0x43, 0, 0, 0, 0], Bytes::from(pattern(7, 3)))
        .unwrap();
    stag
}

fn check(p: &Pair, stag: rddp_proto::mem::Stag) {
    assert!(p.b.error().is_none(), "{:?}", p.b.error());
    assert_eq!(p.b.mem.region(stag).unwrap().data(), &pattern(100, 1)[..]);
    let lens: Vec<u64> =
        p.b.delivered
            .iter()
            .map(|d| match d {
                Delivery::Tagged { len, .. } => *len,
                Delivery::Untagged { len, .. } => u64::from(*len),
            })
            .collect();
    assert_eq!(lens, vec![100, 50, 0, 0, 7]);
    let Delivery::Untagged { buffer, .. } = &p.b.delivered[1] else {
        panic!()
    };
    assert_eq!(&buffer.data[..50], &pattern(50, 2)[..]);
}
