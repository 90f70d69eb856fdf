//! Two rddp endpoints over real loopback TCP: tagged writes and untagged messages
//! both ways, CRC on and off, Markers on and off per direction, Rev 1 and Rev 2
//! (RTR by Write and by Read), private data both ways.

use crate::common::exchange;
use rddp_mpa::{MpaOptions, Role, Rtr, RtrTypes};

fn rev1(crc: bool, markers: bool) -> MpaOptions {
    MpaOptions {
        crc,
        markers,
        ..MpaOptions::rev1()
    }
}

#[test]
fn rev1_crc_on_no_markers_large_messages() {
    let (i, r) = exchange(rev1(true, false), rev1(true, false), 300_000);
    assert_eq!((i.neg.rev, i.neg.crc, i.neg.rtr), (1, true, None));
    assert_eq!((r.neg.role, r.neg.crc), (Role::Responder, true));
    // Most of each 300 KB write went from the socket straight into the region.
    assert!(
        r.direct_bytes > 150_000 && i.direct_bytes > 150_000,
        "{} {}",
        r.direct_bytes,
        i.direct_bytes
    );
}

#[test]
fn direct_placement_with_crc_off_and_a_small_emss() {
    // Many FPDUs, many headers.
    let o = MpaOptions {
        emss: Some(1448),
        ..rev1(false, false)
    };
    let (i, r) = exchange(o.clone(), o, 100_000);
    assert!(i.direct_bytes > 0 && r.direct_bytes > 0);
}

#[test]
fn rev1_crc_off_both_sides() {
    let (i, r) = exchange(rev1(false, false), rev1(false, false), 100_000);
    assert!(!i.neg.crc && !r.neg.crc);
}

#[test]
fn crc_is_on_if_either_side_asks() {
    let (i, r) = exchange(rev1(false, false), rev1(true, false), 5000);
    assert!(i.neg.crc && r.neg.crc);
    let (i, r) = exchange(rev1(true, false), rev1(false, false), 5000);
    assert!(i.neg.crc && r.neg.crc);
}

#[test]
fn markers_both_directions_small_emss() {
    let mut o = rev1(true, true);
    o.emss = Some(1448);
    let (i, r) = exchange(o.clone(), o, 70_000);
    assert!(i.neg.markers_tx && i.neg.markers_rx && r.neg.markers_tx && r.neg.markers_rx);
    // Header-first receive (docs/data-path.md): direct placement with Markers towards us too.
    assert!(
        i.direct_bytes >= 140_000 && r.direct_bytes >= 140_000,
        "direct placement with Markers: {} {}",
        i.direct_bytes,
        r.direct_bytes
    );
}

#[test]
fn markers_each_direction_alone() {
    // Only the responder asks: initiator->responder FPDUs carry Markers.
    let (i, r) = exchange(rev1(true, false), rev1(true, true), 20_000);
    assert!(i.neg.markers_tx && !i.neg.markers_rx && r.neg.markers_rx && !r.neg.markers_tx);
    // Only the initiator asks, CRC off.
    let (i, r) = exchange(rev1(false, true), rev1(false, false), 20_000);
    assert!(!i.neg.markers_tx && i.neg.markers_rx && r.neg.markers_tx);
}

#[test]
fn rev2_rtr_write_with_ird_ord_and_private_data() {
    let i = MpaOptions {
        private_data: vec![0xAB; 508],
        ird: 4,
        ord: 8,
        ..MpaOptions::default()
    };
    let r = MpaOptions {
        private_data: b"reply".to_vec(),
        ird: 16,
        ord: 16,
        ..MpaOptions::default()
    };
    let (i, r) = exchange(i, r, 50_000);
    assert_eq!(i.neg.rev, 2);
    assert_eq!(i.neg.rtr, Some(Rtr::Write));
    assert_eq!(r.neg.rtr, Some(Rtr::Write));
    assert_eq!(i.neg.peer_private_data, b"reply");
    assert_eq!(r.neg.peer_private_data, vec![0xAB; 508]);
    // Responder: IRD raised to our ORD 8, ORD lowered to our IRD 4.
    assert_eq!(r.neg.ird_ord, Some((8, 4)));
    assert_eq!(i.neg.ird_ord, Some((4, 8)));
}

#[test]
fn rev2_rtr_read_with_markers_and_crc_off() {
    let i = MpaOptions {
        crc: false,
        markers: true,
        emss: Some(1448),
        ..MpaOptions::default()
    };
    let r = MpaOptions {
        crc: false,
        rtr: RtrTypes {
            write: false,
            read: true,
        },
        emss: Some(1448),
        ..MpaOptions::default()
    };
    let (i, r) = exchange(i, r, 40_000);
    assert_eq!((i.neg.rtr, r.neg.rtr), (Some(Rtr::Read), Some(Rtr::Read)));
    assert!(!i.neg.crc && i.neg.markers_rx && !i.neg.markers_tx);
}

#[test]
fn rev2_initiator_meets_rev1_responder() {
    let (i, r) = exchange(
        MpaOptions::default(),
        MpaOptions {
            private_data: vec![1; 512],
            ..MpaOptions::rev1()
        },
        10_000,
    );
    assert_eq!((i.neg.rev, r.neg.rev, i.neg.rtr), (1, 1, None));
    assert_eq!(i.neg.peer_private_data, vec![1; 512]);
}

#[test]
fn rev2_without_peer_to_peer() {
    let o = MpaOptions {
        p2p: false,
        ..MpaOptions::default()
    };
    let (i, _) = exchange(o.clone(), o, 10_000);
    assert_eq!((i.neg.rev, i.neg.rtr), (2, None));
    assert!(i.neg.ird_ord.is_some());
}
