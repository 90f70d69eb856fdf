//! Socket options that rddp sets and that neither socket2 nor rustix offers,
//! each one `setsockopt(2)` or `getsockopt(2)` call behind a safe function.
//!
//! Today that is `SO_RCVLOWAT`. Linux raises a TCP socket's receive buffer
//! (without locking it, so autotuning goes on from there) when the low-water
//! mark asks for more than it holds (`tcp_set_rcvlowat`, since Linux 4.18);
//! rddp-mpa uses that to start its connections with a receive window of one
//! burst (docs/journal.md, "The receive window").
//!
//! Why a crate of its own: the workspace forbids `unsafe` everywhere else
//! (usrsctp-ffi, the FFI over libusrsctp, is the other exception). The
//! invariants every call here keeps:
//!
//! * the descriptor is a [`BorrowedFd`], so it is open for the whole call;
//! * the option value is a live `c_int` on this function's stack, and the
//!   length passed is exactly `size_of::<c_int>()`; for a get, the kernel
//!   writes at most that many octets into it and says how many it wrote;
//! * nothing the kernel returns is trusted beyond an `int` it wrote in full
//!   (a shorter answer is an error).

#![warn(missing_docs)]

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Set `SO_RCVLOWAT` to `octets` (socket(7): the least the kernel gathers
/// before it reports the socket readable; 0 is taken as 1).
pub fn set_rcvlowat(fd: BorrowedFd<'_>, octets: i32) -> io::Result<()> {
    let v: libc::c_int = octets;
    // SAFETY: `fd` is open for the call (BorrowedFd); `&v` points to a live
    // c_int and the length is its size (the crate's invariants).
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&raw const v).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The socket's `SO_RCVLOWAT`.
pub fn rcvlowat(fd: BorrowedFd<'_>) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is open for the call; `&mut v` points to a live c_int and
    // `len` says its size, so the kernel writes within it (the invariants).
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&raw mut v).cast(),
            &raw mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != size_of::<libc::c_int>() {
        return Err(io::Error::other("SO_RCVLOWAT: a short answer"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    #[test]
    fn set_then_get() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert_eq!(rcvlowat(s.as_fd()).unwrap(), 1);
        set_rcvlowat(s.as_fd(), 4096).unwrap();
        assert_eq!(rcvlowat(s.as_fd()).unwrap(), 4096);
        set_rcvlowat(s.as_fd(), 1).unwrap();
        assert_eq!(rcvlowat(s.as_fd()).unwrap(), 1);
    }

    #[test]
    fn a_descriptor_that_is_no_socket_gives_the_kernels_error() {
        let f = std::fs::File::open("/dev/null").unwrap();
        let e = set_rcvlowat(f.as_fd(), 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTSOCK));
    }
}
