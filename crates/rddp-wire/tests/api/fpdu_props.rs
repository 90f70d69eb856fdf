//! Property tests of the MPA FPDU encoder and streaming decoder (RFC 5044 §4).

use proptest::prelude::*;
use rddp_wire::mpa::{FpduDecoder, FpduEncoder, MAX_ULPDU, MIN_ULPDU};

fn ulpdus() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let one = prop_oneof![
        8 => proptest::collection::vec(any::<u8>(), MIN_ULPDU..80),
        3 => proptest::collection::vec(any::<u8>(), 80..1600),
        1 => proptest::collection::vec(any::<u8>(), 1600..5000),
    ];
    proptest::collection::vec(one, 0..12)
}

/// Stream offsets: 4-aligned (what a real stream has), near wrap-around, or anything.
fn offsets() -> impl Strategy<Value = u32> {
    prop_oneof![
        (0u32..2048).prop_map(|o| o * 4),
        (0u32..1024).prop_map(|o| 0u32.wrapping_sub(o * 4)),
        any::<u32>(),
    ]
}

/// Feed `wire` in chunks whose sizes cycle through `sizes` (all >= 1).
fn feed_chunked(d: &mut FpduDecoder, wire: &[u8], sizes: &[usize]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = wire;
    for &n in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (a, b) = rest.split_at(n.min(rest.len()));
        d.feed(a, &mut out).unwrap();
        rest = b;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn encode_then_decode_any_chunking(
        msgs in ulpdus(),
        crc in any::<bool>(),
        markers in any::<bool>(),
        start in offsets(),
        sizes in prop_oneof![
            Just(vec![1usize]),
            proptest::collection::vec(1usize..64, 1..16),
            proptest::collection::vec(1usize..4000, 1..4),
        ],
    ) {
        let mut enc = FpduEncoder { crc, markers, offset: start };
        let mut wire = Vec::new();
        for m in &msgs {
            let before = wire.len();
            let predicted = enc.wire_len(m.len()).unwrap();
            let n = enc.encode(m, &mut wire).unwrap();
            prop_assert_eq!(n, wire.len() - before);
            prop_assert_eq!(n, predicted);
            prop_assert_eq!(n % 4, 0);
        }
        let max = msgs.iter().map(Vec::len).max().unwrap_or(MIN_ULPDU);
        let mut dec = FpduDecoder::with_offset(crc, markers, max, start);
        let got = feed_chunked(&mut dec, &wire, &sizes);
        prop_assert_eq!(got, msgs);
        prop_assert!(dec.at_boundary());
        prop_assert_eq!(dec.offset(), enc.offset);
    }

    #[test]
    fn garbage_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..3000),
        crc in any::<bool>(),
        markers in any::<bool>(),
        start in offsets(),
        max in 0usize..=MAX_ULPDU + 10,
        sizes in proptest::collection::vec(1usize..700, 1..8),
    ) {
        let mut dec = FpduDecoder::with_offset(crc, markers, max, start);
        let mut out = Vec::new();
        let mut rest = &bytes[..];
        let mut first_err = None;
        for &n in sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (a, b) = rest.split_at(n.min(rest.len()));
            match dec.feed(a, &mut out) {
                Ok(()) => prop_assert!(first_err.is_none()),
                Err(e) => {
                    // Errors are sticky: every later call repeats the first one.
                    let first = first_err.get_or_insert(e.clone());
                    prop_assert_eq!(&e, first);
                }
            }
            rest = b;
        }
        for u in &out {
            prop_assert!(u.len() >= MIN_ULPDU && u.len() <= max.clamp(MIN_ULPDU, MAX_ULPDU));
        }
        if let Some(p) = dec.partial() {
            prop_assert!(p.received.len() <= usize::from(p.ulpdu_len));
        }
    }

    #[test]
    fn corrupted_stream_never_yields_wrong_ulpdu(
        msgs in ulpdus(),
        markers in any::<bool>(),
        start in (0u32..2048).prop_map(|o| o * 4),
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        // With CRC on, a single flipped bit is always detected (CRC32c catches every
        // single-bit error), or stops framing before a corrupt ULPDU is handed out.
        prop_assume!(!msgs.is_empty());
        let mut enc = FpduEncoder { crc: true, markers, offset: start };
        let mut wire = Vec::new();
        for m in &msgs {
            enc.encode(m, &mut wire).unwrap();
        }
        let i = flip.index(wire.len());
        wire[i] ^= 1 << bit;
        let mut dec = FpduDecoder::with_offset(true, markers, MAX_ULPDU, start);
        let mut out = Vec::new();
        let _ = dec.feed(&wire, &mut out);
        prop_assert!(out.len() < msgs.len() || dec.error().is_some() || !dec.at_boundary());
        for (got, want) in out.iter().zip(&msgs) {
            prop_assert_eq!(got, want);
        }
    }
}
