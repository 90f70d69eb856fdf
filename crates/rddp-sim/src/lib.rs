//! A deterministic in-memory harness for the rddp engines.
//!
//! Two [`Endpoint`]s (each with its own memory table and DDP stream) joined by a
//! simulated LLP in each direction. Two link kinds cover what real LLPs do:
//!
//! * [`LinkMode::Stream`]: a byte stream (like TCP) carrying length-prefixed
//!   segments, handed to the receiver in chunks cut at arbitrary offsets
//!   ([`Chunking`]), reassembled by a bounded [`Deframer`]. Always in order.
//! * [`LinkMode::Reorder`]: whole segments that arrive in a random order within a
//!   window, each tagged with the sender's order (like SCTP's DDP-SSN).
//!
//! All randomness comes from one seed, so every run can be replayed.

#![warn(missing_docs)]

mod byte_link;
mod deframe;
mod endpoint;
mod pair;
mod rdmap_endpoint;
mod rdmap_pair;
mod segment_link;

pub use deframe::{Deframer, FrameError, frame};
pub use endpoint::Endpoint;
pub use pair::{Chunking, LinkMode, Pair, SimError};
pub use rdmap_endpoint::RdmapEndpoint;
pub use rdmap_pair::{Dir, Llp, MpaLlp, PairConfig, RdmapPair, Reader};
