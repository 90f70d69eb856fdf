//! The receive half of an MPA queue pair on the event loop: rddp-mpa's
//! header-first [`FpduReceiver`] (CRC, Markers, the RFC 6581 RTR check) over the
//! non-blocking socket, RDMAP deciding from each DDP header where the payload
//! goes, so the payload is read from the socket straight into its region or
//! receive buffer (`crate::qp`'s task drives it; docs/data-path.md, "Receive").
//!
//! Memory: the receiver itself is a few hundred octets; the buffer for batches
//! of small FPDUs is the I/O thread's, shared by its connections, so an
//! idle connection holds no buffer at all.

use rddp_mpa::Rtr;
use rddp_mpa::fpdu::{FpduReceiver, Peek, RxConfig};
use rddp_mpa::pcap::TcpEndpoint;
use std::io::{self, IoSliceMut, Read};
use std::net::TcpStream;

/// A queue pair's socket as the receiver reads it, each call that returned
/// octets counted in `reads` (`QpStats::llp_reads`: the connection's own
/// count, under its queue pair's lock, where a process-wide atomic cost
/// every message a locked instruction).
pub(crate) struct Counted<'a> {
    pub sock: &'a TcpStream,
    pub reads: &'a mut u64,
}

impl Counted<'_> {
    fn counted(&mut self, r: io::Result<usize>) -> io::Result<usize> {
        if matches!(r, Ok(n) if n > 0) {
            *self.reads += 1;
        }
        r
    }
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.sock.read(buf);
        self.counted(r)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        let r = self.sock.read_vectored(bufs);
        self.counted(r)
    }
}

impl Peek for Counted<'_> {
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.sock.peek(buf);
        self.counted(r)
    }
}

pub(crate) struct MpaIn {
    pub rx: FpduReceiver,
    /// The gate is still closed (a responder before the initiator's first FPDU,
    /// RFC 5044 §7.1.2).
    pub gate_closed: bool,
    /// This connection in the process's capture (`--pcap`).
    pub wire: Option<TcpEndpoint>,
}

impl MpaIn {
    /// At the start of FPDU mode; `leftover`: octets setup read past the
    /// Reply (the first FPDU octets), `expect_rtr`: a responder's agreed RTR.
    pub(crate) fn new(
        crc: bool,
        markers: bool,
        max_ulpdu: usize,
        leftover: Vec<u8>,
        expect_rtr: Option<Rtr>,
        gate_closed: bool,
        wire: Option<TcpEndpoint>,
    ) -> Self {
        let cfg = RxConfig {
            crc,
            markers,
            max_ulpdu,
            expect_rtr,
        };
        Self {
            rx: FpduReceiver::new(cfg, leftover),
            gate_closed,
            wire,
        }
    }
}
