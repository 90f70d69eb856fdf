//! Target `wire_decoders`: every parser of rddp-wire on the same input, with the
//! oracle that decode, encode, decode is stable (and, where the crate promises
//! it, that encoding a decoded value gives back the very octets decoded).
//!
//! The first octet also configures a streaming FPDU decoder (CRC, Markers, start
//! offset, receive limit, chunk size) that reads the rest: chunked and whole
//! feeding must agree, and the decoded ULPDUs re-encoded must decode to themselves.

use crate::input::Input;
use rddp_wire::mpa::frame::frame_len;
use rddp_wire::mpa::{MAX_ULPDU, MIN_ULPDU};
use rddp_wire::sctp::{PPID_DDP_SEGMENT, PPID_SESSION_CONTROL};
use rddp_wire::{
    AdaptationIndication, DdpHeader, DdpSegmentChunk, EnhancedBlock, FpduDecoder, FpduEncoder,
    Marker, MpaFrame, ReadRequestHeader, SctpPayload, SessionControl, Terminate, WireError,
};

/// The `wire_decoders` target: every rddp-wire parser, and the streaming FPDU decoder, on the same input; panics when an oracle fails
/// (docs/reliability.md lists them).
pub fn wire_decoders(data: &[u8]) {
    ddp_header(data);
    read_request(data);
    terminate(data);
    mpa_frame(data);
    enhanced_block(data);
    marker(data);
    sctp(data);
    if let Some((&cfg, rest)) = data.split_first() {
        fpdu_stream(cfg, rest);
    }
}

fn ddp_header(b: &[u8]) {
    let Ok(h) = DdpHeader::parse(b) else { return };
    let e = h.to_vec();
    assert_eq!(e.len(), h.len());
    assert_eq!(&e[..], &b[..h.len()], "DDP header emit(parse(b)) != b");
    assert_eq!(DdpHeader::parse(&e), Ok(h));
}

fn read_request(b: &[u8]) {
    let Ok(h) = ReadRequestHeader::parse(b) else {
        return;
    };
    assert_eq!(&h.to_bytes()[..], b);
    assert_eq!(ReadRequestHeader::parse(&h.to_bytes()), Ok(h));
}

fn terminate(b: &[u8]) {
    let Ok(t) = Terminate::parse(b) else { return };
    let e = t.to_vec().expect("a parsed Terminate encodes");
    assert_eq!(e, b, "Terminate emit(parse(b)) != b");
    assert_eq!(Terminate::parse(&e).as_ref(), Ok(&t));
    // As a whole segment: an untagged header on QN 2, then the same body.
    let seg = t
        .to_segment()
        .expect("a parsed Terminate encodes as a segment");
    let Ok(DdpHeader::Untagged(h)) = DdpHeader::parse(&seg) else {
        panic!("Terminate segment without an untagged header");
    };
    assert_eq!((h.qn, h.msn, h.mo, h.ctrl.last()), (2, 1, 0, true));
    assert_eq!(Terminate::parse(&seg[18..]), Ok(t));
}

fn mpa_frame(b: &[u8]) {
    match frame_len(b) {
        Ok(n) if n <= b.len() => {
            // A header that frame_len accepts makes a frame, except a Rev 2 + E
            // frame too short for its enhanced block.
            match MpaFrame::parse(&b[..n]) {
                Ok(_) | Err(WireError::Truncated { .. }) => {}
                Err(e) => panic!("frame_len accepted a header MpaFrame refuses: {e}"),
            }
        }
        _ => {}
    }
    let Ok(f) = MpaFrame::parse(b) else { return };
    let e = f.to_vec().expect("a parsed MPA frame encodes");
    assert_eq!(e, b, "MPA frame emit(parse(b)) != b");
    assert_eq!(frame_len(&e), Ok(e.len()));
    assert_eq!(MpaFrame::parse(&e), Ok(f));
}

fn enhanced_block(b: &[u8]) {
    let Ok(e) = EnhancedBlock::parse(b) else {
        return;
    };
    assert_eq!(&e.to_bytes()[..], &b[..4]);
    assert_eq!(EnhancedBlock::parse(&e.to_bytes()), Ok(e));
}

fn marker(b: &[u8]) {
    let Ok(m) = Marker::parse(b) else { return };
    assert_eq!(&m.to_bytes()[..], b);
}

