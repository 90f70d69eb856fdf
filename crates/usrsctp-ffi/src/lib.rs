//! Hand-written FFI over Debian's libusrsctp (userspace SCTP) and a safe socket type.
//!
//! * The library is loaded at run time ([`available`]); without it every call returns
//!   [`Error::Load`] naming the package (`libusrsctp2`), and nothing else breaks.
//! * One stack per process ([`stack::init`]); sockets over IPv4 (UDP encapsulation or
//!   raw IP) or AF_CONN ([`stack::ConnAddress`]) for in-process links.
//! * One of the few crates of the workspace allowed `unsafe` (CONTRIBUTING.md
//!   lists them); each `unsafe` block says why it holds (clippy's
//!   `undocumented_unsafe_blocks` is denied here).
//! * A dropped [`Socket`] whose association is still up is closed by the
//!   [`reaper`] once the association is gone, never at once: closing it at
//!   once races usrsctp's own threads (sctplab/usrsctp#709).
//! * Three symbols outside usrsctp.h are used, each optional (a library
//!   without them still loads, and the public calls are used instead):
//!   * `sctp_lower_sosend`, which `usrsctp_sendv` calls with a one-buffer
//!     `struct uio`. `usrsctp_sendv` cannot gather, so a DDP segment's headers
//!     and its payload (read in place from a registered region) would have to
//!     be copied into one buffer first; [`Socket::send_gather`] passes them as
//!     one message of several iovecs instead ([`gather_available`]).
//!   * `sctp_sorecvmsg` and `m_freem`: `usrsctp_recvv` copies a message out
//!     without saying how long it is before the copy, and DDP over SCTP carries
//!     no length, so a message read as soon as it arrives could only be
//!     validated (RFC 5041: before any octet is placed) after a copy into a
//!     buffer of our own. [`Socket::recv_chain`] takes the message as the mbuf
//!     chain usrsctp holds, its length known, and the caller copies it from
//!     there once, straight into place ([`chain_available`]).
//!
//!   With `RDDP_USRSCTP_API_ONLY` set ([`API_ONLY_ENV`]) none of them is used.

#![warn(missing_docs)]

mod api;
mod chain;
mod error;
mod notify;
pub mod reaper;
mod socket;
pub mod stack;
pub mod sys;

pub use api::{
    API_ONLY_ENV, LIBRARY_NAMES, LoadError, available, chain_available, gather_available,
};
pub use chain::Chain;
pub use error::Error;
pub use notify::Notification;
pub use socket::{
    FailureDetection, NextInfo, Part, Received, RecvInfo, Socket, Status, Target, Wake,
};
pub use stack::{ConnAddress, Encapsulation};
