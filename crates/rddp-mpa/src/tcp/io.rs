//! Socket helpers: whole-FPDU vectored writes and deadline-bounded reads.

use crate::fpdu::OutFpdu;
use crate::pcap::Tap;
use crate::setup::Role;
use std::io::{self, IoSlice, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

/// Write every part of `f` with `writev`, no copy of the payload; record the
/// octets in `tap` (a copy, for tests) if there is one.
pub fn write_fpdu(
    sock: &mut TcpStream,
    f: &OutFpdu,
    tap: Option<&Tap>,
    role: Role,
) -> io::Result<()> {
    // Record first: a peer may answer (and record) before our write returns.
    if let Some(t) = tap {
        t.record(role, f.to_vec());
    }
    let mut slices: Vec<IoSlice<'_>> = f.parts.iter().map(|p| IoSlice::new(p)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = sock.write_vectored(rest)?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut rest, n);
    }
    Ok(())
}

/// Write a setup frame (Request/Reply).
pub(crate) fn write_frame(
    sock: &mut TcpStream,
    b: &[u8],
    tap: Option<&Tap>,
    role: Role,
) -> io::Result<()> {
    if let Some(t) = tap {
        t.record(role, b.to_vec());
    }
    sock.write_all(b)
}

/// Read once, waiting at most until `deadline` (`None`: wait forever). Returns
/// `Ok(None)` when the deadline passed.
pub(crate) fn read_until(
    sock: &mut TcpStream,
    buf: &mut [u8],
    deadline: Option<Instant>,
) -> io::Result<Option<usize>> {
    let wait = match deadline {
        None => None,
        Some(d) => match d.checked_duration_since(Instant::now()) {
            Some(w) if !w.is_zero() => Some(w),
            _ => return Ok(None),
        },
    };
    sock.set_read_timeout(wait)?;
    match sock.read(buf) {
        Ok(n) => Ok(Some(n)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Ok(None)
        }
        Err(e) if e.kind() == io::ErrorKind::Interrupted => read_until(sock, buf, deadline),
        Err(e) => Err(e),
    }
}
