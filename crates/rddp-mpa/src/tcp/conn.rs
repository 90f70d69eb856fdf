//! [`MpaConnection`]: an [`FpduConn`] on a blocking `TcpStream`.
//!
//! Copies on send: the FPDU's slices go out with `writev` (ULPDU_Length, header,
//! Markers, PAD and CRC are small owned pieces; payload slices point into the
//! message's `Bytes`), so the kernel copies payload straight from the ULP's buffer.
//!
//! Copies on receive (direct placement on, with or without Markers): the engine's
//! header-first receiver reads ULPDU_Length and the DDP header into scratch, the
//! DDP sink validates the segment from them, and the payload is read by the
//! kernel straight into its region or receive buffer (kernel -> final place, no
//! user-space copy); then PAD + CRC, the CRC computed over the placed octets. A
//! CRC failure leaves those octets undefined (RFC 5044 §4): nothing is delivered,
//! Terminate 2/0/0x02, close. The setup's leftover octets, and every read with
//! direct placement off, go through a 256 KiB buffer and are copied into place.

use super::io::{read_until, write_fpdu};
use super::mss::effective_mss;
use crate::error::MpaError;
use crate::fpdu::FpduConn;
use crate::options::MpaOptions;
use crate::pcap::Tap;
use crate::setup::Negotiated;
use bytes::Bytes;
use rddp_proto::ddp::{DdpStream, Delivery, RecvBuffer};
use rddp_proto::mem::MemoryTable;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Octets per socket read.
pub(super) const READ_BUF: usize = 256 * 1024;
/// Messages between two reads of TCP_MAXSEG.
const EMSS_EVERY: u32 = 64;
/// How long a closing side keeps reading so that its close does not turn into a
/// reset that could destroy the Terminate it just sent.
const LINGER: Duration = Duration::from_millis(200);

/// An MPA connection over a blocking TCP socket: an [`FpduConn`] and its
/// socket, for DDP-level users and tests (the verbs queue pairs run theirs on
/// the event loop instead).
#[derive(Debug)]
pub struct MpaConnection {
    pub(super) sock: TcpStream,
    pub(super) conn: FpduConn,
    pub(super) tap: Option<Tap>,
    /// Received octets not yet taken by the engine (after setup or an RTR).
    pub(super) pending: Vec<u8>,
    pub(super) rbuf: Vec<u8>,
    pub(super) shut: bool,
    pub(super) direct: bool,
    /// Re-read TCP_MAXSEG now and then (the caller did not fix the EMSS).
    pub(super) emss_auto: bool,
    pub(super) sends: u32,
}

impl MpaConnection {
    pub(crate) fn new(
        sock: TcpStream,
        conn: FpduConn,
        opts: &MpaOptions,
        pending: Vec<u8>,
    ) -> Result<Self, MpaError> {
        sock.set_read_timeout(None)?;
        Ok(Self {
            sock,
            conn,
            tap: opts.tap.clone(),
            pending,
            rbuf: vec![0; READ_BUF],
            shut: false,
            direct: opts.direct_placement,
            emss_auto: opts.emss.is_none(),
            sends: 0,
        })
    }

    /// What connection setup agreed.
    pub fn negotiated(&self) -> &Negotiated {
        self.conn.negotiated()
    }

    /// The peer ULP's private data from its Request or Reply.
    pub fn peer_private_data(&self) -> &[u8] {
        &self.conn.negotiated().peer_private_data
    }

    /// The DDP stream.
    pub fn stream(&self) -> &DdpStream {
        self.conn.stream()
    }

    /// The DDP stream, to send, post receives and take deliveries.
    pub fn stream_mut(&mut self) -> &mut DdpStream {
        self.conn.stream_mut()
    }

    /// The FPDU engine.
    pub fn engine(&self) -> &FpduConn {
        &self.conn
    }

    /// The socket's local address.
    pub fn local_addr(&self) -> Result<SocketAddr, MpaError> {
        Ok(self.sock.local_addr()?)
    }

    /// Re-read TCP_MAXSEG and recompute MULPDU (RFC 5044 §4.5); returns the EMSS.
    pub fn refresh_emss(&mut self) -> Result<usize, MpaError> {
        let emss = effective_mss(&self.sock);
        self.conn.set_emss(emss)?;
        Ok(emss)
    }

    /// Set the EMSS by hand (tests, or a path MTU the caller knows).
    pub fn set_emss(&mut self, emss: usize) -> Result<(), MpaError> {
        self.conn.set_emss(emss)
    }

    /// Every 64th message, re-read TCP_MAXSEG; on a change, re-set MULPDU
    /// (RFC 5044 §4: MULPDU re-read when the EMSS changes).
    fn follow_emss(&mut self) -> Result<(), MpaError> {
        if self.emss_auto {
            self.sends = self.sends.wrapping_add(1);
            if self.sends % EMSS_EVERY == 1 {
                let emss = effective_mss(&self.sock);
                if emss != self.conn.emss() {
                    self.conn.set_emss(emss)?;
                }
            }
        }
        Ok(())
    }

