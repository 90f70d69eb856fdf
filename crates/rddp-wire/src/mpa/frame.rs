//! MPA Request and Reply frames (RFC 5044 §7.1) and the RFC 6581
//! enhanced IRD/ORD block (RFC 6581).

use super::{MPA_MAX_PD, MPA_RR_HDR_LEN};
use crate::error::{WireError, be16, need};

/// Request key, "MPA ID Req Frame" (RFC 5044 §7.1.1).
pub const KEY_REQ: [u8; 16] = *b"MPA ID Req Frame";
/// Reply key, "MPA ID Rep Frame" (RFC 5044 §7.1.1).
pub const KEY_REP: [u8; 16] = *b"MPA ID Rep Frame";
/// Octets in the enhanced IRD/ORD block.
pub const ENHANCED_LEN: usize = 4;
/// Highest revision with a known layout (0 = RDMAC, 1 = RFC 5044, 2 = RFC 6581).
pub const MAX_REV: u8 = 2;

/// Which of the two frames (they differ only in the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// Initiator to responder, key "MPA ID Req Frame".
    Request,
    /// Responder to initiator, key "MPA ID Rep Frame".
    Reply,
}

impl FrameKind {
    /// The 16-octet key that opens this kind of frame.
    pub fn key(self) -> &'static [u8; 16] {
        match self {
            Self::Request => &KEY_REQ,
            Self::Reply => &KEY_REP,
        }
    }
}

/// Octet 16: M, C, R, E and 4 reserved bits (kept, ignored on receive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MpaFlags(pub u8);

impl MpaFlags {
    /// M (0x80): Markers wanted.
    pub const M: u8 = 0x80;
    /// C (0x40): CRC wanted.
    pub const C: u8 = 0x40;
    /// R (0x20): rejected (Reply only).
    pub const R: u8 = 0x20;
    /// E (0x10): enhanced RFC 6581 block present.
    pub const E: u8 = 0x10;
    /// The 4 reserved bits (0x0F): sent as 0, ignored on receive.
    pub const RES: u8 = 0x0F;

    /// The flags octet with these four bits set as given, reserved bits 0.
    pub fn new(markers: bool, crc: bool, reject: bool, enhanced: bool) -> Self {
        let b = |on: bool, m: u8| if on { m } else { 0 };
        Self(b(markers, Self::M) | b(crc, Self::C) | b(reject, Self::R) | b(enhanced, Self::E))
    }
    /// M: the sender wants Markers in the FPDUs it receives.
    pub fn markers(self) -> bool {
        self.0 & Self::M != 0
    }
    /// C: the sender wants CRC (on in both directions if either side sets it).
    pub fn crc(self) -> bool {
        self.0 & Self::C != 0
    }
    /// R: Reply only, connection rejected.
    pub fn reject(self) -> bool {
        self.0 & Self::R != 0
    }
    /// E: an enhanced block starts the private data (meaningful with Rev 2 only).
    pub fn enhanced(self) -> bool {
        self.0 & Self::E != 0
    }
    /// The reserved bits as received.
    pub fn res(self) -> u8 {
        self.0 & Self::RES
    }
}

/// The 4-octet RFC 6581 block: `A|B|IRD(14)`, `C|D|ORD(14)` (RFC 6581).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EnhancedBlock {
    /// A: peer-to-peer mode, an RTR will be exchanged.
    pub p2p: bool,
    /// B: RTR is a zero-length Send.
    pub rtr_send: bool,
    /// Inbound RDMA Read queue depth, 14 bits (0x3FFF: "not given" in Intel practice).
    pub ird: u16,
    /// C: RTR is a zero-length RDMA Write.
    pub rtr_write: bool,
    /// D: RTR is a zero-length RDMA Read.
    pub rtr_read: bool,
    /// Outbound RDMA Read queue depth, 14 bits.
    pub ord: u16,
}

impl EnhancedBlock {
    /// Largest IRD or ORD the 14-bit fields hold.
    pub const IRD_ORD_MAX: u16 = 0x3FFF;

    /// Parse the first 4 octets of `b` (the ULP's private data may follow).
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        need(b, ENHANCED_LEN, "MPA enhanced IRD/ORD block")?;
        let (w1, w2) = (be16(b, 0), be16(b, 2));
        Ok(Self {
            p2p: w1 & 0x8000 != 0,
            rtr_send: w1 & 0x4000 != 0,
            ird: w1 & Self::IRD_ORD_MAX,
            rtr_write: w2 & 0x8000 != 0,
            rtr_read: w2 & 0x4000 != 0,
            ord: w2 & Self::IRD_ORD_MAX,
        })
    }

    /// Encode; IRD and ORD above 14 bits are clamped to 0x3FFF (RFC 6581).
    pub fn to_bytes(&self) -> [u8; ENHANCED_LEN] {
        let f = |on: bool, m: u16| if on { m } else { 0 };
        let w1 = f(self.p2p, 0x8000) | f(self.rtr_send, 0x4000) | self.ird.min(Self::IRD_ORD_MAX);
        let w2 =
            f(self.rtr_write, 0x8000) | f(self.rtr_read, 0x4000) | self.ord.min(Self::IRD_ORD_MAX);
        let mut b = [0; ENHANCED_LEN];
        b[..2].copy_from_slice(&w1.to_be_bytes());
        b[2..].copy_from_slice(&w2.to_be_bytes());
        b
    }
}

