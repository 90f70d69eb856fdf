//! Every worked test vector (RDMAP and DDP over MPA, and MPA frames), byte for byte,
//! through the typed builders, the FPDU encoder and back through the decoder.

use rddp_wire::mpa::{EnhancedBlock, FpduDecoder, FrameKind, MpaFlags, MpaFrame, encode_fpdu};
use rddp_wire::{
    DdpHeader, Opcode, RdmapControl, ReadRequestHeader, TaggedHeader, Terminate, TerminateCode,
    UntaggedHeader, WireError, crc32c,
};

/// Octets from a hex dump: whitespace-separated pairs, "0000:" offsets ignored.
fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .filter(|t| !t.ends_with(':'))
        .map(|t| u8::from_str_radix(t, 16).unwrap())
        .collect()
}

fn tagged(op: Opcode, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let h = TaggedHeader::new(true, RdmapControl::new(op).0, stag, to);
    [&h.to_bytes()[..], payload].concat()
}

fn untagged(op: Opcode, inval: u32, qn: u32, msn: u32, payload: &[u8]) -> Vec<u8> {
    let mut r = [0u8; 5];
    r[0] = RdmapControl::new(op).0;
    r[1..].copy_from_slice(&inval.to_be_bytes());
    let h = UntaggedHeader::new(true, r, qn, msn, 0);
    [&h.to_bytes()[..], payload].concat()
}

/// Encode `ulpdu` (CRC on), compare with `want`, check the CRC value, then decode
/// `want` whole, octet by octet, and split at every position.
fn check(ulpdu: &[u8], marker_off: Option<u32>, want: &[u8], crc_value: u32) {
    let mut wire = Vec::new();
    assert_eq!(
        encode_fpdu(ulpdu, true, marker_off, &mut wire),
        Ok(want.len())
    );
    assert_eq!(wire, want, "encoded FPDU");
    let (body, trailer) = want.split_at(want.len() - 4);
    assert_eq!(crc32c(body), crc_value, "CRC value");
    assert_eq!(trailer, crc_value.to_le_bytes(), "CRC wire order");

    let dec =
        || FpduDecoder::with_offset(true, marker_off.is_some(), 65535, marker_off.unwrap_or(0));
    for split in 0..=want.len() {
        let mut d = dec();
        let mut out = Vec::new();
        d.feed(&want[..split], &mut out).unwrap();
        d.feed(&want[split..], &mut out).unwrap();
        assert_eq!(out, vec![ulpdu.to_vec()], "split at {split}");
        assert!(d.at_boundary());
    }
    let mut d = dec();
    let mut out = Vec::new();
    for b in want {
        d.feed(std::slice::from_ref(b), &mut out).unwrap();
    }
    assert_eq!(out, vec![ulpdu.to_vec()], "octet by octet");

    // No flipped octet yields a ULPDU: the CRC, a length or marker check catches it,
    // or (a larger ULPDU_Length) the decoder is still waiting for more octets.
    for i in 0..want.len() {
        let mut bad = want.to_vec();
        bad[i] ^= 0x01;
        let mut out = Vec::new();
        let mut d = dec();
        let r = d.feed(&bad, &mut out);
        assert!(
            out.is_empty() && (r.is_err() || !d.at_boundary()),
            "flip at {i} went unnoticed"
        );
    }
}

#[test]
fn crc_self_checks() {
    // RFC 3720 §B.4
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    let inc: Vec<u8> = (0..32).collect();
    let dec: Vec<u8> = (0..32).rev().collect();
    assert_eq!(crc32c(&[0; 32]).to_le_bytes(), [0xaa, 0x36, 0x91, 0x8a]);
    assert_eq!(crc32c(&[0xff; 32]).to_le_bytes(), [0x43, 0xab, 0xa8, 0x62]);
    assert_eq!(crc32c(&inc).to_le_bytes(), [0x4e, 0x79, 0xdd, 0x46]);
    assert_eq!(crc32c(&dec).to_le_bytes(), [0x5c, 0xdb, 0x3f, 0x11]);
}

