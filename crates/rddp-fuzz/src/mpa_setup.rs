//! Target `mpa_setup`: the MPA initiator or responder (RFC 5044 §7, RFC 6581)
//! fed the peer's octets in arbitrary chunkings, with arbitrary local options,
//! ULP decisions and deadlines; then FPDU mode built from what was agreed, as
//! a verbs queue pair builds it (the product's receive path: `FpduReceiver`
//! with `RdmapPlacer` over an `RdmapStream`, the responder's RTR check
//! included), fed the octets that followed the frame.
//!
//! Oracles: no panic; chunking never changes the outcome (status, result,
//! octets sent); what goes out is a well-formed frame of the right kind; what
//! was agreed is within what was offered; FPDU mode starts from any agreement
//! without panicking, never writes outside a writable region, and every FPDU
//! it sends decodes within MULPDU.

use crate::fixture::{PD, Regions, STREAM};
use crate::input::Input;
use bytes::Bytes;
use rddp_mpa::fpdu::{FpduReceiver, Progress, RdmapPlacer, RxConfig, build_fpdu};
use rddp_mpa::{Initiator, MpaOptions, Negotiated, Responder, Role, Rtr, RtrTypes, SetupStatus};
use rddp_proto::ddp::{DdpConfig, split_segment};
use rddp_proto::mem::MemoryTable;
use rddp_proto::rdmap::{RdmapConfig, RdmapStream, WcStatus};
use rddp_wire::mpa::MAX_ULPDU;
use rddp_wire::{
    FpduDecoder, FpduEncoder, FrameKind, MpaFrame, Opcode, RdmapControl, TaggedHeader, mulpdu,
};
use std::io::{self, Read};
use std::time::{Duration, Instant};

fn options(input: &mut Input<'_>) -> MpaOptions {
    let f = input.u8();
    let rev = match f & 3 {
        0 | 1 => 2,
        2 => 1,
        _ => input.u8(),
    };
    let pd_len = usize::from(input.u16()) % 520;
    MpaOptions {
        rev,
        crc: f & 0x04 != 0,
        markers: f & 0x08 != 0,
        p2p: f & 0x10 != 0,
        rtr: RtrTypes {
            write: f & 0x20 != 0,
            read: f & 0x40 != 0,
        },
        strict_ird: f & 0x80 != 0,
        ird: input.u16(),
        ord: input.u16(),
        private_data: (0..pd_len).map(|i| i as u8).collect(),
        ..MpaOptions::default()
    }
}

/// What one run of a setup machine produced.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    status: SetupStatus,
    result: Option<String>,
    sent: Vec<Vec<u8>>,
    /// Peer octets the machine left to FPDU mode.
    leftover: Vec<u8>,
}

/// Feed `wire` to an initiator `chunk` octets at a time.
fn run_initiator(
    opts: &MpaOptions,
    wire: &[u8],
    chunk: usize,
    timeout: bool,
) -> Option<(Outcome, Option<Negotiated>)> {
    let t0 = Instant::now();
    let i = Initiator::new(opts, t0);
    // IRD and ORD are 14-bit fields (RFC 6581): larger ones are a
    // local mistake, refused before anything is sent.
    if opts.ird > 0x3FFF || opts.ord > 0x3FFF {
        assert!(i.is_err(), "IRD {} / ORD {} accepted", opts.ird, opts.ord);
    }
    let mut i = i.ok()?;
    let mut sent: Vec<Vec<u8>> = i.poll_transmit().into_iter().collect();
    let mut used = 0;
    for part in wire.chunks(chunk.max(1)) {
        let n = i.on_bytes(part);
        assert!(n <= part.len());
        used += n;
        if n < part.len() {
            // The Reply ended inside this part: the rest is FPDU mode's.
            assert_ne!(i.status(), SetupStatus::Pending);
            break;
        }
    }
    if timeout {
        i.on_timeout(t0 + opts.reply_timeout);
    }
    sent.extend(i.poll_transmit());
    let status = i.status();
    let res = i.take_result();
    let leftover = if status == SetupStatus::Established {
        wire[used..].to_vec()
    } else {
        Vec::new()
    };
    let neg = match &res {
        Some(Ok(n)) => Some(n.clone()),
        _ => None,
    };
    let result = res.map(|r| format!("{r:?}"));
    Some((
        Outcome {
            status,
            result,
            sent,
            leftover,
        },
        neg,
    ))
}

