//! Non-blocking socket steps for setup on the event loop: a frame that may take
//! several writes, and one read that says `WouldBlock` instead of waiting.

use std::io::{self, Read, Write};
use std::net::TcpStream;

/// Octets to send (a Reply, a Request, a Terminate) and how far they got.
#[derive(Debug)]
pub(crate) struct Outbox {
    bytes: Vec<u8>,
    sent: usize,
}

impl Outbox {
    pub(super) fn new(bytes: Vec<u8>) -> Self {
        Self { bytes, sent: 0 }
    }

    /// Write what is left without blocking: `Ok(true)` once all of it is written.
    pub(super) fn flush(&mut self, mut sock: &TcpStream) -> io::Result<bool> {
        while self.sent < self.bytes.len() {
            match sock.write(&self.bytes[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// Read once without blocking: `Ok(None)` when nothing is there yet.
pub(crate) fn read_nb(mut sock: &TcpStream, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        match sock.read(buf) {
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
