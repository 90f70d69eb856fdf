//! Errors of the verbs API: each says what was wrong and what to do.

use crate::quota::Resource;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(
        "consumer {consumer:?} has used its quota of {limit} {what}; release some or ask for a larger quota"
    )]
    Quota {
        consumer: String,
        what: Resource,
        limit: u64,
    },
    #[error(
        "the device cannot grant quota {asked} {what}: only {left} of its capacity is unreserved"
    )]
    DeviceFull {
        what: Resource,
        asked: u64,
        left: u64,
    },
    #[error("range [{offset}, +{len}) is outside the region's {size} octets")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    #[error("memory registration failed: {0}")]
    Mem(#[from] rddp_proto::mem::MemError),
    #[error("MPA: {0}")]
    Mpa(#[from] rddp_mpa::MpaError),
    #[error("the memory region was invalidated or deregistered")]
    RegionGone,
    #[error("the memory region belongs to another protection domain than the queue pair")]
    WrongPd,
    #[error("queue pair setup failed: {0}")]
    Setup(rddp_proto::ddp::SourceError),
    #[error(transparent)]
    Stream(#[from] rddp_proto::ddp::StreamError),
    #[error("completion queue: {0}")]
    Cq(#[from] rddp_proto::cq::CqError),
    #[error("shared receive queue: {0}")]
    Srq(rddp_proto::ddp::PoolError),
    #[error(
        "the send queue holds its maximum of {depth} work requests posted and not yet polled from the send CQ; poll the send CQ first"
    )]
    SendQueueFull { depth: u32 },
    /// A receive queue, shared receive queue or credit window is at its limit: a
    /// slot counts until its completion is taken from the CQ.
    #[error(transparent)]
    QueueFull(#[from] rddp_proto::wq::QueueFull),
    #[error("the queue pair is disconnecting: it takes no new work requests")]
    Disconnecting,
    #[error("queue pair setup: {0}")]
    ReadRtr(#[from] rddp_proto::rdmap::RtrRefused),
    #[error("the shared receive queue belongs to another protection domain than the queue pair")]
    SrqWrongPd,
    #[error("{what} {value} does not fit the 14-bit MPA field (RFC 6581): at most 16383")]
    IrdOrdTooLarge { what: &'static str, value: u32 },
    #[error(
        "the connection agreed ORD 0 (the peer serves no RDMA Reads): an RDMA Read cannot be posted on this queue pair"
    )]
    OrdZero,
    #[error(
        "credits can only be granted on a queue pair attached to a credits-mode shared receive queue"
    )]
    NotCredits,
    #[error("the event loop could not take the queue pair: {0}")]
    EventLoop(std::io::Error),
}