    fn dead_error(&mut self) -> MpaError {
        self.conn.take_error().unwrap_or(MpaError::ConnectionLost)
    }

    /// A tagged message (RDMA Write / Read Response); written before returning
    /// unless the responder still waits for the initiator's first FPDU.
    pub fn send_tagged(
        &mut self,
        rsvd_ulp: u8,
        stag: u32,
        to: u64,
        payload: Bytes,
    ) -> Result<(), MpaError> {
        if self.conn.is_dead() {
            return Err(self.dead_error());
        }
        self.follow_emss()?;
        self.conn
            .stream_mut()
            .send_tagged(rsvd_ulp, stag, to, payload)?;
        self.flush()
    }

    /// An untagged message on `qn`; returns its MSN.
    pub fn send_untagged(
        &mut self,
        qn: u32,
        rsvd_ulp: [u8; 5],
        payload: Bytes,
    ) -> Result<u32, MpaError> {
        if self.conn.is_dead() {
            return Err(self.dead_error());
        }
        self.follow_emss()?;
        let msn = self
            .conn
            .stream_mut()
            .send_untagged(qn, rsvd_ulp, payload)?;
        self.flush()?;
        Ok(msn)
    }

    /// Post a receive buffer on untagged queue `qn`.
    pub fn post_recv(&mut self, qn: u32, buf: RecvBuffer) -> Result<(), MpaError> {
        Ok(self.conn.stream_mut().post_recv(qn, buf)?)
    }

    /// Write every FPDU the engine has ready; close the socket once it is dead.
    pub fn flush(&mut self) -> Result<(), MpaError> {
        while let Some(f) = self.conn.poll_transmit() {
            if let Err(e) = write_fpdu(
                &mut self.sock,
                &f,
                self.tap.as_ref(),
                self.conn.negotiated().role,
            ) {
                self.conn.on_llp_closed(false);
                return Err(e.into());
            }
        }
        if self.conn.wants_close() {
            self.shutdown();
        }
        Ok(())
    }

    /// Close after a fatal error: FIN after the last FPDU, then read (and drop)
    /// until the peer closes or a short linger passes.
    fn shutdown(&mut self) {
        if self.shut {
            return;
        }
        self.shut = true;
        let _ = self.sock.shutdown(Shutdown::Write);
        let end = Instant::now() + LINGER;
        while let Ok(Some(n)) = read_until(&mut self.sock, &mut self.rbuf, Some(end)) {
            if n == 0 {
                break;
            }
        }
        let _ = self.sock.shutdown(Shutdown::Both);
    }

    /// One read (bounded by `deadline`) and its processing. `Ok(false)`: timed out.
    fn step(&mut self, mem: &MemoryTable, deadline: Option<Instant>) -> Result<bool, MpaError> {
        if !self.read_step(mem, deadline)? {
            return Ok(false);
        }
        self.flush()?;
        Ok(true)
    }

    /// Responder: read until the RTR (or first FPDU) has been absorbed.
    pub(crate) fn wait_established(
        &mut self,
        mem: &MemoryTable,
        deadline: Option<Instant>,
    ) -> Result<(), MpaError> {
        self.drain_pending(mem);
        self.flush()?;
        while !self.conn.is_established() {
            if self.conn.is_dead() {
                self.shutdown();
                return Err(self.dead_error());
            }
            if !self.step(mem, deadline)? {
                self.shutdown();
                return Err(MpaError::Timeout);
            }
        }
        Ok(())
    }

    /// The next delivered message, blocking. Errors: a Terminate sent or received,
    /// or the connection ended.
    pub fn recv(&mut self, mem: &MemoryTable) -> Result<Delivery, MpaError> {
        self.recv_deadline(mem, None)?.ok_or(MpaError::Timeout)
    }

    /// As [`Self::recv`], giving up (`Ok(None)`) after `timeout`.
    pub fn recv_timeout(
        &mut self,
        mem: &MemoryTable,
        timeout: Duration,
    ) -> Result<Option<Delivery>, MpaError> {
        self.recv_deadline(mem, Some(Instant::now() + timeout))
    }

    fn recv_deadline(
        &mut self,
        mem: &MemoryTable,
        deadline: Option<Instant>,
    ) -> Result<Option<Delivery>, MpaError> {
        self.drain_pending(mem);
        self.flush()?;
        loop {
            if let Some(d) = self.conn.poll_delivery() {
                return Ok(Some(d));
            }
            if self.conn.is_dead() {
                self.flush()?;
                self.shutdown();
                return Err(self.dead_error());
            }
            if !self.step(mem, deadline)? {
                return Ok(None);
            }
        }
    }

    /// Graceful close: queued messages leave, then FIN; waits briefly for the
    /// peer's FIN.
    pub fn close(mut self) -> Result<(), MpaError> {
        self.conn.stream_mut().close();
        self.flush()?;
        self.shutdown();
        Ok(())
    }
}
