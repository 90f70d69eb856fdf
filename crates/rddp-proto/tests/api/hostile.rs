//! Crafted segments never write outside a registered region, and a refused
//! segment places nothing (RFC 5041 §7.1: validation before placement).

use crate::common::*;
use proptest::prelude::*;
use rddp_proto::ddp::{DdpConfig, DdpStream, RecvBuffer};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};

/// A segment an attacker might craft: near-valid STags, TOs around the bounds and
/// the 2^64 edge, random untagged fields, random lengths and arbitrary garbage.
fn crafted(stags: Vec<u32>) -> impl Strategy<Value = Vec<u8>> {
    let to = prop_oneof![
        3 => 0xFF8u64..0x1048,
        1 => 0xF00u64..0x1000,
        1 => (u64::MAX - 64)..=u64::MAX,
        1 => any::<u64>()
    ];
    let stag = prop_oneof![
        3 => proptest::sample::select(stags.clone()),
        1 => proptest::sample::select(stags).prop_map(|s| s ^ 1),
        1 => any::<u32>()
    ];
    prop_oneof![
        3 => (any::<bool>(), stag, to, proptest::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(l, s, t, p)| tagged(l, s, t, &p)),
        1 => (any::<bool>(), 0u32..4, 0u32..4, 0u32..40, proptest::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(l, q, m, o, p)| untagged(l, q, m, o, &p)),
        1 => proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn no_crafted_segment_writes_outside_its_region(
        // STags are deterministic for a seeded table: register once to learn them.
        segs in proptest::collection::vec(crafted(setup(&MemoryTable::with_seed(77))), 1..12)
    ) {
        let mem = MemoryTable::with_seed(77);
        let stags = setup(&mem);
        let fresh = || {
            let mut s = DdpStream::new(STREAM, PD, DdpConfig::default()).unwrap();
            for id in 0..2 {
                s.post_recv(0, RecvBuffer { id, data: vec![0; 32] }).unwrap();
            }
            s
        };
        let mut s = fresh();
        // Model of what the memory must look like: apply only accepted tagged writes.
        let mut model: Vec<Vec<u8>> = stags.iter().map(|&t| mem.region(rddp_proto::mem::Stag(t)).unwrap().data().to_vec()).collect();
        let mut seq = 0;
        for seg in &segs {
            let accepted = s.on_segment(&mem, seq, seg).is_ok();
            seq += 1;
            if accepted && seg.len() > 14 && seg[0] & 0x80 != 0 {
                let stag = u32::from_be_bytes([seg[2], seg[3], seg[4], seg[5]]);
                let to = u64::from_be_bytes(seg[6..14].try_into().unwrap());
                let i = stags.iter().position(|&t| t == stag).expect("accepted STag is registered");
                prop_assert_eq!(i, 0, "only the PD-scoped writable region may be written");
                let off = (to - 0x1000) as usize;
                model[i][off..off + seg.len() - 14].copy_from_slice(&seg[14..]);
            }
            if !accepted {
                // The stream is erroneous now; the attacker opens another one.
                s = fresh();
                seq = 0;
            }
        }
        prop_assert!(mem.all_guards_intact());
        for (i, &t) in stags.iter().enumerate() {
            prop_assert_eq!(mem.region(rddp_proto::mem::Stag(t)).unwrap().data().to_vec(), &model[i][..]);
        }
    }
}

/// Four regions: writable in our PD at TO 0x1000 (64 octets), read-only in our PD,
/// writable in another PD, writable but bound to another stream.
fn setup(mem: &MemoryTable) -> Vec<u32> {
    let fill = |b| vec![b; 64];
    vec![
        mem.register(PD, StagScope::Pd, Access::REMOTE_WRITE, 0x1000, fill(0))
            .unwrap()
            .0,
        mem.register(PD, StagScope::Pd, Access::REMOTE_READ, 0x1000, fill(1))
            .unwrap()
            .0,
        mem.register(
            PdId(2),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            0x1000,
            fill(2),
        )
        .unwrap()
        .0,
        mem.register(
            PD,
            StagScope::Stream(StreamId(99)),
            Access::REMOTE_WRITE,
            0x1000,
            fill(3),
        )
        .unwrap()
        .0,
    ]
}
