//! DDP over SCTP (RFC 5043).
//!
//! * [`Adaptation`]: the sans-IO adaptation layer of one association: DDP-SSN
//!   numbering ([`ssn`]), session control ([`session`]), maximum segment size, one
//!   `DdpStream` per accepted session. Chunks in with [`Adaptation::on_chunk`], out
//!   with [`Adaptation::poll_transmit`]; sessions with `initiate`, `accept`,
//!   `reject`, `terminate` and [`Event`]s.
//! * [`driver`]: the same over real SCTP (usrsctp, loaded at run time):
//!   [`driver::Listener`] / [`driver::connect`] set up and verify an association,
//!   [`driver::SctpConnection`] moves chunks (`flush`, `poll`, `run_until`).
//!
//! A ULP (RDMAP) sits on a connection as on an MPA connection: it opens a session
//! per stream number, then uses that session's `DdpStream` (send, post receives,
//! poll deliveries and errors) while the driver carries the segments.

#![warn(missing_docs)]

pub mod adaptation;
mod control;
pub mod driver;
mod receive;
pub mod session;
pub mod ssn;
mod transmit;

pub use adaptation::{
    Adaptation, AssociationError, Config, Event, OutChunk, SessionError, max_segment_for,
};
pub use session::{CloseReason, Role, SessionState};
