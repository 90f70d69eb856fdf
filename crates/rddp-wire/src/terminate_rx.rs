//! Decoding a Terminate as received from a real peer (RFC 5040 §4.8),
//! including Linux siw's control-word layout.
//!
//! siw 6.1 declares the Terminate control word in `struct iwarp_terminate` (its
//! `iwarp.h`) as C bitfields for little-endian hosts: `layer:4, etype:4, ecode:8,
//! flag_m:1, flag_d:1, flag_r:1, reserved:13`. On x86 the compiler fills each octet
//! from its low bit, so the first octet carries EType in its high nibble and Layer
//! in its low one (swapped against the RFC), the Error Code stays in the second
//! octet, and M/D/R land in bits 0/1/2 of the third octet instead of bits 7/6/5.
//! The octets after the control word follow the RFC (length, DDP header, RDMAP
//! header), except that siw's DDP Segment Length counts the payload only.
//!
//! [`ReceivedTerminate::decode`] reads the body both ways and keeps the reading
//! that makes sense (a valid body, a known code, header flags as the code calls for);
//! on a tie the RFC wins. A body that makes sense neither way is kept with its raw
//! control word, so it can still be reported.

use crate::codes::TerminateCode;
use crate::error::WireError;
use crate::terminate::{TERM_CTRL_LEN, TERM_MAX_BODY, Terminate};

/// How a received Terminate's control word was laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TerminateLayout {
    /// RFC 5040 §4.8: Layer, EType, Error Code, then M, D, R from the top bit down.
    Rfc5040,
    /// Linux siw 6.1 on a little-endian host: Layer and EType swapped, M/D/R in the
    /// low bits of the third octet (see the module documentation).
    SiwBitfields,
    /// Neither reading gives a valid Terminate body.
    Undecodable,
}

impl TerminateLayout {
    /// A short name for reports: `rfc5040`, `siw-bitfields` or `undecodable`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rfc5040 => "rfc5040",
            Self::SiwBitfields => "siw-bitfields",
            Self::Undecodable => "undecodable",
        }
    }
}

/// Octets of the raw body kept for reports (more than any valid body has).
pub const KEPT_OCTETS: usize = TERM_MAX_BODY + 12;

/// A received Terminate body: the raw octets, and what they meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedTerminate {
    /// The first [`KEPT_OCTETS`] octets of the body (after the untagged DDP header).
    pub raw: Vec<u8>,
    /// Octets the body had in all.
    pub len: usize,
    /// The control word as it came (big-endian octets 0..4); `None` if shorter.
    pub control_word: Option<u32>,
    /// Which layout the body was read with.
    pub layout: TerminateLayout,
    /// The meaning, in RFC terms (for the siw layout: the Terminate siw meant).
    pub terminate: Option<Terminate>,
    /// Why the body is not a valid RFC 5040 Terminate (set when the RFC reading
    /// was not taken).
    pub rfc_error: Option<WireError>,
    /// The other layout's reading when it too gave a valid body with a known code:
    /// the choice was a judgement, and the report says so.
    pub other_reading: Option<TerminateCode>,
}

/// The body with its control word moved from siw's layout to the RFC's; `None` if
/// the reserved bits are set (siw always sends them as 0).
fn from_siw(body: &[u8]) -> Option<Vec<u8>> {
    let w: [u8; 4] = body.get(..TERM_CTRL_LEN)?.try_into().ok()?;
    let (layer, etype, code, flags) = (w[0] & 0x0F, w[0] >> 4, w[1], w[2]);
    if flags & 0xF8 != 0 || w[3] != 0 {
        return None;
    }
    let (m, d, r) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
    let mut v = body.to_vec();
    v[0] = (layer << 4) | etype;
    v[1] = code;
    v[2] = u8::from(m) << 7 | u8::from(d) << 6 | u8::from(r) << 5;
    v[3] = 0;
    Some(v)
}

