//! The Terminate each fatal FPDU-mode error sends (RFC 5040 §4.8; RFC 5044 §8).

use rddp_proto::ddp::DdpError;
use rddp_wire::{Terminate, TerminateCode, WireError};

/// Code sent for an impossible ULPDU_Length (shorter than a tagged DDP header, or
/// longer than our MULPDU). RFC 5044 has no code of its own for it. We send
/// 2/0/0x02, "MPA CRC error": the receiver cannot find the FPDU's CRC field, so it
/// cannot verify the FPDU, exactly the situation of a CRC failure, and every peer
/// knows this code. (0x03 needs Markers; 0x04 is about Request/Reply frames; 0x05
/// "local catastrophic" would blame ourselves.)
pub const ULPDU_LENGTH_CODE: TerminateCode = TerminateCode::MPA_CRC_ERROR;

/// Layer-2 Terminate for a framing error: M=D=R=0 (RFC 5040 §4.8 table).
pub fn terminate_for_wire(e: &WireError) -> Terminate {
    let code = match e {
        WireError::UlpduLength { .. } => ULPDU_LENGTH_CODE,
        other => other
            .terminate_code()
            .unwrap_or(TerminateCode::MPA_LOCAL_CATASTROPHIC),
    };
    Terminate::bare(code)
}

/// Terminate for a DDP validation error: its code; M=D=1 with the offending header
/// and the whole segment's length when the header is trusted, else bare (RFC 5040 §4.8:
/// M and D together or neither).
pub fn terminate_for_ddp(e: &DdpError) -> Terminate {
    match e.header {
        Some(h) => Terminate::with_headers(
            e.code,
            e.segment_len.min(usize::from(u16::MAX)) as u16,
            h,
            None,
        ),
        None => Terminate::bare(e.code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_codes() {
        let crc = WireError::CrcMismatch {
            wire: 1,
            computed: 2,
        };
        assert_eq!(terminate_for_wire(&crc).code, TerminateCode::MPA_CRC_ERROR);
        let m = WireError::MarkerMismatch {
            fpduptr: 1,
            expected: 0,
        };
        assert_eq!(
            terminate_for_wire(&m).code,
            TerminateCode::MPA_MARKER_MISMATCH
        );
        let l = WireError::UlpduLength {
            len: 3,
            min: 14,
            max: 100,
        };
        let t = terminate_for_wire(&l);
        assert_eq!(
            (t.code, t.m, t.d()),
            (TerminateCode::MPA_CRC_ERROR, false, false)
        );
        assert_eq!(t.code.layer, 2);
    }
}
