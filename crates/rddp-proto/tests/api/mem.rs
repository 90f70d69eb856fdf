//! The STag table (RFC 5042).

use rddp_proto::mem::{
    Access, AccessFault, MemError, MemoryTable, PdId, Stag, StagScope, StreamId, TableLimits,
};

const PD: PdId = PdId(1);
const S: StreamId = StreamId(1);

#[test]
fn a_stale_stag_never_matches_a_new_region() {
    let mem = MemoryTable::with_seed(3);
    let mut seen = std::collections::HashSet::new();
    let mut stale = Vec::new();
    // Reuse one index far more often than there are keys.
    for _ in 0..600 {
        let stag = mem
            .register(PD, StagScope::Pd, Access::REMOTE_WRITE, 0, vec![0; 4])
            .unwrap();
        assert!(seen.insert(stag), "STag {stag} handed out twice");
        for old in &stale {
            assert!(mem.region(*old).is_none(), "stale {old} matches");
        }
        mem.deregister(stag).unwrap();
        stale.push(stag);
    }
    // After 256 keys an index retires: new STags move on to another index.
    assert!(seen.iter().any(|s| s.index() != 1));
}

#[test]
fn stag_is_index_plus_key_and_keys_differ() {
    let mem = MemoryTable::with_seed(4);
    let a = mem
        .register(PD, StagScope::Pd, Access::NONE, 0, vec![])
        .unwrap();
    let b = mem
        .register(PD, StagScope::Pd, Access::NONE, 0, vec![])
        .unwrap();
    assert_eq!((a.index(), b.index()), (1, 2));
    assert_eq!(Stag::new(a.index(), a.key()), a);
    // A different key at a live index misses.
    assert!(
        mem.region(Stag::new(a.index(), a.key().wrapping_add(1)))
            .is_none()
    );
    assert!(mem.region(Stag(0)).is_none());
}

#[test]
fn read_and_write_rights_are_independent() {
    let mem = MemoryTable::with_seed(5);
    let r = mem
        .register(
            PD,
            StagScope::Pd,
            Access::REMOTE_READ,
            0,
            b"secret".to_vec(),
        )
        .unwrap();
    let w = mem
        .register(PD, StagScope::Pd, Access::REMOTE_WRITE, 0, vec![0; 6])
        .unwrap();
    assert_eq!(mem.read_remote(r, PD, S, 0, 6).unwrap(), b"secret");
    assert_eq!(mem.place(r, PD, S, 0, b"x"), Err(AccessFault::AccessRights));
    assert_eq!(
        mem.read_remote(w, PD, S, 0, 1).unwrap_err(),
        AccessFault::AccessRights
    );
    assert_eq!(mem.place(w, PD, S, 0, b"abc"), Ok(()));
}

#[test]
fn remote_invalidation_needs_association() {
    let mem = MemoryTable::with_seed(6);
    let t = mem
        .register(
            PD,
            StagScope::Stream(S),
            Access::REMOTE_WRITE | Access::REMOTE_INVALIDATE,
            0,
            vec![0; 4],
        )
        .unwrap();
    assert_eq!(
        mem.remote_invalidate(t, PD, StreamId(2)),
        Err(AccessFault::NotAssociated)
    );
    assert_eq!(
        mem.remote_invalidate(t, PdId(2), S),
        Err(AccessFault::NotAssociated)
    );
    assert_eq!(mem.remote_invalidate(t, PD, S), Ok(()));
    assert_eq!(
        mem.remote_invalidate(t, PD, S),
        Err(AccessFault::InvalidStag)
    );
    assert_eq!(mem.place(t, PD, S, 0, b"x"), Err(AccessFault::InvalidStag));
    // Local access survives invalidation until deregistration.
    assert_eq!(mem.region(t).unwrap().data(), &[0; 4]);
    assert_eq!(mem.deregister(t).unwrap(), vec![0; 4]);
    assert_eq!(mem.deregister(t), Err(MemError::UnknownStag(t)));
}

#[test]
fn limits_are_clear_errors() {
    let mem = MemoryTable::with_seed(7);
    mem.set_limits(TableLimits {
        max_regions: 2,
        max_bytes: 10,
    });
    mem.register(PD, StagScope::Pd, Access::NONE, 0, vec![0; 6])
        .unwrap();
    assert!(matches!(
        mem.register(PD, StagScope::Pd, Access::NONE, 0, vec![0; 6]),
        Err(MemError::TooManyBytes {
            asked: 6,
            limit: 10
        })
    ));
    mem.register(PD, StagScope::Pd, Access::NONE, 0, vec![0; 4])
        .unwrap();
    assert_eq!(
        mem.register(PD, StagScope::Pd, Access::NONE, 0, vec![]),
        Err(MemError::TooManyRegions(2))
    );
    assert!(matches!(
        MemoryTable::with_seed(1).register(PD, StagScope::Pd, Access::NONE, u64::MAX, vec![0; 2]),
        Err(MemError::RangeWraps { .. })
    ));
    assert_eq!(mem.len(), 2);
    assert_eq!(mem.registered_bytes(), 10);
}
