//! The receive checks of an FPDU's framing, in one place for every reader:
//! the streaming [`super::FpduDecoder`] and rddp-mpa's header-first receiver
//! with its batch and one-read strategies all call these, so a rule of
//! RFC 5044 is written once.
//!
//! * [`ulpdu_len`]: ULPDU_Length within 14 (a tagged DDP header) and the
//!   receiver's limit (RFC 5044 §4.1, §4.5).
//! * [`covered_len`]: the octets the CRC covers, Markers aside (RFC 5044 §4.4).
//! * [`crc`]: the CRC field against the digest of those octets (RFC 5044 §4.4).
//! * [`marker`]: a Marker's FPDUPTR against the framing (RFC 5044 §4.3).
//! * [`whole`]: a Marker-free FPDU lying whole in a buffer, every check done.

use super::marker::{MARKER_LEN, Marker, fpduptr};
use super::{MIN_ULPDU, MPA_CRC_LEN, MPA_HDR_LEN, pad_len};
use crate::crc::{CRC_LEN, crc_from_wire, crc32c};
use crate::error::WireError;

/// The ULPDU_Length field's value if it is at least [`MIN_ULPDU`] and at most
/// `max_ulpdu` (the receiver's limit, RFC 5044 §4.5); else the error that
/// ends the stream (RFC 5044 §4.1).
#[inline]
pub fn ulpdu_len(field: [u8; MPA_HDR_LEN], max_ulpdu: usize) -> Result<usize, WireError> {
    let len = u16::from_be_bytes(field);
    let l = usize::from(len);
    if (MIN_ULPDU..=max_ulpdu).contains(&l) {
        Ok(l)
    } else {
        Err(WireError::UlpduLength {
            len,
            min: MIN_ULPDU,
            max: max_ulpdu,
        })
    }
}

/// Octets from the ULPDU_Length field to the end of PAD for a ULPDU of
/// `ulpdu_len` octets: what the CRC covers (RFC 5044 §4.4), Markers aside.
#[inline]
pub fn covered_len(ulpdu_len: usize) -> usize {
    MPA_HDR_LEN + ulpdu_len + pad_len(ulpdu_len)
}

/// The CRC field as it came (`field`, RFC 5044 §4.4: little-endian on the
/// wire) against `computed` over the covered octets. Always passes when CRCs
/// were not negotiated (the field is then not checked, RFC 5044 §7.1.1).
#[inline]
pub fn crc(negotiated: bool, field: [u8; CRC_LEN], computed: u32) -> Result<(), WireError> {
    let wire = crc_from_wire(field);
    if !negotiated || wire == computed {
        Ok(())
    } else {
        Err(WireError::CrcMismatch { wire, computed })
    }
}

/// A Marker (`octets`) that starts at stream offset `at` (RFC 5044 §4.3): its
/// FPDUPTR must point back to the ULPDU_Length field at `len_off` of the FPDU
/// it falls in, or be 0 for a leading Marker (`len_off` `None`: the Marker
/// sits right before the next FPDU's ULPDU_Length field).
#[inline]
pub fn marker(octets: &[u8; MARKER_LEN], at: u32, len_off: Option<u32>) -> Result<(), WireError> {
    let m = Marker::parse(octets)?;
    let expected = len_off.map_or(0, |l| fpduptr(at, l));
    if m.fpduptr == expected {
        Ok(())
    } else {
        Err(WireError::MarkerMismatch {
            fpduptr: m.fpduptr,
            expected,
        })
    }
}

/// The FPDU at the start of `b` on a stream without Markers, if it lies there
/// whole: its wire length and its ULPDU, ULPDU_Length and CRC checked.
/// `Ok(None)`: more octets are needed (ULPDU_Length is checked as soon as it
/// is there).
pub fn whole(
    b: &[u8],
    crc_negotiated: bool,
    max_ulpdu: usize,
) -> Result<Option<(usize, &[u8])>, WireError> {
    let Some(&[l0, l1]) = b.get(..MPA_HDR_LEN) else {
        return Ok(None);
    };
    let len = ulpdu_len([l0, l1], max_ulpdu)?;
    let covered = covered_len(len);
    let Some(&[c0, c1, c2, c3]) = b.get(covered..covered + MPA_CRC_LEN) else {
        return Ok(None);
    };
    let computed = if crc_negotiated {
        crc32c(&b[..covered])
    } else {
        0
    };
    crc(crc_negotiated, [c0, c1, c2, c3], computed)?;
    Ok(Some((
        covered + MPA_CRC_LEN,
        &b[MPA_HDR_LEN..MPA_HDR_LEN + len],
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpa::FpduEncoder;

    #[test]
    fn ulpdu_length_bounds() {
        assert_eq!(ulpdu_len([0, 14], 100), Ok(14));
        assert_eq!(ulpdu_len([0, 100], 100), Ok(100));
        for (field, len) in [([0, 13], 13), ([0, 101], 101), ([0xFF, 0xFF], 0xFFFF)] {
            assert_eq!(
                ulpdu_len(field, 100),
                Err(WireError::UlpduLength {
                    len,
                    min: 14,
                    max: 100
                })
            );
        }
    }

    #[test]
    fn crc_field_is_little_endian_and_ignored_when_off() {
        let c: u32 = 0x1234_5678;
        assert_eq!(crc(true, c.to_le_bytes(), c), Ok(()));
        assert!(crc(true, c.to_be_bytes(), c).is_err());
        assert_eq!(crc(false, [9; 4], c), Ok(()));
    }

    #[test]
    fn marker_pointers() {
        let m = |p: u16| Marker::new(p).to_bytes();
        assert_eq!(marker(&m(0), 512, None), Ok(()));
        assert_eq!(marker(&m(12), 512, Some(500)), Ok(()));
        assert_eq!(
            marker(&m(8), 512, Some(500)),
            Err(WireError::MarkerMismatch {
                fpduptr: 8,
                expected: 12
            })
        );
        assert!(marker(&m(4), 1024, None).is_err());
    }

    #[test]
    fn whole_fpdus_cut_anywhere() {
        let mut wire = Vec::new();
        let mut enc = FpduEncoder::new(true, false);
        let ulpdu: Vec<u8> = (0..37).collect();
        enc.encode(&ulpdu, &mut wire).unwrap();
        for cut in 0..wire.len() {
            assert_eq!(whole(&wire[..cut], true, 100), Ok(None), "cut {cut}");
        }
        assert_eq!(whole(&wire, true, 100), Ok(Some((wire.len(), &ulpdu[..]))));
        assert!(whole(&wire, true, 36).is_err(), "over the limit");
        let mut bad = wire.clone();
        bad[5] ^= 1;
        assert!(matches!(
            whole(&bad, true, 100),
            Err(WireError::CrcMismatch { .. })
        ));
        assert!(whole(&bad, false, 100).unwrap().is_some(), "CRC off");
    }
}
