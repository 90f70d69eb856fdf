//! Receive side of FPDU mode (RFC 5044 §4): turns the byte stream into
//! whole, CRC-checked ULPDUs.
//!
//! Fast path (no Markers in this direction, decoder between FPDUs): an FPDU lying
//! whole in the caller's buffer is checked in place and its ULPDU handed up as a
//! slice of that buffer, so the sink copies payload once, from the read buffer to
//! its final place. Everything else (Markers, FPDUs split across reads) goes
//! through [`FpduDecoder`], which buffers the ULPDU (one more copy). Either way the
//! CRC is verified before the ULPDU is handed up: nothing of a bad FPDU is placed.

use rddp_wire::mpa::check;
use rddp_wire::{FpduDecoder, WireError};
use std::ops::ControlFlow;

/// Turns a byte stream into whole, CRC-checked ULPDUs (see the module doc).
#[derive(Debug)]
pub struct Receiver {
    crc: bool,
    markers: bool,
    max_ulpdu: usize,
    dec: FpduDecoder,
}

impl Receiver {
    /// A receiver for FPDUs with or without CRC and Markers, ULPDUs of at most
    /// `max_ulpdu` octets.
    pub fn new(crc: bool, markers: bool, max_ulpdu: usize) -> Self {
        Self {
            crc,
            markers,
            max_ulpdu,
            dec: FpduDecoder::new(crc, markers, max_ulpdu),
        }
    }

    /// A new limit (MULPDU changed); takes effect at the next FPDU boundary.
    pub fn set_max_ulpdu(&mut self, max: usize) {
        self.max_ulpdu = max;
    }

    /// The largest ULPDU taken now.
    pub fn max_ulpdu(&self) -> usize {
        self.max_ulpdu
    }

    /// Direct placement is possible: no Markers, between FPDUs.
    pub fn direct_ok(&self) -> bool {
        !self.markers && self.dec.at_boundary()
    }

    fn refresh_limit(&mut self) {
        if self.dec.at_boundary() {
            self.dec =
                FpduDecoder::with_offset(self.crc, self.markers, self.max_ulpdu, self.dec.offset());
        }
    }

    /// Feed octets; `up` gets each ULPDU and may stop the feed (`Break`, e.g. after
    /// a Terminate). Returns the octets consumed, or the framing error.
    pub fn feed(
        &mut self,
        mut input: &[u8],
        mut up: impl FnMut(&[u8]) -> ControlFlow<()>,
    ) -> Result<usize, WireError> {
        let total = input.len();
        self.refresh_limit();
        while !input.is_empty() {
            if !self.markers
                && self.dec.at_boundary()
                && let Some((n, ulpdu)) = check::whole(input, self.crc, self.max_ulpdu)?
            {
                let flow = up(ulpdu);
                input = &input[n..];
                if flow.is_break() {
                    break;
                }
                continue;
            }
            let (n, done) = self.dec.decode(input)?;
            input = &input[n..];
            if let Some(u) = done {
                self.refresh_limit();
                if up(&u).is_break() {
                    break;
                }
            }
        }
        Ok(total - input.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rddp_wire::FpduEncoder;

    fn stream(markers: bool) -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut enc = FpduEncoder::new(true, markers);
        let mut wire = Vec::new();
        let mut ulpdus = Vec::new();
        for len in [14usize, 15, 16, 17, 100, 513, 1400, 18] {
            let u: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            enc.encode(&u, &mut wire).unwrap();
            ulpdus.push(u);
        }
        (wire, ulpdus)
    }

    #[test]
    fn split_at_every_byte_boundary() {
        for markers in [false, true] {
            let (wire, want) = stream(markers);
            for cut in 0..=wire.len() {
                let mut r = Receiver::new(true, markers, 2000);
                let mut got = Vec::new();
                for part in [&wire[..cut], &wire[cut..]] {
                    let n = r
                        .feed(part, |u| {
                            got.push(u.to_vec());
                            ControlFlow::Continue(())
                        })
                        .unwrap();
                    assert_eq!(n, part.len());
                }
                assert_eq!(got, want, "cut at {cut}, markers {markers}");
            }
        }
    }

    #[test]
    fn byte_by_byte_and_all_at_once() {
        for markers in [false, true] {
            let (wire, want) = stream(markers);
            for step in [1, 3, wire.len()] {
                let mut r = Receiver::new(true, markers, 2000);
                let mut got = Vec::new();
                for part in wire.chunks(step) {
                    r.feed(part, |u| {
                        got.push(u.to_vec());
                        ControlFlow::Continue(())
                    })
                    .unwrap();
                }
                assert_eq!(got, want, "step {step}, markers {markers}");
            }
        }
    }

    #[test]
    fn errors() {
        let (mut wire, _) = stream(false);
        let mut r = Receiver::new(true, false, 2000);
        wire[5] ^= 1;
        let e = r.feed(&wire, |_| ControlFlow::Continue(())).unwrap_err();
        assert!(matches!(e, WireError::CrcMismatch { .. }));
        let mut r = Receiver::new(true, false, 2000);
        let e = r.feed(&[0, 13], |_| ControlFlow::Continue(())).unwrap_err();
        assert!(matches!(e, WireError::UlpduLength { len: 13, .. }));
        let mut r = Receiver::new(true, false, 2000);
        let e = r
            .feed(&[0x07, 0xD1], |_| ControlFlow::Continue(()))
            .unwrap_err();
        assert!(matches!(e, WireError::UlpduLength { len: 2001, .. }));
        // Split: the decoder path reports it too.
        let mut r = Receiver::new(true, false, 2000);
        r.feed(&[0], |_| ControlFlow::Continue(())).unwrap();
        let e = r.feed(&[13], |_| ControlFlow::Continue(())).unwrap_err();
        assert!(matches!(e, WireError::UlpduLength { len: 13, .. }));
    }
}
