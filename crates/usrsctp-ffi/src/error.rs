//! Errors of the usrsctp layer.

use crate::api::LoadError;
use crate::stack::Encapsulation;

/// Why a call of this crate failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libusrsctp is not installed (the message names the package).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// [`crate::stack::init`] found the process's one stack started with
    /// another encapsulation.
    #[error("usrsctp stack already runs with {running:?}, {wanted:?} requested (one per process)")]
    StackMismatch {
        /// The encapsulation the stack runs with.
        running: Encapsulation,
        /// The one asked for.
        wanted: Encapsulation,
    },
    /// A socket or address was asked for before [`crate::stack::init`].
    #[error("usrsctp stack not started (call stack::init first)")]
    NotInitialized,
    /// A usrsctp call failed. A non-blocking call that would block comes back
    /// as this with `EWOULDBLOCK` (or `EINPROGRESS`); a receive at the end of
    /// the peer's data as [`std::io::ErrorKind::UnexpectedEof`].
    #[error("usrsctp {op}: {err}")]
    Io {
        /// The call that failed (`"sendv"`, `"sctp_sorecvmsg"`, ...).
        op: &'static str,
        /// Its errno.
        err: std::io::Error,
    },
    /// A wait of [`crate::Socket`] (accept, receive, send buffer space) ran
    /// out of time; the string names what was waited for.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
}

impl Error {
    /// The last OS error (usrsctp sets errno) for operation `op`.
    pub(crate) fn last(op: &'static str) -> Self {
        Self::Io {
            op,
            err: std::io::Error::last_os_error(),
        }
    }

    pub(crate) fn would_block(&self) -> bool {
        matches!(self, Self::Io { err, .. }
            if matches!(err.raw_os_error(), Some(libc::EWOULDBLOCK) | Some(libc::EINPROGRESS)))
    }
}
