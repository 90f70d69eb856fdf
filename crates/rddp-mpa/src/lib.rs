//! MPA: Marker PDU Aligned framing for TCP (RFC 5044, RFC 6581).
//!
//! * [`setup`]: the sans-IO connection-setup state machines (Request/Reply, Rev 1
//!   and 2, IRD/ORD, RTR choice, deadlines) for initiator and responder (RFC 5044 §7.1; RFC 6581).
//! * [`fpdu`]: FPDU mode, sans-IO: the one receiver ([`fpdu::FpduReceiver`],
//!   CRC, Markers, the RFC 6581 RTR check, payloads straight into place) with
//!   an RDMAP stream as its engine ([`fpdu::RdmapPlacer`]), and FPDU framing
//!   for transmit (RFC 5044 §4, §8; RFC 5040 §4.8).
//! * [`tcp`]: connection setup over `std::net` TCP up to FPDU mode:
//!   [`tcp::connect_raw`], [`tcp::listen`] and [`tcp::MpaListener::accept_raw`];
//!   the socket writers.
//! * [`pcap`]: captures that wrap the octets each side sent and received in
//!   synthesised IP/TCP headers, for Wireshark (`--pcap`, and the wire check).
//!
//! No module except [`tcp`] touches a socket or a clock: callers pass
//! `std::time::Instant` values in.

#![warn(missing_docs)]

pub mod error;
pub mod fpdu;
pub mod options;
pub mod pcap;
pub mod setup;
pub mod tcp;

pub use error::MpaError;
pub use fpdu::OutFpdu;
pub use options::{DEAD_PEER_TIMEOUT, INITIAL_RECEIVE_WINDOW, MpaOptions, RtrTypes};
pub use setup::{Accept, Initiator, Negotiated, PeerRequest, Responder, Role, Rtr, SetupStatus};
pub use tcp::{MpaListener, connect_raw, listen};
