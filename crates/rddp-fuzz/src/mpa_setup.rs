//! Target `mpa_setup`: the MPA initiator or responder (RFC 5044 §7, RFC 6581)
//! fed the peer's octets in arbitrary chunkings, with arbitrary local options,
//! ULP decisions and deadlines; then FPDU mode built from what was agreed and
//! fed the octets that followed the frame.
//!
//! Oracles: no panic; chunking never changes the outcome (status, result,
//! octets sent); what goes out is a well-formed frame of the right kind; what
//! was agreed is within what was offered; FPDU mode starts from any agreement
//! without panicking and never writes outside a writable region.

use crate::fixture::{Regions, STREAM};
use crate::input::Input;
use rddp_mpa::{
    FpduConn, Initiator, MpaOptions, Negotiated, Responder, Role, RtrTypes, SetupStatus,
};
use rddp_proto::mem::MemoryTable;
use rddp_wire::{FrameKind, MpaFrame};
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

/// FPDU mode from what setup agreed, fed what followed the frame.
fn fpdu_mode(neg: Negotiated, opts: &MpaOptions, emss: usize, rest: &[u8], input: &mut Input) {
    let Ok(mut conn) = FpduConn::new(neg, opts, emss) else {
        return;
    };
    let mem = MemoryTable::with_seed(3);
    let regions = Regions::new(&mem, input, STREAM);
    for id in 0..4 {
        let buf = rddp_proto::ddp::RecvBuffer {
            id,
            data: vec![0; 2048],
        };
        let _ = conn.stream_mut().post_recv(0, buf);
    }
    let mut data = rest;
    while !data.is_empty() {
        let n = conn.on_bytes(&mem, data);
        assert!(n <= data.len());
        if n == 0 {
            break;
        }
        data = &data[n..];
    }
    while conn.poll_delivery().is_some() {
        crate::reach::note(|r| r.delivered += 1);
    }
    while conn.poll_transmit().is_some() {}
    regions.check(&mem, None);
}

/// The `mpa_setup` target: MPA setup, initiator or responder, with any options and any peer octets; panics when an oracle fails
/// (docs/reliability.md lists them).
pub fn mpa_setup(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    let mut opts = options(&mut input);
    opts.stream = STREAM;
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
