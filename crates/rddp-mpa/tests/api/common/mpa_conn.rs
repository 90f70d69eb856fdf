//! [`MpaConnection`]: the DDP-level test driver [`FpduConn`] on a blocking
//! `TcpStream`, with [`connect`] and [`DdpAccept`] to set one up over the
//! product's setup (`connect_raw`, `MpaListener::accept_raw`). Not a product
//! path: the verbs queue pair runs FPDU mode on the event loop.
//!
//! Copies on send: the FPDU's slices go out with `writev` (ULPDU_Length, header,
//! Markers, PAD and CRC are small owned pieces; payload slices point into the
//! message's `Bytes`), so the kernel copies payload straight from the ULP's buffer.
//!
//! Copies on receive: none (with or without Markers): the engine's
//! header-first receiver reads ULPDU_Length and the DDP header into scratch,
//! the DDP sink validates the segment from them, and the payload is read by
//! the kernel straight into its region or receive buffer; then PAD + CRC, the
//! CRC computed over the placed octets. A CRC failure leaves those octets
//! undefined (RFC 5044 §4): nothing is delivered, Terminate 2/0/0x02, close.
//! The setup's leftover octets go through a 256 KiB buffer and are copied
//! into place.

use super::fpdu_conn::FpduConn;
use bytes::Bytes;
use rddp_mpa::fpdu::Progress;
use rddp_mpa::pcap::Tap;
use rddp_mpa::tcp::{effective_mss, write_fpdu};
use rddp_mpa::{MpaError, MpaListener, MpaOptions, Negotiated, PeerRequest, connect_raw};
use rddp_proto::ddp::{Delivery, RecvBuffer};
use rddp_proto::mem::MemoryTable;
use std::io::{self, Read};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Octets per socket read.
const READ_BUF: usize = 256 * 1024;
/// Messages between two reads of TCP_MAXSEG.
const EMSS_EVERY: u32 = 64;
/// How long a closing side keeps reading so that its close does not turn into a
/// reset that could destroy the Terminate it just sent.
const LINGER: Duration = Duration::from_millis(200);

