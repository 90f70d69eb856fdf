//! Every Terminate code the stack can send, provoked over real loopback TCP by
//! crafted DDP segments from a raw MPA peer against a real queue pair. Each
//! row: the segments sent, the (Layer, EType, Code) and M/D/R bits
//! expected in the Terminate (RFC 5040 §4.8), the echoed header and length, the
//! connection closed afterwards, no region changed, every posted receive completed
//! with the expected status, and work posted afterwards flushed.
//!
//! Codes the stack can send but this file does not provoke, and why:
//! * 1/0/0x00 from the reorder window (duplicate or out-of-window segment): MPA/TCP
//!   hands segments up in order, numbered by the reader; only SCTP could.
//! * 2/0/0x03 (Marker mismatch): needs Markers towards the queue pair; provoked in
//!   `marker_mismatch.rs`.
//! * 2/0/0x05 (local catastrophic): no input provokes it (a local fault).
//! * 2/0/0x01: a local indication only (RFC 5040 §4.8), never sent.
//! * 2/0/0x04, 0/0/0x00, 0/1/0xFF, 0/2/0x08: the stack never sends them (a bad
//!   Request or Reply is refused during setup, before FPDU mode).
//!
//! 2/0/0x06 and 2/0/0x07 (RFC 6581) are provoked by a raw responder and a raw Rev 2
//! initiator in the tests after the table.
//!
//! 1/1/0x00 and 1/1/0x01 are also provoked by a bad Read Response: those rows
//! first have the queue pair post one or two RDMA Reads towards the raw peer.
//!
//! Rows for a message placed whole or refused (Read
//! Responses matched FIFO and covering their sink exactly, one opcode and STag
//! per message, untagged segments tiling their message, no interleaving on one
//! queue) and for remote invalidation and unsendable Read Responses.

use crate::common::raw_peer;

use raw_peer::{RawPeer, read_frame};
use rddp::transport::memory_pair;
use rddp::transport::mpa::Listener;
use rddp::{
    Access, BufferOrdering, CompletionQueue, Device, MemoryRegion, QueuePair, QueuePairBuilder,
    Quota, RemoteBuf, SendFlags, SharedReceiveQueue, SrqMode, TerminateCode, WcStatus,
};
use rddp_mpa::MpaOptions;
use rddp_wire::mpa::{EnhancedBlock, FrameKind, MpaFlags, MpaFrame};
use rddp_wire::{DdpHeader, FpduEncoder, ReadRequestHeader};
use std::time::{Duration, Instant};

type Tc = TerminateCode;

/// Regions of the server's PD the rows aim at.
struct Regions {
    /// PD-scoped, remote read and write.
    rw: MemoryRegion,
    /// Remote read only.
    ro: MemoryRegion,
    /// Remote write only.
    wo: MemoryRegion,
    /// Same PD, bound to another queue pair's stream.
    bound: MemoryRegion,
    /// Another PD.
    foreign: MemoryRegion,
    /// `BIG` octets, remote read (only with `Setup::IrdFull`).
    big: Option<MemoryRegion>,
}

impl Regions {
    fn all(&self) -> [&MemoryRegion; 5] {
        [&self.rw, &self.ro, &self.wo, &self.bound, &self.foreign]
    }
}

const REGION_LEN: usize = 64;
/// Larger than loopback TCP buffers hold when the peer does not read.
const BIG: u32 = 16 << 20;
const RECV_LEN: usize = 16;

fn pattern(seed: u8) -> Vec<u8> {
    (0..REGION_LEN as u8)
        .map(|i| i.wrapping_mul(7) ^ seed)
        .collect()
}

/// What the raw peer puts on the wire.
enum Wire {
    /// A DDP segment in a well-formed FPDU.
    Seg(Vec<u8>),
    /// A DDP segment in an FPDU whose CRC is wrong.
    BadCrc(Vec<u8>),
    /// A well-formed segment sent after the offending one (not echoed).
    After(Vec<u8>),
    /// Well-formed segments in one write, so that they arrive together.
    Together(Vec<Vec<u8>>),
}

#[derive(Clone, Copy, PartialEq)]
enum Setup {
    /// Two receives (wr_id 100, 101) of 16 octets posted before attach.
    Plain,
    /// IRD 0 offered to the peer.
    Ird0,
    /// IRD 1 offered, and a `BIG` region to read.
    IrdFull,
    /// Sends drawn from a credits-mode shared receive queue, 1 credit granted.
    SrqCredits,
    /// As Plain, and the queue pair has an RDMA Read outstanding towards the raw
    /// peer into `rw` (TO 0, 8 octets).
    ReadOutstanding,
    /// As ReadOutstanding, then a second Read (wr_id 8) into `wo` (TO 0, 8).
    TwoReadsOutstanding,
}

