//! Direct Data Placement (RFC 5041).
//!
//! * [`DdpSource`] cuts ULP messages into segments no larger than the LLP's MULPDU.
//! * [`DdpSink`] validates every segment before placing anything, places segments as
//!   they arrive (in any order) and delivers messages strictly in order.
//! * [`DdpStream`] joins both halves with the stream state machine and teardown.
//!
//! The LLP contract (RFC 5041 §3): the LLP tells DDP its MULPDU and every change of it
//! ([`DdpStream::set_mulpdu`]), hands each received segment up whole with its length
//! (the slice), and, if it may hand segments up out of order, the sender's order
//! ([`SenderSeq`]). An in-order LLP such as MPA/TCP numbers segments 0, 1, 2, ...

mod endpoint;
mod error;
mod payload;
mod pool;
mod recv_queue;
mod sink;
mod slots;
mod source;
mod stream;

pub use endpoint::{SegmentEndpoint, fill_target, place_whole};
pub use error::{DdpError, SourceError, StreamError};
pub use payload::Payload;
pub use pool::{
    BufferOrdering, BufferPool, PoolConfig, PoolError, PoolEvent, PoolId, PoolStats, PoolStrategy,
};
pub use recv_queue::{RecvBuffer, RecvModel, RegionSpan};
pub use sink::{
    Begin, DdpSink, Delivery, Fits, NotBegun, SinkStats, TaggedProgress, Target, split_segment,
};
pub use source::{DdpSource, OutSegment};
pub use stream::{DdpStream, StreamEvent, StreamState};

/// Position of a segment in the sender's transmit order, counted from 0 for the
/// first segment of the stream. MPA/TCP delivers in this order; SCTP carries it as
/// the DDP-SSN, which its adaptation layer unwraps to this 64-bit count.
pub type SenderSeq = u64;

/// Per-stream DDP settings.
#[derive(Debug, Clone, Copy)]
pub struct DdpConfig {
    /// Number of untagged queues: valid QNs are `0..num_qns` (RDMAP uses 3).
    pub num_qns: u32,
    /// How far ahead of the oldest missing segment a segment may arrive (in
    /// segments). Bounds the sink's reorder state; 0 means the LLP is in order.
    pub max_reorder: usize,
    /// Initial MULPDU (largest segment, header included) until the LLP says otherwise.
    pub mulpdu: usize,
}

impl Default for DdpConfig {
    fn default() -> Self {
        Self {
            num_qns: rddp_wire::rdmap::qn::COUNT,
            max_reorder: 4096,
            mulpdu: 1454,
        }
    }
}
