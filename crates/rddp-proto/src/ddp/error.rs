//! DDP errors: what the ULP is told, and what goes into a Terminate.

use rddp_wire::{DdpHeader, TerminateCode};
use std::fmt;

/// A fatal error found on a received segment. Carries everything a Terminate needs
/// (RFC 5040 §4.8): the code, the offending DDP header when its layout is trusted, and the
/// length of the offending segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdpError {
    /// The Terminate's Layer, Error Type and Error Code (RFC 5041 §7.2 for DDP's).
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
    /// The message is 2^32 octets or longer: an untagged message's MO is a 32-bit
    /// field (RFC 5041 §4.3), and every message is held to that bound.
    #[error("a DDP message must be shorter than 2^32 octets; got {0}")]
    MessageTooLong(u64),
    /// The queue number is not below the stream's number of untagged queues. RDMAP
    /// returns it too for a receive whose wr_id lies in RDMAP's own range
    /// ([`crate::rdmap::INTERNAL_WR_ID`] and above).
    #[error("queue number {qn} is not one of the stream's {count} untagged queues")]
    InvalidQn {
        /// The queue number asked for.
        qn: u32,
        /// How many untagged queues the stream has (valid: `0..count`).
        count: u32,
    },
    /// A tagged message would run past the end of the 64-bit TO space.
    #[error("TO {to:#x} + length {len} wraps the 64-bit tagged offset space")]
    ToWrap {
        /// The message's first TO.
        to: u64,
        /// The message's length in octets.
        len: u64,
    },
    /// An ordered receive queue already holds as many buffers as its limit.
    #[error("receive queue {qn} already holds its limit of {limit} buffers")]
    RecvQueueFull {
        /// The queue.
        qn: u32,
        /// Its depth (the limit it reserved on its CQ).
        limit: usize,
    },
    /// The queue's pool already holds its maximum of buffers (the value), free
    /// or held by a message.
    #[error("the shared buffer pool already holds its maximum of {0} buffers")]
    PoolFull(usize),
    /// A receive posted into a region names octets past the region's end.
    #[error("a receive on queue {qn} names octets past the end of its region")]
    OutsideRegion {
        /// The queue posted to.
        qn: u32,
    },
    /// The MULPDU (the value) cannot hold an untagged header (18 octets, RFC 5041
    /// §4.3) and one payload octet.
    #[error("MULPDU {0} is too small: it must hold an 18-octet untagged header and one octet")]
    MulpduTooSmall(usize),
}

/// Why a stream refuses a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// A refusal of the data source (message, queue or MULPDU).
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Graceful teardown is under way (RFC 5041 §6): no new message is accepted.
    #[error("the stream is closing (graceful teardown): no new messages are accepted")]
    Closing,
    /// The stream had a fatal error with this code; only abortive teardown remains.
    #[error("the stream had a fatal error ({0}); only abortive teardown is possible")]
    Erroneous(TerminateCode),
    /// The stream is closed.
    #[error("the stream is closed")]
    Closed,
    /// A segment begun [`crate::ddp::Begin::Ahead`] cannot join the segments
    /// begun before it: nothing changed; take it alone once they are finished.
    #[error("the segment cannot be begun ahead of those begun before it")]
    NotAhead,
}
