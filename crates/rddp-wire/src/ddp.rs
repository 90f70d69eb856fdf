//! DDP headers (RFC 5041 §4).

use crate::error::{WireError, be32, be64, need};

/// Octets in a tagged DDP header (RFC 5041 §4.2).
pub const TAGGED_HDR_LEN: usize = 14;
/// Octets in an untagged DDP header (RFC 5041 §4.3).
pub const UNTAGGED_HDR_LEN: usize = 18;
/// The only DDP version defined (DV = 1, RFC 5041 §4.1).
pub const DDP_VERSION: u8 = 1;

const T: u8 = 0x80;
const L: u8 = 0x40;
const RSVD: u8 = 0x3C;
const DV: u8 = 0x03;

/// The DDP control octet: T, L, 4 reserved bits, DV (RFC 5041 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DdpControl(pub u8);

impl DdpControl {
    /// DV = 1, reserved bits 0, T and L as given.
    pub fn new(tagged: bool, last: bool) -> Self {
        Self(if tagged { T } else { 0 } | if last { L } else { 0 } | DDP_VERSION)
    }
    /// T: the tagged header follows (else the untagged one).
    pub fn tagged(self) -> bool {
        self.0 & T != 0
    }
    /// L: the last segment of its DDP message (RFC 5041 §4.1).
    pub fn last(self) -> bool {
        self.0 & L != 0
    }
    /// Length of the DDP header this control octet opens (RFC 5041 §4.1: the T
    /// bit picks the tagged or the untagged layout).
    pub fn header_len(self) -> usize {
        if self.tagged() {
            TAGGED_HDR_LEN
        } else {
            UNTAGGED_HDR_LEN
        }
    }
    /// Reserved bits, shifted down (send 0, do not check on receive).
    pub fn rsvd(self) -> u8 {
        (self.0 & RSVD) >> 2
    }
    /// DV, the DDP version (2 bits; 1 is the only defined value).
    pub fn dv(self) -> u8 {
        self.0 & DV
    }
    /// The same octet with L set to `last`.
    pub fn with_last(self, last: bool) -> Self {
        Self((self.0 & !L) | if last { L } else { 0 })
    }
}

/// Tagged buffer model header: control, RsvdULP (8 bits), STag, TO (RFC 5041 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaggedHeader {
    /// DDP control octet; T is 1 on the wire whatever this holds.
    pub ctrl: DdpControl,
    /// Opaque to DDP; RDMAP puts its control octet here (RFC 5040 §4.1).
    pub rsvd_ulp: u8,
    /// STag: names the Data Sink's tagged buffer (RFC 5041 §4.2).
    pub stag: u32,
    /// TO: offset in the tagged buffer, in octets, where this segment's first payload
    /// octet goes (RFC 5041 §4.2).
    pub to: u64,
}

/// Untagged buffer model header: control, RsvdULP (40 bits), QN, MSN, MO (RFC 5041 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UntaggedHeader {
    /// DDP control octet; T is 0 on the wire whatever this holds.
    pub ctrl: DdpControl,
    /// Opaque to DDP; RDMAP uses octet 0 as its control and 1..5 as Invalidate STag.
    pub rsvd_ulp: [u8; 5],
    /// QN: the Data Sink's untagged queue (RFC 5041 §4.3; RDMAP uses 0, 1 and 2).
    pub qn: u32,
    /// MSN: the message's number on its queue, 1 for the first and then +1 modulo 2^32
    /// (RFC 5041 §4.3).
    pub msn: u32,
    /// MO: offset in octets of this segment's payload within its message, 0 for the
    /// first segment (RFC 5041 §4.3).
    pub mo: u32,
}

/// A DDP header of either model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DdpHeader {
    /// T = 1: 14 octets (RFC 5041 §4.2).
    Tagged(TaggedHeader),
    /// T = 0: 18 octets (RFC 5041 §4.3).
    Untagged(UntaggedHeader),
}

impl TaggedHeader {
    /// A DV=1 header with zero reserved bits.
    pub fn new(last: bool, rsvd_ulp: u8, stag: u32, to: u64) -> Self {
        Self {
            ctrl: DdpControl::new(true, last),
            rsvd_ulp,
            stag,
            to,
        }
    }

    /// Write the 14 octets, T forced to 1.
    pub fn emit(&self, out: &mut [u8; TAGGED_HDR_LEN]) {
        out[0] = self.ctrl.0 | T;
        out[1] = self.rsvd_ulp;
        out[2..6].copy_from_slice(&self.stag.to_be_bytes());
        out[6..14].copy_from_slice(&self.to.to_be_bytes());
    }

    /// The 14 octets [`TaggedHeader::emit`] writes.
    pub fn to_bytes(&self) -> [u8; TAGGED_HDR_LEN] {
        let mut b = [0; TAGGED_HDR_LEN];
        self.emit(&mut b);
        b
    }
}

impl UntaggedHeader {
    /// A DV=1 header with zero reserved bits.
    pub fn new(last: bool, rsvd_ulp: [u8; 5], qn: u32, msn: u32, mo: u32) -> Self {
        Self {
            ctrl: DdpControl::new(false, last),
            rsvd_ulp,
            qn,
            msn,
            mo,
        }
    }

    /// Write the 18 octets, T forced to 0.
    pub fn emit(&self, out: &mut [u8; UNTAGGED_HDR_LEN]) {
        out[0] = self.ctrl.0 & !T;
        out[1..6].copy_from_slice(&self.rsvd_ulp);
        out[6..10].copy_from_slice(&self.qn.to_be_bytes());
        out[10..14].copy_from_slice(&self.msn.to_be_bytes());
        out[14..18].copy_from_slice(&self.mo.to_be_bytes());
    }

