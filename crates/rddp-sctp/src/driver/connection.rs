//! One DDP/SCTP association: the socket and the sans-IO adaptation, shaped like an
//! MPA connection (a DDP stream per session; segments sent and fed by the driver).
//! Every DATA chunk goes out unordered (U=1) with PPID 16 or 17 (RFC 5043).
//!
//! Receive is header-first where SCTP already said how long the message is
//! (`SCTP_RECVNXTINFO`, told with the message before it): the DDP-SSN and the
//! DDP header are read, the session's upper layer decides where the payload
//! goes, and the payload is read from usrsctp straight there (docs/data-path.md,
//! like MPA's direct receive). Where the library hands a message over as its
//! mbuf chain (`usrsctp_ffi::Socket::recv_chain`) every message is taken that
//! way without waiting, its length known before any octet is copied, and its
//! payload copied from the chain straight into place. Otherwise a message
//! whose length is not known yet (the first after a pause) is read whole
//! into the connection's buffer.
//!
//! Transmit gathers: a segment's DDP-SSN and DDP header and its payload, read
//! where it lies (a region lease), leave as one message of two buffers
//! ([`Socket::send_gather`]), with no user-space copy (docs/data-path.md).

use super::DriverError;
use crate::adaptation::{Adaptation, AssociationError, Config, Event, OutChunk};
use bytes::Bytes;
use rddp_proto::ddp::{DdpStream, Payload};
use rddp_proto::mem::MemoryTable;
use rddp_wire::DdpControl;
use rddp_wire::ddp::UNTAGGED_HDR_LEN;
use rddp_wire::sctp::{PPID_DDP_SEGMENT, SSN_LEN};
use std::time::{Duration, Instant};
use usrsctp_ffi::sys::{SCTP_COMM_LOST, SCTP_SHUTDOWN_COMP};
use usrsctp_ffi::{NextInfo, Notification, RecvInfo, Socket};

/// Largest message the driver accepts from the peer (the peer's fragmentation point
/// may differ from ours, but never beyond this); anything bigger aborts.
const RECV_BUF: usize = 64 * 1024;

/// What a capture (`--pcap`) is shown of the association's messages: each is one
/// whole DATA chunk on the wire (RFC 5043). Called on the driver's thread.
pub trait ChunkTap: Send + std::fmt::Debug {
    /// A message handed to SCTP on stream `sid` with `ppid`.
    fn sent(&mut self, sid: u16, ppid: u32, payload: &[u8]);
    /// A message received, with its TSN and stream as SCTP reported them.
    fn received(&mut self, tsn: u32, sid: u16, ppid: u32, payload: &[u8]);
}

/// Counters of the association.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChunkStats {
    /// DATA chunks (DDP segments and Session Control) handed to SCTP.
    pub chunks_sent: u64,
    /// DATA chunks received from SCTP.
    pub chunks_received: u64,
}

/// One verified DDP/SCTP association: its socket and its [`Adaptation`]; made by
/// [`super::Listener::accept`] or [`super::connect`].
#[derive(Debug)]
pub struct SctpConnection {
    sock: Socket,
    ad: Adaptation,
    buf: Vec<u8>,
    /// A chunk the send buffer had no room for; it leaves first next time.
    blocked: Option<OutChunk>,
    fragmentation_point: usize,
    stats: ChunkStats,
    /// Every chunk sent, kept only when recording (wire checks).
    record: Option<Vec<OutChunk>>,
    /// A capture of every message sent and received (`--pcap`).
    tap: Option<Box<dyn ChunkTap>>,
    closed: bool,
    /// When the path (fragmentation point) was last read.
    path_checked: Instant,
    /// The next message, as SCTP described it with the last one read.
    next: Option<NextInfo>,
}

/// How often `flush` re-reads the fragmentation point (RFC 5043: DDP learns every
/// MULPDU change; usrsctp sends no notification for a path MTU change).
const PATH_CHECK: Duration = Duration::from_millis(100);

