//! `FpduReceiver::drive_buffered`: runs of small FPDUs in batches (one peek and
//! one vectored read for many FPDUs, every payload straight into place, none
//! copied), large payloads straight into place; one buffer shared by two
//! connections driven in turn.

mod common;

use bytes::Bytes;
use common::source::Source;
use rddp_mpa::fpdu::{FpduReceiver, Progress, RdmapPlacer, RxConfig, SMALL_PAYLOAD};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope};
use rddp_proto::rdmap::{Completion, RdmapStream, WcOpcode, WcStatus, WorkRequest};
use rddp_wire::FpduEncoder;

const BASE: u64 = 0x10_0000;
const MULPDU: usize = 16_000;
const SENDS: usize = 200;
const BIG: usize = 64 * 1024;

fn stream(id: u32) -> RdmapStream {
    common::wires::stream_mulpdu(id, MULPDU)
}

/// One receiving connection: `SENDS` posted receives, a region for a Write;
/// the sender's FPDUs: `SENDS` Sends of 64 octets, then one Write of `BIG`.
struct Conn {
    mem: MemoryTable,
    rx_stream: RdmapStream,
    rx: FpduReceiver,
    src: Source,
    stag: rddp_proto::mem::Stag,
    big: Vec<u8>,
}

fn conn(id: u32, seed: u8, cut: usize) -> Conn {
    conn_with(id, seed, cut, false)
}

fn conn_with(id: u32, seed: u8, cut: usize, markers: bool) -> Conn {
    let mem = MemoryTable::with_seed(u64::from(id));
    let mut rx_stream = stream(id);
    for i in 0..SENDS {
        rx_stream.post_recv(i as u64, vec![0; 64]).unwrap();
    }
    let stag = mem
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            BASE,
            vec![0; BIG],
        )
        .unwrap();
    let tx_mem = MemoryTable::with_seed(99);
    let mut tx = stream(100 + id);
    for i in 0..SENDS {
        let p = vec![seed.wrapping_add(i as u8); 64];
        tx.post(
            &tx_mem,
            WorkRequest::Send {
                wr_id: i as u64,
                payload: Bytes::from(p).into(),
                solicited: false,
                invalidate: None,
                fence: false,
            },
        );
    }
    let big: Vec<u8> = (0..BIG).map(|i| (i as u8) ^ seed).collect();
    tx.post(
        &tx_mem,
        WorkRequest::Write {
            wr_id: 1000,
            payload: Bytes::from(big.clone()).into(),
            remote_stag: stag.0,
            remote_to: BASE,
            fence: false,
        },
    );
    let mut enc = FpduEncoder::new(true, markers);
    let mut wire = Vec::new();
    while let Some(seg) = tx.poll_segment() {
        enc.encode(&seg.to_vec(), &mut wire).unwrap();
    }
    Conn {
        mem,
        rx_stream,
        rx: FpduReceiver::new(
            RxConfig {
                crc: true,
                markers,
                max_ulpdu: MULPDU + 100,
                expect_rtr: None,
            },
            Vec::new(),
        ),
        src: Source::new(wire, cut),
        stag,
        big,
    }
}

impl Conn {
    /// One drive with the shared buffer.
    fn drive(&mut self, buf: &mut Vec<u8>) -> Progress {
        let mut p = RdmapPlacer::new(&mut self.rx_stream, &self.mem);
        self.rx.drive_buffered(&mut self.src, &mut p, buf).unwrap()
    }

    fn done(&self) -> bool {
        self.src.at == self.src.data.len()
    }

    fn check(&mut self, seed: u8) {
        let c: Vec<Completion> = std::iter::from_fn(|| self.rx_stream.poll_completion()).collect();
        assert_eq!(c.len(), SENDS);
        for (i, c) in c.iter().enumerate() {
            assert_eq!((c.opcode, c.status), (WcOpcode::Recv, WcStatus::Success));
            assert_eq!(c.wr_id, i as u64);
            let b = c.buffer.as_ref().unwrap();
            assert_eq!(&b[..64], &[seed.wrapping_add(i as u8); 64][..], "Send {i}");
        }
        assert_eq!(
            &self.mem.region(self.stag).unwrap().data()[..],
            &self.big[..]
        );
        assert!(self.mem.all_guards_intact());
    }
}

