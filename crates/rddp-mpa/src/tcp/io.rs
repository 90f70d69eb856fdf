//! Socket helpers: whole-FPDU vectored writes, setup frames.

use crate::fpdu::{FpduLayout, OutFpdu, Piece};
use crate::pcap::Tap;
use crate::setup::Role;
use std::io::{self, IoSlice, Write};
use std::net::TcpStream;

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

/// Write as much of `layout` (over `payload`) as the socket takes now, without
/// waiting; returns the octets written (fewer than `layout.len()` when the
/// socket's buffer is full). The caller may hold a lock meanwhile: this never
/// blocks.
pub fn try_write_layout(
    sock: &TcpStream,
    layout: &FpduLayout,
    payload: &[u8],
) -> io::Result<usize> {
    let mut slices = layout.slices(payload);
    let mut rest = &mut slices[..];
    let sock = socket2::SockRef::from(sock);
    let mut done = 0;
    while !rest.is_empty() {
        match sock.send_vectored_with_flags(rest, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                done += n;
                IoSlice::advance_slices(&mut rest, n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// The octets of `layout` (over `payload`) from `from` on, copied, and how many
/// of them are payload (what a caller that could not write them at once keeps).
pub fn layout_rest(layout: &FpduLayout, payload: &[u8], from: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(layout.len().saturating_sub(from));
    let (mut at, mut of_payload) = (0, 0);
    for p in &layout.pieces {
        let (b, is_payload): (&[u8], bool) = match p {
            Piece::Own(b) => (b, false),
            Piece::Payload(r) => (&payload[r.clone()], true),
        };
        let skip = from.saturating_sub(at).min(b.len());
        out.extend_from_slice(&b[skip..]);
        if is_payload {
            of_payload += b.len() - skip;
        }
        at += b.len();
    }
    (out, of_payload)
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