impl SctpConnection {
    pub(crate) fn new(sock: Socket, cfg: Config, fragmentation_point: usize) -> Self {
        // The next message's length with each receive (header-first receive);
        // without it every message is read whole.
        let _ = sock.set_recv_nxtinfo(true);
        Self {
            sock,
            ad: Adaptation::new(cfg, fragmentation_point),
            buf: vec![0; RECV_BUF],
            blocked: None,
            fragmentation_point,
            stats: ChunkStats::default(),
            record: None,
            tap: None,
            closed: false,
            path_checked: Instant::now(),
            next: None,
        }
    }

    /// Call `wake` whenever usrsctp signals the socket (data, send space, an
    /// error): an event loop's wake. See [`usrsctp_ffi::Socket::set_wake`].
    pub fn set_wake(&self, wake: Option<usrsctp_ffi::Wake>) {
        self.sock.set_wake(wake);
    }

    /// Whether a chunk waits for send space (the send buffer was full).
    pub fn is_blocked(&self) -> bool {
        self.blocked.is_some()
    }

    /// Sessions: initiate, accept, reject, terminate, and their DDP streams.
    pub fn adaptation(&mut self) -> &mut Adaptation {
        &mut self.ad
    }

    /// The DDP stream of the session on stream `sid`.
    pub fn stream(&mut self, sid: u16) -> Option<&mut DdpStream> {
        self.ad.stream(sid)
    }