impl Setup {
    /// The RDMA Reads the queue pair has outstanding towards the raw peer.
    fn reads(self) -> &'static [u64] {
        match self {
            Setup::ReadOutstanding => &[7],
            Setup::TwoReadsOutstanding => &[7, 8],
            _ => &[],
        }
    }
}

struct Row {
    name: &'static str,
    setup: Setup,
    wire: fn(&Regions) -> Vec<Wire>,
    code: Tc,
    /// (M, D, R)
    mdr: (bool, bool, bool),
    /// Expected statuses of receives 100 and 101 (None: not checked, SRQ).
    recvs: Option<[WcStatus; 2]>,
}

const FLUSHED: Option<[WcStatus; 2]> = Some([WcStatus::Flushed, WcStatus::Flushed]);

fn tagged(ctrl: u8, rdmap: u8, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut s = vec![ctrl, rdmap];
    s.extend_from_slice(&stag.to_be_bytes());
    s.extend_from_slice(&to.to_be_bytes());
    s.extend_from_slice(payload);
    s
}

fn untagged(ctrl: u8, rsvd: [u8; 5], qn: u32, msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    let mut s = vec![ctrl];
    s.extend_from_slice(&rsvd);
    for v in [qn, msn, mo] {
        s.extend_from_slice(&v.to_be_bytes());
    }
    s.extend_from_slice(payload);
    s
}

fn write(stag: u32, to: u64, len: usize) -> Vec<Wire> {
    vec![Wire::Seg(tagged(0xC1, 0x40, stag, to, &vec![0xEE; len]))]
}

fn send(qn: u32, msn: u32, mo: u32, len: usize) -> Vec<Wire> {
    vec![Wire::Seg(untagged(
        0x41,
        [0x43, 0, 0, 0, 0],
        qn,
        msn,
        mo,
        &vec![0xEE; len],
    ))]
}

fn send_inv(stag: u32) -> Vec<Wire> {
    let s = stag.to_be_bytes();
    vec![Wire::Seg(untagged(
        0x41,
        [0x44, s[0], s[1], s[2], s[3]],
        0,
        1,
        0,
        b"inv",
    ))]
}

fn read_req(src_stag: u32, src_to: u64, size: u32) -> Vec<Wire> {
    read_req_msn(1, src_stag, src_to, size)
}

fn read_req_msn(msn: u32, src_stag: u32, src_to: u64, size: u32) -> Vec<Wire> {
    read_req_to(msn, 0, src_stag, src_to, size)
}

fn read_req_to(msn: u32, sink_to: u64, src_stag: u32, src_to: u64, size: u32) -> Vec<Wire> {
    let rr = ReadRequestHeader {
        sink_stag: 0x1234_5600,
        sink_to,
        size,
        src_stag,
        src_to,
    };
    vec![Wire::Seg(untagged(
        0x41,
        [0x41, 0, 0, 0, 0],
        1,
        msn,
        0,
        &rr.to_bytes(),
    ))]
}

/// An STag naming no region: `rw`'s index with another key.
fn unknown(r: &Regions) -> u32 {
    r.rw.stag() ^ 0x5A
}

const NO: (bool, bool, bool) = (false, false, false);
const MD: (bool, bool, bool) = (true, true, false);
const MDR: (bool, bool, bool) = (true, true, true);

