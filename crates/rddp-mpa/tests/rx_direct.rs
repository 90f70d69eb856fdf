//! The header-first FPDU receiver (`FpduReceiver` + `RdmapPlacer`,
//! docs/data-path.md) driven sans-IO with real encoded FPDUs (RDMAP's own segments
//! through the crate's `FpduEncoder`), split into every kind of read (1 octet,
//! random sizes, a would-block between reads), CRC on and off, Markers on and
//! off; and once over a real blocking TCP connection.
//!
//! Every test in this file places only straight from the source, so the
//! receive copy counters stay 0 (the receiver's and the stream's); the
//! copying paths are counted in `rx_leftover.rs`.

use bytes::Bytes;
use rddp_mpa::fpdu::{FpduReceiver, Progress, RdmapPlacer, RxConfig};
use rddp_mpa::setup::Rtr;
use rddp_proto::ddp::{BufferOrdering, BufferPool, DdpConfig, PoolConfig, RecvBuffer};
use rddp_proto::mem::{Access, MemoryTable, PdId, Stag, StagScope, StreamId};
use rddp_proto::rdmap::{
    AsyncEvent, Completion, RdmapConfig, RdmapStream, WcOpcode, WcStatus, WorkRequest,
};
use rddp_wire::rdmap::qn;
use rddp_wire::{DdpHeader, FpduEncoder, TerminateCode};
use std::io::{self, Read};

const BASE: u64 = 0x10_0000;
/// Small segments: many FPDUs, Markers inside headers and payloads.
const MULPDU: usize = 700;

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// One side: its memory, RDMAP stream, encoder towards the peer, receiver.
struct Side {
    mem: MemoryTable,
    s: RdmapStream,
    enc: FpduEncoder,
    rx: FpduReceiver,
}

impl Side {
    fn new(id: u32, crc: bool, markers: bool) -> Self {
        let cfg = RdmapConfig {
            ddp: DdpConfig {
                mulpdu: MULPDU,
                ..DdpConfig::default()
            },
            ..RdmapConfig::default()
        };
        Self {
            mem: MemoryTable::with_seed(u64::from(id)),
            s: RdmapStream::new(StreamId(id), PdId(1), cfg).unwrap(),
            enc: FpduEncoder::new(crc, markers),
            rx: FpduReceiver::new(
                RxConfig {
                    crc,
                    markers,
                    max_ulpdu: MULPDU,
                    expect_rtr: None,
                },
                Vec::new(),
            ),
        }
    }

    /// Payload octets copied in user space: the receiver's and the stream's.
    fn copied(&self) -> u64 {
        self.rx.copied_octets() + self.s.stats().rx_copied_octets
    }

    fn region(&self, access: Access, len: usize) -> Stag {
        self.mem
            .register(PdId(1), StagScope::Pd, access, BASE, vec![0; len])
            .unwrap()
    }

    /// Our queued segments as FPDUs: (the segment's DDP header, its FPDU).
    fn fpdus(&mut self) -> Vec<(DdpHeader, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(seg) = self.s.poll_segment() {
            let mut w = Vec::new();
            self.enc.encode(&seg.to_vec(), &mut w).unwrap();
            out.push((seg.header, w));
        }
        out
    }

    fn completions(&mut self) -> Vec<Completion> {
        std::iter::from_fn(|| self.s.poll_completion()).collect()
    }

    fn terminate_sent(&mut self) -> Option<TerminateCode> {
        std::iter::from_fn(|| self.s.poll_event()).find_map(|e| match e {
            AsyncEvent::TerminateSent { code, .. } => Some(code),
            _ => None,
        })
    }
}

/// How a source hands out the octets: sizes of successive reads, with a
/// would-block after each.
#[derive(Clone, Copy, Debug)]
enum Cut {
    One,
    Random(u64),
    Whole,
}

struct Source {
    data: Vec<u8>,
    at: usize,
    cut: Cut,
    rng: u64,
    blocked: bool,
}

