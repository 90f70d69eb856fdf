//! Errors of the usrsctp layer.

use crate::api::LoadError;
use crate::stack::Encapsulation;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libusrsctp is not installed (the message names the package).
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("usrsctp stack already runs with {running:?}, {wanted:?} requested (one per process)")]
    StackMismatch {
        running: Encapsulation,
        wanted: Encapsulation,
    },
    #[error("usrsctp stack not started (call stack::init first)")]
    NotInitialized,
    #[error("usrsctp {op}: {err}")]
    Io {
        op: &'static str,
        err: std::io::Error,
    },
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
