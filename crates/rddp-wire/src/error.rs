//! The one error type of the wire crate.

/// Why a byte string is not a valid instance of a wire format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer octets than the format needs.
    #[error("truncated: {what} needs {need} octets, got {got}")]
    Truncated {
        what: &'static str,
        need: usize,
        got: usize,
    },
    /// A field holds a value the format does not allow.
    #[error("invalid {field}: {value:#x}")]
    InvalidField { field: &'static str, value: u64 },
    /// Octets left over after a complete message.
    #[error("{extra} unexpected trailing octets after {what}")]
    Trailing { what: &'static str, extra: usize },
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