impl Source {
    fn new(data: Vec<u8>, cut: Cut) -> Self {
        let rng = match cut {
            Cut::Random(s) => s,
            _ => 1,
        };
        Self {
            data,
            at: 0,
            cut,
            rng,
            blocked: false,
        }
    }
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // A would-block between any two reads: the receiver must resume there.
        self.blocked = !self.blocked;
        if self.blocked || self.at == self.data.len() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let k = match self.cut {
            Cut::One => 1,
            Cut::Whole => usize::MAX,
            Cut::Random(_) => {
                self.rng = self
                    .rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (self.rng >> 33) as usize % 1500 + 1
            }
        };
        let n = k.min(buf.len()).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Feed `wire` to `to` through its receiver, read by read, until all of it is
/// used or the receiver stops. Returns the last progress.
fn deliver(to: &mut Side, wire: Vec<u8>, cut: Cut) -> Progress {
    let mut src = Source::new(wire, cut);
    loop {
        let mut p = RdmapPlacer::new(&mut to.s, &to.mem);
        let got = to.rx.drive(&mut src, &mut p).unwrap();
        let done = src.at == src.data.len() && src.blocked;
        match got {
            Progress::WouldBlock if !done => {}
            other => return other,
        }
    }
}

fn wire_of(fpdus: &[(DdpHeader, Vec<u8>)]) -> Vec<u8> {
    fpdus.iter().flat_map(|(_, f)| f.clone()).collect()
}

/// B posts an RDMA Read of A's region; A answers. Returns the Read's sink STag.
fn read_request(a: &mut Side, b: &mut Side, src: Stag, len: u32, cut: Cut) -> Stag {
    let sink = b.region(Access::REMOTE_WRITE, len as usize);
    b.s.post(
        &b.mem,
        WorkRequest::Read {
            wr_id: 40,
            local_stag: sink.0,
            local_to: BASE,
            len,
            remote_stag: src.0,
            remote_to: BASE,
            fence: false,
        },
    );
    let req = wire_of(&b.fpdus());
    assert_eq!(deliver(a, req, cut), Progress::WouldBlock);
    sink
}

/// What every scenario sets up on B: a region for a Write, two posted receive
/// buffers (or a shared pool holding them), and on A a region B reads.
struct Setup {
    a: Side,
    b: Side,
    dst: Stag,
    src: Stag,
    write: Vec<u8>,
    sends: [Vec<u8>; 2],
    read: Vec<u8>,
    pool: Option<BufferPool>,
}

fn setup(crc: bool, markers: bool, pooled: bool) -> Setup {
    let a = Side::new(1, crc, markers);
    let mut b = Side::new(2, crc, markers);
    let dst = b.region(Access::REMOTE_WRITE, 30_000);
    let read = pattern(9000, 7);
    let src = a
        .mem
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_READ,
            BASE,
            read.clone(),
        )
        .unwrap();
    let pool = pooled.then(|| {
        let pool = BufferPool::new(PoolConfig::shared(BufferOrdering::Arrival, 8, 8));
        b.s.ddp_mut().set_recv_pool(qn::SEND, &pool).unwrap();
        for id in [11, 12] {
            pool.post(RecvBuffer {
                id,
                data: vec![0; 5000],
            })
            .unwrap();
        }
        pool
    });
    if !pooled {
        for id in [1, 2] {
            b.s.post_recv(id, vec![0; 5000]).unwrap();
        }
    }
    Setup {
        a,
        b,
        dst,
        src,
        write: pattern(20_000, 3),
        sends: [pattern(3000, 5), pattern(5000, 9)],
        read,
        pool,
    }
}

