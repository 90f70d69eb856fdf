//! The STag table shared by many streams without a table-wide lock
//! (docs/data-path.md): placements into different regions never wait for each other, a
//! placement into a busy region waits for that region only, and a region handle
//! outlives its deregistration.

use rddp_proto::mem::{Access, AccessFault, MemoryTable, PdId, StagScope, StreamId};
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::Duration;

const PD: PdId = PdId(1);
const S: StreamId = StreamId(1);
/// Far longer than any placement takes: only a lock held elsewhere reaches it.
const STUCK: Duration = Duration::from_secs(20);

fn rw() -> Access {
    Access::REMOTE_WRITE | Access::REMOTE_READ
}

#[test]
fn a_locked_region_does_not_hold_up_placement_into_another() {
    let mem = Arc::new(MemoryTable::with_seed(1));
    let a = mem
        .register(PD, StagScope::Pd, rw(), 0, vec![0; 64])
        .unwrap();
    let b = mem
        .register(PD, StagScope::Pd, rw(), 0, vec![0; 64])
        .unwrap();
    let region_a = mem.region(a).unwrap();
    // The application holds region A's octets (local access) ...
    let held = region_a.data();
    let (done_tx, done) = channel();
    let m = mem.clone();
    let t = std::thread::spawn(move || {
        // ... while another stream places into B, looks A up and registers C.
        let placed = m.place(b, PD, S, 8, b"beside");
        let looked_up = m.region(a).is_some();
        let c = m.register(PD, StagScope::Pd, rw(), 0, vec![1; 8]);
        done_tx.send((placed, looked_up, c.is_ok())).unwrap();
    });
    let got = done
        .recv_timeout(STUCK)
        .expect("placement into B waited for A");
    assert_eq!(got, (Ok(()), true, true));
    drop(held);
    t.join().unwrap();
    assert_eq!(&mem.region(b).unwrap().data()[8..14], b"beside");
    assert!(mem.all_guards_intact());
}

#[test]
fn a_placement_into_a_locked_region_waits_for_it_then_lands() {
    let mem = Arc::new(MemoryTable::with_seed(2));
    let a = mem
        .register(PD, StagScope::Pd, rw(), 0, vec![0; 16])
        .unwrap();
    let region_a = mem.region(a).unwrap();
    let mut held = region_a.data_mut();
    held[0] = 7;
    let (done_tx, done) = channel();
    let m = mem.clone();
    let t = std::thread::spawn(move || {
        done_tx.send(m.place(a, PD, S, 4, b"late")).unwrap();
    });
    // It cannot land while the application writes the region.
    assert!(done.recv_timeout(Duration::from_millis(200)).is_err());
    drop(held);
    assert_eq!(done.recv_timeout(STUCK).unwrap(), Ok(()));
    t.join().unwrap();
    assert_eq!(&region_a.data()[..8], b"\x07\0\0\0late");
}

#[test]
fn many_streams_place_into_their_own_regions_at_once() {
    let mem = Arc::new(MemoryTable::with_seed(3));
    let stags: Vec<_> = (0..8)
        .map(|_| {
            mem.register(PD, StagScope::Pd, rw(), 0, vec![0; 4096])
                .unwrap()
        })
        .collect();
    let threads: Vec<_> = stags
        .iter()
        .enumerate()
        .map(|(i, &stag)| {
            let m = mem.clone();
            std::thread::spawn(move || {
                for round in 0..200u32 {
                    let to = u64::from(round % 64) * 64;
                    m.place(stag, PD, S, to, &[i as u8 + 1; 64]).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for (i, &stag) in stags.iter().enumerate() {
        assert!(
            mem.region(stag)
                .unwrap()
                .data()
                .iter()
                .all(|&o| o == i as u8 + 1)
        );
    }
    assert!(mem.all_guards_intact());
}

#[test]
fn a_handle_outlives_deregistration_and_the_stag_dies_at_once() {
    let mem = MemoryTable::with_seed(4);
    let a = mem
        .register(PD, StagScope::Pd, rw(), 0, b"keep".to_vec())
        .unwrap();
    let lease = mem.region(a).unwrap();
    // Someone (a transmit lease) still holds the region: the memory handed back
    // is a copy and the holder keeps reading the octets.
    assert_eq!(mem.deregister(a).unwrap(), b"keep");
    assert_eq!(lease.data(), b"keep");
    assert!(mem.region(a).is_none());
    assert_eq!(mem.place(a, PD, S, 0, b"x"), Err(AccessFault::InvalidStag));
    assert_eq!(mem.len(), 0);
    assert_eq!(mem.registered_bytes(), 0);
}

#[test]
fn invalidation_is_seen_by_every_handle() {
    let mem = MemoryTable::with_seed(5);
    let a = mem
        .register(PD, StagScope::Pd, rw(), 0, vec![0; 4])
        .unwrap();
    let handle = mem.region(a).unwrap();
    mem.invalidate(a).unwrap();
    assert!(!handle.is_valid());
    assert_eq!(mem.place(a, PD, S, 0, b"x"), Err(AccessFault::InvalidStag));
    // Local access goes on until deregistration.
    handle.data_mut()[0] = 9;
    assert_eq!(mem.region(a).unwrap().data()[0], 9);
}

/// Readers share a region's lock (transmits from it, the application's
/// reads); a placement waits for them.
#[test]
fn readers_share_a_region_and_a_placement_waits_for_them() {
    let mem = Arc::new(MemoryTable::with_seed(4));
    let a = mem
        .register(PD, StagScope::Pd, rw(), 0, vec![0; 16])
        .unwrap();
    let region = mem.region(a).unwrap();
    let first = region.data();
    let (tx, rx) = channel();
    let r = region.clone();
    let t = std::thread::spawn(move || tx.send(r.data()[0]).unwrap());
    assert_eq!(
        rx.recv_timeout(STUCK),
        Ok(0),
        "a second reader waited for the first"
    );
    t.join().unwrap();
    let (done_tx, done) = channel();
    let m = mem.clone();
    let t = std::thread::spawn(move || {
        done_tx.send(m.place(a, PD, S, 0, b"w")).unwrap();
    });
    assert!(done.recv_timeout(Duration::from_millis(200)).is_err());
    drop(first);
    assert_eq!(done.recv_timeout(STUCK).unwrap(), Ok(()));
    t.join().unwrap();
    region.data_mut()[1] = 1;
    assert_eq!(&region.data()[..2], b"w\x01");
}
