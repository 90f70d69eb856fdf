//! Terminate message body (RFC 5040 §4.8).
//!
//! The body follows the 18-octet untagged DDP header (QN 2, MSN 1, MO 0, L 1,
//! RDMAP opcode 7): a 32-bit control word, then, packed without padding, an optional
//! 2-octet DDP Segment Length, the copied DDP header and the copied Read Request header.

use crate::codes::TerminateCode;
use crate::ddp::{DdpHeader, TAGGED_HDR_LEN, UNTAGGED_HDR_LEN, UntaggedHeader};
use crate::error::{WireError, be16, be32, need};
use crate::rdmap::{Opcode, RdmapControl, qn};
use crate::read_request::{READ_REQ_HDR_LEN, ReadRequestHeader};

/// Octets in the Terminate control word.
pub const TERM_CTRL_LEN: usize = 4;
/// Largest Terminate body: 4 + 2 + 18 + 28 (cxgb4's `TERM_MAX_LENGTH`, RFC 5040 §4.8).
pub const TERM_MAX_BODY: usize = TERM_CTRL_LEN + 2 + UNTAGGED_HDR_LEN + READ_REQ_HDR_LEN;
/// Largest Terminate DDP segment (ULPDU): 18 + 52 = 70 octets (RFC 5040 §4.8; docs/security.md).
pub const TERM_MAX_SEGMENT: usize = UNTAGGED_HDR_LEN + TERM_MAX_BODY;

const M: u32 = 0x0000_8000;
const D: u32 = 0x0000_4000;
const R: u32 = 0x0000_2000;
const RESERVED: u32 = 0x0000_1FFF;

/// A Terminate message body.
///
/// The D bit is `ddp_hdr.is_some()`. The 2-octet length is present exactly when M
/// or D is set (RFC 5040 §4.8; implementations disagree), so `seg_len.is_some()` must equal
/// `m || ddp_hdr.is_some()`; [`Terminate::emit`] refuses anything else.
/// `r` may be set without `rdmap_hdr` (siw sets R=1 on Send protection errors with
/// no RDMAP header attached, RFC 5040 §4.8); `rdmap_hdr` requires `r`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Terminate {
    /// Layer, EType and Error Code.
    pub code: TerminateCode,
    /// M: the DDP Segment Length field is valid.
    pub m: bool,
    /// R: the offending RDMAP header is included (or claimed to be, see above).
    pub r: bool,
    /// The 13 reserved bits of the control word (send 0; kept for round trips).
    pub reserved: u16,
    /// DDP Segment Length: the whole offending DDP segment (irdma meaning, RFC 5040 §4.8).
    pub seg_len: Option<u16>,
    /// The copied DDP header (including RsvdULP, excluding the MPA length).
    pub ddp_hdr: Option<DdpHeader>,
    /// The copied RDMA Read Request header.
    pub rdmap_hdr: Option<ReadRequestHeader>,
}

impl Terminate {
    /// A Terminate carrying only a code (M=D=R=0): LLP, catastrophic and version errors.
    pub fn bare(code: TerminateCode) -> Self {
        Self {
            code,
            m: false,
            r: false,
            reserved: 0,
            seg_len: None,
            ddp_hdr: None,
            rdmap_hdr: None,
        }
    }

    /// M=D=1 with the offending segment's length and header; R=1 too if a Read
    /// Request header is given (RFC 5040 §4.8, "when to include headers").
    pub fn with_headers(
        code: TerminateCode,
        seg_len: u16,
        ddp_hdr: DdpHeader,
        rdmap_hdr: Option<ReadRequestHeader>,
    ) -> Self {
        Self {
            code,
            m: true,
            r: rdmap_hdr.is_some(),
            reserved: 0,
            seg_len: Some(seg_len),
            ddp_hdr: Some(ddp_hdr),
            rdmap_hdr,
        }
    }

    /// D: the offending DDP header is included.
    pub fn d(&self) -> bool {
        self.ddp_hdr.is_some()
    }

    /// The 32-bit control word.
    pub fn control_word(&self) -> u32 {
        let c = self.code;
        (u32::from(c.layer & 0xF) << 28)
            | (u32::from(c.etype & 0xF) << 24)
            | (u32::from(c.code) << 16)
            | if self.m { M } else { 0 }
            | if self.d() { D } else { 0 }
            | if self.r { R } else { 0 }
            | (u32::from(self.reserved) & RESERVED)
    }