/// Feed `wire[..split]` to a responder, let the ULP decide, then the rest.
fn run_responder(
    opts: &MpaOptions,
    wire: &[u8],
    split: usize,
    chunk: usize,
    decision: u8,
) -> (Outcome, Option<Negotiated>) {
    let t0 = Instant::now();
    let mut r = Responder::new(opts, t0);
    let (first, second) = wire.split_at(split.min(wire.len()));
    for part in first.chunks(chunk.max(1)) {
        let n = r.on_bytes(part);
        assert!(n <= part.len());
    }
    if r.status() == SetupStatus::Requested {
        let req = r.request().cloned().expect("Requested has a request");
        assert!((1..=2).contains(&req.rev));
        match decision % 4 {
            0 => {
                let _ = r.accept();
            }
            1 => {
                let _ = r.accept_with(req.private_data.clone());
            }
            2 => {
                let _ = r.reject(vec![0xEE; usize::from(decision)]);
            }
            _ => r.on_timeout(t0 + opts.request_timeout),
        }
    } else if decision & 0x80 != 0 {
        r.on_timeout(t0 + opts.request_timeout + Duration::from_secs(1));
    }
    // After the Reply the responder consumes nothing: these octets are FPDUs.
    let mut leftover = Vec::new();
    let established = r.status() == SetupStatus::Established;
    for part in second.chunks(chunk.max(1)) {
        let n = r.on_bytes(part);
        if established {
            assert_eq!(n, 0, "an established responder consumed FPDU octets");
            leftover.extend_from_slice(part);
        }
    }
    let sent: Vec<Vec<u8>> = r.poll_transmit().into_iter().collect();
    let status = r.status();
    let res = r.take_result();
    let neg = match &res {
        Some(Ok(n)) => Some(n.clone()),
        _ => None,
    };
    let result = res.map(|r| format!("{r:?}"));
    (
        Outcome {
            status,
            result,
            sent,
            leftover,
        },
        neg,
    )
}

fn check_frames(opts: &MpaOptions, out: &Outcome, role: Role) {
    let Some(first) = out.sent.first() else {
        return;
    };
    match role {
        Role::Initiator => {
            let f = MpaFrame::parse(first).expect("our Request parses");
            assert_eq!(f.kind, FrameKind::Request);
            assert_eq!(f.rev, opts.rev);
            assert_eq!(f.private_data, opts.private_data);
            assert_eq!(f.flags.crc(), opts.crc);
        }
        Role::Responder => {
            if let Ok(f) = MpaFrame::parse(first) {
                assert_eq!(f.kind, FrameKind::Reply);
                if out.status == SetupStatus::Established {
                    assert!(!f.flags.reject());
                    assert!(f.rev <= opts.rev.max(1));
                } else {
                    assert!(f.flags.reject(), "a Reply of a failed setup is R=1");
                }
            } else {
                panic!("our Reply does not parse: {first:?}");
            }
        }
    }
}

fn check_negotiated(opts: &MpaOptions, n: &Negotiated) {
    crate::reach::note(|r| r.established += 1);
    assert!((1..=2).contains(&n.rev));
    assert!(n.rev <= opts.rev);
    assert!(!opts.crc || n.crc, "we asked for CRC and it is off");
    assert_eq!(n.markers_rx, opts.markers);
    if n.rtr.is_some() {
        assert_eq!(n.rev, 2);
    }
    if let Some((ird, ord)) = n.ird_ord {
        assert!(ird <= 0x3FFF && ord <= 0x3FFF);
    }
}

/// A source with nothing more yet: the octets that followed the frame are
/// the receiver's leftover, as on a queue pair whose socket is still empty.
pub(crate) struct Empty;

