//! A message of several FPDUs, read one call an FPDU: with an untagged FPDU
//! that is not its message's last, the receiver reads the whole untagged head
//! of the next FPDU (20 octets, where any head has at least 16), so the later
//! FPDUs of a Send cost no read of their own for the last 4 octets of their
//! head (a 64 KiB Send over MPA is two FPDUs). A tagged FPDU put there instead
//! (another message's, interleaved) has 4 payload octets copied from what was
//! read ahead (counted), and every octet lands where header first puts it.

mod common;

use bytes::Bytes;
use common::source::Source;
use rddp_mpa::fpdu::{FpduReceiver, Progress, RdmapPlacer, RxConfig};
use rddp_proto::mem::{MemoryTable, Stag};
use rddp_proto::rdmap::{Completion, RdmapStream, WcStatus, WorkRequest};
use rddp_wire::FpduEncoder;

const MULPDU: usize = 1000;
/// Three FPDUs a message (two full ones and a shorter last).
const LEN: usize = 2500;
const BASE: u64 = 0x10_0000;

fn stream(id: u32) -> RdmapStream {
    common::wires::stream_mulpdu(id, MULPDU)
}

fn data(i: usize) -> Vec<u8> {
    (0..LEN).map(|k| (i * 37 + k * 7) as u8).collect()
}

/// The receiver's region for Writes (the same STag every time: one seed).
fn memory() -> (MemoryTable, Stag) {
    common::seeded_region(5, BASE, 8 * LEN)
}

/// The FPDUs of `sends` Sends and, if `write`, one Write of LEN octets to
/// the region (after the Sends), each message's FPDUs in order.
fn fpdus(sends: usize, write: bool) -> Vec<Vec<u8>> {
    let (_, stag) = memory();
    let tx_mem = MemoryTable::with_seed(99);
    let mut tx = stream(2);
    for i in 0..sends {
        let wr = WorkRequest::Send {
            wr_id: i as u64,
            payload: Bytes::from(data(i)).into(),
            solicited: false,
            invalidate: None,
            fence: false,
        };
        tx.post(&tx_mem, wr);
    }
    if write {
        let wr = WorkRequest::Write {
            wr_id: 99,
            payload: Bytes::from(data(99)).into(),
            remote_stag: stag.0,
            remote_to: BASE + LEN as u64,
            fence: false,
        };
        tx.post(&tx_mem, wr);
    }
    let mut enc = FpduEncoder::new(true, false);
    std::iter::from_fn(|| tx.poll_segment())
        .map(|seg| {
            let mut w = Vec::new();
            enc.encode(&seg.to_vec(), &mut w).unwrap();
            w
        })
        .collect()
}

struct Received {
    recvs: Vec<Completion>,
    region: Vec<u8>,
    reads: usize,
    copied: u64,
}

/// All of `wire` at once, header first (`drive`), into posted buffers of
/// 4 KiB: what the receiver made of it, its reads and the octets it copied.
fn receive(wire: Vec<u8>) -> Received {
    let (mem, stag) = memory();
    let mut s = stream(1);
    for i in 0..16 {
        s.post_recv(i, vec![0; 4096]).unwrap();
    }
    let mut rx = FpduReceiver::new(
        RxConfig {
            crc: true,
            markers: false,
            max_ulpdu: MULPDU,
            expect_rtr: None,
        },
        Vec::new(),
    );
    let mut src = Source::new(wire, usize::MAX);
    let mut p = RdmapPlacer::new(&mut s, &mem);
    assert_eq!(rx.drive(&mut src, &mut p).unwrap(), Progress::WouldBlock);
    let copied = rx.copied_octets() + s.stats().rx_copied_octets;
    assert_eq!(src.at, src.data.len(), "all read");
    assert!(s.poll_segment().is_none(), "nothing refused");
    Received {
        recvs: std::iter::from_fn(|| s.poll_completion()).collect(),
        region: mem.region(stag).unwrap().data()[..].to_vec(),
        reads: src.reads,
        copied,
    }
}

fn check_sends(r: &Received, sends: usize) {
    assert_eq!(r.recvs.len(), sends);
    for (i, c) in r.recvs.iter().enumerate() {
        assert_eq!(c.status, WcStatus::Success);
        assert_eq!(c.byte_len as usize, LEN);
        assert_eq!(&c.buffer.as_ref().unwrap()[..LEN], &data(i)[..], "Send {i}");
    }
}

#[test]
fn a_sends_later_fpdus_take_one_read_each() {
    const SENDS: usize = 8;
    let f = fpdus(SENDS, false);
    assert_eq!(f.len(), 3 * SENDS, "three FPDUs a Send");
    let r = receive(f.concat());
    check_sends(&r, SENDS);
    assert_eq!(r.copied, 0, "payload copied");
    // One read an FPDU (its payload, then PAD, CRC and the next head in the
    // same call), and one for the last 4 head octets of each Send's first
    // FPDU (a Last FPDU reads only the 16 octets any head has): 4 a Send,
    // 1 for the first head. Reading only 16 octets after every FPDU made it
    // 6 a Send.
    assert!(
        r.reads <= 4 * SENDS + 2,
        "{} reads for {SENDS} Sends of 3 FPDUs",
        r.reads
    );
}

#[test]
fn a_tagged_fpdu_among_a_sends_fpdus_costs_four_octets_and_places_alike() {
    let mut f = fpdus(1, true);
    assert_eq!(f.len(), 6);
    // The Write's first FPDU right after the Send's first (siw's tolerance:
    // one unfinished untagged and one unfinished tagged message).
    let w = f.remove(3);
    f.insert(1, w);
    let r = receive(f.concat());
    check_sends(&r, 1);
    let mut want = vec![0; 8 * LEN];
    want[LEN..2 * LEN].copy_from_slice(&data(99));
    assert!(r.region == want, "the Write's octets where it put them");
    assert_eq!(r.copied, 4, "the tagged FPDU's first 4 payload octets");
}
