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
//! * [`Device`]: the software RNIC; owns every resource and acts as the privileged
//!   resource manager (seed 000): resources are created through it, per-consumer
//!   quotas are enforced, one consumer cannot use another's share.
//! * [`Consumer`]: one user of the device (like one process's ibverbs context).
//! * [`ProtectionDomain`], [`MemoryRegion`]: memory the peer may reach, by STag.

mod cq;
mod device;
mod error;
mod mr;
mod pd;
mod qp;
mod quota;
pub mod transport;

pub use cq::{CompletionQueue, WorkCompletion};
pub use device::{Consumer, Device, DeviceLimits};
pub use error::Error;
pub use mr::{MemoryRegion, RemoteBuf};
pub use pd::ProtectionDomain;
pub use qp::{PreparedQueuePair, QueuePair, QueuePairBuilder, SendFlags};
pub use quota::{Quota, Usage};
pub use rddp_proto::mem::Access;
pub use rddp_proto::rdmap::{AsyncEvent, WcOpcode, WcStatus};
pub use rddp_wire::TerminateCode;
