//! A deterministic in-memory harness for the rddp engines: behaviour tests
//! that need no socket, no thread and no sleep.
//!
//! Two pairs of simulated hosts:
//!
//! * [`RdmapPair`]: two RDMAP engines (the product's `RdmapStream`, each with
//!   its own memory table, see [`RdmapEndpoint`]) joined by a simulated LLP
//!   each way on a virtual clock ([`PairConfig`]). Over [`Llp::Mpa`] the
//!   engines' segments are framed into FPDUs by rddp-mpa's layout (CRC,
//!   Markers and MULPDU as negotiated, RFC 5044 §4-6), cut into chunks at
//!   random offsets ([`Chunking`]) and read by the product's `FpduReceiver`
//!   with `RdmapPlacer` (any of its readers, [`Reader`]). Over
//!   [`Llp::Segments`] whole segments overtake each other (like SCTP) and go
//!   to RDMAP's whole-segment entry point. Each link has a delay in ticks, so
//!   a test says exactly what arrives before what; octets on the way can be
//!   damaged ([`RdmapPair::tamper`]). The type's docs give the call order.
//! * [`Pair`]: two DDP-only [`Endpoint`]s (memory table and DDP stream) with no
//!   clock. Two link kinds: [`LinkMode::Stream`], a byte stream (like TCP)
//!   carrying length-prefixed segments (not MPA: DDP tested apart from it),
//!   handed to the receiver in chunks cut at arbitrary offsets, reassembled by
//!   a bounded [`Deframer`], always in order; [`LinkMode::Reorder`], whole
//!   segments that arrive in a random order within a window, each tagged with
//!   the sender's order (like SCTP's DDP-SSN).
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
