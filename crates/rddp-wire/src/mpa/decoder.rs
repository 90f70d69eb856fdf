//! Streaming FPDU decoder (RFC 5044 §4-5).
//!
//! Feed it the TCP byte stream in chunks split anywhere; it strips Markers, checks
//! their FPDUPTR against the framing, verifies the CRC and hands back each ULPDU.
//! Memory is bounded: the only buffer is the current ULPDU, at most `max_ulpdu`
//! octets, allocated after its ULPDU_Length has been checked. Errors are sticky.

use super::check;
use super::marker::{MARKER_LEN, at_marker, until_marker};
use super::{MAX_ULPDU, MIN_ULPDU, MPA_CRC_LEN, MPA_HDR_LEN, pad_len};
use crate::crc::Crc32c;
use crate::error::WireError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading ULPDU_Length (`have` octets of it so far).
    Header,
    Body,
    Pad,
    Crc,
}

/// The FPDU being received, for a caller that wants to look at the DDP header (and
/// place payload) before the whole FPDU has arrived. Nothing here is CRC-checked yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialFpdu<'a> {
    /// The FPDU's ULPDU_Length.
    pub ulpdu_len: u16,
    /// ULPDU octets received so far (Markers removed).
    pub received: &'a [u8],
}

/// Decoder for one receive direction of an MPA connection in FPDU mode.
#[derive(Debug, Clone)]
pub struct FpduDecoder {
    crc: bool,
    markers: bool,
    max_ulpdu: usize,
    /// Offset of the next input octet relative to SeqStart (mod 2^32).
    off: u32,
    state: State,
    /// An FPDU has started (its first octet, possibly a leading Marker, was seen).
    in_fpdu: bool,
    digest: Crc32c,
    marker: [u8; MARKER_LEN],
    marker_have: usize,
    small: [u8; MPA_CRC_LEN],
    small_have: usize,
    len_off: u32,
    ulpdu_len: usize,
    ulpdu: Vec<u8>,
    pad_left: usize,
    failed: Option<WireError>,
}

impl FpduDecoder {
    /// A decoder positioned at SeqStart. `crc`: verify the CRC field (it is ignored
    /// otherwise). `markers`: Markers are present in this direction. `max_ulpdu`: the
    /// largest ULPDU_Length accepted (clamped to 14..=65535).
    pub fn new(crc: bool, markers: bool, max_ulpdu: usize) -> Self {
        Self::with_offset(crc, markers, max_ulpdu, 0)
    }

    /// As [`FpduDecoder::new`], for a stream whose next octet is at `offset` from
    /// SeqStart (only its value mod 512 matters, and only with Markers).
    pub fn with_offset(crc: bool, markers: bool, max_ulpdu: usize, offset: u32) -> Self {
        Self {
            crc,
            markers,
            max_ulpdu: max_ulpdu.clamp(MIN_ULPDU, MAX_ULPDU),
            off: offset,
            state: State::Header,
            in_fpdu: false,
            digest: Crc32c::new(),
            marker: [0; MARKER_LEN],
            marker_have: 0,
            small: [0; MPA_CRC_LEN],
            small_have: 0,
            len_off: 0,
            ulpdu_len: 0,
            ulpdu: Vec::new(),
            pad_left: 0,
            failed: None,
        }
    }

    /// Offset of the next expected octet relative to SeqStart.
    pub fn offset(&self) -> u32 {
        self.off
    }

    /// Whether the decoder sits exactly between FPDUs (no partial FPDU buffered).
    pub fn at_boundary(&self) -> bool {
        !self.in_fpdu && self.marker_have == 0 && self.failed.is_none()
    }

