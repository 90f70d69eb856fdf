//! `rddp target --deviate NAME`: planted deviations from the RFCs, for testing a
//! conformance tester (`rddp conform`), never for anything else.
//!
//! The engine has no switch to break itself, so the deviations are made on the
//! wire by a relay in front of the unchanged target, in this process: every
//! connection to `--listen` is relayed to the real listener on 127.0.0.1. The
//! relay copies MPA setup as it is, then rewrites what it must:
//!
//! * `no-to-wrap-check`: a TO-wrap Terminate (1/1/0x03, 0/1/0x04) goes out as the
//!   base-or-bounds one (1/1/0x01, 0/1/0x01) an engine that skips the wrap check
//!   reports, its wrapped TO + length failing the bounds check instead
//!   (RFC 5041 §7.1 asks for the wrap check).
//! * `wrong-terminate-code`: a base-or-bounds Terminate (1/1/0x01) goes out as
//!   Invalid STag (1/1/0x00).
//! * `siw-terminate-layout`: every Terminate's control word in Linux siw's
//!   little-endian bitfield layout, not RFC 5040 §4.8's.
//! * `no-terminate`: Terminates are dropped; the target just closes.
//! * `place-before-validate`: an RDMA Write to the advertised buffer that runs
//!   past its end is preceded by a Write of the part inside it, so the target
//!   really places octets of a segment it then refuses (RFC 5041 §7.1: validate,
//!   then place). Needs FPDUs towards the target without Markers.
//!
//! Over SCTP (`--transport sctp`) the first three are made by a UDP relay
//! instead (`deviate_sctp.rs`), and one more that only SCTP has:
//!
//! * `reject-not-terminate`: a Session Terminate that answers an Initiate
//!   (the target's first chunk on its stream, DDP-SSN 0) goes out as a Session
//!   Reject; RFC 5043 lets only the ULP reject, and an Initiate the adaptation
//!   refuses (private data above 512 octets) is answered with Terminate.
//!
//! Two more break the rules of the active side of an SCTP session, for
//! `rddp conform --transport sctp --role responder`: with `--deviate-to ADDR`
//! no target runs, the relay passes whatever associates with `--listen` (the
//! initiator under test, e.g. `rddp perf client --transport sctp`) on to ADDR
//! (the tester) and rewrites the initiator's packets (`deviate_sctp.rs`):
//!
//! * `ssn-gap`: the initiator's chunk with DDP-SSN 1 (its first after the
//!   Initiate) goes out with DDP-SSN 2: a gap in the DDP-SSNs (RFC 5043: one
//!   per chunk, from 0, without gaps).
//! * `wrong-adaptation`: the Adaptation Layer Indication in the initiator's
//!   INIT goes out as 0x00000002, not 0x00000001 (DDP).

use clap::ValueEnum;
use rddp_wire::rdmap::qn;
use rddp_wire::{
    DdpHeader, FpduDecoder, FpduEncoder, FrameKind, MpaFrame, Opcode, RdmapControl, TaggedHeader,
    Terminate, TerminateCode, UntaggedHeader, frame_len, pad_len,
};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Deviation {
    NoToWrapCheck,
    WrongTerminateCode,
    SiwTerminateLayout,
    NoTerminate,
    PlaceBeforeValidate,
    /// SCTP only (`deviate_sctp.rs`).
    RejectNotTerminate,
    /// SCTP, the initiator's side, with `--deviate-to` only.
    SsnGap,
    /// SCTP, the initiator's side, with `--deviate-to` only.
    WrongAdaptation,
}

/// What one relayed connection learnt: the Request, the Reply, the buffer.
#[derive(Default)]
struct Link {
    request: Option<MpaFrame>,
    reply: Option<MpaFrame>,
    /// The advertisement: STag, TO, length.
    advert: Option<(u32, u64, u32)>,
}

type Shared = Arc<Mutex<Link>>;

fn lock(l: &Shared) -> std::sync::MutexGuard<'_, Link> {
    l.lock().unwrap_or_else(|p| p.into_inner())
}

/// Listen on `listen` and relay each connection to `back`; the bound address.
pub(super) fn start(listen: &str, back: SocketAddr, d: Deviation) -> Result<String, String> {
    let l = TcpListener::bind(listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let at = l.local_addr().map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        for front in l.incoming().flatten() {
            std::thread::spawn(move || relay(front, back, d));
        }
    });
    Ok(at.to_string())
}

fn relay(front: TcpStream, back: SocketAddr, d: Deviation) {
    let Ok(back) = TcpStream::connect(back) else {
        return;
    };
    let _ = (front.set_nodelay(true), back.set_nodelay(true));
    let link: Shared = Arc::default();
    let (Ok(f2), Ok(b2)) = (front.try_clone(), back.try_clone()) else {
        return;
    };
    let l2 = link.clone();
    let up = std::thread::spawn(move || upstream(f2, b2, &l2, d));
    downstream(back, front, &link, d);
    let _ = up.join();
}