fn rows() -> Vec<Row> {
    let row = |name, wire, code, mdr| Row {
        name,
        setup: Setup::Plain,
        wire,
        code,
        mdr,
        recvs: FLUSHED,
    };
    vec![
        // ---- DDP, RFC 5041 §7.2 ----
        // MPA refuses a ULPDU shorter than 14 octets, so only an untagged header can
        // be too short past MPA (14..17 octets).
        row(
            "untagged header too short",
            |_| {
                vec![Wire::Seg(vec![
                    0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0,
                ])]
            },
            Tc::DDP_LOCAL_CATASTROPHIC,
            NO,
        ),
        row(
            "tagged DDP version 0",
            |r| vec![Wire::Seg(tagged(0xC0, 0x40, r.rw.stag(), 0, b"abcd"))],
            Tc::DDP_TAGGED_INVALID_VERSION,
            NO,
        ),
        row(
            "untagged DDP version 2",
            |_| {
                vec![Wire::Seg(untagged(
                    0x42,
                    [0x43, 0, 0, 0, 0],
                    0,
                    1,
                    0,
                    b"ab",
                ))]
            },
            Tc::DDP_UNTAGGED_INVALID_VERSION,
            NO,
        ),
        row(
            "write to an unknown STag",
            |r| write(unknown(r), 0, 8),
            Tc::DDP_INVALID_STAG,
            MD,
        ),
        row(
            "write past the region's end",
            |r| write(r.rw.stag(), 60, 8),
            Tc::DDP_BASE_BOUNDS,
            MD,
        ),
        row(
            "write to another PD's region",
            |r| write(r.foreign.stag(), 0, 8),
            Tc::DDP_STAG_NOT_ASSOCIATED,
            MD,
        ),
        row(
            "write to a region bound to another queue pair",
            |r| write(r.bound.stag(), 0, 8),
            Tc::DDP_STAG_NOT_ASSOCIATED,
            MD,
        ),
        row(
            "write whose TO + length wraps",
            |r| write(r.rw.stag(), u64::MAX - 3, 8),
            Tc::DDP_TO_WRAP,
            MD,
        ),
        row("send on QN 3", |_| send(3, 1, 0, 4), Tc::DDP_INVALID_QN, MD),
        row(
            "send to MSN 3 with two receives posted",
            |_| send(0, 3, 0, 4),
            Tc::DDP_INVALID_MSN_NO_BUFFER,
            MD,
        ),
        Row {
            name: "send beyond the granted credits (credits SRQ)",
            setup: Setup::SrqCredits,
            wire: |_| send(0, 2, 0, 4),
            code: Tc::DDP_INVALID_MSN_RANGE,
            mdr: MD,
            recvs: None,
        },
        row(
            "send at MO past the receive buffer",
            |_| send(0, 1, RECV_LEN as u32 + 1, 1),
            Tc::DDP_INVALID_MO,
            MD,
        ),
        Row {
            name: "send longer than the receive buffer",
            setup: Setup::Plain,
            wire: |_| send(0, 1, 0, RECV_LEN + 1),
            code: Tc::DDP_MSG_TOO_LONG,
            mdr: MD,
            recvs: Some([WcStatus::LocalLength, WcStatus::Flushed]),
        },
        // ---- RDMAP, RFC 5040 §4.8 ----
        row(
            "RDMAP version 2 on a send",
            |_| {
                vec![Wire::Seg(untagged(
                    0x41,
                    [0x83, 0, 0, 0, 0],
                    0,
                    1,
                    0,
                    b"ab",
                ))]
            },
            Tc::RDMAP_INVALID_VERSION,
            NO,
        ),
        row(
            "RDMAP version 0 on a write",
            |r| vec![Wire::Seg(tagged(0xC1, 0x00, r.rw.stag(), 0, b"ab"))],
            Tc::RDMAP_INVALID_VERSION,
            NO,
        ),
        row(
            "reserved opcode 0x8",
            |_| {
                vec![Wire::Seg(untagged(
                    0x41,
                    [0x48, 0, 0, 0, 0],
                    0,
                    1,
                    0,
                    b"ab",
                ))]
            },
            Tc::RDMAP_UNEXPECTED_OPCODE,
            NO,
        ),
        row(
            "send opcode on the tagged model",
            |r| vec![Wire::Seg(tagged(0xC1, 0x43, r.rw.stag(), 0, b"ab"))],
            Tc::RDMAP_UNEXPECTED_OPCODE,
            NO,
        ),
        row(
            "send opcode on QN 1",
            |_| send(1, 1, 0, 4),
            Tc::RDMAP_UNEXPECTED_OPCODE,
            MD,
        ),
        row(
            "read response with no read outstanding",
            |r| vec![Wire::Seg(tagged(0xC1, 0x42, r.rw.stag(), 0, b"ab"))],
            Tc::RDMAP_UNEXPECTED_OPCODE,
            MD,
        ),
        row(
            "write to a read-only region",
            |r| write(r.ro.stag(), 0, 8),
            Tc::RDMAP_ACCESS_VIOLATION,
            MD,
        ),
        row(
            "read request: unknown source STag",
            |r| read_req(unknown(r), 0, 8),
            Tc::RDMAP_INVALID_STAG,
            MDR,
        ),
        row(
            "read request: past the source's end",
            |r| read_req(r.rw.stag(), 60, 8),
            Tc::RDMAP_BASE_BOUNDS,
            MDR,
        ),
        row(
            "read request: source without remote read",
            |r| read_req(r.wo.stag(), 0, 8),
            Tc::RDMAP_ACCESS_VIOLATION,
            MDR,
        ),
        row(
            "read request: another PD's source",
            |r| read_req(r.foreign.stag(), 0, 8),
            Tc::RDMAP_STAG_NOT_ASSOCIATED,
            MDR,
        ),
        row(
            "read request: source bound to another queue pair",
            |r| read_req(r.bound.stag(), 0, 8),
            Tc::RDMAP_STAG_NOT_ASSOCIATED,
            MDR,
        ),
        row(
            "read request: source TO + size wraps",
            |r| read_req(r.rw.stag(), u64::MAX - 3, 8),
            Tc::RDMAP_TO_WRAP,
            MDR,
        ),
        Row {
            name: "send with invalidate of another PD's STag",
            setup: Setup::Plain,
            wire: |r| send_inv(r.foreign.stag()),
            code: Tc::RDMAP_PROT_CANNOT_INVALIDATE,
            mdr: MD,
            recvs: Some([WcStatus::LocalProtection, WcStatus::Flushed]),
        },
        Row {
            name: "send with invalidate of an unknown STag",
            setup: Setup::Plain,
            wire: |r| send_inv(unknown(r)),
            code: Tc::RDMAP_OP_CANNOT_INVALIDATE,
            mdr: MD,
            recvs: Some([WcStatus::LocalProtection, WcStatus::Flushed]),
        },
        Row {
            // Point 6: remote invalidation is a right of its own, and `rw` was
            // registered with remote read and write only (RFC 5042 §5).
            name: "send with invalidate of a region not registered for it",
            setup: Setup::Plain,
            wire: |r| send_inv(r.rw.stag()),
            code: Tc::RDMAP_PROT_CANNOT_INVALIDATE,
            mdr: MD,
            recvs: Some([WcStatus::LocalProtection, WcStatus::Flushed]),
        },
        row(
            // Point 6: the Read Response could not be sent.
            "read request: sink TO + size wraps",
            |r| read_req_to(1, u64::MAX - 3, r.rw.stag(), 0, 8),
            Tc::RDMAP_TO_WRAP,
            MDR,
        ),
        // Point 1: untagged messages, whole or refused.
        row(
            "send segments overlapping at MO 0",
            |_| {
                let p = [0xEE; 4];
                vec![
                    Wire::Seg(untagged(0x01, [0x43, 0, 0, 0, 0], 0, 1, 0, &p)),
                    Wire::Seg(untagged(0x01, [0x43, 0, 0, 0, 0], 0, 1, 0, &p)),
                    Wire::After(untagged(0x41, [0x43, 0, 0, 0, 0], 0, 1, 8, &p)),
                ]
            },
            Tc::DDP_INVALID_MO,
            MD,
        ),
        row(
            // The batch: MSN 1 a Send with Invalidate that cannot succeed,
            // MSN 2 complete before MSN 1's last segment. Refused at MSN 2, so
            // both receives come back.
            "send MSN 2 before the last segment of MSN 1",
            |r| {
                let s = unknown(r).to_be_bytes();
                let inv = [0x44, s[0], s[1], s[2], s[3]];
                vec![
                    Wire::Seg(untagged(0x01, inv, 0, 1, 0, b"1a")),
                    Wire::Seg(untagged(0x41, [0x43, 0, 0, 0, 0], 0, 2, 0, b"22")),
                    Wire::After(untagged(0x41, inv, 0, 1, 2, b"1b")),
                ]
            },
            Tc::DDP_INVALID_MSN_RANGE,
            MD,
        ),
        Row {
            // IRD + 1 Read Requests, the responses not read: the first response
            // cannot all leave, so it still holds the one IRD slot.
            name: "two read requests with IRD 1, responses unread",
            setup: Setup::IrdFull,
            // Both in one write: the second is read before the first response
            // starts. A second request read while the first response is
            // leaving: ird_while_sending.rs.
            wire: |r| {
                let big = r.big.as_ref().map_or(0, |b| b.stag());
                let segs = [read_req_msn(1, big, 0, BIG), read_req_msn(2, big, 0, BIG)]
                    .into_iter()
                    .flatten()
                    .map(|w| match w {
                        Wire::Seg(s) => s,
                        _ => unreachable!("a Read Request is one well-formed segment"),
                    })
                    .collect();
                vec![Wire::Together(segs)]
            },
            code: Tc::RDMAP_CATASTROPHIC_STREAM,
            mdr: MD,
            recvs: FLUSHED,
        },
        Row {
            // One more Read Request than IRD = 0.
            name: "read request beyond IRD",
            setup: Setup::Ird0,
            wire: |r| read_req(r.rw.stag(), 0, 8),
            code: Tc::RDMAP_CATASTROPHIC_STREAM,
            mdr: MD,
            recvs: FLUSHED,
        },
        row(
            "read request with a payload after its header",
            |r| {
                let mut w = read_req(r.rw.stag(), 0, 8);
                if let Some(Wire::Seg(s)) = w.first_mut() {
                    s.push(0);
                }
                w
            },
            Tc::RDMAP_OP_UNSPECIFIED,
            MD,
        ),
        Row {
            name: "read response to another STag than the read's sink",
            setup: Setup::ReadOutstanding,
            wire: |r| vec![Wire::Seg(tagged(0xC1, 0x42, r.ro.stag(), 0, &[0xEE; 8]))],
            code: Tc::DDP_INVALID_STAG,
            mdr: MD,
            recvs: FLUSHED,
        },
        Row {
            name: "read response longer than the read",
            setup: Setup::ReadOutstanding,
            wire: |r| vec![Wire::Seg(tagged(0xC1, 0x42, r.rw.stag(), 0, &[0xEE; 9]))],
            code: Tc::DDP_BASE_BOUNDS,
            mdr: MD,
            recvs: FLUSHED,
        },
        // Point 1: Read Responses, whole or refused. The first segments carry the
        // sink's own octets, so a segment placed before the refusal changes
        // nothing the check below would see.
        Row {
            name: "read response: two segments at the sink's first TO",
            setup: Setup::ReadOutstanding,
            wire: |r| {
                let p = &pattern(1)[..4];
                vec![
                    Wire::Seg(tagged(0x81, 0x42, r.rw.stag(), 0, p)),
                    Wire::Seg(tagged(0xC1, 0x42, r.rw.stag(), 0, &[0xEE; 4])),
                ]
            },
            code: Tc::DDP_BASE_BOUNDS,
            mdr: MD,
            recvs: FLUSHED,
        },
        Row {
            name: "write with L=0, then a read response with L=1",
            setup: Setup::ReadOutstanding,
            wire: |r| {
                let p = pattern(1);
                vec![
                    Wire::Seg(tagged(0x81, 0x40, r.rw.stag(), 0, &p[..4])),
                    Wire::Seg(tagged(0xC1, 0x42, r.rw.stag(), 4, &p[4..8])),
                ]
            },
            code: Tc::RDMAP_UNEXPECTED_OPCODE,
            mdr: MD,
            recvs: FLUSHED,
        },
        Row {
            name: "read response to the second read's sink first",
            setup: Setup::TwoReadsOutstanding,
            wire: |r| vec![Wire::Seg(tagged(0xC1, 0x42, r.wo.stag(), 0, &[0xEE; 8]))],
            code: Tc::DDP_INVALID_STAG,
            mdr: MD,
            recvs: FLUSHED,
        },
        // ---- LLP (MPA) ----
        row(
            "first FPDU with a bad CRC",
            |_| {
                vec![Wire::BadCrc(untagged(
                    0x41,
                    [0x43, 0, 0, 0, 0],
                    0,
                    1,
                    0,
                    b"ab",
                ))]
            },
            Tc::MPA_CRC_ERROR,
            NO,
        ),
        // A valid first FPDU (a zero-length Write, which places nothing), then one
        // with a bad CRC.
        row(
            "FPDU with a bad CRC",
            |_| {
                vec![
                    Wire::Seg(tagged(0xC1, 0x40, 0, 0, &[])),
                    Wire::BadCrc(untagged(0x41, [0x43, 0, 0, 0, 0], 0, 1, 0, b"ab")),
                ]
            },
            Tc::MPA_CRC_ERROR,
            NO,
        ),
    ]
}

