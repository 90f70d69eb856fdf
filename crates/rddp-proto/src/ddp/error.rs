//! DDP errors: what the ULP is told, and what goes into a Terminate.

use rddp_wire::{DdpHeader, TerminateCode};
use std::fmt;

/// A fatal error found on a received segment. Carries everything a Terminate needs
/// (RFC 5040 §4.8): the code, the offending DDP header when its layout is trusted, and the
/// length of the offending segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdpError {
    pub code: TerminateCode,
    /// The offending header, absent when it cannot be trusted (version errors,
    /// truncated headers).
    pub header: Option<DdpHeader>,
    /// Length of the offending DDP segment, header included.
    pub segment_len: usize,
    /// What exactly was wrong, for people.
    pub detail: String,
}

impl DdpError {
    pub(crate) fn new(
        code: TerminateCode,
        header: Option<DdpHeader>,
        segment_len: usize,
        detail: String,
    ) -> Self {
        Self {
            code,
            header,
            segment_len,
            detail,
        }
    }
}

impl fmt::Display for DdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.detail)
    }
}

impl std::error::Error for DdpError {}

/// A local request the data source refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    #[error("a DDP message must be shorter than 2^32 octets; got {0}")]
    MessageTooLong(u64),
    #[error("queue number {qn} is not one of the stream's {count} untagged queues")]
    InvalidQn { qn: u32, count: u32 },
    #[error("TO {to:#x} + length {len} wraps the 64-bit tagged offset space")]
    ToWrap { to: u64, len: u64 },
    #[error("receive queue {qn} already holds its limit of {limit} buffers")]
    RecvQueueFull { qn: u32, limit: usize },
    #[error("the shared buffer pool already holds its maximum of {0} buffers")]
    PoolFull(usize),
    #[error("a receive on queue {qn} names octets past the end of its region")]
    OutsideRegion { qn: u32 },
    #[error("MULPDU {0} is too small: it must hold an 18-octet untagged header and one octet")]
    MulpduTooSmall(usize),
}

/// Why a stream refuses a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("the stream is closing (graceful teardown): no new messages are accepted")]
    Closing,
    #[error("the stream had a fatal error ({0}); only abortive teardown is possible")]
    Erroneous(TerminateCode),
    #[error("the stream is closed")]
    Closed,
}