impl Read for Empty {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

/// FPDU mode from what setup agreed, as a verbs queue pair enters it
/// (`rddp::transport::mpa`, `rddp::qp::task`): an `RdmapStream` (MULPDU
/// from the EMSS and our Markers, IRD/ORD as agreed, the initiator's Read
/// RTR posted) under the header-first receiver (CRC and Markers as agreed, a
/// responder expecting the agreed RTR, RFC 6581), fed what followed the
/// frame as the setup's leftover. What we send back (the Write RTR, Read
/// Responses, a Terminate) is framed as the queue pair frames it and must
/// decode within MULPDU.
fn fpdu_mode(neg: Negotiated, opts: &MpaOptions, emss: usize, rest: &[u8], input: &mut Input) {
    let initiator = neg.role == Role::Initiator;
    // As agreed, else our own; at most 64 (RDMAP posts IRD + 1 buffers of
    // its own, and nothing here needs more).
    let (ird, ord) = neg.ird_ord.unwrap_or((opts.ird, opts.ord));
    let cfg = RdmapConfig {
        ddp: DdpConfig {
            mulpdu: mulpdu(emss, neg.markers_tx),
            ..DdpConfig::default()
        },
        ird: u32::from(ird.min(64)),
        ord: u32::from(ord.min(64)),
    };
    let Ok(mut s) = RdmapStream::new(STREAM, PD, cfg) else {
        return;
    };
    if initiator && neg.rtr == Some(Rtr::Read) {
        let _ = s.post_read_rtr();
    }
    let mem = MemoryTable::with_seed(3);
    let regions = Regions::new(&mem, input, STREAM);
    for id in 0..4 {
        let _ = s.post_recv(id, vec![0; 2048]);
    }
    let mut rx = FpduReceiver::new(
        RxConfig {
            crc: neg.crc,
            markers: neg.markers_rx,
            max_ulpdu: MAX_ULPDU,
            expect_rtr: if initiator { None } else { neg.rtr },
        },
        rest.to_vec(),
    );
    loop {
        let mut p = RdmapPlacer::new(&mut s, &mem);
        match rx.drive(&mut Empty, &mut p) {
            Ok(Progress::Paused) => continue,
            Ok(x) => {
                crate::trace!("fpdu mode: {x:?}, terminated {}", s.is_terminated());
                break;
            }
            Err(e) => unreachable!("the empty source never fails: {e}"),
        }
    }
    while let Some(c) = s.poll_completion() {
        if c.status == WcStatus::Success {
            crate::reach::note(|r| r.delivered += 1);
        }
    }
    // What we send, framed as the queue pair frames it.
    let mut enc = FpduEncoder::new(neg.crc, neg.markers_tx);
    let mut sent = Vec::new();
    if initiator && neg.rtr == Some(Rtr::Write) {
        let hdr = TaggedHeader::new(true, RdmapControl::new(Opcode::RDMA_WRITE).0, 1, 0);
        sent.extend_from_slice(&build_fpdu(&mut enc, &hdr.to_bytes(), Bytes::new()).to_vec());
    }
    while let Some(seg) = s.poll_segment() {
        let seg = seg.to_vec();
        let (head, payload) = split_segment(&seg);
        let f = build_fpdu(&mut enc, head, Bytes::copy_from_slice(payload));
        sent.extend_from_slice(&f.to_vec());
    }
    let mut dec = FpduDecoder::new(neg.crc, neg.markers_tx, MAX_ULPDU);
    let mut out = Vec::new();
    dec.feed(&sent, &mut out).expect("our FPDUs decode");
    assert!(dec.at_boundary(), "we sent a partial FPDU");
    let limit = s.ddp().mulpdu().max(70);
    for u in &out {
        assert!(u.len() <= limit, "FPDU of {} > MULPDU {limit}", u.len());
    }
    regions.check(&mem, None);
}

/// The `mpa_setup` target: MPA setup, initiator or responder, with any options and any peer octets; panics when an oracle fails
/// (docs/reliability.md lists them).
pub fn mpa_setup(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    let opts = options(&mut input);
    let chunk = 1 + usize::from(input.u8());
    let decision = input.u8();
    let split = usize::from(input.u16());
    let emss = usize::from(input.u16());
    let wire_len = usize::from(input.u16());
    let wire = input.bytes(wire_len);
    if mode & 1 == 0 {
        let timeout = mode & 2 != 0;
        let Some((whole, neg)) = run_initiator(&opts, wire, wire.len(), timeout) else {
            return;
        };
        let (chunked, _) = run_initiator(&opts, wire, chunk, timeout).expect("same options");
        assert_eq!(
            whole, chunked,
            "chunk size {chunk} changed the initiator's outcome"
        );
        check_frames(&opts, &whole, Role::Initiator);
        if let Some(n) = neg {
            check_negotiated(&opts, &n);
            fpdu_mode(n, &opts, emss, &whole.leftover, &mut input);
        }
    } else {
        let (whole, neg) = run_responder(&opts, wire, split, usize::MAX, decision);
        let (chunked, _) = run_responder(&opts, wire, split, chunk, decision);
        assert_eq!(
            whole, chunked,
            "chunk size {chunk} changed the responder's outcome"
        );
        check_frames(&opts, &whole, Role::Responder);
        if let Some(n) = neg {
            check_negotiated(&opts, &n);
            fpdu_mode(n, &opts, emss, &whole.leftover, &mut input);
        }
    }
}