/// A posts a Write of 20,000 octets and two Sends; B's Read of 9,000 octets is
/// answered. Returns A's FPDUs towards B, in order.
fn traffic(t: &mut Setup, cut: Cut) -> (Stag, Vec<(DdpHeader, Vec<u8>)>) {
    let sink = read_request(&mut t.a, &mut t.b, t.src, t.read.len() as u32, cut);
    let a = &mut t.a;
    a.s.post(
        &a.mem,
        WorkRequest::Write {
            wr_id: 20,
            payload: Bytes::from(t.write.clone()).into(),
            remote_stag: t.dst.0,
            remote_to: BASE + 100,
            fence: false,
        },
    );
    for (i, p) in t.sends.iter().enumerate() {
        a.s.post(
            &a.mem,
            WorkRequest::Send {
                wr_id: 30 + i as u64,
                payload: Bytes::from(p.clone()).into(),
                solicited: false,
                invalidate: None,
                fence: false,
            },
        );
    }
    (sink, a.fpdus())
}

fn recv_ids(t: &Setup) -> [u64; 2] {
    if t.pool.is_some() { [11, 12] } else { [1, 2] }
}

#[test]
fn every_payload_kind_is_placed_straight_from_the_source() {
    for crc in [true, false] {
        for markers in [false, true] {
            for pooled in [false, true] {
                for cut in [Cut::One, Cut::Random(7), Cut::Random(99), Cut::Whole] {
                    let mut t = setup(crc, markers, pooled);
                    let (sink, fpdus) = traffic(&mut t, cut);
                    let what = format!("crc {crc} markers {markers} pool {pooled} {cut:?}");
                    assert!(fpdus.len() > 40, "{what}: {} FPDUs", fpdus.len());
                    assert_eq!(
                        deliver(&mut t.b, wire_of(&fpdus), cut),
                        Progress::WouldBlock,
                        "{what}"
                    );
                    assert_eq!(t.b.terminate_sent(), None, "{what}");
                    let r = t.b.mem.region(t.dst).unwrap();
                    assert_eq!(&r.data()[100..20_100], &t.write[..], "{what}");
                    assert_eq!(
                        &t.b.mem.region(sink).unwrap().data()[..],
                        &t.read[..],
                        "{what}"
                    );
                    let c = t.b.completions();
                    assert_eq!(c.len(), 3, "{what}: {c:?}");
                    assert_eq!(
                        (c[0].opcode, c[0].status),
                        (WcOpcode::RdmaRead, WcStatus::Success)
                    );
                    for (k, want) in t.sends.iter().enumerate() {
                        let c = &c[k + 1];
                        assert_eq!((c.opcode, c.status), (WcOpcode::Recv, WcStatus::Success));
                        assert_eq!(c.wr_id, recv_ids(&t)[k], "{what}");
                        assert_eq!(c.byte_len as usize, want.len());
                        assert_eq!(&c.buffer.as_ref().unwrap()[..want.len()], &want[..]);
                    }
                    assert!(t.b.mem.all_guards_intact(), "{what}");
                    assert!(t.b.rx.placed_octets() >= 20_000 + 9000 + 8000);
                    assert_eq!(t.b.copied(), 0, "{what}: a payload was copied");
                }
            }
        }
    }
}

/// Which message's last FPDU gets a corrupted payload octet.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Write,
    ReadResponse,
    Send,
}

/// The last FPDU (L=1) of the first message of `kind`: finishing it would
/// deliver the message.
fn last_fpdu_of(fpdus: &[(DdpHeader, Vec<u8>)], kind: Kind) -> usize {
    let first = first_fpdu_of(fpdus, kind);
    first
        + fpdus[first..]
            .iter()
            .position(|(h, _)| match h {
                DdpHeader::Tagged(t) => t.ctrl.last(),
                DdpHeader::Untagged(u) => u.ctrl.last(),
            })
            .unwrap()
}

fn first_fpdu_of(fpdus: &[(DdpHeader, Vec<u8>)], kind: Kind) -> usize {
    fpdus
        .iter()
        .position(|(h, _)| {
            let op = match h {
                DdpHeader::Tagged(t) => t.rsvd_ulp & 0x0F,
                DdpHeader::Untagged(u) => u.rsvd_ulp[0] & 0x0F,
            };
            match kind {
                Kind::Write => op == 0x0,
                Kind::ReadResponse => op == 0x2,
                Kind::Send => op == 0x3,
            }
        })
        .unwrap()
}