    /// The oldest session event not yet taken, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.ad.poll_event()
    }

    /// Whether [`Self::poll_event`] has something.
    pub fn has_event(&self) -> bool {
        self.ad.has_event()
    }

    /// SCTP's fragmentation point in octets as last read: the largest user message
    /// that leaves unfragmented.
    pub fn fragmentation_point(&self) -> usize {
        self.fragmentation_point
    }

    /// Chunks sent and received so far.
    pub fn stats(&self) -> ChunkStats {
        self.stats
    }

    /// Keep a copy of every chunk sent from now on (for wire checks).
    pub fn record_sent(&mut self) {
        self.record = Some(Vec::new());
    }

    /// Show every message sent and received from now on to `tap`.
    pub fn set_tap(&mut self, tap: Box<dyn ChunkTap>) {
        self.tap = Some(tap);
    }

    /// The peer's primary address and SCTP port, as SCTP reports it (IPv4).
    pub fn peer_addr(&self) -> Option<std::net::SocketAddrV4> {
        self.sock.status().ok()?.primary
    }

    /// The chunks kept since [`Self::record_sent`], and stop keeping them.
    pub fn take_recorded(&mut self) -> Vec<OutChunk> {
        self.record.take().unwrap_or_default()
    }

    /// Re-read the path: a new fragmentation point becomes DDP's new MULPDU.
    pub fn refresh_path(&mut self) -> Result<(), DriverError> {
        let fp = self.sock.status()?.fragmentation_point as usize;
        if fp != self.fragmentation_point {
            self.fragmentation_point = fp;
            self.ad.set_fragmentation_point(fp);
        }
        Ok(())
    }

    /// Hand every ready chunk to SCTP without waiting; returns whether all left
    /// (false: the send buffer is full, call again after `poll`).
    pub fn flush(&mut self) -> Result<bool, DriverError> {
        if self.closed {
            return Err(DriverError::Closed);
        }
        if self.path_checked.elapsed() >= PATH_CHECK {
            self.path_checked = Instant::now();
            // EINVAL here means the association is gone (`SCTP_STATUS`
            // fails with EINVAL once the peer has aborted);
            // the next receive reports it.
            let _ = self.refresh_path();
        }
        loop {
            // A blocked chunk was shown to the tap when it was first tried.
            let (mut c, shown) = match self.blocked.take() {
                Some(c) => (c, true),
                None => match self.ad.poll_transmit() {
                    Some(c) => (c, false),
                    None => return Ok(true),
                },
            };
            if !shown && !c.body.is_empty() && !self.sock.can_gather() {
                // usrsctp_sendv takes one buffer: the payload's one user-space
                // copy (counted), made once and kept if the send is refused.
                self.ad.count_copied(c.sid, 0, c.body.leased_len());
                c = OutChunk::whole(c.sid, c.ppid, c.to_vec());
            }
            // Shown before it leaves: an answer shown by a peer in this process
            // must come after it in a capture.
            if let (false, Some(t)) = (shown, self.tap.as_mut()) {
                // A capture, not the data path: whole octets, not counted, and
                // the region is not locked while the tap writes.
                let whole = c.body.with(|b| [&c.head[..], b].concat());
                t.sent(c.sid, c.ppid, &whole);
            }
            // Unordered always; one chunk per message, never above the fragmentation
            // point (the adaptation capped the segment). The body is gathered
            // from where it lies: a lease's region is locked only for this
            // non-blocking call, during which usrsctp copies it into its buffers.
            let sent = if c.body.is_empty() {
                self.sock.send(c.sid, c.ppid, true, &c.head)
            } else {
                let sock = &self.sock;
                c.body
                    .with(|b| sock.send_gather(c.sid, c.ppid, true, &[&c.head, b]))
            };
            match sent {
                Ok(_) => {
                    self.stats.chunks_sent += 1;
                    if c.ppid == PPID_DDP_SEGMENT {
                        self.ad.chunk_accepted(c.sid);
                    }
                    if let Some(r) = self.record.as_mut() {
                        r.push(snapshot(c));
                    }
                }
                Err(e) if is_would_block(&e) => {
                    self.blocked = Some(c);
                    return Ok(false);
                }
                Err(e) => return Err(self.lost(e.into())),
            }
        }
    }

    /// Receive one message or notification (waiting up to `timeout`) and feed it to
    /// the adaptation. Returns false on timeout.
    pub fn poll(&mut self, mem: &MemoryTable, timeout: Duration) -> Result<bool, DriverError> {
        if self.closed {
            return Err(DriverError::Closed);
        }
        if self.tap.is_none() && timeout.is_zero() && self.sock.can_recv_chain() {
            return self.poll_chain(mem);
        }
        if let Some(n) = self.next.take()
            && self.tap.is_none()
            && self.direct_fits(&n)
        {
            return self.poll_direct(mem, n.len);
        }
        let got = match self.sock.recv_part_wait(&mut self.buf, timeout) {
            Ok(p) => p,
            Err(usrsctp_ffi::Error::Timeout(_)) => return Ok(false),
            Err(e) => return Err(self.lost(e.into())),
        };
        self.next = got.next;
        if got.notification {
            return self.on_notification(got.len);
        }
        self.on_message(mem, got.len, got.info, got.eor)
    }

    /// Take the next message as usrsctp's mbuf chain (its length known before
    /// any octet is copied): a DDP segment's DDP-SSN and header are copied
    /// out here, the session's upper layer decides with the whole length
    /// where the payload goes (every check before any octet is placed, seed
    /// 000), and the payload is copied from the chain straight there, the
    /// one copy `usrsctp_recvv` would make. Anything else is copied whole
    /// into the buffer and taken as such.
    fn poll_chain(&mut self, mem: &MemoryTable) -> Result<bool, DriverError> {
        // What SCTP said of the next message no longer holds once this one is
        // taken (a waiting `poll` after this one must not trust it).
        self.next = None;
        let ch = match self.sock.recv_chain() {
            Ok(c) => c,
            Err(e) if is_would_block(&e) => return Ok(false),
            Err(e) => return Err(self.lost(e.into())),
        };
        let len = ch.len();
        if ch.notification() {
            let n = len.min(self.buf.len());
            // n <= len: the copy cannot fall short.
            let _ = ch.copy_to(0, &mut self.buf[..n]);
            return self.on_notification(n);
        }
        let info = ch.info();
        // The DDP-SSN and as much of the longest DDP header as there is.
        let mut head = [0u8; SSN_LEN + UNTAGGED_HDR_LEN];
        let have = len.min(head.len());
        // have <= len: the copy cannot fall short.
        let _ = ch.copy_to(0, &mut head[..have]);
        let hlen = (have > SSN_LEN).then(|| DdpControl(head[SSN_LEN]).header_len());
        let direct = hlen.filter(|&h| {
            ch.eor()
                && info.unordered
                && info.ppid == PPID_DDP_SEGMENT
                && len >= SSN_LEN + h
                && len <= SSN_LEN + self.ad.max_recv_segment()
        });
        let Some(hlen) = direct else {
            // Whole into the buffer: `on_message` refuses what does not fit.
            let n = len.min(self.buf.len());
            // n <= len: the copy cannot fall short.
            let _ = ch.copy_to(0, &mut self.buf[..n]);
            let complete = ch.eor() && n == len;
            return self.on_message(mem, n, info, complete);
        };
        self.stats.chunks_received += 1;
        let hdr = &head[..SSN_LEN + hlen];
        let mut off = hdr.len();
        let mut fill = |dst: &mut [u8]| {
            let ok = ch.copy_to(off, dst);
            off += dst.len();
            ok
        };
        let payload_len = len - hdr.len();
        let r = self
            .ad
            .on_chunk_direct(mem, info.sid, hdr, payload_len, &mut fill);
        if let Err(e) = r {
            return Err(self.fail(e));
        }
        Ok(true)
    }

    /// Whether the next message can be read header-first: a whole unordered
    /// DDP segment (PPID 16) with room for the longest DDP header, not above
    /// the largest segment (anything else is read whole and checked as such).
    fn direct_fits(&self, n: &NextInfo) -> bool {
        n.complete
            && !n.notification
            && n.unordered
            && n.ppid == PPID_DDP_SEGMENT
            && n.len >= SSN_LEN + UNTAGGED_HDR_LEN
            && n.len <= SSN_LEN + self.ad.max_recv_segment()
    }

    /// Read the next message, of `len` octets, header-first: its DDP-SSN and
    /// DDP header here, its payload where the session's upper layer places it.
    fn poll_direct(&mut self, mem: &MemoryTable, len: usize) -> Result<bool, DriverError> {
        // The DDP-SSN and the longest DDP header in one read: a tagged
        // segment's (14-octet header) first 4 payload octets come with it.
        let mut head = [0u8; SSN_LEN + UNTAGGED_HDR_LEN];
        let p = match self.sock.recv_part(&mut head) {
            Ok(p) => p,
            Err(e) if is_would_block(&e) => return Ok(false),
            Err(e) => return Err(self.lost(e.into())),
        };
        self.next = p.next;
        let mut eor = p.eor;
        let expected = !p.notification
            && p.len == head.len()
            && eor == (len == head.len())
            && p.info.ppid == PPID_DDP_SEGMENT
            && p.info.unordered;
        if !expected {
            // Not what SCTP announced: read the rest and take it whole.
            self.buf[..p.len].copy_from_slice(&head[..p.len]);
            let (total, eor) = self.read_rest(p.len, eor)?;
            if p.notification {
                return self.on_notification(total);
            }
            return self.on_message(mem, total, p.info, eor);
        }
        let hlen = DdpControl(head[SSN_LEN]).header_len();
        let payload_len = len - SSN_LEN - hlen;
        self.stats.chunks_received += 1;
        let (hdr, mut pre) = head.split_at(SSN_LEN + hlen);
        let pre_len = pre.len();
        let mut next = None;
        let mut failed = None;
        let sock = &self.sock;
        let mut fill = |dst: &mut [u8]| -> bool {
            // The payload octets read with the header first (copied, counted).
            let k = pre.len().min(dst.len());
            dst[..k].copy_from_slice(&pre[..k]);
            pre = &pre[k..];
            let mut off = k;
            while off < dst.len() {
                if eor {
                    return false; // the message ended early
                }
                match sock.recv_part(&mut dst[off..]) {
                    Ok(q) if !q.notification && q.len > 0 => {
                        off += q.len;
                        next = q.next.or(next);
                        eor = q.eor;
                    }
                    Ok(_) => return false,
                    Err(e) => {
                        failed = Some(e);
                        return false;
                    }
                }
            }
            true
        };
        let r = self
            .ad
            .on_chunk_direct(mem, p.info.sid, hdr, payload_len, &mut fill);
        self.ad.count_copied(p.info.sid, pre_len - pre.len(), 0);
        if next.is_some() {
            self.next = next;
        }
        if let Some(e) = failed {
            return Err(self.lost(e.into()));
        }
        if let Err(e) = r {
            return Err(self.fail(e));
        }
        if !eor {
            // A refused segment's payload (or what its reader left): drained.
            self.read_rest(0, false)?;
        }
        Ok(true)
    }

    /// Read the rest of the current message into the buffer after its first
    /// `have` octets (until MSG_EOR or the buffer is full); its length and
    /// whether it ended.
    fn read_rest(&mut self, mut have: usize, mut eor: bool) -> Result<(usize, bool), DriverError> {
        while !eor && have < self.buf.len() {
            match self.sock.recv_part(&mut self.buf[have..]) {
                Ok(q) if q.len > 0 || q.eor => {
                    have += q.len;
                    eor = q.eor;
                    if q.next.is_some() {
                        self.next = q.next;
                    }
                }
                Ok(_) => break,
                Err(e) if is_would_block(&e) => break,
                Err(e) => return Err(self.lost(e.into())),
            }
        }
        Ok((have, eor))
    }

    fn on_notification(&mut self, len: usize) -> Result<bool, DriverError> {
        let n = Notification::parse(&self.buf[..len]).unwrap_or(Notification::Other { kind: 0 });
        match n {
            Notification::SenderDry => self.ad.on_sender_dry(),
            Notification::AssocChange { state, .. }
                if state == SCTP_COMM_LOST || state == SCTP_SHUTDOWN_COMP =>
            {
                return Err(self.lost(DriverError::Closed));
            }
            Notification::Shutdown => {
                return Err(self.lost(DriverError::Closed));
            }
            _ => {}
        }
        Ok(true)
    }

    /// A message read whole into the buffer (`complete`: it fit).
    fn on_message(
        &mut self,
        mem: &MemoryTable,
        len: usize,
        info: RecvInfo,
        complete: bool,
    ) -> Result<bool, DriverError> {
        self.stats.chunks_received += 1;
        if let Some(t) = self.tap.as_mut() {
            t.received(info.tsn, info.sid, info.ppid, &self.buf[..len]);
        }
        let bad = if !complete {
            Some(format!("message larger than {RECV_BUF} octets"))
        } else if !info.unordered {
            Some("an ordered DATA chunk (non-DDP traffic)".to_string())
        } else {
            None
        };
        if let Some(why) = bad {
            return Err(self.fail(AssociationError(why)));
        }
        let r = self.ad.on_chunk(mem, info.sid, info.ppid, &self.buf[..len]);
        if let Err(e) = r {
            return Err(self.fail(e));
        }
        Ok(true)
    }

    /// Flush and poll until `done` holds or `timeout` passes.
    pub fn run_until(
        &mut self,
        mem: &MemoryTable,
        timeout: Duration,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> Result<(), DriverError> {
        let deadline = Instant::now() + timeout;
        loop {
            let all_out = self.flush()?;
            if all_out && done(self) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(DriverError::Setup("timed out".into()));
            }
            let wait = if all_out {
                Duration::from_millis(50)
            } else {
                Duration::from_millis(1)
            };
            self.poll(mem, wait.min(deadline - now))?;
        }
    }

    /// Graceful SCTP SHUTDOWN of the association.
    pub fn shutdown(&mut self) -> Result<(), DriverError> {
        self.closed = true;
        self.sock.shutdown()?;
        Ok(())
    }

    /// Association error: ABORT, and every session closes without a Terminate on
    /// each stream (RFC 5043).
    fn fail(&mut self, e: AssociationError) -> DriverError {
        tracing::warn!("SCTP: {e}; ABORT sent, every session on the association ends");
        let _ = self.sock.abort();
        self.lost(e.into())
    }

    fn lost(&mut self, e: DriverError) -> DriverError {
        if !self.closed {
            tracing::info!("SCTP: the association ended: {e}");
        }
        self.closed = true;
        self.ad.on_association_lost();
        e
    }
}

/// A sent chunk as it left, for the record (wire checks): a lease's octets
/// are copied now (the region may change later), not counted (not the data
/// path).
fn snapshot(c: OutChunk) -> OutChunk {
    match c.body {
        Payload::Region { .. } => OutChunk {
            body: c.body.with(Bytes::copy_from_slice).into(),
            ..c
        },
        Payload::Bytes(_) => c,
    }
}

fn is_would_block(e: &usrsctp_ffi::Error) -> bool {
    matches!(e, usrsctp_ffi::Error::Io { err, .. }
        if err.kind() == std::io::ErrorKind::WouldBlock)
}