#[test]
fn small_fpdus_share_reads_and_no_payload_is_copied() {
    const { assert!(64 < SMALL_PAYLOAD && MULPDU > SMALL_PAYLOAD) };
    // Alone, a peek can show the whole stream: few system calls in all.
    let mut buf = vec![0u8; 16 * 1024];
    let mut a = conn(1, 3, usize::MAX);
    assert_eq!(a.drive(&mut buf), Progress::WouldBlock);
    assert!(a.done());
    a.check(3);
    let fpdus = a.rx.fpdus() as usize;
    assert!(fpdus > SENDS);
    let calls = a.src.reads + a.src.peeks;
    assert!(
        calls * 4 < fpdus,
        "{calls} reads and peeks for {fpdus} FPDUs"
    );
    // Every payload octet went straight into its place: the Sends' into their
    // receive buffers, the Write's into its region.
    let copied = a.rx.copied_octets() + a.rx_stream.stats().rx_copied_octets;
    assert_eq!(copied, 0, "payload octets copied");
    assert_eq!(a.rx.placed_octets(), (SENDS * 64 + BIG) as u64);

    // Two connections, one buffer, reads of any size: each is placed whole.
    let mut b = conn(2, 50, 777);
    let mut c = conn(3, 90, 5000);
    let mut rounds = 0;
    while !(b.done() && c.done()) {
        for x in [&mut b, &mut c] {
            if !x.done() {
                // One read at most (then would-block): the other goes next.
                x.src.budget = 2;
                assert_eq!(x.drive(&mut buf), Progress::WouldBlock);
            }
        }
        rounds += 1;
        assert!(rounds < 10_000);
    }
    b.check(50);
    c.check(90);
}

/// With Markers towards us there are no batches: small FPDUs are read header
/// first, Markers and all (no copy either), and each FPDU's end is read with
/// the next one's head (the batches' rule of not reading it ahead is off):
/// 3.5 reads an FPDU here, 4.5 with that rule on.
#[test]
fn small_fpdus_with_markers_read_the_next_head_with_the_end() {
    let mut buf = vec![0u8; 16 * 1024];
    let mut m = conn_with(4, 7, usize::MAX, true);
    assert_eq!(m.drive(&mut buf), Progress::WouldBlock);
    assert!(m.done());
    m.check(7);
    let fpdus = m.rx.fpdus() as usize;
    assert_eq!(m.src.peeks, 0, "a batch with Markers");
    assert!(
        m.src.reads < fpdus * 4,
        "{} reads for {fpdus} FPDUs",
        m.src.reads
    );
}

/// A stream of nothing but large payloads never goes through the buffer.
#[test]
fn large_payloads_alone_are_never_copied() {
    // (Its own counter window: the other test of this file may run at once,
    // so this one only checks its receiver's own placed count.)
    let mut buf = vec![0u8; 16 * 1024];
    let (mem, stag) = common::seeded_region(7, BASE, 1 << 20);
    let tx_mem = MemoryTable::with_seed(8);
    let mut tx = stream(20);
    let mut s = stream(21);
    let data: Vec<u8> = (0..1 << 20).map(|i: usize| (i * 7) as u8).collect();
    tx.post(
        &tx_mem,
        WorkRequest::Write {
            wr_id: 1,
            payload: Bytes::from(data.clone()).into(),
            remote_stag: stag.0,
            remote_to: BASE,
            fence: false,
        },
    );
    let mut enc = FpduEncoder::new(true, false);
    let mut wire = Vec::new();
    while let Some(seg) = tx.poll_segment() {
        enc.encode(&seg.to_vec(), &mut wire).unwrap();
    }
    let mut rx = FpduReceiver::new(
        RxConfig {
            crc: true,
            markers: false,
            max_ulpdu: MULPDU + 100,
            expect_rtr: None,
        },
        Vec::new(),
    );
    let mut src = Source::new(wire, usize::MAX);
    let mut p = RdmapPlacer::new(&mut s, &mem);
    assert_eq!(
        rx.drive_buffered(&mut src, &mut p, &mut buf).unwrap(),
        Progress::WouldBlock
    );
    assert_eq!(rx.placed_octets(), 1 << 20, "a payload octet was copied");
    assert_eq!(&mem.region(stag).unwrap().data()[..], &data[..]);
}
