//! Terminate error codes of every layer (RFC 5041 §7.2 for DDP, RFC 5040 §4.8 for RDMAP and MPA).
//!
//! A validation failure anywhere in the stack is expressed as exactly one
//! [`TerminateCode`]; the tables below are the only place the numbers live.

use core::fmt;

/// Layer field of a Terminate message (RFC 5040 §4.8).
pub mod layer {
    /// Layer 0: RDMAP detected the error.
    pub const RDMAP: u8 = 0;
    /// Layer 1: DDP detected the error (codes of RFC 5041 §7.2).
    pub const DDP: u8 = 1;
    /// Layer 2: the LLP (MPA, or the SCTP adaptation) detected the error.
    pub const LLP: u8 = 2;
}

/// Layer / Error Type / Error Code triple carried by a Terminate message.
///
/// Unknown code points survive as plain values (the struct is not an enum) so that a
/// received Terminate round-trips exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TerminateCode {
    /// 4 bits: 0 RDMAP, 1 DDP, 2 LLP.
    pub layer: u8,
    /// 4 bits; meaning depends on the layer.
    pub etype: u8,
    /// 8 bits; meaning depends on layer and etype.
    pub code: u8,
}

const fn tc(layer: u8, etype: u8, code: u8) -> TerminateCode {
    TerminateCode { layer, etype, code }
}

impl TerminateCode {
    // ---- DDP, RFC 5041 §7.2 ----
    /// 1/0/0x00: local catastrophic error.
    pub const DDP_LOCAL_CATASTROPHIC: Self = tc(1, 0, 0x00);
    /// 1/1/0x00: the tagged segment's STag is not valid.
    pub const DDP_INVALID_STAG: Self = tc(1, 1, 0x00);
    /// 1/1/0x01: the segment falls outside the STag's registered range.
    pub const DDP_BASE_BOUNDS: Self = tc(1, 1, 0x01);
    /// 1/1/0x02: the STag is not associated with this DDP stream.
    pub const DDP_STAG_NOT_ASSOCIATED: Self = tc(1, 1, 0x02);
    /// 1/1/0x03: TO plus the payload length wraps 64 bits.
    pub const DDP_TO_WRAP: Self = tc(1, 1, 0x03);
    /// 1/1/0x04: DV other than 1 on a tagged segment.
    pub const DDP_TAGGED_INVALID_VERSION: Self = tc(1, 1, 0x04);
    /// 1/2/0x01: the QN names no queue of this stream.
    pub const DDP_INVALID_QN: Self = tc(1, 2, 0x01);
    /// 1/2/0x02: no buffer is posted for this QN and MSN.
    pub const DDP_INVALID_MSN_NO_BUFFER: Self = tc(1, 2, 0x02);
    /// 1/2/0x03: the MSN lies outside the queue's valid range.
    pub const DDP_INVALID_MSN_RANGE: Self = tc(1, 2, 0x03);
    /// 1/2/0x04: the MO lies outside the untagged buffer.
    pub const DDP_INVALID_MO: Self = tc(1, 2, 0x04);
    /// 1/2/0x05: MO plus the payload length exceeds the untagged buffer.
    pub const DDP_MSG_TOO_LONG: Self = tc(1, 2, 0x05);
    /// 1/2/0x06: DV other than 1 on an untagged segment.
    pub const DDP_UNTAGGED_INVALID_VERSION: Self = tc(1, 2, 0x06);

    // ---- RDMAP, RFC 5040 §4.8 ----
    /// 0/0/0x00: local catastrophic error.
    pub const RDMAP_LOCAL_CATASTROPHIC: Self = tc(0, 0, 0x00);
    /// 0/1/0x00: remote protection error, invalid STag.
    pub const RDMAP_INVALID_STAG: Self = tc(0, 1, 0x00);
    /// 0/1/0x01: remote protection error, base or bounds violation.
    pub const RDMAP_BASE_BOUNDS: Self = tc(0, 1, 0x01);
    /// 0/1/0x02: remote protection error, the STag lacks the access right.
    pub const RDMAP_ACCESS_VIOLATION: Self = tc(0, 1, 0x02);
    /// 0/1/0x03: remote protection error, the STag is not associated with this stream.
    pub const RDMAP_STAG_NOT_ASSOCIATED: Self = tc(0, 1, 0x03);
    /// 0/1/0x04: remote protection error, TO wrap.
    pub const RDMAP_TO_WRAP: Self = tc(0, 1, 0x04);
    /// 0/1/0x09: remote protection error, the STag cannot be invalidated.
    pub const RDMAP_PROT_CANNOT_INVALIDATE: Self = tc(0, 1, 0x09);
    /// 0/1/0xFF: remote protection error, unspecified.
    pub const RDMAP_PROT_UNSPECIFIED: Self = tc(0, 1, 0xFF);
    /// 0/2/0x05: remote operation error, RDMAP version other than 1.
    pub const RDMAP_INVALID_VERSION: Self = tc(0, 2, 0x05);
    /// 0/2/0x06: remote operation error, undefined or unexpected opcode.
    pub const RDMAP_UNEXPECTED_OPCODE: Self = tc(0, 2, 0x06);
    /// 0/2/0x07: remote operation error, catastrophic and local to this stream.
    pub const RDMAP_CATASTROPHIC_STREAM: Self = tc(0, 2, 0x07);
    /// 0/2/0x08: remote operation error, catastrophic and global.
    pub const RDMAP_CATASTROPHIC_GLOBAL: Self = tc(0, 2, 0x08);
    /// 0/2/0x09: remote operation error, the STag cannot be invalidated.
    pub const RDMAP_OP_CANNOT_INVALIDATE: Self = tc(0, 2, 0x09);
    /// 0/2/0xFF: remote operation error, unspecified.
    pub const RDMAP_OP_UNSPECIFIED: Self = tc(0, 2, 0xFF);

