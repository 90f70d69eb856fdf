//! rddp: RDMA semantics without RDMA hardware, in the shape of ibverbs.
//!
//! ```
//! use rddp::{Access, Device, Quota};
//!
//! let dev = Device::new();
//! let app = dev.consumer("app", Quota::default()).unwrap();
//! let pd = app.alloc_pd().unwrap();
//! let mr = pd.register(vec![0u8; 4096], Access::REMOTE_WRITE | Access::REMOTE_READ).unwrap();
//! let remote = mr.remote(); // (STag, TO, length) to advertise to the peer
//! assert_eq!(remote.len, 4096);
//! mr.write(0, b"hello").unwrap();
//! assert_eq!(mr.read(0, 5).unwrap(), b"hello");
//! ```
//!
//! Two queue pairs, here joined by the in-memory LLP (MPA/TCP works the same way):
//! advertise a region, RDMA Write into it, RDMA Read it back, Send and Receive.
//! This is the README's quick start (`scripts/check-docs.sh` checks they agree).
//!
//! ```
//! use rddp::transport::memory_pair;
//! use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, Quota, SendFlags, WcStatus};
//! use std::time::Duration;
//!
//! fn main() -> Result<(), rddp::Error> {
//!     let dev = Device::new();
//!     let (link_a, link_b) = memory_pair(1024);
//!     let pd_a = dev.consumer("a", Quota::default())?.alloc_pd()?;
//!     let pd_b = dev.consumer("b", Quota::default())?.alloc_pd()?;
//!     let (cq_a, cq_b) = (CompletionQueue::new(32), CompletionQueue::new(32));
//!     let qp_a = QueuePairBuilder::new(&pd_a, &cq_a, &cq_a).build()?.attach(link_a)?;
//!     let qp_b = QueuePairBuilder::new(&pd_b, &cq_b, &cq_b).build()?.attach(link_b)?;
//!
//!     // B registers a buffer the peer may write and read, and advertises it.
//!     let target = pd_b.register(vec![0; 64], Access::REMOTE_WRITE | Access::REMOTE_READ)?;
//!     let advert = target.remote(); // (STag, TO, length): sent to A in a Send or out of band
//!
//!     // A writes into it, then reads it back into a sink of its own.
//!     let src = pd_a.register(b"hello, remote memory".to_vec(), Access::NONE)?;
//!     let sink = pd_a.register(vec![0; 20], Access::REMOTE_WRITE)?; // Read sinks need remote write
//!     qp_a.post_write(1, &src, 0, 20, advert, 0)?;
//!     qp_a.post_read(2, &sink, 0, 20, advert, 0)?;
//!
//!     // Send and Receive: B posts a buffer, A sends into it.
//!     qp_b.post_recv(10, 32)?;
//!     qp_a.post_send(3, &src, 0, 5, SendFlags::default())?;
//!
//!     let mut done = Vec::new();
//!     while done.len() < 3 {
//!         done.extend(cq_a.wait(8, Duration::from_secs(5)));
//!     }
//!     assert!(done.iter().all(|wc| wc.status == WcStatus::Success));
//!     assert_eq!(sink.read(0, 20)?, b"hello, remote memory");
//!     let recv = cq_b.wait(1, Duration::from_secs(5));
//!     assert_eq!(&recv[0].buffer.as_ref().unwrap()[..5], b"hello");
//!     Ok(())
//! }
//! ```
//!
//! * [`Device`]: the software RNIC; owns every resource and acts as the privileged
//!   resource manager (RFC 5041): resources are created through it, per-consumer
//!   quotas are enforced, one consumer cannot use another's share.
//! * [`Consumer`]: one user of the device (like one process's ibverbs context).
//! * [`ProtectionDomain`], [`MemoryRegion`]: memory the peer may reach, by STag.
//! * [`QueuePairBuilder`] → [`PreparedQueuePair`] → [`QueuePair`]: built (its
//!   quota charged), receives posted if the peer may send at once, then
//!   attached to a connected LLP from [`transport`] (MPA over TCP, DDP over
//!   SCTP, or in memory).
//! * [`CompletionQueue`]: completions of any number of queue pairs, polled,
//!   waited for or notified; [`SharedReceiveQueue`]: receive buffers shared by
//!   the queue pairs of one PD (docs/receive-strategies.md).
//! * [`Error`] refuses a call before anything is posted; work that fails
//!   after it was posted completes with a [`WcStatus`] other than `Success`.
//!
//! docs/guide.md walks through the API with the ibverbs equivalent of each
//! call.

#![warn(missing_docs)]

pub mod capture;
mod cq;
mod device;
mod error;
mod limits;
mod mr;
mod pd;
mod qp;
mod quota;
mod srq;
mod stats;
mod trace;
pub mod transport;

pub use cq::{CompletionQueue, Spin, WorkCompletion};
pub use device::{Consumer, Device, DeviceLimits};
pub use error::Error;
pub use limits::raise_open_file_limit;
pub use mr::{MemoryRegion, RemoteBuf};
pub use pd::ProtectionDomain;
pub use qp::{
    PostListError, PostWr, PreparedQueuePair, QueuePair, QueuePairBuilder, ReadFlags, RecvWr,
    SendFlags, WriteFlags,
};
pub use quota::{Quota, Usage};
pub use rddp_proto::ddp::{BufferOrdering, PoolEvent};
pub use rddp_proto::mem::{Access, AppMem, MemError};
pub use rddp_proto::rdmap::{AsyncEvent, WcOpcode, WcStatus};
pub use rddp_wire::TerminateCode;
pub use srq::{SharedReceiveQueue, SrqMode};
pub use stats::{CompletionCounts, DeviceStats, QpStats, TerminateClasses};
