//! The one error type of the wire crate.

/// Why a byte string is not a valid instance of a wire format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer octets than the format needs.
    #[error("truncated: {what} needs {need} octets, got {got}")]
    Truncated {
        /// The format, or the part of it, that was cut short.
        what: &'static str,
        /// Octets it needs.
        need: usize,
        /// Octets there were.
        got: usize,
    },
    /// A field holds a value the format does not allow.
    #[error("invalid {field}: {value:#x}")]
    InvalidField {
        /// The field's name.
        field: &'static str,
        /// The value it held.
        value: u64,
    },
    /// Octets left over after a complete message.
    #[error("{extra} unexpected trailing octets after {what}")]
    Trailing {
        /// The message that ended before the octets did.
        what: &'static str,
        /// Octets after its end.
        extra: usize,
    },
    /// The first 16 octets are neither MPA key (RFC 5044 §7.1.1): not an MPA peer.
    #[error("not an MPA Request/Reply key")]
    MpaBadKey,
    /// An MPA revision this crate cannot lay out (RFC 5044 §7.1.1, RFC 6581: 0, 1, 2 are known).
    #[error("unsupported MPA revision {rev}")]
    MpaBadRev {
        /// The Rev field received.
        rev: u8,
    },
    /// Private data longer than the protocol allows (RFC 5044 §7.1.1, RFC 5043).
    #[error("private data of {len} octets exceeds the limit of {max}")]
    PrivateDataTooLong {
        /// Octets of private data given or announced.
        len: usize,
        /// The limit that applies.
        max: usize,
    },
    /// The MPA CRC field does not match the octets it covers (RFC 5044 §4.4).
    #[error("MPA CRC mismatch: wire {wire:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// The CRC the FPDU carried.
        wire: u32,
        /// The CRC of the octets it covers.
        computed: u32,
    },
    /// A Marker's FPDUPTR disagrees with the framing from ULPDU_Length (RFC 5044 §4.3).
    #[error("MPA marker FPDUPTR {fpduptr:#x}, framing says {expected:#x}")]
    MarkerMismatch {
        /// The FPDUPTR the Marker carried.
        fpduptr: u16,
        /// The FPDUPTR that ULPDU_Length framing gives at that position.
        expected: u16,
    },
    /// ULPDU_Length below a tagged DDP header (14 octets) or above the local
    /// receive limit: no valid DDP segment, and more than the receiver buffers.
    #[error("ULPDU_Length {len} outside {min}..={max}")]
    UlpduLength {
        /// The ULPDU_Length received.
        len: u16,
        /// The smallest one accepted.
        min: usize,
        /// The largest one accepted.
        max: usize,
    },
}

impl WireError {
    /// The Terminate code an LLP error maps to (RFC 5040 §4.8; RFC 5044 §8), if it has one.
    /// Errors without a defined code (e.g. a bad ULPDU_Length) return `None`;
    /// the caller picks a code for those.
    pub fn terminate_code(&self) -> Option<crate::TerminateCode> {
        use crate::TerminateCode as T;
        match self {
            Self::CrcMismatch { .. } => Some(T::MPA_CRC_ERROR),
            Self::MarkerMismatch { .. } => Some(T::MPA_MARKER_MISMATCH),
            Self::MpaBadKey | Self::MpaBadRev { .. } => Some(T::MPA_INVALID_REQ_REP),
            _ => None,
        }
    }
}

/// Return `Truncated` unless `buf` holds at least `need` octets.
pub(crate) fn need(buf: &[u8], need: usize, what: &'static str) -> Result<(), WireError> {
    if buf.len() < need {
        Err(WireError::Truncated {
            what,
            need,
            got: buf.len(),
        })
    } else {
        Ok(())
    }
}

pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}