#[test]
fn a_bad_crc_on_a_directly_placed_payload_delivers_nothing() {
    for kind in [Kind::Write, Kind::ReadResponse, Kind::Send] {
        for pooled in [false, true] {
            for markers in [false, true] {
                let mut t = setup(true, markers, pooled);
                let (sink, mut fpdus) = traffic(&mut t, Cut::Random(3));
                let what = format!("{kind:?} pool {pooled} markers {markers}");
                let i = last_fpdu_of(&fpdus, kind);
                // A payload octet (past ULPDU_Length, header and any Marker).
                let f = &mut fpdus[i].1;
                let at = f.len() - 40;
                f[at] ^= 0x10;
                let progress = deliver(&mut t.b, wire_of(&fpdus), Cut::Random(5));
                assert_eq!(progress, Progress::Stopped, "{what}");
                assert_eq!(
                    t.b.terminate_sent(),
                    Some(TerminateCode::MPA_CRC_ERROR),
                    "{what}"
                );
                // The Terminate is the stream's last message, its code alone.
                let term = t.b.s.poll_segment().expect("no Terminate queued");
                let DdpHeader::Untagged(h) = term.header else {
                    panic!("{what}: not untagged")
                };
                assert_eq!(h.qn, qn::TERMINATE, "{what}");
                // Nothing of the bad FPDU or after it was delivered: no receive
                // completes with data; the Read completes only if its response
                // came whole before the bad FPDU.
                for c in t.b.completions() {
                    let earlier_read = c.opcode == WcOpcode::RdmaRead && kind != Kind::ReadResponse;
                    assert!(
                        earlier_read || (c.status != WcStatus::Success && c.byte_len == 0),
                        "{what}: {c:?}"
                    );
                    if c.opcode == WcOpcode::Recv {
                        assert_eq!(c.status, WcStatus::Flushed, "{what}");
                    }
                }
                match kind {
                    // The FPDUs before the bad one were placed (not delivered).
                    Kind::Write => {
                        let r = t.b.mem.region(t.dst).unwrap();
                        assert_eq!(&r.data()[100..1000], &t.write[..900], "{what}");
                    }
                    Kind::ReadResponse => {
                        let r = t.b.mem.region(sink).unwrap();
                        assert_eq!(&r.data()[..900], &t.read[..900], "{what}");
                    }
                    Kind::Send => {}
                }
                // Later segments are refused, unplaced.
                let mut more = t.a.fpdus();
                t.a.s.post(
                    &t.a.mem,
                    WorkRequest::Write {
                        wr_id: 99,
                        payload: Bytes::from_static(b"late").into(),
                        remote_stag: t.dst.0,
                        remote_to: BASE,
                        fence: false,
                    },
                );
                more.extend(t.a.fpdus());
                assert_eq!(
                    deliver(&mut t.b, wire_of(&more), Cut::Whole),
                    Progress::Stopped
                );
                assert!(t.b.s.is_terminated());
                assert_eq!(&t.b.mem.region(t.dst).unwrap().data()[..4], &[0; 4]);
                assert!(t.b.mem.all_guards_intact(), "{what}");
                assert_eq!(t.b.copied(), 0, "{what}: a payload was copied");
            }
        }
    }
}

/// A Write to a region that does not exist: refused from the header alone,
/// nothing placed; the payload is read and dropped so that the FPDU's CRC is
/// checked first (RFC 5041 §7.1): with a good CRC the peer hears DDP's
/// code, with a bad one 2/0/0x02.
fn refused_write(flip_crc: bool) -> (Progress, Option<TerminateCode>, usize, usize) {
    let mut a = Side::new(1, true, false);
    let mut b = Side::new(2, true, false);
    a.s.post(
        &a.mem,
        WorkRequest::Write {
            wr_id: 1,
            payload: Bytes::from(pattern(600, 1)).into(),
            remote_stag: 0x1234_5600,
            remote_to: BASE,
            fence: false,
        },
    );
    let mut wire = wire_of(&a.fpdus());
    if flip_crc {
        *wire.last_mut().unwrap() ^= 0x40;
    }
    let len = wire.len();
    let mut src = Source::new(wire, Cut::One);
    let mut got = Progress::WouldBlock;
    while got == Progress::WouldBlock {
        got =
            b.rx.drive(&mut src, &mut RdmapPlacer::new(&mut b.s, &b.mem))
                .unwrap();
    }
    (got, b.terminate_sent(), src.at, len)
}

