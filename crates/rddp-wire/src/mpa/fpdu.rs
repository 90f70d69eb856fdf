//! FPDU layout and encoder (RFC 5044 §4).
//!
//! `ULPDU_Length (2) | ULPDU | PAD (0-3) | CRC (4, LE)`, with Markers inserted at every
//! 512-octet stream position when the receiver asked for them. The CRC covers every
//! octet before the CRC field, Markers included (a leading Marker too).

use super::marker::{MARKER_LEN, Marker, at_marker, fpduptr, until_marker};
use super::{MAX_ULPDU, MIN_ULPDU, MPA_CRC_LEN, MPA_HDR_LEN};
use crate::crc::{crc_wire_bytes, crc32c};
use crate::error::WireError;

/// PAD octets after a ULPDU of this length: `(4 - (2 + len) mod 4) mod 4` (RFC 5044 §4.1).
pub fn pad_len(ulpdu_len: usize) -> usize {
    ulpdu_len.wrapping_add(MPA_HDR_LEN).wrapping_neg() & 3
}

/// MULPDU for an EMSS (RFC 5044 §4.5): `EMSS - (6 + EMSS mod 4)` without Markers,
/// `EMSS - (6 + 4*ceil(EMSS/512) + EMSS mod 4)` with. Saturates at 0 for tiny EMSS.
pub fn mulpdu(emss: usize, markers: bool) -> usize {
    let marker_room = if markers {
        MARKER_LEN * emss.div_ceil(super::marker::MARKER_INTERVAL as usize)
    } else {
        0
    };
    emss.saturating_sub(MPA_HDR_LEN + MPA_CRC_LEN + marker_room + emss % 4)
}

fn check_len(ulpdu_len: usize) -> Result<u16, WireError> {
    match u16::try_from(ulpdu_len) {
        Ok(l) if ulpdu_len >= MIN_ULPDU => Ok(l),
        _ => Err(WireError::UlpduLength {
            len: ulpdu_len.min(MAX_ULPDU) as u16,
            min: MIN_ULPDU,
            max: MAX_ULPDU,
        }),
    }
}

/// Appends FPDU octets, inserting Markers on the grid. `len_off` is the offset of the
/// ULPDU_Length field once it has been written (None before: a due Marker is leading).
struct Writer<'a> {
    out: Option<&'a mut Vec<u8>>,
    written: usize,
    off: u32,
    markers: bool,
    len_off: Option<u32>,
}

impl Writer<'_> {
    fn push(&mut self, b: &[u8]) {
        if let Some(o) = self.out.as_mut() {
            o.extend_from_slice(b);
        }
        self.written += b.len();
        // FPDUs are < 2^32 octets, so the cast is exact; offsets wrap by design.
        self.off = self.off.wrapping_add(b.len() as u32);
    }

    fn marker_if_due(&mut self) {
        if self.markers && at_marker(self.off) {
            let ptr = self.len_off.map_or(0, |l| fpduptr(self.off, l));
            self.push(&Marker::new(ptr).to_bytes());
        }
    }

    fn write(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            self.marker_if_due();
            let n = if self.markers {
                until_marker(self.off).min(data.len())
            } else {
                data.len()
            };
            self.push(&data[..n]);
            data = &data[n..];
        }
    }

    /// Everything up to the CRC field: ULPDU_Length, ULPDU, PAD and their Markers,
    /// including one that falls between PAD and CRC (RFC 5044 §4).
    fn body(&mut self, ulpdu_len: u16, ulpdu: &[u8]) {
        self.marker_if_due();
        self.len_off = Some(self.off);
        self.write(&ulpdu_len.to_be_bytes());
        self.write(ulpdu);
        self.write(&[0u8; 3][..pad_len(ulpdu.len())]);
        self.marker_if_due();
    }
}

/// Append one FPDU carrying `ulpdu` to `out`; returns the octets appended.
///
/// `crc`: compute the CRC (else the field is zero, RFC 5044 §4). `marker_off`: `Some`
/// with the stream offset of the FPDU's first octet relative to SeqStart when Markers
/// are on in this direction, `None` when they are off. ULPDU length must be
/// 14..=65535 (the decoder refuses anything shorter than a tagged DDP header).
pub fn encode_fpdu(
    ulpdu: &[u8],
    crc: bool,
    marker_off: Option<u32>,
    out: &mut Vec<u8>,
) -> Result<usize, WireError> {
    let len = check_len(ulpdu.len())?;
    let start = out.len();
    let mut w = Writer {
        out: Some(out),
        written: 0,
        off: marker_off.unwrap_or(0),
        markers: marker_off.is_some(),
        len_off: None,
    };
    w.body(len, ulpdu);
    let value = match (&w.out, crc) {
        (Some(o), true) => crc32c(&o[start..]),
        _ => 0,
    };
    w.write(&crc_wire_bytes(value));
    Ok(w.written)
}