/// Whether RFC 5040 §4.8 ("when to include headers") sends this code bare (M=D=R=0):
/// LLP errors, local catastrophic errors, and version or opcode errors, whose
/// offending header layout cannot be trusted.
fn sent_bare(c: TerminateCode) -> bool {
    matches!(
        (c.layer, c.etype, c.code),
        (2, _, _) | (0 | 1, 0, _) | (0, 2, 0x05 | 0x06) | (1, 1, 0x04) | (1, 2, 0x06)
    )
}

/// Whether the M/D flags are what this code is sent with. The RDMAP catastrophic
/// stream and global errors (0/2/0x07, 0/2/0x08) go either way: siw attaches the
/// header, stacks that hit them outside any segment cannot.
fn flags_fit(t: &Terminate) -> bool {
    let c = t.code;
    matches!((c.layer, c.etype, c.code), (0, 2, 0x07 | 0x08)) || sent_bare(c) != (t.m || t.d())
}

fn known(c: TerminateCode) -> bool {
    c.layer <= 2 && c.describe() != "unknown error code"
}

/// How much sense a parsed reading makes: a known code counts most, then the
/// reserved bits being 0, then headers present exactly when the code calls for them.
fn score(t: &Terminate) -> u8 {
    u8::from(known(t.code)) * 4 + u8::from(t.reserved == 0) * 2 + u8::from(flags_fit(t))
}

impl ReceivedTerminate {
    /// Decode a Terminate body (the octets after its untagged DDP header). Never
    /// panics; keeps at most [`KEPT_OCTETS`] octets whatever the input.
    pub fn decode(body: &[u8]) -> Self {
        let control_word = body
            .get(..TERM_CTRL_LEN)
            .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        let rfc = Terminate::parse(body);
        let siw = from_siw(body).and_then(|v| Terminate::parse(&v).ok());
        let take_rfc = match (rfc.as_ref().ok().map(score), siw.as_ref().map(score)) {
            (Some(r), Some(s)) => s <= r,
            (rfc_ok, _) => rfc_ok.is_some(),
        };
        let rfc_known = rfc.as_ref().ok().filter(|t| known(t.code)).map(|t| t.code);
        let (layout, terminate, other) = if take_rfc {
            let other = siw.filter(|t| known(t.code)).map(|t| t.code);
            (TerminateLayout::Rfc5040, rfc.clone().ok(), other)
        } else if siw.is_some() {
            (TerminateLayout::SiwBitfields, siw, rfc_known)
        } else {
            (TerminateLayout::Undecodable, None, None)
        };
        let other = other.filter(|c| Some(*c) != terminate.as_ref().map(|t| t.code));
        Self {
            raw: body[..body.len().min(KEPT_OCTETS)].to_vec(),
            len: body.len(),
            control_word,
            layout,
            rfc_error: if layout == TerminateLayout::Rfc5040 {
                None
            } else {
                rfc.err()
            },
            terminate,
            other_reading: other,
        }
    }

    /// The error code the peer meant, when the body could be decoded.
    pub fn code(&self) -> Option<TerminateCode> {
        self.terminate.as_ref().map(|t| t.code)
    }

    /// Layer, EType and Error Code at their RFC 5040 positions in the raw control
    /// word, whatever the layout: what an undecodable Terminate is reported with.
    pub fn rfc_fields(&self) -> Option<TerminateCode> {
        self.control_word.map(|w| TerminateCode {
            layer: (w >> 28) as u8,
            etype: ((w >> 24) & 0xF) as u8,
            code: ((w >> 16) & 0xFF) as u8,
        })
    }

    /// What the peer meant, in words for an error message: the decoded code (or
    /// that it could not be decoded) and the layout note, if any.
    pub fn summary(&self) -> String {
        let what = self
            .code()
            .map_or_else(|| "that could not be decoded".into(), |c| c.to_string());
        let note = self.note().map(|n| format!(" [{n}]")).unwrap_or_default();
        format!("{what}{note}")
    }