    /// Parse a Terminate body (the octets after the untagged DDP header). Never panics;
    /// at most [`TERM_MAX_BODY`] octets are accepted, anything after the last field
    /// announced by M/D/R is `Trailing`.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        need(b, TERM_CTRL_LEN, "Terminate control")?;
        let w = be32(b, 0);
        let (m, d, r) = (w & M != 0, w & D != 0, w & R != 0);
        let code = TerminateCode {
            layer: (w >> 28) as u8,
            etype: ((w >> 24) & 0xF) as u8,
            code: ((w >> 16) & 0xFF) as u8,
        };
        let mut at = TERM_CTRL_LEN;
        let seg_len = if m || d {
            need(b, at + 2, "Terminate DDP Segment Length")?;
            at += 2;
            Some(be16(b, at - 2))
        } else {
            None
        };
        let ddp_hdr = if d {
            // The copied header's own T bit says how long it is (RFC 5040 §4.8).
            need(b, at + 1, "Terminate copied DDP header")?;
            let n = if b[at] & 0x80 != 0 {
                TAGGED_HDR_LEN
            } else {
                UNTAGGED_HDR_LEN
            };
            need(b, at + n, "Terminate copied DDP header")?;
            let h = DdpHeader::parse(&b[at..at + n])?;
            at += n;
            Some(h)
        } else {
            None
        };
        // R=1 with nothing after it is siw's header-less R (RFC 5040 §4.8); otherwise the
        // 28-octet Read Request header must follow.
        let rdmap_hdr = if r && b.len() > at {
            need(b, at + READ_REQ_HDR_LEN, "Terminate copied RDMAP header")?;
            at += READ_REQ_HDR_LEN;
            Some(ReadRequestHeader::parse(&b[at - READ_REQ_HDR_LEN..at])?)
        } else {
            None
        };
        if b.len() > at {
            return Err(WireError::Trailing {
                what: "Terminate message",
                extra: b.len() - at,
            });
        }
        Ok(Self {
            code,
            m,
            r,
            reserved: (w & RESERVED) as u16,
            seg_len,
            ddp_hdr,
            rdmap_hdr,
        })
    }

    /// Octets [`Terminate::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        TERM_CTRL_LEN
            + self.seg_len.map_or(0, |_| 2)
            + self.ddp_hdr.map_or(0, |h| h.len())
            + self.rdmap_hdr.map_or(0, |_| READ_REQ_HDR_LEN)
    }

    fn check(&self) -> Result<(), WireError> {
        let want_len = self.m || self.d();
        if self.seg_len.is_some() != want_len {
            return Err(WireError::InvalidField {
                field: "Terminate DDP Segment Length presence (must match M|D)",
                value: u64::from(self.seg_len.is_some()),
            });
        }
        if self.rdmap_hdr.is_some() && !self.r {
            return Err(WireError::InvalidField {
                field: "Terminate RDMAP header without R",
                value: 0,
            });
        }
        if self.code.layer > 0xF || self.code.etype > 0xF || self.reserved > 0x1FFF {
            return Err(WireError::InvalidField {
                field: "Terminate control word",
                value: u64::from(self.control_word()),
            });
        }
        Ok(())
    }

    /// Write the body into `out`; returns the octets written ([`Terminate::buffer_len`]).
    /// Fails if `out` is short or the flags and optional fields disagree.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        self.check()?;
        let n = self.buffer_len();
        let got = out.len();
        let out = out.get_mut(..n).ok_or(WireError::Truncated {
            what: "Terminate buffer",
            need: n,
            got,
        })?;
        out[..4].copy_from_slice(&self.control_word().to_be_bytes());
        let mut at = TERM_CTRL_LEN;
        if let Some(l) = self.seg_len {
            out[at..at + 2].copy_from_slice(&l.to_be_bytes());
            at += 2;
        }
        if let Some(h) = &self.ddp_hdr {
            at += h.emit(&mut out[at..])?;
        }
        if let Some(h) = &self.rdmap_hdr {
            out[at..at + READ_REQ_HDR_LEN].copy_from_slice(&h.to_bytes());
        }
        Ok(n)
    }

    /// The body's octets, as [`Terminate::emit`] would write them.
    pub fn to_vec(&self) -> Result<Vec<u8>, WireError> {
        let mut v = vec![0; self.buffer_len()];
        self.emit(&mut v)?;
        Ok(v)
    }

    /// The complete Terminate DDP segment: untagged header with QN=2, MSN=1, MO=0,
    /// L=1 and RDMAP control 0x47 (RFC 5040 §4.2: Terminate is QN 2; §4.8), then the body.
    pub fn to_segment(&self) -> Result<Vec<u8>, WireError> {
        let mut rsvd_ulp = [0u8; 5];
        rsvd_ulp[0] = RdmapControl::new(Opcode::TERMINATE).0;
        let hdr = UntaggedHeader::new(true, rsvd_ulp, qn::TERMINATE, 1, 0);
        let mut v = hdr.to_bytes().to_vec();
        v.extend_from_slice(&self.to_vec()?);
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::TaggedHeader;
    use proptest::prelude::*;

    #[test]
    fn vector6_body() {
        // RFC 5040 §4.8: DDP tagged Invalid STag about vector 1's segment, M=D=1, R=0.
        let t = Terminate::with_headers(
            TerminateCode::DDP_INVALID_STAG,
            19,
            DdpHeader::Tagged(TaggedHeader::new(true, 0x40, 0x1234, 0x1000)),
            None,
        );
        assert_eq!(t.control_word(), 0x1100_c000);
        let seg = t.to_segment().unwrap();
        let want = [
            0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0x11, 0x00, 0xc0, 0x00,
            0x00, 0x13, 0xc1, 0x40, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0x10, 0,
        ];
        assert_eq!(seg, want);
        assert_eq!(Terminate::parse(&seg[18..]), Ok(t));
    }

    #[test]
    fn sizes_and_shapes() {
        let bare = Terminate::bare(TerminateCode::MPA_CRC_ERROR);
        assert_eq!(bare.to_vec().unwrap(), [0x20, 0x02, 0, 0]);
        let full = Terminate::with_headers(
            TerminateCode::RDMAP_INVALID_STAG,
            46,
            DdpHeader::Untagged(UntaggedHeader::new(true, [0x41, 0, 0, 0, 0], 1, 1, 0)),
            Some(ReadRequestHeader::default()),
        );
        let b = full.to_vec().unwrap();
        assert_eq!(b.len(), TERM_MAX_BODY);
        assert_eq!(full.to_segment().unwrap().len(), TERM_MAX_SEGMENT);
        assert_eq!(Terminate::parse(&b), Ok(full.clone()));
        // One more octet is trailing garbage; one less is truncated.
        let mut long = b.clone();
        long.push(0);
        assert!(matches!(
            Terminate::parse(&long),
            Err(WireError::Trailing { .. })
        ));
        assert!(matches!(
            Terminate::parse(&b[..b.len() - 1]),
            Err(WireError::Truncated { .. })
        ));
        // M=1, D=0 (irdma): only the length follows.
        assert_eq!(
            Terminate::parse(&[0x11, 0, 0x80, 0, 0, 7]).unwrap().seg_len,
            Some(7)
        );
        // R=1 with no header (siw on Send errors) parses and round-trips.
        let siw = [
            0x01, 0x00, 0xe0, 0x00, 0x00, 0x17, 0x41, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0,
            0, 0, 0,
        ];
        let t = Terminate::parse(&siw).unwrap();
        assert!(t.r && t.rdmap_hdr.is_none());
        assert_eq!(t.to_vec().unwrap(), siw);
        // Inconsistent values are refused on emit.
        let mut bad = bare.clone();
        bad.m = true;
        assert!(bad.to_vec().is_err());
    }

    fn any_ddp() -> impl Strategy<Value = DdpHeader> {
        prop_oneof![
            any::<[u8; 14]>().prop_map(|mut b| {
                b[0] |= 0x80;
                DdpHeader::parse(&b).unwrap()
            }),
            any::<[u8; 18]>().prop_map(|mut b| {
                b[0] &= 0x7F;
                DdpHeader::parse(&b).unwrap()
            }),
        ]
    }

    fn any_term() -> impl Strategy<Value = Terminate> {
        (
            (0u8..16, 0u8..16, any::<u8>()),
            any::<bool>(),
            any::<bool>(),
            0u16..0x2000,
            any::<u16>(),
            proptest::option::of(any_ddp()),
            proptest::option::of(any::<[u8; 28]>()),
        )
            .prop_map(|((layer, etype, code), m, r, reserved, len, ddp, rr)| {
                let rdmap_hdr = rr.map(|b| ReadRequestHeader::parse(&b).unwrap());
                Terminate {
                    code: TerminateCode { layer, etype, code },
                    m,
                    r: r || rdmap_hdr.is_some(),
                    reserved,
                    seg_len: (m || ddp.is_some()).then_some(len),
                    ddp_hdr: ddp,
                    rdmap_hdr,
                }
            })
    }

    proptest! {
        #[test]
        fn value_roundtrip(t in any_term()) {
            let b = t.to_vec().unwrap();
            prop_assert!(b.len() <= TERM_MAX_BODY);
            prop_assert_eq!(Terminate::parse(&b), Ok(t));
        }

        #[test]
        fn bytes_roundtrip(v in proptest::collection::vec(any::<u8>(), 0..60)) {
            if let Ok(t) = Terminate::parse(&v) {
                prop_assert_eq!(t.to_vec().unwrap(), v);
            }
        }

        #[test]
        fn structured_bytes_roundtrip(ctrl in any::<[u8; 4]>(), first in any::<u8>(),
                                      tail in proptest::collection::vec(any::<u8>(), 0..=50)) {
            // Random flags with tails of every plausible length, so M/D/R paths are hit.
            let mut v = ctrl.to_vec();
            v.extend_from_slice(&tail);
            if v.len() > 6 { v[6] = first; }
            if let Ok(t) = Terminate::parse(&v) {
                prop_assert_eq!(t.to_vec().unwrap(), v);
            }
        }
    }
}