fn sctp(b: &[u8]) {
    if let Ok(c) = SessionControl::parse(b) {
        let e = c.to_vec().expect("a parsed session control encodes");
        assert_eq!(e, b);
        assert_eq!(SessionControl::parse(&e), Ok(c));
    }
    if let Ok(s) = DdpSegmentChunk::parse(b) {
        let mut e = Vec::new();
        assert_eq!(s.emit(&mut e), b.len());
        assert_eq!(e, b);
        assert_eq!(DdpSegmentChunk::parse(&e), Ok(s));
    }
    if let Ok(a) = AdaptationIndication::parse(b) {
        assert_eq!(&a.to_bytes()[..], b);
    }
    let other = b
        .get(..4)
        .map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    for ppid in [PPID_DDP_SEGMENT, PPID_SESSION_CONTROL, other] {
        let Ok(p) = SctpPayload::parse(ppid, b) else {
            continue;
        };
        assert_eq!(p.ppid(), ppid);
        let e = match &p {
            SctpPayload::Segment(s) => {
                let mut v = Vec::new();
                s.emit(&mut v);
                v
            }
            SctpPayload::Control(c) => c.to_vec().expect("a parsed control encodes"),
        };
        assert_eq!(e, b);
        assert_eq!(SctpPayload::parse(ppid, &e), Ok(p));
    }
}

/// Offsets a stream may start at: 4-aligned (what real streams have), near the
/// Marker grid, near 2^32, or anything.
fn start_offset(sel: u8, input: &mut Input<'_>) -> u32 {
    match sel & 3 {
        0 => 0,
        1 => u32::from(input.u16()) & !3,
        2 => 0u32.wrapping_sub(u32::from(input.u8()) * 4),
        _ => input.u32(),
    }
}

/// All of `wire` through a decoder in `chunk`-octet pieces: the ULPDUs and the
/// error (if any) that stopped it.
fn decode(
    mut dec: FpduDecoder,
    wire: &[u8],
    chunk: usize,
) -> (Vec<Vec<u8>>, Option<WireError>, FpduDecoder) {
    let mut out = Vec::new();
    for part in wire.chunks(chunk.max(1)) {
        if let Err(e) = dec.feed(part, &mut out) {
            return (out, Some(e), dec);
        }
    }
    (out, None, dec)
}

fn fpdu_stream(cfg: u8, rest: &[u8]) {
    let crc = cfg & 0x01 != 0;
    let markers = cfg & 0x02 != 0;
    let mut input = Input::new(rest);
    let offset = start_offset(cfg >> 2, &mut input);
    let max = match (cfg >> 4) & 3 {
        0 => MAX_ULPDU,
        1 => 1454,
        2 => MIN_ULPDU + usize::from(input.u8()),
        _ => usize::from(input.u16()),
    };
    let chunk = 1 + usize::from(input.u8() >> (cfg >> 6));
    let wire = input.rest();

    let fresh = || FpduDecoder::with_offset(crc, markers, max, offset);
    let (whole, whole_err, _) = decode(fresh(), wire, wire.len());
    let (chunked, chunked_err, _) = decode(fresh(), wire, chunk);
    // Chunking never changes what is decoded, nor whether (and why) it stops.
    assert_eq!(whole, chunked, "chunk size {chunk} changed the ULPDUs");
    assert_eq!(
        whole_err, chunked_err,
        "chunk size {chunk} changed the error"
    );
    for u in &whole {
        assert!((MIN_ULPDU..=max.clamp(MIN_ULPDU, MAX_ULPDU)).contains(&u.len()));
    }

    // Encode what was decoded; decoding that gives the same ULPDUs, cleanly.
    let mut enc = FpduEncoder {
        crc,
        markers,
        offset,
    };
    let mut again = Vec::new();
    for u in &whole {
        let want = enc
            .wire_len(u.len())
            .expect("decoded ULPDU length is valid");
        let n = enc.encode(u, &mut again).expect("decoded ULPDU encodes");
        assert_eq!(n, want);
    }
    let (redecoded, err, dec) = decode(fresh(), &again, chunk);
    assert_eq!(err, None, "re-encoded FPDUs do not decode");
    assert_eq!(redecoded, whole, "decode(encode(decode(b))) != decode(b)");
    assert!(dec.at_boundary());
    assert_eq!(dec.offset(), enc.offset);
    // And encoding is stable: the same ULPDUs give the same octets.
    let mut enc2 = FpduEncoder {
        crc,
        markers,
        offset,
    };
    let mut third = Vec::new();
    for u in &redecoded {
        enc2.encode(u, &mut third).expect("encodes");
    }
    assert_eq!(third, again);
}
