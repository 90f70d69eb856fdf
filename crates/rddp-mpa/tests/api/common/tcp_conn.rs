//! [`TcpConn`]: the test driver [`RdmapConn`] on a blocking `TcpStream`, set up
//! by the product's `connect_raw` and `MpaListener::accept_raw` ([`connect`],
//! [`RdmapAccept`]). FPDUs are written whole with `write_fpdu` (payload
//! slices straight from their `Bytes`); the receiver reads with the socket
//! non-blocking for each run, payloads straight into place, so a completion
//! never waits behind a blocked read. Not a product path: the verbs queue
//! pair runs FPDU mode on the event loop.

use super::rdmap_conn::RdmapConn;
use rddp_mpa::pcap::Tap;
use rddp_mpa::tcp::{effective_mss, write_fpdu};
use rddp_mpa::{MpaError, MpaListener, MpaOptions, Negotiated, PeerRequest, Role, connect_raw};
use rddp_proto::mem::MemoryTable;
use rddp_proto::rdmap::{Completion, WorkRequest};
use std::io::{ErrorKind, Read};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Work requests between two reads of TCP_MAXSEG.
const EMSS_EVERY: u32 = 64;
/// How long a closing side keeps reading so that its close does not turn into a
/// reset that could destroy the Terminate it just sent.
const LINGER: Duration = Duration::from_millis(200);

/// An MPA connection over a blocking TCP socket, in RDMAP's vocabulary: post
/// work requests, poll completions.
#[derive(Debug)]
pub(crate) struct TcpConn {
    sock: TcpStream,
    pub conn: RdmapConn,
    tap: Option<Tap>,
    shut: bool,
    /// Re-read TCP_MAXSEG now and then (the caller did not fix the EMSS).
    emss_auto: bool,
    posts: u32,
    /// A responder in peer-to-peer mode: the RTR must come by then
    /// (`MpaOptions::request_timeout`, RFC 6581).
    rtr_deadline: Option<Instant>,
}

impl TcpConn {
    fn new(
        sock: TcpStream,
        neg: Negotiated,
        opts: &MpaOptions,
        leftover: Vec<u8>,
    ) -> Result<Self, MpaError> {
        let emss = opts.emss.unwrap_or_else(|| effective_mss(&sock));
        let rtr_wait = neg.role == Role::Responder && neg.rtr.is_some();
        let mut c = Self {
            sock,
            conn: RdmapConn::new(neg, emss, leftover)?,
            tap: opts.tap.clone(),
            shut: false,
            emss_auto: opts.emss.is_none(),
            posts: 0,
            rtr_deadline: rtr_wait.then(|| Instant::now() + opts.request_timeout),
        };
        c.flush()?;
        Ok(c)
    }

    pub(crate) fn negotiated(&self) -> &Negotiated {
        self.conn.negotiated()
    }

    pub(crate) fn peer_private_data(&self) -> &[u8] {
        &self.negotiated().peer_private_data
    }

    fn dead_error(&mut self) -> MpaError {
        self.conn.take_error().unwrap_or(MpaError::ConnectionLost)
    }

    /// Post `wr` and write what it produced (held while the responder waits
    /// for the initiator's first FPDU). Every 64th, re-read TCP_MAXSEG and on
    /// a change re-set MULPDU (RFC 5044 §4).
    pub(crate) fn post(&mut self, mem: &MemoryTable, wr: WorkRequest) -> Result<(), MpaError> {
        if self.conn.is_dead() {
            return Err(self.dead_error());
        }
        self.posts = self.posts.wrapping_add(1);
        if self.emss_auto && self.posts % EMSS_EVERY == 1 {
            let emss = effective_mss(&self.sock);
            if emss != self.conn.emss() {
                self.conn.set_emss(emss)?;
            }
        }
        self.conn.rdmap.post(mem, wr);
        self.flush()
    }

    /// A receive buffer of `len` octets for Sends.
    pub(crate) fn post_recv(&mut self, wr_id: u64, len: usize) -> Result<(), MpaError> {
        Ok(self.conn.rdmap.post_recv(wr_id, vec![0; len])?)
    }

    /// Write every FPDU ready; close the socket once the stream says so.
    fn flush(&mut self) -> Result<(), MpaError> {
        let role = self.negotiated().role;
        while let Some(f) = self.conn.poll_transmit() {
            if let Err(e) = write_fpdu(&mut self.sock, &f, self.tap.as_ref(), role) {
                self.conn.rdmap.on_llp_closed(false);
                return Err(e.into());
            }
        }
        if self.conn.rdmap.should_close() {
            self.shutdown();
        }
        Ok(())
    }