    /// The 18 octets [`UntaggedHeader::emit`] writes.
    pub fn to_bytes(&self) -> [u8; UNTAGGED_HDR_LEN] {
        let mut b = [0; UNTAGGED_HDR_LEN];
        self.emit(&mut b);
        b
    }
}

impl DdpHeader {
    /// Parse the header at the start of a DDP segment. Returns the header; its length
    /// is [`DdpHeader::len`] and the payload follows it. Never panics.
    pub fn parse(seg: &[u8]) -> Result<Self, WireError> {
        need(seg, 1, "DDP control field")?;
        let ctrl = DdpControl(seg[0]);
        if ctrl.tagged() {
            need(seg, TAGGED_HDR_LEN, "tagged DDP header")?;
            Ok(Self::Tagged(TaggedHeader {
                ctrl,
                rsvd_ulp: seg[1],
                stag: be32(seg, 2),
                to: be64(seg, 6),
            }))
        } else {
            need(seg, UNTAGGED_HDR_LEN, "untagged DDP header")?;
            let mut rsvd_ulp = [0; 5];
            rsvd_ulp.copy_from_slice(&seg[1..6]);
            Ok(Self::Untagged(UntaggedHeader {
                ctrl,
                rsvd_ulp,
                qn: be32(seg, 6),
                msn: be32(seg, 10),
                mo: be32(seg, 14),
            }))
        }
    }

    /// Header length in octets: 14 tagged, 18 untagged.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        match self {
            Self::Tagged(_) => TAGGED_HDR_LEN,
            Self::Untagged(_) => UNTAGGED_HDR_LEN,
        }
    }

    /// The DDP control octet of either model.
    pub fn ctrl(&self) -> DdpControl {
        match self {
            Self::Tagged(h) => h.ctrl,
            Self::Untagged(h) => h.ctrl,
        }
    }

    /// L: the last segment of its DDP message.
    pub fn last(&self) -> bool {
        self.ctrl().last()
    }

    /// The RDMAP control octet (`RsvdULP[0:7]`) of either model.
    pub fn rdmap_octet(&self) -> u8 {
        match self {
            Self::Tagged(h) => h.rsvd_ulp,
            Self::Untagged(h) => h.rsvd_ulp[0],
        }
    }

    /// Write the header into `out`, which must hold at least `len()` octets.
    /// Returns the number of octets written, or `Truncated` if `out` is too short.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let n = self.len();
        let got = out.len();
        let dst = out.get_mut(..n).ok_or(WireError::Truncated {
            what: "DDP header buffer",
            need: n,
            got,
        })?;
        match self {
            Self::Tagged(h) => dst.copy_from_slice(&h.to_bytes()),
            Self::Untagged(h) => dst.copy_from_slice(&h.to_bytes()),
        }
        Ok(n)
    }

    /// The header as owned octets (for copying into a Terminate message).
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            Self::Tagged(h) => h.to_bytes().to_vec(),
            Self::Untagged(h) => h.to_bytes().to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn control_octets_match_siw_table() {
        // RFC 5040 §4.2: tagged last 0xC1, tagged middle 0x81, untagged last 0x41, middle 0x01.
        assert_eq!(DdpControl::new(true, true).0, 0xC1);
        assert_eq!(DdpControl::new(true, false).0, 0x81);
        assert_eq!(DdpControl::new(false, true).0, 0x41);
        assert_eq!(DdpControl::new(false, false).0, 0x01);
    }

    #[test]
    fn truncated_headers_are_errors() {
        assert!(DdpHeader::parse(&[]).is_err());
        assert!(DdpHeader::parse(&[0xC1; 13]).is_err());
        assert!(DdpHeader::parse(&[0x41; 17]).is_err());
        assert!(DdpHeader::parse(&[0xC1; 14]).is_ok());
        assert!(DdpHeader::parse(&[0x41; 18]).is_ok());
    }

    fn any_header() -> impl Strategy<Value = DdpHeader> {
        prop_oneof![
            (any::<u8>(), any::<u8>(), any::<u32>(), any::<u64>()).prop_map(|(c, r, s, t)| {
                DdpHeader::Tagged(TaggedHeader {
                    ctrl: DdpControl(c | T),
                    rsvd_ulp: r,
                    stag: s,
                    to: t,
                })
            }),
            (
                any::<u8>(),
                any::<[u8; 5]>(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>()
            )
                .prop_map(|(c, r, q, m, o)| {
                    DdpHeader::Untagged(UntaggedHeader {
                        ctrl: DdpControl(c & !T),
                        rsvd_ulp: r,
                        qn: q,
                        msn: m,
                        mo: o,
                    })
                }),
        ]
    }

    proptest! {
        #[test]
        fn parse_emit_roundtrip(h in any_header()) {
            let mut buf = [0u8; UNTAGGED_HDR_LEN];
            let n = h.emit(&mut buf).unwrap();
            prop_assert_eq!(n, h.len());
            prop_assert_eq!(DdpHeader::parse(&buf[..n]).unwrap(), h);
        }

        #[test]
        fn emit_parse_roundtrip(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(h) = DdpHeader::parse(&b) {
                let mut out = [0u8; UNTAGGED_HDR_LEN];
                let n = h.emit(&mut out).unwrap();
                prop_assert_eq!(&out[..n], &b[..n]);
            }
        }
    }
}
