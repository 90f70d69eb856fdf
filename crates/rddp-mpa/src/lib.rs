//! MPA: Marker PDU Aligned framing for TCP (RFC 5044, RFC 6581).
//!
//! * [`setup`]: the sans-IO connection-setup state machines (Request/Reply, Rev 1
//!   and 2, IRD/ORD, RTR choice, deadlines) for initiator and responder (RFC 5044 §7.1; RFC 6581).
//! * [`fpdu`]: the sans-IO FPDU-mode connection: DDP segments <-> FPDU octets, CRC,
//!   Markers, MULPDU, Terminate on every fatal error (RFC 5044 §4, §8; RFC 5040 §4.8).
//! * [`tcp`]: a blocking `std::net` driver: [`tcp::connect`], [`tcp::listen`].
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
pub use fpdu::{FpduConn, OutFpdu};
pub use options::{DEAD_PEER_TIMEOUT, INITIAL_RECEIVE_WINDOW, MpaOptions, RtrTypes};
pub use setup::{Accept, Initiator, Negotiated, PeerRequest, Responder, Role, Rtr, SetupStatus};
pub use tcp::{MpaConnection, MpaListener, connect, connect_raw, listen};