    // ---- LLP = MPA, RFC 5040 §4.8 (RFC 5044 §8, RFC 6581). EType 0 is sent. ----
    /// 2/0/0x01: the TCP connection closed, was reset or was lost (RFC 5044 §8); a
    /// local indication, as no Terminate can follow it.
    pub const MPA_CONNECTION_LOST: Self = tc(2, 0, 0x01);
    /// 2/0/0x02: an FPDU's CRC did not match (RFC 5044 §8).
    pub const MPA_CRC_ERROR: Self = tc(2, 0, 0x02);
    /// 2/0/0x03: a Marker and the ULPDU_Length disagree on where an FPDU starts
    /// (RFC 5044 §8).
    pub const MPA_MARKER_MISMATCH: Self = tc(2, 0, 0x03);
    /// 2/0/0x04: an invalid MPA Request or Reply frame (RFC 5044 §8).
    pub const MPA_INVALID_REQ_REP: Self = tc(2, 0, 0x04);
    /// 2/0/0x05: local catastrophic error (RFC 6581).
    pub const MPA_LOCAL_CATASTROPHIC: Self = tc(2, 0, 0x05);
    /// 2/0/0x06: insufficient IRD resources (RFC 6581).
    pub const MPA_INSUFFICIENT_IRD: Self = tc(2, 0, 0x06);
    /// 2/0/0x07: no RTR message type that both sides support (RFC 6581).
    pub const MPA_NO_MATCHING_RTR: Self = tc(2, 0, 0x07);

    /// The twelve DDP error codes of RFC 5041 §7.2, in table order.
    pub const ALL_DDP: [Self; 12] = [
        Self::DDP_LOCAL_CATASTROPHIC,
        Self::DDP_INVALID_STAG,
        Self::DDP_BASE_BOUNDS,
        Self::DDP_STAG_NOT_ASSOCIATED,
        Self::DDP_TO_WRAP,
        Self::DDP_TAGGED_INVALID_VERSION,
        Self::DDP_INVALID_QN,
        Self::DDP_INVALID_MSN_NO_BUFFER,
        Self::DDP_INVALID_MSN_RANGE,
        Self::DDP_INVALID_MO,
        Self::DDP_MSG_TOO_LONG,
        Self::DDP_UNTAGGED_INVALID_VERSION,
    ];

    /// Human-readable meaning, for error messages and the `rddp` tool.
    pub fn describe(&self) -> &'static str {
        match (self.layer, self.etype, self.code) {
            (0, 0, 0x00) => "RDMAP local catastrophic error",
            (0, 1, 0x00) => "RDMAP invalid STag",
            (0, 1, 0x01) => "RDMAP base or bounds violation",
            (0, 1, 0x02) => "RDMAP access rights violation",
            (0, 1, 0x03) => "RDMAP STag not associated with RDMAP stream",
            (0, 1, 0x04) => "RDMAP TO wrap",
            (0, 1, 0x09) | (0, 2, 0x09) => "RDMAP STag cannot be invalidated",
            (0, 1, 0xFF) => "RDMAP unspecified protection error",
            (0, 2, 0x05) => "RDMAP invalid RDMAP version",
            (0, 2, 0x06) => "RDMAP unexpected opcode",
            (0, 2, 0x07) => "RDMAP catastrophic error, localized to stream",
            (0, 2, 0x08) => "RDMAP catastrophic error, global",
            (0, 2, 0xFF) => "RDMAP unspecified operation error",
            (1, 0, 0x00) => "DDP local catastrophic error",
            (1, 1, 0x00) => "DDP invalid STag",
            (1, 1, 0x01) => "DDP base or bounds violation",
            (1, 1, 0x02) => "DDP STag not associated with DDP stream",
            (1, 1, 0x03) => "DDP TO wrap",
            (1, 1, 0x04) => "DDP invalid DDP version (tagged)",
            (1, 2, 0x01) => "DDP invalid QN",
            (1, 2, 0x02) => "DDP invalid MSN: no buffer available",
            (1, 2, 0x03) => "DDP invalid MSN: MSN range is not valid",
            (1, 2, 0x04) => "DDP invalid MO",
            (1, 2, 0x05) => "DDP message too long for available buffer",
            (1, 2, 0x06) => "DDP invalid DDP version (untagged)",
            // Implementations disagree on the EType: accept any when Layer = 2.
            (2, _, 0x01) => "LLP connection closed, terminated or lost",
            (2, _, 0x02) => "MPA CRC error",
            (2, _, 0x03) => "MPA marker and ULPDU_Length mismatch",
            (2, _, 0x04) => "invalid MPA Request or Reply frame",
            (2, _, 0x05) => "LLP local catastrophic error",
            (2, _, 0x06) => "insufficient IRD resources",
            (2, _, 0x07) => "no matching RTR option",
            _ => "unknown error code",
        }
    }
}

impl fmt::Display for TerminateCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}/{}/{:#04x})",
            self.describe(),
            self.layer,
            self.etype,
            self.code
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddp_table_is_distinct_and_known() {
        for (i, a) in TerminateCode::ALL_DDP.iter().enumerate() {
            assert_eq!(a.layer, layer::DDP);
            assert_ne!(a.describe(), "unknown error code");
            for b in &TerminateCode::ALL_DDP[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn display_names_the_triple() {
        let s = TerminateCode::DDP_TO_WRAP.to_string();
        assert_eq!(s, "DDP TO wrap (1/1/0x03)");
    }
}