    /// The FPDU in progress once its ULPDU_Length is known.
    pub fn partial(&self) -> Option<PartialFpdu<'_>> {
        (self.state != State::Header).then(|| PartialFpdu {
            ulpdu_len: self.ulpdu_len as u16,
            received: &self.ulpdu,
        })
    }

    /// The error that stopped the decoder, if any.
    pub fn error(&self) -> Option<&WireError> {
        self.failed.as_ref()
    }

    /// Consume octets from `input` until one FPDU completes or the input runs out.
    /// Returns the octets consumed and the ULPDU if one completed. Call again with
    /// the rest of the input. After an error every call returns that error.
    pub fn decode(&mut self, input: &[u8]) -> Result<(usize, Option<Vec<u8>>), WireError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.run(input) {
            Ok(r) => Ok(r),
            Err(e) => {
                self.ulpdu = Vec::new();
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Decode all of `input`, appending each complete ULPDU to `out`. On error, `out`
    /// holds the ULPDUs that completed (CRC-checked) before it.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), WireError> {
        while !input.is_empty() {
            let (n, u) = self.decode(input)?;
            out.extend(u);
            input = &input[n..];
        }
        Ok(())
    }

    fn run(&mut self, input: &[u8]) -> Result<(usize, Option<Vec<u8>>), WireError> {
        let mut i = 0;
        while i < input.len() {
            if self.markers && (self.marker_have > 0 || at_marker(self.off)) {
                let n = (MARKER_LEN - self.marker_have).min(input.len() - i);
                self.marker[self.marker_have..self.marker_have + n]
                    .copy_from_slice(&input[i..i + n]);
                self.marker_have += n;
                self.advance(n);
                i += n;
                if self.marker_have == MARKER_LEN {
                    self.marker_have = 0;
                    self.on_marker()?;
                }
                continue;
            }
            let room = if self.markers {
                until_marker(self.off)
            } else {
                usize::MAX
            };
            let chunk = &input[i..input.len().min(i.saturating_add(room))];
            let (n, done) = self.logical(chunk)?;
            self.advance(n);
            i += n;
            if done.is_some() {
                return Ok((i, done));
            }
        }
        Ok((i, None))
    }

    fn advance(&mut self, n: usize) {
        // n never exceeds one input slice; offsets wrap by design.
        self.off = self.off.wrapping_add(n as u32);
    }

    /// A complete Marker just ended at `self.off`. Check FPDUPTR; feed the CRC if the
    /// Marker lies inside the CRC's coverage (RFC 5044 §4.4).
    fn on_marker(&mut self) -> Result<(), WireError> {
        let at = self.off.wrapping_sub(MARKER_LEN as u32);
        let leading = self.state == State::Header && self.small_have == 0;
        if leading {
            // Right before a ULPDU_Length field: it opens the next FPDU.
            self.digest.reset();
            self.in_fpdu = true;
        }
        check::marker(&self.marker, at, (!leading).then_some(self.len_off))?;
        // Only a misaligned stream can put a Marker inside the CRC field; such a
        // Marker comes after the covered range.
        if !(self.state == State::Crc && self.small_have > 0) {
            self.digest.update(&self.marker);
        }
        Ok(())
    }

    /// Consume FPDU octets (no Markers inside `b`). Returns octets used and the ULPDU
    /// if the FPDU completed.
    fn logical(&mut self, b: &[u8]) -> Result<(usize, Option<Vec<u8>>), WireError> {
        let mut i = 0;
        while i < b.len() {
            let rest = &b[i..];
            match self.state {
                State::Header => {
                    if !self.in_fpdu {
                        self.digest.reset();
                        self.in_fpdu = true;
                    }
                    if self.small_have == 0 {
                        self.len_off = self.off.wrapping_add(i as u32);
                    }
                    let n = self.take_small(rest, MPA_HDR_LEN);
                    i += n;
                    if self.small_have == MPA_HDR_LEN {
                        self.small_have = 0;
                        self.start_body()?;
                    }
                }
                State::Body => {
                    let n = (self.ulpdu_len - self.ulpdu.len()).min(rest.len());
                    self.digest.update(&rest[..n]);
                    self.ulpdu.extend_from_slice(&rest[..n]);
                    i += n;
                    if self.ulpdu.len() == self.ulpdu_len {
                        self.state = if self.pad_left > 0 {
                            State::Pad
                        } else {
                            State::Crc
                        };
                    }
                }
                State::Pad => {
                    let n = self.pad_left.min(rest.len());
                    self.digest.update(&rest[..n]);
                    self.pad_left -= n;
                    i += n;
                    if self.pad_left == 0 {
                        self.state = State::Crc;
                    }
                }
                State::Crc => {
                    let n = self.take_small(rest, MPA_CRC_LEN);
                    i += n;
                    if self.small_have == MPA_CRC_LEN {
                        return Ok((i, Some(self.finish()?)));
                    }
                }
            }
        }
        Ok((i, None))
    }

    /// Collect up to `want` octets into `small`; the CRC field is not covered by the
    /// digest, the length field is.
    fn take_small(&mut self, b: &[u8], want: usize) -> usize {
        let n = (want - self.small_have).min(b.len());
        if self.state == State::Header {
            self.digest.update(&b[..n]);
        }
        self.small[self.small_have..self.small_have + n].copy_from_slice(&b[..n]);
        self.small_have += n;
        n
    }

    fn start_body(&mut self) -> Result<(), WireError> {
        let l = check::ulpdu_len([self.small[0], self.small[1]], self.max_ulpdu)?;
        self.ulpdu_len = l;
        self.ulpdu = Vec::with_capacity(l);
        self.pad_left = pad_len(l);
        self.state = State::Body;
        Ok(())
    }

    fn finish(&mut self) -> Result<Vec<u8>, WireError> {
        self.small_have = 0;
        self.state = State::Header;
        self.in_fpdu = false;
        check::crc(self.crc, self.small, self.digest.finalize())?;
        Ok(std::mem::take(&mut self.ulpdu))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpa::FpduEncoder;

    #[test]
    fn partial_exposes_header_before_crc() {
        let ulpdu: Vec<u8> = (0..40).collect();
        let mut enc = FpduEncoder::new(true, false);
        let mut wire = Vec::new();
        enc.encode(&ulpdu, &mut wire).unwrap();
        let mut d = FpduDecoder::new(true, false, 100);
        assert_eq!(d.partial(), None);
        assert_eq!(d.decode(&wire[..20]), Ok((20, None)));
        let p = d.partial().unwrap();
        assert_eq!((p.ulpdu_len, p.received), (40, &ulpdu[..18]));
        assert!(!d.at_boundary());
        let (n, u) = d.decode(&wire[20..]).unwrap();
        assert_eq!((n, u), (wire.len() - 20, Some(ulpdu)));
        assert!(d.at_boundary() && d.partial().is_none());
    }

    #[test]
    fn largest_ulpdu_with_markers() {
        // FPDUPTR wraps modulo 2^16 in FPDUs longer than 64 KiB; both sides agree.
        let ulpdu = vec![0xA5; MAX_ULPDU];
        for start in [0u32, 4, 508] {
            let mut enc = FpduEncoder {
                crc: true,
                markers: true,
                offset: start,
            };
            let mut wire = Vec::new();
            enc.encode(&ulpdu, &mut wire).unwrap();
            enc.encode(&ulpdu[..14], &mut wire).unwrap();
            let mut d = FpduDecoder::with_offset(true, true, MAX_ULPDU, start);
            let mut out = Vec::new();
            d.feed(&wire, &mut out).unwrap();
            assert_eq!(out, vec![ulpdu.clone(), ulpdu[..14].to_vec()]);
        }
    }

    #[test]
    fn one_decode_call_stops_after_each_fpdu() {
        let mut enc = FpduEncoder::new(false, true);
        let mut wire = Vec::new();
        for len in [14, 15, 16] {
            enc.encode(&vec![1; len], &mut wire).unwrap();
        }
        let mut d = FpduDecoder::new(false, true, 16);
        let (n, u) = d.decode(&wire).unwrap();
        assert_eq!((n, u.map(|u| u.len())), (24, Some(14)));
    }
}
