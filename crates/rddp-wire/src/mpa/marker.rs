//! MPA Markers (RFC 5044 §4.2 for the format, §4.3 for where they go).
//!
//! A Marker starts at every stream offset `S` with `(S - SeqStart) mod 512 == 0`.
//! Offsets in this crate are relative to SeqStart, modulo 2^32 (2^32 is a multiple of
//! 512, so the grid survives wrap-around). FPDUPTR is the distance back from the
//! Marker to its FPDU's ULPDU_Length field, or 0 for a Marker that sits right before
//! that field (the FPDU's leading Marker).

use crate::error::{WireError, be16, need};

/// Octets in a Marker.
pub const MARKER_LEN: usize = 4;
/// Stream distance between Markers.
pub const MARKER_INTERVAL: u32 = 512;

/// A Marker: 16 reserved bits, then FPDUPTR (RFC 5044 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Marker {
    /// Send 0; kept so parse/emit round-trips.
    pub reserved: u16,
    /// Octets back from this Marker to its FPDU's ULPDU_Length field (a multiple
    /// of 4), or 0 for a Marker right before that field.
    pub fpduptr: u16,
}

impl Marker {
    /// A Marker with zero reserved bits.
    pub fn new(fpduptr: u16) -> Self {
        Self {
            reserved: 0,
            fpduptr,
        }
    }

    /// Parse exactly 4 octets.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        need(b, MARKER_LEN, "MPA marker")?;
        if b.len() > MARKER_LEN {
            return Err(WireError::Trailing {
                what: "MPA marker",
                extra: b.len() - MARKER_LEN,
            });
        }
        Ok(Self {
            reserved: be16(b, 0),
            fpduptr: be16(b, 2),
        })
    }

    /// The 4 octets on the wire, big-endian.
    pub fn to_bytes(&self) -> [u8; MARKER_LEN] {
        let mut b = [0; MARKER_LEN];
        b[..2].copy_from_slice(&self.reserved.to_be_bytes());
        b[2..].copy_from_slice(&self.fpduptr.to_be_bytes());
        b
    }
}

/// Whether a Marker starts at this offset (relative to SeqStart).
pub fn at_marker(offset: u32) -> bool {
    offset.is_multiple_of(MARKER_INTERVAL)
}

/// Octets from `offset` up to the next Marker position (512 at a Marker position).
pub fn until_marker(offset: u32) -> usize {
    (MARKER_INTERVAL - offset % MARKER_INTERVAL) as usize
}

/// FPDUPTR for a Marker at `marker_off` inside an FPDU whose ULPDU_Length field is at
/// `len_off`. Arithmetic is modulo 2^16: an FPDU longer than 64 KiB (only possible
/// with ULPDU_Length near its maximum) cannot express the distance, and encoder and
/// decoder agree on the wrapped value.
pub fn fpduptr(marker_off: u32, len_off: u32) -> u16 {
    (marker_off.wrapping_sub(len_off) & 0xFFFF) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn marker_roundtrips(r in any::<u16>(), p in any::<u16>(), raw in any::<[u8; 4]>()) {
            let m = Marker { reserved: r, fpduptr: p };
            prop_assert_eq!(Marker::parse(&m.to_bytes()), Ok(m));
            prop_assert_eq!(Marker::parse(&raw).unwrap().to_bytes(), raw);
        }
    }

    #[test]
    fn grid() {
        assert!(at_marker(0) && at_marker(512) && at_marker(1024));
        assert!(!at_marker(4) && !at_marker(508));
        assert_eq!(until_marker(500), 12);
        assert_eq!(until_marker(512), 512);
        assert!(at_marker(0u32.wrapping_sub(512)));
        assert_eq!(fpduptr(512, 500), 12);
        assert_eq!(fpduptr(0, 0u32.wrapping_sub(8)), 8);
    }

    #[test]
    fn roundtrip() {
        let m = Marker {
            reserved: 0xBEEF,
            fpduptr: 32,
        };
        assert_eq!(m.to_bytes(), [0xBE, 0xEF, 0, 32]);
        assert_eq!(Marker::parse(&m.to_bytes()), Ok(m));
        assert!(Marker::parse(&[0; 3]).is_err());
        assert!(Marker::parse(&[0; 5]).is_err());
    }
}
