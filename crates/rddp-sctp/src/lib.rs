//! DDP over SCTP (RFC 5043; seed 001; spec §5).
//!
//! * [`Adaptation`]: the sans-IO adaptation layer of one association: DDP-SSN
//!   numbering ([`ssn`]), session control ([`session`]), maximum segment size, one
//!   `DdpStream` per accepted session.
//! * [`driver`]: the same over real SCTP (usrsctp, loaded at run time).

pub mod adaptation;
mod receive;
pub mod session;
pub mod ssn;
mod transmit;

pub use adaptation::{
    Adaptation, AssociationError, Config, Event, OutChunk, SessionError, max_segment_for,
};
pub use session::{CloseReason, Role, SessionState};
pub mod driver;