/// One MPA frame (Request or Reply) from `src`, its octets; `Err` with the
/// octets read if they are not one.
fn frame(src: &mut TcpStream) -> Result<(MpaFrame, Vec<u8>), Vec<u8>> {
    let mut b = vec![0u8; 20];
    if src.read_exact(&mut b).is_err() {
        return Err(Vec::new());
    }
    let Ok(n) = frame_len(&b) else {
        return Err(b);
    };
    b.resize(n, 0);
    if src.read_exact(&mut b[20..]).is_err() {
        return Err(Vec::new());
    }
    match MpaFrame::parse(&b) {
        Ok(f) => Ok((f, b)),
        Err(_) => Err(b),
    }
}

/// Copy until either side is done, then pass the close on.
fn copy(mut src: TcpStream, mut dst: TcpStream) {
    let _ = std::io::copy(&mut src, &mut dst);
    let _ = dst.shutdown(Shutdown::Write);
}

/// Initiator to target: the Request as it is, then FPDUs (rewritten only for
/// `place-before-validate`).
fn upstream(mut src: TcpStream, mut dst: TcpStream, link: &Shared, d: Deviation) {
    match frame(&mut src) {
        Ok((f, b)) => {
            lock(link).request = Some(f);
            if dst.write_all(&b).is_err() {
                return;
            }
        }
        Err(b) => {
            let _ = dst.write_all(&b);
            return copy(src, dst);
        }
    }
    if d != Deviation::PlaceBeforeValidate {
        return copy(src, dst);
    }
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 65536];
    // CRC and Markers as agreed: the first FPDU only comes once the Reply has
    // gone through (downstream stored it first).
    let mut crc = None;
    loop {
        let n = match src.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let crc = *crc.get_or_insert_with(|| {
            let l = lock(link);
            let (req, rep) = (l.request.as_ref(), l.reply.as_ref());
            let markers = rep.is_none_or(|r| r.flags.markers());
            let crc = req.is_some_and(|r| r.flags.crc()) || rep.is_some_and(|r| r.flags.crc());
            (!markers).then_some(crc)
        });
        let Some(crc) = crc else {
            // Markers towards the target (or no Reply): relayed as they come.
            let _ = dst.write_all(&buf);
            return copy(src, dst);
        };
        // Whole FPDUs: ULPDU_Length, ULPDU, PAD, CRC.
        loop {
            if buf.len() < 2 {
                break;
            }
            let len = usize::from(u16::from_be_bytes([buf[0], buf[1]]));
            let total = 2 + len + pad_len(len) + if crc { 4 } else { 0 };
            if buf.len() < total {
                break;
            }
            let fpdu: Vec<u8> = buf.drain(..total).collect();
            let adv = lock(link).advert;
            if let Some(pre) = adv.and_then(|a| inside_part(&fpdu[2..2 + len], a, crc))
                && dst.write_all(&pre).is_err()
            {
                return;
            }
            if dst.write_all(&fpdu).is_err() {
                return;
            }
        }
    }
    let _ = dst.write_all(&buf);
    let _ = dst.shutdown(Shutdown::Write);
}

/// For a Write that runs past the end of the advertised buffer: an FPDU with
/// a Write of the part inside it.
fn inside_part(ulpdu: &[u8], (stag, to, len): (u32, u64, u32), crc: bool) -> Option<Vec<u8>> {
    let DdpHeader::Tagged(h) = DdpHeader::parse(ulpdu).ok()? else {
        return None;
    };
    let payload = &ulpdu[14..];
    let end = to.checked_add(u64::from(len))?;
    let over = h.to.checked_add(payload.len() as u64)?;
    if RdmapControl(h.rsvd_ulp).opcode() != Opcode::RDMA_WRITE
        || h.stag != stag
        || h.to < to
        || h.to >= end
        || over <= end
    {
        return None;
    }
    let inside = usize::try_from(end - h.to).ok()?;
    let mut seg = TaggedHeader::new(true, h.rsvd_ulp, h.stag, h.to)
        .to_bytes()
        .to_vec();
    seg.extend_from_slice(&payload[..inside]);
    let mut out = Vec::new();
    FpduEncoder::new(crc, false).encode(&seg, &mut out).ok()?;
    Some(out)
}

/// Target to initiator: the Reply as it is, then FPDUs, Terminates rewritten.
fn downstream(mut src: TcpStream, mut dst: TcpStream, link: &Shared, d: Deviation) {
    let reply = match frame(&mut src) {
        Ok((f, b)) if f.kind == FrameKind::Reply && !f.flags.reject() => {
            lock(link).reply = Some(f.clone());
            if dst.write_all(&b).is_err() {
                return;
            }
            f
        }
        Ok((_, b)) | Err(b) => {
            let _ = dst.write_all(&b);
            return copy(src, dst);
        }
    };
    let Some(req) = lock(link).request.clone() else {
        return copy(src, dst);
    };
    let crc = req.flags.crc() || reply.flags.crc();
    let markers = req.flags.markers();
    let mut dec = FpduDecoder::new(crc, markers, 65535);
    let mut enc = FpduEncoder::new(crc, markers);
    let mut chunk = vec![0u8; 65536];
    loop {
        let n = match src.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut segs = Vec::new();
        let bad = dec.feed(&chunk[..n], &mut segs).is_err();
        let mut out = Vec::new();
        for s in segs {
            if let Some(a) = advert(&s) {
                lock(link).advert.get_or_insert(a);
            }
            let Some(s) = rewrite(s, d) else { continue };
            if enc.encode(&s, &mut out).is_err() {
                return;
            }
        }
        if dst.write_all(&out).is_err() || bad {
            break;
        }
    }
    let _ = dst.shutdown(Shutdown::Write);
}

