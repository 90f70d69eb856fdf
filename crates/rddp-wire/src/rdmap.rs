//! RDMAP control field and opcodes (RFC 5040 §4.1, §4.2).

/// The only RDMAP version defined (RV = 1, RFC 5040 §4.1).
pub const RDMAP_VERSION: u8 = 1;

/// Queue numbers RDMAP uses on the untagged model (RFC 5040 §4.2).
pub mod qn {
    /// QN 0: Send, Send with Invalidate, Send with SE, Send with SE and Invalidate.
    pub const SEND: u32 = 0;
    /// QN 1: RDMA Read Request.
    pub const READ_REQUEST: u32 = 1;
    /// QN 2: Terminate.
    pub const TERMINATE: u32 = 2;
    /// Number of untagged queues RDMAP defines.
    pub const COUNT: u32 = 3;
}

/// An RDMAP opcode. A newtype, so reserved values 0x8-0xF survive parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Opcode(pub u8);

impl Opcode {
    /// 0x0: RDMA Write (tagged).
    pub const RDMA_WRITE: Self = Self(0x0);
    /// 0x1: RDMA Read Request (untagged, QN 1).
    pub const READ_REQUEST: Self = Self(0x1);
    /// 0x2: RDMA Read Response (tagged).
    pub const READ_RESPONSE: Self = Self(0x2);
    /// 0x3: Send (untagged, QN 0).
    pub const SEND: Self = Self(0x3);
    /// 0x4: Send with Invalidate (untagged, QN 0).
    pub const SEND_INVALIDATE: Self = Self(0x4);
    /// 0x5: Send with Solicited Event (untagged, QN 0).
    pub const SEND_SE: Self = Self(0x5);
    /// 0x6: Send with Solicited Event and Invalidate (untagged, QN 0).
    pub const SEND_SE_INVALIDATE: Self = Self(0x6);
    /// 0x7: Terminate (untagged, QN 2).
    pub const TERMINATE: Self = Self(0x7);

    /// Whether the opcode travels on the tagged model (Write, Read Response).
    pub fn is_tagged(self) -> bool {
        matches!(self, Self::RDMA_WRITE | Self::READ_RESPONSE)
    }

    /// Whether the opcode is defined by RFC 5040 (0x0-0x7).
    pub fn is_known(self) -> bool {
        self.0 <= 7
    }

    /// Whether `RsvdULP[8:39]` carries an Invalidate STag (RFC 5040 §4.1).
    pub fn carries_invalidate_stag(self) -> bool {
        matches!(self, Self::SEND_INVALIDATE | Self::SEND_SE_INVALIDATE)
    }
}

/// RDMAP control octet: RV (2 bits), reserved (2 bits), opcode (4 bits)
/// (RFC 5040 §4.1); it is the DDP header's `RsvdULP[0:7]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RdmapControl(pub u8);

impl RdmapControl {
    /// RV = 1, reserved bits 0, and `op`'s low 4 bits.
    pub fn new(op: Opcode) -> Self {
        Self((RDMAP_VERSION << 6) | (op.0 & 0x0F))
    }
    /// RV, the RDMAP version (2 bits; 1 is the only defined value).
    pub fn rv(self) -> u8 {
        self.0 >> 6
    }
    /// The 2 reserved bits (sent as 0).
    pub fn rsv(self) -> u8 {
        (self.0 >> 4) & 0x3
    }
    /// The opcode (4 bits).
    pub fn opcode(self) -> Opcode {
        Opcode(self.0 & 0x0F)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_octets_match_spec() {
        // RFC 5040 §4.2: Write 0x40 ... Terminate 0x47.
        for op in 0..8u8 {
            assert_eq!(RdmapControl::new(Opcode(op)).0, 0x40 | op);
        }
        let c = RdmapControl(0x7B);
        assert_eq!((c.rv(), c.rsv(), c.opcode()), (1, 3, Opcode(0xB)));
    }
}