    /// FIN after the last FPDU, then read (and drop) until the peer closes or
    /// a short linger passes.
    fn shutdown(&mut self) {
        if std::mem::replace(&mut self.shut, true) {
            return;
        }
        let _ = self.sock.shutdown(Shutdown::Write);
        let end = Instant::now() + LINGER;
        let mut buf = [0u8; 4096];
        while self.wait_readable(Some(end)) && matches!(self.sock.read(&mut buf), Ok(n) if n > 0) {}
        let _ = self.sock.shutdown(Shutdown::Both);
    }

    /// The next completion, blocking. Errors: a Terminate sent or received,
    /// the connection ended, the responder's RTR did not come in time.
    pub(crate) fn poll(&mut self, mem: &MemoryTable) -> Result<Completion, MpaError> {
        self.poll_deadline(mem, None)?.ok_or(MpaError::Timeout)
    }

    /// As [`Self::poll`], giving up (`Ok(None)`) after `timeout`.
    pub(crate) fn poll_timeout(
        &mut self,
        mem: &MemoryTable,
        timeout: Duration,
    ) -> Result<Option<Completion>, MpaError> {
        self.poll_deadline(mem, Some(Instant::now() + timeout))
    }

    fn poll_deadline(
        &mut self,
        mem: &MemoryTable,
        deadline: Option<Instant>,
    ) -> Result<Option<Completion>, MpaError> {
        loop {
            self.flush()?;
            if let Some(c) = self.conn.rdmap.poll_completion() {
                return Ok(Some(c));
            }
            if self.conn.is_dead() {
                self.shutdown();
                return Err(self.dead_error());
            }
            let rtr = self.rtr_deadline.filter(|_| !self.conn.gate_open());
            let until = match (deadline, rtr) {
                (Some(d), Some(r)) => Some(d.min(r)),
                (d, r) => d.or(r),
            };
            if !self.wait_readable(until) {
                if rtr.is_some_and(|r| Instant::now() >= r) {
                    self.shutdown();
                    return Err(MpaError::Timeout);
                }
                return Ok(None);
            }
            // One run of the receiver, until the socket has nothing more.
            let mut sock = &self.sock;
            let _ = sock.set_nonblocking(true);
            let _ = self.conn.drive(mem, &mut sock);
            let _ = sock.set_nonblocking(false);
        }
    }

    /// Wait until the socket has octets (or its end, or an error) or
    /// `until` passes (`None`: forever); `false` when it passed.
    fn wait_readable(&self, until: Option<Instant>) -> bool {
        let wait = match until {
            None => None,
            Some(u) => match u.checked_duration_since(Instant::now()) {
                Some(w) if !w.is_zero() => Some(w),
                _ => return false,
            },
        };
        if self.sock.set_read_timeout(wait).is_err() {
            return true;
        }
        let peek = self.sock.peek(&mut [0u8; 1]);
        !peek.is_err_and(|e| matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
    }

    /// Graceful close (RFC 5040 §6): what was posted leaves, then FIN; waits
    /// briefly for the peer's FIN.
    pub(crate) fn close(mut self) -> Result<(), MpaError> {
        self.conn.rdmap.close();
        self.flush()?;
        assert!(self.conn.rdmap.poll_close(), "posted work still pending");
        self.shutdown();
        Ok(())
    }
}

/// Active open: `connect_raw`, then FPDU mode with the RTR sent if one was
/// agreed.
pub(crate) fn connect(addr: impl ToSocketAddrs, opts: MpaOptions) -> Result<TcpConn, MpaError> {
    let (sock, neg, leftover) = connect_raw(addr, &opts)?;
    TcpConn::new(sock, neg, &opts, leftover)
}

/// Passive open into the test driver, over `MpaListener::accept_raw`. In
/// peer-to-peer mode the RTR is waited for by the first [`TcpConn::poll`],
/// at most `request_timeout` from the accept: the receives the ULP posts
/// before then are in place for whatever follows the RTR.
pub(crate) trait RdmapAccept {
    /// Accept one connection with the listener's private data. A refused
    /// Request returns [`MpaError::Refused`].
    fn accept(&self) -> Result<TcpConn, MpaError>;
    /// As [`Self::accept`], `decide` answering the Request: `Ok(reply
    /// private data)` accepts, `Err(private data)` refuses with R=1.
    fn accept_with(
        &self,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<TcpConn, MpaError>;
}

impl RdmapAccept for MpaListener {
    fn accept(&self) -> Result<TcpConn, MpaError> {
        let pd = self.options().private_data.clone();
        self.accept_with(move |_| Ok(pd))
    }

    fn accept_with(
        &self,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<TcpConn, MpaError> {
        let (sock, _, neg, leftover) = self.accept_raw(decide)?;
        TcpConn::new(sock, neg, self.options(), leftover)
    }
}
