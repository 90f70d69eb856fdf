//! Errors of the verbs API: each says what was wrong and what to do.

use crate::quota::Resource;

/// Why a call of the verbs API failed. Work that fails after it was posted
/// completes with a [`crate::WcStatus`] instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A consumer would hold more of a resource than its [`crate::Quota`].
    #[error(
        "consumer {consumer:?} has used its quota of {limit} {what}; release some or ask for a larger quota"
    )]
    Quota {
        /// The consumer's name.
        consumer: String,
        /// The resource.
        what: Resource,
        /// The consumer's quota of it.
        limit: u64,
    },
    /// A new consumer's quota does not fit in what the device has left.
    #[error(
        "the device cannot grant quota {asked} {what}: only {left} of its capacity is unreserved"
    )]
    DeviceFull {
        /// The resource.
        what: Resource,
        /// The quota asked for.
        asked: u64,
        /// What the device has not reserved for other consumers.
        left: u64,
    },
    /// A range names octets a region does not have.
    #[error("range [{offset}, +{len}) is outside the region's {size} octets")]
    OutOfRange {
        /// Where the range starts in the region.
        offset: u64,
        /// Its length.
        len: u64,
        /// The region's length.
        size: u64,
    },
    /// The memory table refused a registration (no STag left, limits).
    #[error("memory registration failed: {0}")]
    Mem(#[from] rddp_proto::mem::MemError),
    /// MPA connection setup failed.
    #[error("MPA: {0}")]
    Mpa(#[from] rddp_mpa::MpaError),
    /// A work request names a region that was invalidated or deregistered.
    #[error("the memory region was invalidated or deregistered")]
    RegionGone,
    /// A work request names a region of another protection domain.
    #[error("the memory region belongs to another protection domain than the queue pair")]
    WrongPd,
    /// The RDMAP stream could not be set up with what the connection agreed
    /// (e.g. a maximum segment too small for RDMAP's headers).
    #[error("queue pair setup failed: {0}")]
    Setup(rddp_proto::ddp::SourceError),
    /// The stream refused the work: it is closed, closing or dead.
    #[error(transparent)]
    Stream(#[from] rddp_proto::ddp::StreamError),
    /// A completion queue could not reserve room for a queue pair or a shared
    /// receive queue.
    #[error("completion queue: {0}")]
    Cq(#[from] rddp_proto::cq::CqError),
    /// The shared receive queue refused a buffer.
    #[error("shared receive queue: {0}")]
    Srq(rddp_proto::ddp::PoolError),
    /// The send queue holds `max_send_wr` requests whose completions were not
    /// polled yet.
    #[error(
        "the send queue holds its maximum of {depth} work requests posted and not yet polled from the send CQ; poll the send CQ first"
    )]
    SendQueueFull {
        /// The queue pair's `max_send_wr`.
        depth: u32,
    },
    /// A receive queue, shared receive queue or credit window is at its limit: a
    /// slot counts until its completion is taken from the CQ.
    #[error(transparent)]
    QueueFull(#[from] rddp_proto::wq::QueueFull),
    /// The queue pair was asked to disconnect and takes no new work.
    #[error("the queue pair is disconnecting: it takes no new work requests")]
    Disconnecting,
    /// The RFC 6581 Read RTR cannot be sent: it needs a free ORD slot on a
    /// live stream with nothing queued ahead of it.
    #[error("queue pair setup: {0}")]
    ReadRtr(#[from] rddp_proto::rdmap::RtrRefused),
    /// A shared receive queue's low-water limit above its size.
    #[error("srq limit {limit} is above the queue's {max_wr} receives")]
    SrqLimit {
        /// The limit asked for.
        limit: usize,
        /// The queue's size.
        max_wr: usize,
    },
    /// A queue pair's shared receive queue is of another protection domain.
    #[error("the shared receive queue belongs to another protection domain than the queue pair")]
    SrqWrongPd,
    /// IRD or ORD above 16,383, which MPA cannot carry.
    #[error("{what} {value} does not fit the 14-bit MPA field (RFC 6581): at most 16383")]
    IrdOrdTooLarge {
        /// "IRD" or "ORD".
        what: &'static str,
        /// The value asked for.
        value: u32,
    },
    /// An RDMA Read on a connection that agreed ORD 0.
    #[error(
        "the connection agreed ORD 0 (the peer serves no RDMA Reads): an RDMA Read cannot be posted on this queue pair"
    )]
    OrdZero,
    /// Credits granted on a queue pair without a credits-mode shared receive
    /// queue.
    #[error(
        "credits can only be granted on a queue pair attached to a credits-mode shared receive queue"
    )]
    NotCredits,
    /// The event loop could not register the queue pair's socket.
    #[error("the event loop could not take the queue pair: {0}")]
    EventLoop(std::io::Error),
}