/// Octets [`encode_fpdu`] would append for a ULPDU of `ulpdu_len` octets.
pub fn fpdu_wire_len(ulpdu_len: usize, marker_off: Option<u32>) -> Result<usize, WireError> {
    let len = check_len(ulpdu_len)?;
    let mut w = Writer {
        out: None,
        written: 0,
        off: marker_off.unwrap_or(0),
        markers: marker_off.is_some(),
        len_off: None,
    };
    // Only the length matters, so any octets of the right size will do.
    let zeros = [0u8; 512];
    w.marker_if_due();
    w.len_off = Some(w.off);
    w.write(&[0, 0]);
    let mut rest = ulpdu_len;
    while rest > 0 {
        let n = rest.min(zeros.len());
        w.write(&zeros[..n]);
        rest -= n;
    }
    w.write(&zeros[..pad_len(usize::from(len))]);
    w.marker_if_due();
    w.write(&zeros[..MPA_CRC_LEN]);
    Ok(w.written)
}

/// Stateful FPDU encoder for one stream direction: remembers CRC/Marker settings and
/// the stream offset relative to SeqStart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FpduEncoder {
    /// Compute the CRC; without it the field is sent as zero (RFC 5044 §7.1.1: the
    /// C bit).
    pub crc: bool,
    /// Insert Markers (the peer asked for them with M, RFC 5044 §7.1.1).
    pub markers: bool,
    /// Offset of the next octet relative to SeqStart (mod 2^32).
    pub offset: u32,
}

impl FpduEncoder {
    /// An encoder positioned at SeqStart (the first octet after the Request/Reply).
    pub fn new(crc: bool, markers: bool) -> Self {
        Self {
            crc,
            markers,
            offset: 0,
        }
    }

    fn marker_off(&self) -> Option<u32> {
        self.markers.then_some(self.offset)
    }

    /// Append one FPDU to `out` and advance the offset; returns octets appended.
    pub fn encode(&mut self, ulpdu: &[u8], out: &mut Vec<u8>) -> Result<usize, WireError> {
        let n = encode_fpdu(ulpdu, self.crc, self.marker_off(), out)?;
        self.offset = self.offset.wrapping_add(n as u32);
        Ok(n)
    }

    /// Wire octets the next FPDU with a ULPDU of this length would take.
    pub fn wire_len(&self, ulpdu_len: usize) -> Result<usize, WireError> {
        fpdu_wire_len(ulpdu_len, self.marker_off())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_rule() {
        assert_eq!(pad_len(19), 3);
        assert_eq!(pad_len(22), 0);
        assert_eq!(pad_len(23), 3);
        assert_eq!(pad_len(14), 0);
        assert_eq!(pad_len(15), 3);
        assert_eq!(pad_len(16), 2);
        assert_eq!(pad_len(17), 1);
        for l in 0..100 {
            assert_eq!((2 + l + pad_len(l)) % 4, 0);
        }
    }

    #[test]
    fn mulpdu_table() {
        // RFC 5044 §4
        let table = [
            (536, 530, 522),
            (1440, 1434, 1422),
            (1448, 1442, 1430),
            (1460, 1454, 1442),
            (8960, 8954, 8882),
            (9000, 8994, 8922),
        ];
        for (emss, plain, marked) in table {
            assert_eq!(mulpdu(emss, false), plain, "EMSS {emss}");
            assert_eq!(mulpdu(emss, true), marked, "EMSS {emss} with markers");
        }
        assert_eq!(mulpdu(3, true), 0);
    }

    #[test]
    fn length_limits() {
        let mut v = Vec::new();
        assert!(encode_fpdu(&[0; 13], false, None, &mut v).is_err());
        assert!(encode_fpdu(&vec![0; MAX_ULPDU + 1], false, None, &mut v).is_err());
        assert!(v.is_empty());
        assert_eq!(encode_fpdu(&[0; 14], false, None, &mut v), Ok(20));
        assert_eq!(v, [&[0, 14][..], &[0; 18][..]].concat());
    }

    #[test]
    fn wire_len_matches_encoder() {
        for off in (0..1100).step_by(4).chain([1, 2, 3, 509, 510, 511]) {
            for len in [14, 15, 30, 500, 509, 510, 1500] {
                let mut v = Vec::new();
                let n = encode_fpdu(&vec![7; len], true, Some(off), &mut v).unwrap();
                assert_eq!(n, v.len());
                assert_eq!(fpdu_wire_len(len, Some(off)), Ok(n), "off {off} len {len}");
            }
        }
    }
}
