//! The receive copy counters count what is copied (the tests in rx_direct.rs
//! assert they stay 0 there). Octets that arrived before FPDU mode (the
//! setup's leftover) are copied into place and counted by the receiver
//! (`FpduReceiver::copied_octets`), and it reads the rest straight from the
//! source; the whole-segment entry point (`RdmapStream::on_segment`) copies
//! and counts in the stream's statistics.

use bytes::Bytes;
use rddp_mpa::fpdu::{FpduReceiver, Progress, RdmapPlacer, RxConfig};
use rddp_proto::ddp::DdpConfig;
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_proto::rdmap::{RdmapConfig, RdmapStream, WcStatus, WorkRequest};
use rddp_wire::FpduEncoder;
const BASE: u64 = 0x8000;

fn stream(id: u32) -> RdmapStream {
    let cfg = RdmapConfig {
        ddp: DdpConfig {
            mulpdu: 1000,
            ..DdpConfig::default()
        },
        ..RdmapConfig::default()
    };
    RdmapStream::new(StreamId(id), PdId(1), cfg).unwrap()
}

/// A Write of `n` octets and a Send of 500, as FPDUs (Markers on), and each
/// FPDU's payload length.
fn wire(n: usize) -> (Vec<u8>, Vec<usize>, u32, MemoryTable, RdmapStream) {
    let mem = MemoryTable::with_seed(9);
    let stag = mem
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            BASE,
            vec![0; n],
        )
        .unwrap();
    let mut rx = stream(2);
    rx.post_recv(1, vec![0; 500]).unwrap();
    let mut tx = stream(1);
    let amem = MemoryTable::with_seed(8);
    tx.post(
        &amem,
        WorkRequest::Write {
            wr_id: 1,
            payload: Bytes::from(vec![0x5A; n]).into(),
            remote_stag: stag.0,
            remote_to: BASE,
            fence: false,
        },
    );
    tx.post(
        &amem,
        WorkRequest::Send {
            wr_id: 2,
            payload: Bytes::from(vec![0xC3; 500]).into(),
            solicited: false,
            invalidate: None,
            fence: false,
        },
    );
    let mut enc = FpduEncoder::new(true, true);
    let (mut w, mut lens) = (Vec::new(), Vec::new());
    while let Some(seg) = tx.poll_segment() {
        lens.push(seg.payload.len());
        enc.encode(&seg.to_vec(), &mut w).unwrap();
    }
    (w, lens, stag.0, mem, rx)
}

#[test]
fn leftover_octets_are_copied_and_counted_the_rest_is_not() {
    let (w, lens, stag, mem, mut rx) = wire(5000);
    // The setup read the first 1200 octets with its Reply: the first FPDU
    // whole (its payload copied from the leftover) and part of the second.
    let (left, rest) = w.split_at(1200);
    let mut r = FpduReceiver::new(
        RxConfig {
            crc: true,
            markers: true,
            max_ulpdu: 1000,
            expect_rtr: None,
        },
        left.to_vec(),
    );
    let mut src = rest;
    let got = r
        .drive(&mut src, &mut RdmapPlacer::new(&mut rx, &mem))
        .unwrap();
    assert_eq!(got, Progress::Eof { at_boundary: true });
    assert_eq!(rx.stats().rx_copied_octets, 0, "the engine copied none");
    let copied = r.copied_octets();
    // Payload octets inside the 1200 leftover octets: all of the first FPDU's,
    // and of the second's what follows its head (Markers excluded).
    assert!(copied > lens[0] as u64, "{copied}");
    assert!(copied < 1200 - 16, "{copied}");
    assert_eq!(
        copied + r.placed_octets(),
        5000 + 500,
        "every payload octet is either copied or read into place"
    );
    assert!(mem.region(rddp_proto::mem::Stag(stag)).unwrap().data()[..] == vec![0x5A; 5000][..]);
    let c: Vec<_> = std::iter::from_fn(|| rx.poll_completion()).collect();
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].status, c[0].byte_len), (WcStatus::Success, 500));
}

#[test]
fn whole_segment_entry_points_copy_and_count() {
    let (w, lens, _, mem, mut rx) = wire(3000);
    // The same FPDUs through a whole-buffer feed: every user payload octet is
    // copied from the caller's buffer.
    let mut r = FpduReceiver::new(
        RxConfig {
            crc: true,
            markers: true,
            max_ulpdu: 1000,
            expect_rtr: None,
        },
        w.clone(),
    );
    let got = r
        .drive(&mut std::io::empty(), &mut RdmapPlacer::new(&mut rx, &mem))
        .unwrap();
    assert_eq!(got, Progress::Eof { at_boundary: true });
    assert_eq!(r.placed_octets(), 0);
    assert_eq!(r.copied_octets(), lens.iter().sum::<usize>() as u64);
    // RdmapStream::on_segment (SCTP, in-memory LLP) copies and counts too.
    let (_, _, stag, mem2, mut rx2) = wire(100);
    let before = rx2.stats().rx_copied_octets;
    let mut seg = rddp_wire::TaggedHeader::new(
        true,
        rddp_wire::RdmapControl::new(rddp_wire::Opcode::RDMA_WRITE).0,
        stag,
        BASE,
    )
    .to_bytes()
    .to_vec();
    seg.extend_from_slice(&[1; 100]);
    rx2.on_segment(&mem2, 0, &seg).unwrap();
    assert_eq!(rx2.stats().rx_copied_octets - before, 100);
}
