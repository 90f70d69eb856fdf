//! Hand-written FFI over Debian's libusrsctp (userspace SCTP) and a safe socket type.
//!
//! * The library is loaded at run time ([`available`]); without it every call returns
//!   [`Error::Load`] naming the package (`libusrsctp2`), and nothing else breaks.
//! * One stack per process ([`stack::init`]); sockets over IPv4 (UDP encapsulation or
//!   raw IP) or AF_CONN ([`stack::ConnAddress`]) for in-process links.
//! * This is the only crate of the workspace allowed `unsafe`.

mod api;
mod error;
mod notify;
mod socket;
pub mod stack;
pub mod sys;

pub use api::{LIBRARY_NAMES, LoadError, available};
pub use error::Error;
pub use notify::Notification;
pub use socket::{NextInfo, Part, Received, RecvInfo, Socket, Status, Target, Wake};
pub use stack::{ConnAddress, Encapsulation};