/// The server side of one row.
struct Server {
    regions: Regions,
    qp: QueuePair,
    cq: CompletionQueue,
    _others: (QueuePair, QueuePair),
    _srq: Option<SharedReceiveQueue>,
}

fn start(setup: Setup) -> (Server, RawPeer) {
    let dev = Device::new();
    let consumer = dev.consumer("server", Quota::default()).unwrap();
    let pd = consumer.alloc_pd().unwrap();
    let pd2 = consumer.alloc_pd().unwrap();
    let cq = CompletionQueue::new(64);
    let mut opts = MpaOptions::rev1();
    match setup {
        Setup::Ird0 => opts.ird = 0,
        Setup::IrdFull => opts.ird = 1,
        _ => {}
    }
    let listener = Listener::bind("127.0.0.1:0", opts).unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = std::thread::spawn(move || listener.accept());
    let raw = RawPeer::connect(addr, true);
    let conn = accept.join().unwrap().unwrap();

    let mut b = QueuePairBuilder::new(&pd, &cq, &cq);
    let srq = (setup == Setup::SrqCredits).then(|| {
        let srq = SharedReceiveQueue::new(&pd, SrqMode::Credits, BufferOrdering::Arrival, 8);
        srq.post_recv(100, RECV_LEN).unwrap();
        srq.post_recv(101, RECV_LEN).unwrap();
        srq
    });
    if let Some(srq) = &srq {
        b = b.srq(srq);
    }
    let mut prepared = b.build().unwrap();
    if srq.is_none() {
        prepared.post_recv(100, RECV_LEN).unwrap();
        prepared.post_recv(101, RECV_LEN).unwrap();
    }
    let qp = prepared.attach(conn).unwrap();
    if srq.is_some() {
        qp.grant_credits(1).unwrap();
    }

    // Another queue pair of the same PD (in memory), to own a bound region.
    let (la, lb) = memory_pair(1024);
    let other_cq = CompletionQueue::new(64);
    let qa = QueuePairBuilder::new(&pd, &other_cq, &other_cq)
        .build()
        .unwrap()
        .attach(la)
        .unwrap();
    let qb = QueuePairBuilder::new(&pd, &other_cq, &other_cq)
        .build()
        .unwrap()
        .attach(lb)
        .unwrap();
    let rw_access = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let regions = Regions {
        rw: pd.register(pattern(1), rw_access).unwrap(),
        ro: pd.register(pattern(2), Access::REMOTE_READ).unwrap(),
        wo: pd.register(pattern(3), Access::REMOTE_WRITE).unwrap(),
        bound: qa.register_bound(pattern(4), rw_access).unwrap(),
        foreign: pd2.register(pattern(5), rw_access).unwrap(),
        big: (setup == Setup::IrdFull).then(|| {
            pd.register(vec![0x33; BIG as usize], Access::REMOTE_READ)
                .unwrap()
        }),
    };
    let src = RemoteBuf {
        stag: 0x0BAD_5100,
        to: 0,
        len: 8,
    };
    for (&id, sink) in setup.reads().iter().zip([&regions.rw, &regions.wo]) {
        qp.post_read(id, sink, 0, 8, src, 0).unwrap();
    }
    let server = Server {
        regions,
        qp,
        cq,
        _others: (qa, qb),
        _srq: srq,
    };
    (server, raw)
}

