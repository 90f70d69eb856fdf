//! Hand-written FFI over Debian's libusrsctp (userspace SCTP) and a safe socket type.
//!
//! * The library is loaded at run time ([`available`]); without it every call returns
//!   [`Error::Load`] naming the package (`libusrsctp2`), and nothing else breaks.
//! * One stack per process ([`stack::init`]); sockets over IPv4 (UDP encapsulation or
//!   raw IP) or AF_CONN ([`stack::ConnAddress`]) for in-process links.
//! * This is the only crate of the workspace allowed `unsafe`.
//! * One symbol outside usrsctp.h is used: `sctp_lower_sosend`, which
//!   `usrsctp_sendv` calls with a one-buffer `struct uio`. `usrsctp_sendv` cannot
//!   gather, so a DDP segment's headers and its payload (read in place from a
//!   registered region) would have to be copied into one buffer first;
//!   [`Socket::send_gather`] passes them as one message of several iovecs instead.
//!   The symbol is optional ([`gather_available`]): without it sends concatenate.

mod api;
mod error;
mod notify;
mod socket;
pub mod stack;
pub mod sys;

pub use api::{LIBRARY_NAMES, LoadError, available, gather_available};
pub use error::Error;
pub use notify::Notification;
pub use socket::{NextInfo, Part, Received, RecvInfo, Socket, Status, Target, Wake};
pub use stack::{ConnAddress, Encapsulation};