/// An MPA Request or Reply frame.
///
/// With Rev 2 and E=1 the first 4 private-data octets are the enhanced block and
/// `private_data` is the ULP's part only; otherwise `enhanced` is `None` and
/// `private_data` is all PD_Length octets. PD_Length = `private_data.len()` (+4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MpaFrame {
    /// Request or Reply (the key).
    pub kind: FrameKind,
    /// Octet 16: M, C, R, E.
    pub flags: MpaFlags,
    /// Octet 17: the MPA revision (1 for RFC 5044, 2 for RFC 6581).
    pub rev: u8,
    /// The RFC 6581 block, present exactly when Rev is 2 and E is set.
    pub enhanced: Option<EnhancedBlock>,
    /// The ULP's private data (after the enhanced block, if any).
    pub private_data: Vec<u8>,
}

/// Whether a frame of this Rev and flags carries the enhanced block.
fn has_enhanced(rev: u8, flags: MpaFlags) -> bool {
    rev == 2 && flags.enhanced()
}

/// Total frame length announced by the first 20 octets: 20 + PD_Length. Lets a
/// socket reader know how much to read. Checks key, Rev and PD_Length <= 512 so a bad
/// peer is refused before its private data is read.
pub fn frame_len(hdr: &[u8]) -> Result<usize, WireError> {
    need(hdr, MPA_RR_HDR_LEN, "MPA Request/Reply header")?;
    if hdr[..16] != KEY_REQ && hdr[..16] != KEY_REP {
        return Err(WireError::MpaBadKey);
    }
    let rev = hdr[17];
    if rev > MAX_REV {
        return Err(WireError::MpaBadRev { rev });
    }
    let pd = usize::from(be16(hdr, 18));
    if pd > MPA_MAX_PD {
        return Err(WireError::PrivateDataTooLong {
            len: pd,
            max: MPA_MAX_PD,
        });
    }
    Ok(MPA_RR_HDR_LEN + pd)
}

impl MpaFrame {
    /// A frame with zero reserved bits.
    pub fn new(
        kind: FrameKind,
        flags: MpaFlags,
        rev: u8,
        enhanced: Option<EnhancedBlock>,
        private_data: Vec<u8>,
    ) -> Self {
        Self {
            kind,
            flags,
            rev,
            enhanced,
            private_data,
        }
    }