    /// A sentence on how the body was read, unless it was a plain RFC Terminate.
    pub fn note(&self) -> Option<String> {
        let word = self
            .control_word
            .map_or_else(|| "none".to_string(), |w| format!("{w:#010x}"));
        let other = self
            .other_reading
            .map(|c| format!("; read the other way it would be {c}"))
            .unwrap_or_default();
        match self.layout {
            TerminateLayout::Rfc5040 if other.is_empty() => None,
            TerminateLayout::Rfc5040 => {
                Some(format!("control word {word} read as RFC 5040 §4.8{other}"))
            }
            TerminateLayout::SiwBitfields => Some(format!(
                "control word {word} is in Linux siw's layout (little-endian C bitfields: \
                 Layer and EType swapped, M/D/R in the low bits of octet 2), not RFC 5040 \
                 §4.8; siw's DDP Segment Length counts the payload only{other}"
            )),
            TerminateLayout::Undecodable => Some(format!(
                "undecodable Terminate: control word {word}, {} octets ({})",
                self.len,
                self.rfc_error.as_ref().map_or_else(
                    || "shorter than a control word".to_string(),
                    |e| e.to_string()
                )
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::{DdpHeader, UntaggedHeader};
    use proptest::prelude::*;

    /// The Terminate body siw 6.1 sent when a Send found no receive buffer
    /// (docs/interop.md): control word `21 02 03 00`, siw's 2-octet length, then the
    /// offending untagged DDP header.
    fn siw_no_buffer() -> Vec<u8> {
        let mut b = vec![0x21, 0x02, 0x03, 0x00, 0x00, 0x10];
        b.extend_from_slice(&UntaggedHeader::new(true, [0x43, 0, 0, 0, 0], 0, 2, 0).to_bytes());
        b
    }

    #[test]
    fn siw_no_buffer_is_read_as_siw_meant_it() {
        let r = ReceivedTerminate::decode(&siw_no_buffer());
        assert_eq!(r.layout, TerminateLayout::SiwBitfields);
        assert_eq!(r.code(), Some(TerminateCode::DDP_INVALID_MSN_NO_BUFFER));
        let t = r.terminate.clone().unwrap();
        assert!(t.m && t.d() && !t.r);
        assert_eq!(t.seg_len, Some(16));
        assert!(matches!(t.ddp_hdr, Some(DdpHeader::Untagged(h)) if h.msn == 2));
        assert_eq!(r.control_word, Some(0x2102_0300));
        assert!(r.rfc_error.is_some());
        assert!(r.note().unwrap().contains("siw"), "{:?}", r.note());
    }

    #[test]
    fn siw_bare_llp_codes() {
        // siw's MPA CRC error: Layer 2 / EType 0 / 0x02, written as 02 02 00 00.
        let r = ReceivedTerminate::decode(&[0x02, 0x02, 0, 0]);
        assert_eq!(r.layout, TerminateLayout::SiwBitfields);
        assert_eq!(r.code(), Some(TerminateCode::MPA_CRC_ERROR));
        // siw's invalid Request/Reply frame (2/0/0x04); 0/2/0x04 means nothing.
        let r = ReceivedTerminate::decode(&[0x02, 0x04, 0, 0]);
        assert_eq!(r.code(), Some(TerminateCode::MPA_INVALID_REQ_REP));
        assert_eq!(r.other_reading, None);
        // True ties go to the RFC, and the note names the other reading:
        // 02 06 00 00 is RFC 0/2/0x06 (unexpected opcode) or siw 2/0/0x06, and
        // 02 07 00 00 is RFC 0/2/0x07 (catastrophic, stream) or siw 2/0/0x07.
        let r = ReceivedTerminate::decode(&[0x02, 0x06, 0, 0]);
        assert_eq!(r.layout, TerminateLayout::Rfc5040);
        assert_eq!(r.code(), Some(TerminateCode::RDMAP_UNEXPECTED_OPCODE));
        assert!(
            r.note().unwrap().contains("insufficient IRD"),
            "{:?}",
            r.note()
        );
        let r = ReceivedTerminate::decode(&[0x02, 0x07, 0, 0]);
        assert_eq!(r.code(), Some(TerminateCode::RDMAP_CATASTROPHIC_STREAM));
        assert_eq!(r.other_reading, Some(TerminateCode::MPA_NO_MATCHING_RTR));
    }

    #[test]
    fn siw_read_request_error_with_all_headers() {
        // siw's RDMAP 0/1/0x00 on a Read Request: 10 00 07 00, length, 18 + 28 octets.
        let mut b = vec![0x10, 0x00, 0x07, 0x00, 0x00, 0x1c];
        b.extend_from_slice(&UntaggedHeader::new(true, [0x41, 0, 0, 0, 0], 1, 1, 0).to_bytes());
        b.extend_from_slice(&[0; 28]);
        let r = ReceivedTerminate::decode(&b);
        assert_eq!(r.layout, TerminateLayout::SiwBitfields);
        assert_eq!(r.code(), Some(TerminateCode::RDMAP_INVALID_STAG));
        let t = r.terminate.unwrap();
        assert!(t.m && t.d() && t.r && t.rdmap_hdr.is_some());
    }

    #[test]
    fn rfc_terminates_stay_rfc() {
        for code in TerminateCode::ALL_DDP {
            let hdr = DdpHeader::Untagged(UntaggedHeader::new(true, [0x43, 0, 0, 0, 0], 0, 1, 0));
            let t = if sent_bare(code) {
                Terminate::bare(code)
            } else {
                Terminate::with_headers(code, 40, hdr, None)
            };
            let r = ReceivedTerminate::decode(&t.to_vec().unwrap());
            assert_eq!(r.layout, TerminateLayout::Rfc5040, "{code}");
            assert_eq!(r.terminate, Some(t), "{code}");
        }
        for code in [
            TerminateCode::MPA_CRC_ERROR,
            TerminateCode::MPA_INSUFFICIENT_IRD,
        ] {
            let r = ReceivedTerminate::decode(&Terminate::bare(code).to_vec().unwrap());
            assert_eq!((r.layout, r.code()), (TerminateLayout::Rfc5040, Some(code)));
        }
        // cxgb4 and irdma send LLP errors with EType 3 (0x23): still the RFC.
        let r = ReceivedTerminate::decode(&[0x23, 0x02, 0, 0]);
        assert_eq!(r.code().map(|c| (c.layer, c.code)), Some((2, 0x02)));
    }

    #[test]
    fn undecodable_keeps_the_raw_word() {
        let r = ReceivedTerminate::decode(&[0x21, 0x02, 0x03, 0x00, 1, 2, 3]);
        assert_eq!(r.layout, TerminateLayout::Undecodable);
        assert_eq!(r.terminate, None);
        assert_eq!(r.control_word, Some(0x2102_0300));
        assert_eq!(
            r.rfc_fields(),
            Some(TerminateCode {
                layer: 2,
                etype: 1,
                code: 2
            })
        );
        assert!(r.note().unwrap().contains("0x21020300"));
        let short = ReceivedTerminate::decode(&[0x20]);
        assert_eq!(
            (short.control_word, short.layout),
            (None, TerminateLayout::Undecodable)
        );
        assert!(short.note().unwrap().contains("1 octets"));
    }

    proptest! {
        #[test]
        fn never_panics_and_stays_bounded(v in proptest::collection::vec(any::<u8>(), 0..200)) {
            let r = ReceivedTerminate::decode(&v);
            prop_assert!(r.raw.len() <= KEPT_OCTETS);
            prop_assert_eq!(r.len, v.len());
            prop_assert_eq!(r.terminate.is_some(), r.layout != TerminateLayout::Undecodable);
            if let Ok(t) = Terminate::parse(&v) {
                // A valid RFC body is never thrown away: either it is the reading, or
                // the siw reading made more sense and the RFC one is named beside it.
                prop_assert!(r.terminate.is_some());
                if r.layout == TerminateLayout::SiwBitfields && known(t.code) {
                    prop_assert!(r.other_reading == Some(t.code) || r.code() == Some(t.code));
                }
            }
        }
    }
}