fn send_wire(raw: &mut RawPeer, wire: &[Wire]) {
    for w in wire {
        match w {
            Wire::Seg(s) | Wire::After(s) => raw.send_segment(s),
            Wire::Together(segs) => raw.send_segments(segs),
            Wire::BadCrc(s) => {
                // No Markers, so a fresh encoder frames it as the peer's would.
                let mut out = Vec::new();
                FpduEncoder::new(true, false).encode(s, &mut out).unwrap();
                if let Some(last) = out.last_mut() {
                    *last ^= 0xFF;
                }
                raw.send_raw(&out);
            }
        }
    }
}

/// Completions on `cq` until `want` wr_ids are all seen or 5 s pass.
fn collect(cq: &CompletionQueue, want: &[u64]) -> Vec<rddp::WorkCompletion> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got: Vec<rddp::WorkCompletion> = Vec::new();
    while !want.iter().all(|id| got.iter().any(|w| w.wr_id == *id)) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        got.extend(cq.wait(16, left.min(Duration::from_millis(200))));
    }
    got
}

/// Run one row; returns what went wrong, if anything.
fn run(row: &Row) -> Result<(), String> {
    let (server, mut raw) = start(row.setup);
    let r = &server.regions;
    let wire = (row.wire)(r);
    // When a Read is outstanding, open the responder's gate (RFC 5044 §7.1.2) with a
    // zero-length Write and take the Read Request off the wire first.
    let reads = row.setup.reads();
    if !reads.is_empty() {
        raw.send_segment(&tagged(0xC1, 0x40, 0, 0, &[]));
        // A bound, not a pace: a loaded machine takes longer.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut got = 0;
        while got < reads.len() && Instant::now() < deadline {
            let (segs, _) = raw.read_all(Duration::from_millis(200));
            got += segs
                .iter()
                .filter(|s| s.len() == 46 && s[1] & 0x0F == 1)
                .count();
        }
        if got < reads.len() {
            return Err("the queue pair's Read Requests did not arrive".into());
        }
    }
    send_wire(&mut raw, &wire);
    let t0 = Instant::now();
    let (term, closed) = raw.terminate();
    let term = term.ok_or(format!(
        "no Terminate received (closed {closed}, {:?})",
        t0.elapsed()
    ))?;
    if term.code != row.code {
        return Err(format!("got {} instead of {}", term.code, row.code));
    }
    let (m, d, r_bit) = row.mdr;
    if (term.m, term.d(), term.r) != (m, d, r_bit) {
        return Err(format!(
            "M/D/R = {:?}, want {:?}",
            (term.m, term.d(), term.r),
            row.mdr
        ));
    }
    // The offending segment is the last one sent before any `After`; its header
    // and length are echoed.
    let last = match wire.iter().rev().find(|w| !matches!(w, Wire::After(_))) {
        Some(Wire::Seg(s) | Wire::BadCrc(s)) => Some(s),
        Some(Wire::Together(segs)) => segs.last(),
        _ => None,
    };
    let Some(last) = last else {
        return Err("row sends nothing".into());
    };
    if d {
        let want = DdpHeader::parse(last).map_err(|e| e.to_string())?;
        if term.ddp_hdr != Some(want) || term.seg_len != Some(last.len() as u16) {
            return Err(format!(
                "echo {:?} len {:?}, want {want:?} len {}",
                term.ddp_hdr,
                term.seg_len,
                last.len()
            ));
        }
    }
    if r_bit {
        let want = ReadRequestHeader::parse(&last[18..]).map_err(|e| e.to_string())?;
        if term.rdmap_hdr != Some(want) {
            return Err(format!(
                "Read Request echo {:?}, want {want:?}",
                term.rdmap_hdr
            ));
        }
    }
    if !closed {
        return Err("the connection stayed open after the Terminate".into());
    }
    for (mr, seed) in r.all().into_iter().zip(1u8..) {
        if mr.read(0, REGION_LEN as u64).unwrap() != pattern(seed) {
            return Err(format!("region {seed} changed"));
        }
    }
    // Posted receives complete (as Flushed unless the error was about them); work
    // posted now completes as Flushed.
    server.qp.post_recv(200, 8).map_err(|e| e.to_string())?;
    server
        .qp
        .post_send_inline(201, b"late", SendFlags::default())
        .map_err(|e| e.to_string())?;
    let mut want_ids = vec![200, 201];
    if row.recvs.is_some() {
        want_ids.extend([100, 101]);
    }
    want_ids.extend(reads);
    let got = collect(&server.cq, &want_ids);
    let status = |id: u64| got.iter().find(|w| w.wr_id == id).map(|w| w.status);
    if let Some([s100, s101]) = row.recvs {
        for (id, want) in [(100, s100), (101, s101)] {
            if status(id) != Some(want) {
                return Err(format!("receive {id}: {:?}, want {want:?}", status(id)));
            }
        }
    }
    for id in [200, 201] {
        if status(id) != Some(WcStatus::Flushed) {
            return Err(format!("late work {id}: {:?}, want Flushed", status(id)));
        }
    }
    for &id in reads {
        if status(id) != Some(WcStatus::Flushed) {
            return Err(format!(
                "outstanding Read {id}: {:?}, want Flushed",
                status(id)
            ));
        }
    }
    let events = server.qp.async_events();
    if !events
        .iter()
        .any(|e| matches!(e, rddp::AsyncEvent::TerminateSent { code, .. } if *code == row.code))
    {
        return Err(format!("no TerminateSent event: {events:?}"));
    }
    Ok(())
}