#[test]
fn vector1_rdma_write() {
    let u = tagged(Opcode::RDMA_WRITE, 0x1234, 0x1000, b"hello");
    let want = hex("00 13 c1 40 00 00 12 34 00 00 00 00 00 00 10 00
                    68 65 6c 6c 6f 00 00 00 af 51 be ba");
    check(&u, None, &want, 0xbabe_51af);
}

#[test]
fn vector2_send() {
    let u = untagged(Opcode::SEND, 0, 0, 1, b"hello");
    let want = hex("00 17 41 43 00 00 00 00 00 00 00 00 00 00 00 01
                    00 00 00 00 68 65 6c 6c 6f 00 00 00 b9 90 b1 0c");
    check(&u, None, &want, 0x0cb1_90b9);
}

#[test]
fn vector3_send_se_invalidate() {
    let u = untagged(Opcode::SEND_SE_INVALIDATE, 0xcafe_0001, 0, 2, b"ping");
    let want = hex("00 16 41 46 ca fe 00 01 00 00 00 00 00 00 00 02
                    00 00 00 00 70 69 6e 67 bc 28 3e ee");
    check(&u, None, &want, 0xee3e_28bc);
}

#[test]
fn vector4_read_request() {
    let rr = ReadRequestHeader {
        sink_stag: 0x5678,
        sink_to: 0x2000,
        size: 5,
        src_stag: 0x1234,
        src_to: 0x1000,
    };
    let u = untagged(Opcode::READ_REQUEST, 0, 1, 1, &rr.to_bytes());
    let want = hex("00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01
                    00 00 00 00 00 00 56 78 00 00 00 00 00 00 20 00
                    00 00 00 05 00 00 12 34 00 00 00 00 00 00 10 00
                    e8 0d 36 d4");
    check(&u, None, &want, 0xd436_0de8);
    assert_eq!(ReadRequestHeader::parse(&u[18..]), Ok(rr));
}

#[test]
fn vector5_read_response() {
    let u = tagged(Opcode::READ_RESPONSE, 0x5678, 0x2000, b"hello");
    let want = hex("00 13 c1 42 00 00 56 78 00 00 00 00 00 00 20 00
                    68 65 6c 6c 6f 00 00 00 4f 8f bc ea");
    check(&u, None, &want, 0xeabc_8f4f);
}

#[test]
fn vector6_terminate() {
    let offending = DdpHeader::parse(&tagged(Opcode::RDMA_WRITE, 0x1234, 0x1000, b"")).unwrap();
    let t = Terminate::with_headers(TerminateCode::DDP_INVALID_STAG, 19, offending, None);
    assert_eq!(t.control_word(), 0x1100_c000);
    let u = t.to_segment().unwrap();
    let want = hex("00 26 41 47 00 00 00 00 00 00 00 02 00 00 00 01
                    00 00 00 00 11 00 c0 00 00 13 c1 40 00 00 12 34
                    00 00 00 00 00 00 10 00 b6 c9 b1 45");
    check(&u, None, &want, 0x45b1_c9b6);
    assert_eq!(Terminate::parse(&u[18..]), Ok(t));
}

#[test]
fn vector7_zero_length_write() {
    let u = tagged(Opcode::RDMA_WRITE, 0, 0, b"");
    let want = hex("00 0e c1 40 00 00 00 00 00 00 00 00 00 00 00 00 a3 05 72 ab");
    check(&u, None, &want, 0xab72_05a3);
}

fn marker_ulpdu() -> Vec<u8> {
    let payload: Vec<u8> = (0..16).collect();
    tagged(Opcode::RDMA_WRITE, 0x1234, 0x1000, &payload)
}

#[test]
fn vector8a_marker_inside() {
    let want = hex("00 1e c1 40 00 00 12 34 00 00 00 00 00 00 00 0c
                    00 00 10 00 00 01 02 03 04 05 06 07 08 09 0a 0b
                    0c 0d 0e 0f 6c f5 e9 a2");
    check(&marker_ulpdu(), Some(500), &want, 0xa2e9_f56c);
}

#[test]
fn vector8b_leading_marker() {
    let want = hex("00 00 00 00 00 1e c1 40 00 00 12 34 00 00 00 00
                    00 00 10 00 00 01 02 03 04 05 06 07 08 09 0a 0b
                    0c 0d 0e 0f 44 67 8a 6f");
    check(&marker_ulpdu(), Some(0), &want, 0x6f8a_6744);
}

#[test]
fn vector8c_marker_before_crc() {
    let want = hex("00 1e c1 40 00 00 12 34 00 00 00 00 00 00 10 00
                    00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f
                    00 00 00 20 4f 83 b1 37");
    check(&marker_ulpdu(), Some(480), &want, 0x37b1_834f);
}

#[test]
fn llp_errors_map_to_terminate_codes() {
    let mut wire = Vec::new();
    encode_fpdu(&marker_ulpdu(), true, Some(500), &mut wire).unwrap();
    let mut bad = wire.clone();
    bad[38] ^= 0x80; // CRC field
    let e = FpduDecoder::with_offset(true, true, 100, 500)
        .feed(&bad, &mut Vec::new())
        .unwrap_err();
    assert!(matches!(e, WireError::CrcMismatch { .. }));
    assert_eq!(e.terminate_code(), Some(TerminateCode::MPA_CRC_ERROR));
    // Without CRC negotiated the field is ignored.
    assert!(
        FpduDecoder::with_offset(false, true, 100, 500)
            .feed(&bad, &mut Vec::new())
            .is_ok()
    );
    let mut bad = wire.clone();
    bad[15] = 0x10; // FPDUPTR 12 -> 16
    let e = FpduDecoder::with_offset(false, true, 100, 500)
        .feed(&bad, &mut Vec::new())
        .unwrap_err();
    assert_eq!(
        e,
        WireError::MarkerMismatch {
            fpduptr: 16,
            expected: 12
        }
    );
    assert_eq!(e.terminate_code(), Some(TerminateCode::MPA_MARKER_MISMATCH));
    // ULPDU_Length above the configured maximum is refused before any allocation.
    let mut d = FpduDecoder::with_offset(true, true, 29, 500);
    let e = d.feed(&wire, &mut Vec::new()).unwrap_err();
    assert_eq!(
        e,
        WireError::UlpduLength {
            len: 30,
            min: 14,
            max: 29
        }
    );
    assert_eq!(d.feed(&[0], &mut Vec::new()), Err(e), "errors are sticky");
    // Shorter than a tagged DDP header.
    let e = FpduDecoder::new(true, false, 1000)
        .feed(&[0, 13], &mut Vec::new())
        .unwrap_err();
    assert!(matches!(e, WireError::UlpduLength { len: 13, .. }));
}

#[test]
fn mpa_frames() {
    // RFC 5044 §7.1.1
    let crc_only = MpaFlags::new(false, true, false, false);
    let enhanced = MpaFlags::new(false, true, false, true);
    let frames = [
        (
            MpaFrame::new(FrameKind::Request, crc_only, 1, None, vec![]),
            "4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65  40 01 00 00",
        ),
        (
            MpaFrame::new(
                FrameKind::Request,
                enhanced,
                2,
                Some(EnhancedBlock {
                    p2p: true,
                    ird: 16,
                    rtr_write: true,
                    rtr_read: true,
                    ord: 16,
                    ..Default::default()
                }),
                b"ULP".to_vec(),
            ),
            "4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65  50 02 00 07  80 10 c0 10  55 4c 50",
        ),
        (
            MpaFrame::new(
                FrameKind::Reply,
                enhanced,
                2,
                Some(EnhancedBlock {
                    p2p: true,
                    ird: 16,
                    rtr_write: true,
                    ord: 16,
                    ..Default::default()
                }),
                vec![],
            ),
            "4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65  50 02 00 04  80 10 80 10",
        ),
        (
            MpaFrame::new(
                FrameKind::Reply,
                MpaFlags::new(false, true, true, false),
                1,
                None,
                vec![],
            ),
            "4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 60 01 00 00",
        ),
    ];
    for (frame, dump) in frames {
        let want = hex(dump);
        assert_eq!(frame.to_vec().unwrap(), want);
        assert_eq!(rddp_wire::frame_len(&want[..20]), Ok(want.len()));
        assert_eq!(MpaFrame::parse(&want), Ok(frame));
    }
}