#[test]
fn refusals_from_the_header_wait_for_the_crc() {
    let (got, term, at, len) = refused_write(false);
    assert_eq!(got, Progress::Stopped);
    assert_eq!(term, Some(TerminateCode::DDP_INVALID_STAG));
    // The whole FPDU read (its payload dropped), not a octet more.
    assert_eq!(at, len);
    let (got, term, at, len) = refused_write(true);
    assert_eq!(got, Progress::Stopped);
    assert_eq!(term, Some(TerminateCode::MPA_CRC_ERROR));
    assert_eq!(at, len);
}

#[test]
fn the_responder_checks_the_agreed_rtr_first() {
    for (rtr, good) in [(Rtr::Write, true), (Rtr::Write, false), (Rtr::Read, false)] {
        let mut a = Side::new(1, true, true);
        let mut b = Side::new(2, true, true);
        b.rx = FpduReceiver::new(
            RxConfig {
                crc: true,
                markers: true,
                max_ulpdu: MULPDU,
                expect_rtr: Some(rtr),
            },
            Vec::new(),
        );
        let stag = b.region(Access::REMOTE_WRITE, 100);
        let payload = if good { Vec::new() } else { pattern(50, 1) };
        a.s.post(
            &a.mem,
            WorkRequest::Write {
                wr_id: 1,
                payload: Bytes::from(payload).into(),
                remote_stag: stag.0,
                remote_to: BASE,
                fence: false,
            },
        );
        let mut src = Source::new(wire_of(&a.fpdus()), Cut::Random(1));
        let mut seen = false;
        let got = loop {
            let mut p = RdmapPlacer::new(&mut b.s, &b.mem);
            let got = b.rx.drive(&mut src, &mut p).unwrap();
            seen |= p.first_fpdu_seen;
            if got != Progress::WouldBlock || (src.at == src.data.len() && src.blocked) {
                break got;
            }
        };
        let code = b.terminate_sent();
        if good && rtr == Rtr::Write {
            assert_eq!((got, seen, code), (Progress::WouldBlock, true, None));
        } else {
            assert_eq!(
                (got, seen, code),
                (
                    Progress::Stopped,
                    false,
                    Some(TerminateCode::MPA_NO_MATCHING_RTR)
                ),
                "{rtr:?} good {good}"
            );
        }
    }
}

#[test]
fn a_blocking_tcp_connection_drives_the_receiver() {
    use std::net::{TcpListener, TcpStream};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut t = setup(true, true, false);
    let (sink, fpdus) = traffic(&mut t, Cut::Whole);
    let wire = wire_of(&fpdus);
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut s = TcpStream::connect(addr).unwrap();
        // In uneven pieces, so reads end anywhere.
        for part in wire.chunks(1777) {
            s.write_all(part).unwrap();
            s.flush().unwrap();
        }
    });
    let (sock, _) = l.accept().unwrap();
    // Through a capture tap, as `--pcap` would read it.
    let mut seen = Vec::new();
    let mut src = rddp_mpa::fpdu::Recorded {
        inner: sock,
        record: |b: &[u8]| seen.extend_from_slice(b),
    };
    let got =
        t.b.rx
            .drive(&mut src, &mut RdmapPlacer::new(&mut t.b.s, &t.b.mem))
            .unwrap();
    writer.join().unwrap();
    drop(src);
    assert_eq!(
        seen,
        wire_of(&fpdus),
        "the capture saw every octet in order"
    );
    assert_eq!(got, Progress::Eof { at_boundary: true });
    assert_eq!(
        &t.b.mem.region(t.dst).unwrap().data()[100..20_100],
        &t.write[..]
    );
    assert_eq!(&t.b.mem.region(sink).unwrap().data()[..], &t.read[..]);
    let c = t.b.completions();
    assert_eq!(c.len(), 3, "{c:?}");
    assert!(c.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(t.b.copied(), 0);
}