#[test]
fn every_terminate_code_from_crafted_segments() {
    let rows = rows();
    let mut failures = Vec::new();
    for row in &rows {
        match run(row) {
            Ok(()) => eprintln!("ok   {:<55} -> {}", row.name, row.code),
            Err(e) => {
                eprintln!("FAIL {:<55} -> {e}", row.name);
                failures.push(format!("{}: {e}", row.name));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // Every DDP code of RFC 5041 §7.2 is in the table.
    for c in Tc::ALL_DDP {
        assert!(rows.iter().any(|r| r.code == c), "{c} not covered");
    }
}

/// The other side of the IRD row: a peer that keeps exactly ORD = IRD Reads in
/// flight, each issued as soon as an earlier one completes, never sees 0/2/0x07.
#[test]
fn reads_pipelined_at_ird_are_served() {
    let dev = Device::new();
    let mut opts = MpaOptions::default();
    (opts.ird, opts.ord) = (2, 2);
    let listener = Listener::bind("127.0.0.1:0", opts.clone()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (ad_tx, ad_rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let pd = sdev
            .consumer("s", Quota::default())
            .unwrap()
            .alloc_pd()
            .unwrap();
        let cq = CompletionQueue::new(64);
        let b = QueuePairBuilder::new(&pd, &cq, &cq).ird(2).ord(2);
        let qp = b
            .build()
            .unwrap()
            .attach(listener.accept().unwrap())
            .unwrap();
        let src = pd.register(pattern(9), Access::REMOTE_READ).unwrap();
        ad_tx.send(src.remote()).unwrap();
        let _ = done_rx.recv_timeout(Duration::from_secs(20));
        qp.async_events()
    });
    let pd = dev
        .consumer("c", Quota::default())
        .unwrap()
        .alloc_pd()
        .unwrap();
    let cq = CompletionQueue::new(64);
    let b = QueuePairBuilder::new(&pd, &cq, &cq)
        .ird(2)
        .ord(2)
        .max_send_wr(2);
    let qp = b.build().unwrap().connect_mpa(addr, opts).unwrap();
    let remote = ad_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let sink = pd
        .register(vec![0; REGION_LEN], Access::REMOTE_WRITE)
        .unwrap();
    let (mut posted, mut done) = (0u64, 0u64);
    while done < 200 {
        while posted < 200 && posted - done < 2 {
            qp.post_read(posted, &sink, 0, REGION_LEN as u32, remote, 0)
                .unwrap();
            posted += 1;
        }
        let got = cq.wait(2, Duration::from_secs(10));
        assert!(!got.is_empty(), "timed out after {done} Reads");
        for w in got {
            assert_eq!(
                w.status,
                WcStatus::Success,
                "Read {}: {:?}",
                w.wr_id,
                w.status
            );
            done += 1;
        }
    }
    assert_eq!(sink.read(0, REGION_LEN as u64).unwrap(), pattern(9));
    done_tx.send(()).unwrap();
    let events = server.join().unwrap();
    assert!(events.is_empty(), "{events:?}");
}

/// LLP codes an rddp initiator sends after a Reply it cannot accept (RFC 6581):
/// a raw responder answers the queue pair's Rev 2 Request, then reads the
/// Terminate FPDU; the connect fails and the connection closes.
#[test]
fn llp_codes_from_a_raw_responder() {
    let reply_blk = |rtr_send, rtr_write, ird| EnhancedBlock {
        p2p: true,
        rtr_send,
        ird,
        rtr_write,
        rtr_read: false,
        ord: 1,
    };
    let cases = [
        // We offer Write and Read RTRs; the Reply picks a Send RTR.
        (
            "reply picks an RTR not offered",
            false,
            reply_blk(true, false, 16),
            Tc::MPA_NO_MATCHING_RTR,
        ),
        // Strict IRD: our ORD 16 does not fit the responder's IRD 1.
        (
            "reply IRD below our ORD, strict",
            true,
            reply_blk(false, true, 1),
            Tc::MPA_INSUFFICIENT_IRD,
        ),
    ];
    for (name, strict, blk, want) in cases {
        let raw = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = raw.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let pd = Device::new()
                .consumer("c", Quota::default())
                .unwrap()
                .alloc_pd()
                .unwrap();
            let cq = CompletionQueue::new(64);
            let opts = MpaOptions {
                strict_ird: strict,
                ..MpaOptions::default()
            };
            let b = QueuePairBuilder::new(&pd, &cq, &cq).ord(16);
            b.build()
                .unwrap()
                .connect_mpa(addr, opts)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        let (mut sock, _) = raw.accept().unwrap();
        let req = read_frame(&mut sock);
        assert!(
            req.enhanced.is_some(),
            "{name}: the Request has no IRD/ORD block"
        );
        let flags = MpaFlags::new(false, true, false, true);
        let rep = MpaFrame::new(FrameKind::Reply, flags, 2, Some(blk), Vec::new());
        std::io::Write::write_all(&mut sock, &rep.to_vec().unwrap()).unwrap();
        let (term, closed) = RawPeer::from_stream(sock, true).terminate();
        let term = term.unwrap_or_else(|| panic!("{name}: no Terminate"));
        assert_eq!(term.code, want, "{name}");
        assert_eq!((term.m, term.d(), term.r), NO, "{name}");
        assert!(closed, "{name}: still open");
        let res = client.join().unwrap();
        assert!(res.is_err(), "{name}: connect succeeded");
    }
}

/// A responder that agreed a Write RTR (peer-to-peer, RFC 6581) and gets another
/// first FPDU sends 2/0/0x07 and closes.
#[test]
fn responder_without_the_agreed_rtr() {
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = std::thread::spawn(move || listener.accept());
    let blk = EnhancedBlock {
        p2p: true,
        rtr_send: false,
        ird: 4,
        rtr_write: true,
        rtr_read: false,
        ord: 4,
    };
    let flags = MpaFlags::new(false, true, false, true);
    let req = MpaFrame::new(FrameKind::Request, flags, 2, Some(blk), Vec::new());
    let mut raw = RawPeer::connect_with(addr, &req);
    let conn = accept.join().unwrap().unwrap();
    let pd = Device::new()
        .consumer("s", Quota::default())
        .unwrap()
        .alloc_pd()
        .unwrap();
    let cq = CompletionQueue::new(64);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_recv(100, RECV_LEN).unwrap();
    let qp = prepared.attach(conn).unwrap();
    // A Send, not the zero-length Write agreed as RTR.
    send_wire(&mut raw, &send(0, 1, 0, 4));
    let (term, closed) = raw.terminate();
    let term = term.expect("no Terminate");
    assert_eq!(term.code, Tc::MPA_NO_MATCHING_RTR);
    assert_eq!((term.m, term.d(), term.r), NO);
    assert!(closed);
    let got = collect(&cq, &[100]);
    assert_eq!(got.first().map(|w| w.status), Some(WcStatus::Flushed));
    drop(qp);
}