/// An MPA connection over a blocking TCP socket: an [`FpduConn`] and its
/// socket, for DDP-level users and tests (the verbs queue pairs run theirs on
/// the event loop instead).
#[derive(Debug)]
pub(crate) struct MpaConnection {
    pub(super) sock: TcpStream,
    pub(super) conn: FpduConn,
    pub(super) tap: Option<Tap>,
    /// Received octets not yet taken by the engine (after setup or an RTR).
    pub(super) pending: Vec<u8>,
    pub(super) rbuf: Vec<u8>,
    pub(super) shut: bool,
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
            emss_auto: opts.emss.is_none(),
            sends: 0,
        })
    }

    /// What connection setup agreed.
    pub(crate) fn negotiated(&self) -> &Negotiated {
        self.conn.negotiated()
    }

    /// The peer ULP's private data from its Request or Reply.
    pub(crate) fn peer_private_data(&self) -> &[u8] {
        &self.conn.negotiated().peer_private_data
    }

    /// The FPDU engine.
    pub(crate) fn engine(&self) -> &FpduConn {
        &self.conn
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
    pub(crate) fn send_tagged(
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
    pub(crate) fn send_untagged(
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
    pub(crate) fn post_recv(&mut self, qn: u32, buf: RecvBuffer) -> Result<(), MpaError> {
        Ok(self.conn.stream_mut().post_recv(qn, buf)?)
    }

    /// Write every FPDU the engine has ready; close the socket once it is dead.
    pub(crate) fn flush(&mut self) -> Result<(), MpaError> {
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
    pub(crate) fn recv(&mut self, mem: &MemoryTable) -> Result<Delivery, MpaError> {
        self.recv_deadline(mem, None)?.ok_or(MpaError::Timeout)
    }

    /// As [`Self::recv`], giving up (`Ok(None)`) after `timeout`.
    pub(crate) fn recv_timeout(
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
    pub(crate) fn close(mut self) -> Result<(), MpaError> {
        self.conn.stream_mut().close();
        self.flush()?;
        self.shutdown();
        Ok(())
    }
}

// The receive side: a thin driver over the engine's header-first receiver
// ([`FpduConn::drive`]): payloads are read from the socket straight into their
// region or receive buffer. Octets read before FPDU mode (the setup's
// leftover) go through `on_bytes` (copied into place, counted).
impl MpaConnection {
    /// Process `n` fresh octets in `rbuf` after whatever is pending.
    fn ingest(&mut self, mem: &MemoryTable, n: usize) {
        let rbuf = std::mem::take(&mut self.rbuf);
        if self.pending.is_empty() {
            self.process(mem, &rbuf[..n]);
        } else {
            let mut p = std::mem::take(&mut self.pending);
            p.extend_from_slice(&rbuf[..n]);
            self.process(mem, &p);
        }
        self.rbuf = rbuf;
    }

    fn drain_pending(&mut self, mem: &MemoryTable) {
        if !self.pending.is_empty() {
            let p = std::mem::take(&mut self.pending);
            self.process(mem, &p);
        }
    }

    /// Hand buffered octets to the engine. Before the responder has absorbed the
    /// RTR, `mem` is a scratch table: the engine stops right after it and the
    /// rest is kept for the ULP's table.
    fn process(&mut self, mem: &MemoryTable, data: &[u8]) {
        let used = self.conn.on_bytes(mem, data);
        if !self.conn.is_dead() {
            self.pending.extend_from_slice(&data[used..]);
        }
    }

    /// One read (bounded by `deadline`) and its processing. `Ok(false)`: timed
    /// out. The engine reads from the socket itself once the leftover is taken.
    fn read_step(&mut self, mem: &MemoryTable, deadline: Option<Instant>) -> io::Result<bool> {
        if !self.pending.is_empty() {
            return match read_until(&mut self.sock, &mut self.rbuf, deadline) {
                Ok(None) => Ok(false),
                Ok(Some(0)) => {
                    self.conn.on_llp_closed(true);
                    Ok(true)
                }
                Ok(Some(n)) => {
                    self.ingest(mem, n);
                    Ok(true)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
                Err(_) => {
                    self.conn.on_llp_closed(false);
                    Ok(true)
                }
            };
        }
        let wait = match deadline {
            None => None,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(w) if !w.is_zero() => Some(w),
                _ => return Ok(false),
            },
        };
        if self.sock.set_read_timeout(wait).is_err() {
            self.conn.on_llp_closed(false);
            return Ok(true);
        }
        // The region's own lock is held for each read into it: on this blocking
        // socket a peer stalling mid-payload holds that one region (the event
        // loop reads non-blocking: docs/data-path.md).
        match self.conn.drive(mem, &mut self.sock) {
            // A blocking socket "would block" only when its timeout passed.
            Ok(Progress::WouldBlock) => Ok(deadline.is_none_or(|d| Instant::now() < d)),
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => Ok(false),
            Err(_) => Ok(true),
        }
    }
}

/// Read once, waiting at most until `deadline` (`None`: wait forever). Returns
/// `Ok(None)` when the deadline passed.
fn read_until(
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

/// Active open: `connect_raw`, then FPDU mode with the RTR sent if one was
/// agreed.
pub(crate) fn connect(
    addr: impl ToSocketAddrs,
    opts: MpaOptions,
) -> Result<MpaConnection, MpaError> {
    let (sock, neg, leftover) = connect_raw(addr, &opts)?;
    let emss = opts.emss.unwrap_or_else(|| effective_mss(&sock));
    let conn = FpduConn::new(neg, emss)?;
    let mut c = MpaConnection::new(sock, conn, &opts, leftover)?;
    c.flush()?;
    Ok(c)
}

/// Passive open into the test driver, over `MpaListener::accept_raw`.
pub(crate) trait DdpAccept {
    /// Accept one connection (see `accept_raw`) with the listener's private
    /// data, and in peer-to-peer mode wait (`request_timeout` from this call)
    /// for the RTR. A refused Request returns [`MpaError::Refused`].
    fn accept(&self) -> Result<MpaConnection, MpaError>;
    /// As [`Self::accept`], `decide` answering the Request: `Ok(reply
    /// private data)` accepts, `Err(private data)` refuses with R=1.
    fn accept_with(
        &self,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<MpaConnection, MpaError>;
}

impl DdpAccept for MpaListener {
    fn accept(&self) -> Result<MpaConnection, MpaError> {
        let pd = self.options().private_data.clone();
        self.accept_with(move |_| Ok(pd))
    }

    fn accept_with(
        &self,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<MpaConnection, MpaError> {
        let opts = self.options().clone();
        let deadline = Some(Instant::now() + opts.request_timeout);
        let (sock, _, neg, leftover) = self.accept_raw(decide)?;
        let emss = opts.emss.unwrap_or_else(|| effective_mss(&sock));
        let conn = FpduConn::new(neg, emss)?;
        let mut c = MpaConnection::new(sock, conn, &opts, leftover)?;
        // The RTR is zero-length (Write) or lands in our own QN 1 buffer (Read):
        // no ULP region is touched, so an empty table serves until it is absorbed.
        let scratch = MemoryTable::new();
        c.wait_established(&scratch, deadline)?;
        Ok(c)
    }
}