/// A stream socket's reads: whatever is there, up to the buffer (a vectored
/// read fills its buffers in turn, as readv(2) does); `WouldBlock` once empty.
/// Both counted.
struct StreamSource {
    data: Vec<u8>,
    at: usize,
    would_block: usize,
    reads: usize,
}

impl StreamSource {
    fn new(data: Vec<u8>) -> Self {
        Self {
            data,
            at: 0,
            would_block: 0,
            reads: 0,
        }
    }
}

impl Read for StreamSource {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_vectored(&mut [io::IoSliceMut::new(buf)])
    }

    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.reads += 1;
        if self.at == self.data.len() {
            self.would_block += 1;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut total = 0;
        for buf in bufs {
            let n = buf.len().min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            total += n;
        }
        Ok(total)
    }
}

#[test]
fn a_short_read_of_a_stream_socket_ends_the_drive_without_another_read() {
    for stream in [false, true] {
        let mut t = setup(true, false, false);
        let (_sink, fpdus) = traffic(&mut t, Cut::Whole);
        t.b.rx.set_stream_source(stream);
        let mut src = StreamSource::new(wire_of(&fpdus));
        let mut p = RdmapPlacer::new(&mut t.b.s, &t.b.mem);
        let got = t.b.rx.drive(&mut src, &mut p).unwrap();
        assert_eq!(got, Progress::WouldBlock, "stream {stream}");
        assert_eq!(src.at, src.data.len(), "stream {stream}: all of it read");
        // The last read came back short (the next FPDU's header was asked for
        // too): a stream socket is empty then, and the read that would only say
        // so is not made.
        let want = usize::from(!stream);
        assert_eq!(
            src.would_block, want,
            "stream {stream}: reads that would block"
        );
        let done = t.b.completions();
        assert_eq!(done.len(), 3, "stream {stream}: {done:?}");
        assert!(
            done.iter().all(|c| c.status == WcStatus::Success),
            "{done:?}"
        );
        assert_eq!(t.b.terminate_sent(), None);
    }
}

#[test]
fn a_bulk_write_takes_one_read_per_fpdu() {
    for markers in [false, true] {
        let mut a = Side::new(1, true, markers);
        let mut b = Side::new(2, true, markers);
        let len = 100 * MULPDU;
        let dst = b.region(Access::REMOTE_WRITE, len);
        let data = pattern(len, 5);
        a.s.post(
            &a.mem,
            WorkRequest::Write {
                wr_id: 1,
                payload: Bytes::from(data.clone()).into(),
                remote_stag: dst.0,
                remote_to: BASE,
                fence: false,
            },
        );
        let fpdus = a.fpdus();
        b.rx.set_stream_source(true);
        let mut src = StreamSource::new(wire_of(&fpdus));
        let mut p = RdmapPlacer::new(&mut b.s, &b.mem);
        assert_eq!(b.rx.drive(&mut src, &mut p).unwrap(), Progress::WouldBlock);
        assert_eq!(src.at, src.data.len());
        assert_eq!(b.terminate_sent(), None);
        assert_eq!(
            &b.mem.region(dst).unwrap().data()[..],
            &data[..],
            "markers {markers}"
        );
        // Each payload is read with the PAD, CRC and next head after it (one
        // vectored read; two reads per FPDU before). Markers (every 512
        // octets) cut payloads, each piece a read of its own.
        assert!(
            markers || src.reads <= fpdus.len() + 2,
            "markers {markers}: {} reads for {} FPDUs",
            src.reads,
            fpdus.len()
        );
    }
}
