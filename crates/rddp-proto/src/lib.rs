//! Sans-IO protocol engines of rddp.
//!
//! Nothing in this crate opens a socket, spawns a thread or reads a clock: engines
//! take segments and octets in and hand segments, placements and deliveries out, so
//! the same code runs under real drivers, the in-memory simulator, fuzzers and
//! benchmarks (see the architecture note).
//!
//! * [`mem`]: protection domains, the STag table, memory regions (RFC 5042).
//! * [`ddp`]: the DDP data source (segmentation) and data sink (validate, place,
//!   deliver in order), stream state and teardown (RFC 5041), and the
//!   untagged receive strategies with shared buffer pools (docs/receive-strategies.md).
//! * [`cq`]: completion queues that refuse attachments they could not hold (docs/receive-strategies.md).
//! * [`rdmap`]: RDMAP over a DDP stream: Send, Write, Read, Terminate, ORD/IRD,
//!   completions (RFC 5040).
//! * [`wq`]: work-queue accounting for a verbs layer: a slot counts until its
//!   completion is taken from the CQ; every posted receive comes back once.
//! * [`stats`]: the counters each engine keeps where it does the work (docs/features.md).

#![warn(missing_docs)]

pub mod cq;
pub mod ddp;
pub mod mem;
pub mod rdmap;
pub mod stats;
pub mod wq;