    /// Parse one complete frame (exactly 20 + PD_Length octets). Never panics.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        let total = frame_len(b)?;
        need(b, total, "MPA private data")?;
        if b.len() > total {
            return Err(WireError::Trailing {
                what: "MPA Request/Reply frame",
                extra: b.len() - total,
            });
        }
        let kind = if b[..16] == KEY_REQ {
            FrameKind::Request
        } else {
            FrameKind::Reply
        };
        let flags = MpaFlags(b[16]);
        let rev = b[17];
        let pd = &b[MPA_RR_HDR_LEN..total];
        let (enhanced, ulp) = if has_enhanced(rev, flags) {
            (Some(EnhancedBlock::parse(pd)?), &pd[ENHANCED_LEN..])
        } else {
            (None, pd)
        };
        Ok(Self {
            kind,
            flags,
            rev,
            enhanced,
            private_data: ulp.to_vec(),
        })
    }

    /// PD_Length: private data including the enhanced block.
    pub fn pd_length(&self) -> usize {
        self.private_data.len() + self.enhanced.map_or(0, |_| ENHANCED_LEN)
    }

    /// Octets [`MpaFrame::emit`] writes: 20 + PD_Length.
    pub fn buffer_len(&self) -> usize {
        MPA_RR_HDR_LEN + self.pd_length()
    }

    /// Append the frame to `out`. Fails if PD_Length > 512, Rev > 2, or `enhanced`
    /// disagrees with Rev 2 + E.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<usize, WireError> {
        let pd = self.pd_length();
        if pd > MPA_MAX_PD {
            return Err(WireError::PrivateDataTooLong {
                len: pd,
                max: MPA_MAX_PD,
            });
        }
        if self.rev > MAX_REV {
            return Err(WireError::MpaBadRev { rev: self.rev });
        }
        if self.enhanced.is_some() != has_enhanced(self.rev, self.flags) {
            return Err(WireError::InvalidField {
                field: "MPA enhanced block presence (needs Rev 2 and E)",
                value: u64::from(self.flags.0),
            });
        }
        out.extend_from_slice(self.kind.key());
        out.push(self.flags.0);
        out.push(self.rev);
        // pd <= 512 was checked above, so it fits in 16 bits.
        out.extend_from_slice(&(pd as u16).to_be_bytes());
        if let Some(e) = &self.enhanced {
            out.extend_from_slice(&e.to_bytes());
        }
        out.extend_from_slice(&self.private_data);
        Ok(self.buffer_len())
    }

    /// The frame's octets, as [`MpaFrame::emit`] would append them.
    pub fn to_vec(&self) -> Result<Vec<u8>, WireError> {
        let mut v = Vec::with_capacity(self.buffer_len());
        self.emit(&mut v)?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sample_frames() {
        // RFC 5044 §7.1.1
        let req = MpaFrame::new(
            FrameKind::Request,
            MpaFlags::new(false, true, false, false),
            1,
            None,
            vec![],
        );
        let b = req.to_vec().unwrap();
        assert_eq!(&b[16..], &[0x40, 0x01, 0x00, 0x00]);
        assert_eq!(frame_len(&b), Ok(20));
        assert_eq!(MpaFrame::parse(&b), Ok(req));
    }

    #[test]
    fn errors_are_typed() {
        let mut b = KEY_REQ.to_vec();
        b.extend_from_slice(&[0x40, 1, 0x02, 0x01]); // PD_Length 513
        assert_eq!(
            frame_len(&b),
            Err(WireError::PrivateDataTooLong { len: 513, max: 512 })
        );
        b[19] = 0;
        b[17] = 3;
        assert_eq!(MpaFrame::parse(&b), Err(WireError::MpaBadRev { rev: 3 }));
        b[17] = 1;
        b[9] = b'x';
        assert_eq!(MpaFrame::parse(&b), Err(WireError::MpaBadKey));
        assert!(matches!(
            frame_len(&b[..19]),
            Err(WireError::Truncated { .. })
        ));
        // Rev 2 + E needs 4 octets of private data.
        let mut e = KEY_REP.to_vec();
        e.extend_from_slice(&[0x50, 2, 0, 3, 1, 2, 3]);
        assert!(matches!(
            MpaFrame::parse(&e),
            Err(WireError::Truncated { .. })
        ));
        // E with Rev 1 is not enhanced: the 4 octets stay private data.
        e[17] = 1;
        let f = MpaFrame::parse(&e).unwrap();
        assert_eq!((f.enhanced, f.private_data.len()), (None, 3));
    }

    fn any_frame() -> impl Strategy<Value = MpaFrame> {
        (
            any::<bool>(),
            any::<u8>(),
            0u8..=MAX_REV,
            (
                any::<bool>(),
                any::<bool>(),
                0u16..0x4000,
                any::<bool>(),
                any::<bool>(),
                0u16..0x4000,
            ),
            proptest::collection::vec(any::<u8>(), 0..=508),
        )
            .prop_map(|(req, flags, rev, (a, b, ird, c, d, ord), pd)| {
                let flags = MpaFlags(flags);
                let enhanced = has_enhanced(rev, flags).then_some(EnhancedBlock {
                    p2p: a,
                    rtr_send: b,
                    ird,
                    rtr_write: c,
                    rtr_read: d,
                    ord,
                });
                let kind = if req {
                    FrameKind::Request
                } else {
                    FrameKind::Reply
                };
                MpaFrame::new(kind, flags, rev, enhanced, pd)
            })
    }

    proptest! {
        #[test]
        fn value_roundtrip(f in any_frame()) {
            let b = f.to_vec().unwrap();
            prop_assert_eq!(frame_len(&b), Ok(b.len()));
            prop_assert_eq!(MpaFrame::parse(&b), Ok(f));
        }

        #[test]
        fn bytes_roundtrip(req in any::<bool>(), flags in any::<u8>(), rev in 0u8..4,
                           pd in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut b = if req { KEY_REQ.to_vec() } else { KEY_REP.to_vec() };
            b.extend_from_slice(&[flags, rev]);
            b.extend_from_slice(&(pd.len() as u16).to_be_bytes());
            b.extend_from_slice(&pd);
            match MpaFrame::parse(&b) {
                Ok(f) => prop_assert_eq!(f.to_vec().unwrap(), b),
                Err(e) => prop_assert!(pd.len() > 512 || rev > MAX_REV
                    || (rev == 2 && flags & MpaFlags::E != 0 && pd.len() < 4), "{e}"),
            }
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = frame_len(&b);
            let _ = MpaFrame::parse(&b);
        }
    }
}
