//! RDMAP control field and opcodes (RFC 5040 §4.2).

/// The only RDMAP version defined (RV = 1).
pub const RDMAP_VERSION: u8 = 1;

/// Queue numbers RDMAP uses on the untagged model (RFC 5041 §5.3).
pub mod qn {
    pub const SEND: u32 = 0;
    pub const READ_REQUEST: u32 = 1;
    pub const TERMINATE: u32 = 2;
    /// Number of untagged queues RDMAP defines.
    pub const COUNT: u32 = 3;
}

/// An RDMAP opcode. A newtype, so reserved values 0x8-0xF survive parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Opcode(pub u8);

impl Opcode {
    pub const RDMA_WRITE: Self = Self(0x0);
    pub const READ_REQUEST: Self = Self(0x1);
    pub const READ_RESPONSE: Self = Self(0x2);
    pub const SEND: Self = Self(0x3);
    pub const SEND_INVALIDATE: Self = Self(0x4);
    pub const SEND_SE: Self = Self(0x5);
    pub const SEND_SE_INVALIDATE: Self = Self(0x6);
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

/// RDMAP control octet: RV (2 bits), reserved (2 bits), opcode (4 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RdmapControl(pub u8);

impl RdmapControl {
    pub fn new(op: Opcode) -> Self {
        Self((RDMAP_VERSION << 6) | (op.0 & 0x0F))
    }
    pub fn rv(self) -> u8 {
        self.0 >> 6
    }
    pub fn rsv(self) -> u8 {
        (self.0 >> 4) & 0x3
    }
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