fn advert(s: &[u8]) -> Option<(u32, u64, u32)> {
    match DdpHeader::parse(s).ok()? {
        DdpHeader::Untagged(h) if h.qn == qn::SEND && h.msn == 1 && s.len() == 34 => Some((
            u32::from_be_bytes(s[18..22].try_into().ok()?),
            u64::from_be_bytes(s[22..30].try_into().ok()?),
            u32::from_be_bytes(s[30..34].try_into().ok()?),
        )),
        _ => None,
    }
}

/// The segment as the deviation sends it; `None` to drop it.
pub(super) fn rewrite(s: Vec<u8>, d: Deviation) -> Option<Vec<u8>> {
    let Ok(DdpHeader::Untagged(h)) = DdpHeader::parse(&s) else {
        return Some(s);
    };
    if h.qn != qn::TERMINATE {
        return Some(s);
    }
    let Ok(mut t) = Terminate::parse(&s[18..]) else {
        return Some(s);
    };
    let swap = |t: &mut Terminate, from: TerminateCode, to: TerminateCode| {
        if t.code == from {
            t.code = to;
        }
    };
    match d {
        Deviation::NoTerminate => return None,
        Deviation::NoToWrapCheck => {
            swap(
                &mut t,
                TerminateCode::DDP_TO_WRAP,
                TerminateCode::DDP_BASE_BOUNDS,
            );
            swap(
                &mut t,
                TerminateCode::RDMAP_TO_WRAP,
                TerminateCode::RDMAP_BASE_BOUNDS,
            );
        }
        Deviation::WrongTerminateCode => {
            swap(
                &mut t,
                TerminateCode::DDP_BASE_BOUNDS,
                TerminateCode::DDP_INVALID_STAG,
            );
        }
        Deviation::SiwTerminateLayout => {
            let mut body = t.to_vec().ok()?;
            let (c, flags) = (
                t.code,
                u8::from(t.m) | u8::from(t.d()) << 1 | u8::from(t.r) << 2,
            );
            body[..4].copy_from_slice(&[(c.etype << 4) | (c.layer & 0xF), c.code, flags, 0]);
            return Some(with_header(h, &body));
        }
        Deviation::PlaceBeforeValidate
        | Deviation::RejectNotTerminate
        | Deviation::SsnGap
        | Deviation::WrongAdaptation => return Some(s),
    }
    Some(with_header(h, &t.to_vec().ok()?))
}

fn with_header(h: UntaggedHeader, body: &[u8]) -> Vec<u8> {
    let mut v = h.to_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use rddp_wire::ReceivedTerminate;

    fn term(code: TerminateCode) -> Vec<u8> {
        let h = DdpHeader::Tagged(TaggedHeader::new(true, 0, 7, 0));
        Terminate::with_headers(code, 30, h, None)
            .to_segment()
            .unwrap()
    }

    #[test]
    fn codes_are_swapped_and_layouts_changed() {
        let s = rewrite(term(TerminateCode::DDP_TO_WRAP), Deviation::NoToWrapCheck).unwrap();
        assert_eq!(
            Terminate::parse(&s[18..]).unwrap().code,
            TerminateCode::DDP_BASE_BOUNDS
        );
        let s = rewrite(
            term(TerminateCode::DDP_BASE_BOUNDS),
            Deviation::SiwTerminateLayout,
        )
        .unwrap();
        let r = ReceivedTerminate::decode(&s[18..]);
        assert_eq!(r.layout, rddp_wire::TerminateLayout::SiwBitfields);
        assert_eq!(r.code(), Some(TerminateCode::DDP_BASE_BOUNDS));
        assert!(rewrite(term(TerminateCode::DDP_TO_WRAP), Deviation::NoTerminate).is_none());
    }

    #[test]
    fn only_a_write_past_the_end_gets_its_inside_part() {
        let w = |to: u64, n: usize| {
            let mut s = TaggedHeader::new(true, 0, 0x100, to).to_bytes().to_vec();
            s.resize(14 + n, 0xEE);
            s
        };
        let a = (0x100, 0, 64);
        assert!(inside_part(&w(60, 8), a, false).is_some());
        assert!(inside_part(&w(0, 8), a, false).is_none());
        assert!(inside_part(&w(64, 8), a, false).is_none());
        let f = inside_part(&w(60, 8), a, true).unwrap();
        let mut d = FpduDecoder::new(true, false, 65535);
        let mut out = Vec::new();
        d.feed(&f, &mut out).unwrap();
        assert_eq!(out[0].len(), 14 + 4);
    }
}
