//! Wire formats of the iWARP protocol family, parsed and emitted without panics.
//!
//! Every type here is a plain value (`Repr` in smoltcp's terms): `parse` takes a byte
//! slice and never panics on any input, `emit` writes exactly `buffer_len()` octets.
//! Reserved bits are kept so that `emit(parse(b)) == b` for every valid `b`.
//!
//! Citations name the RFC and its section (RFC 5040-5044, RFC 6581).

#![warn(missing_docs)]

pub mod codes;
pub mod crc;
pub mod ddp;
pub mod error;
pub mod mpa;
pub mod packet;
pub mod rdmap;
pub mod read_request;
pub mod sctp;
pub mod terminate;
pub mod terminate_rx;

pub use codes::TerminateCode;
pub use crc::{Crc32c, crc32c};
pub use ddp::{DdpControl, DdpHeader, TaggedHeader, UntaggedHeader};
pub use error::WireError;
pub use mpa::{
    EnhancedBlock, FpduDecoder, FpduEncoder, FrameKind, Marker, MpaFlags, MpaFrame, encode_fpdu,
    frame_len, mulpdu, pad_len,
};
pub use rdmap::{Opcode, RdmapControl};
pub use read_request::{READ_REQ_HDR_LEN, ReadRequestHeader};
pub use sctp::{
    AdaptationIndication, DdpSegmentChunk, SctpPayload, SessionControl, SessionFunction,
};
pub use terminate::Terminate;
pub use terminate_rx::{ReceivedTerminate, TerminateLayout};
