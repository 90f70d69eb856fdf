//! The transmit half of an MPA queue pair on the event loop: the DDP segments the
//! engine produced, framed as FPDUs (RFC 5044 §4) and written with non-blocking
//! vectored `sendmsg` calls by whichever thread holds the queue pair's lock (the
//! posting thread, or the loop's task when the socket became writable again).
//!
//! * Gathering: one `sendmsg` carries several FPDUs (at most [`GATHER_SEGMENTS`]
//!   segments, [`GATHER_OCTETS`] octets), their payloads straight from the owned
//!   octets or from ONE region's locked memory (a batch stops at a lease of another
//!   region, so a writer never holds two region locks and cannot deadlock with
//!   another queue pair's writer).
//! * The CRC of each FPDU is computed over the locked octets just before the write.
//! * Partial writes: the region's lock is never held while waiting. FPDUs of the
//!   batch that the socket did not start are rolled back (the encoder's stream
//!   offset is reset; they are laid out again, CRC and all, on the next write).
//!   The one FPDU the socket took part of keeps its lease and resumes from the
//!   octet where it stopped, the region locked again for that write. Its CRC is
//!   then computed over the octets actually sent: a running CRC over the part
//!   already written (fed from the locked octets as they went out) continues
//!   over the rest as the region holds it at the resumed write. So the CRC always
//!   matches the octets on the wire, and an application that changes a region
//!   under a Send or Write still posted (which verbs leaves undefined) gets that
//!   message's octets undefined, never a CRC error. No octet of a lease is copied
//!   (`QpStats::tx_copied_octets` stays 0). Exceptions, copied
//!   (counted where they are payload): the rest of an FPDU stopped inside its
//!   4-octet CRC, and with a capture (`--pcap`: the FPDU was recorded whole).
//! * A region over application memory (verbs' `ibv_reg_mr`) is never borrowed
//!   (rddp-appmem's invariants): each segment's own payload octets are copied
//!   out of it for the call (counted in `tx_copied_octets`), never the whole
//!   region.
//! * The responder sends nothing before the initiator's first FPDU (RFC 5044 §7.1.2):
//!   segments queue behind `gate_open`.

use super::{FpduLayout, Piece, PlainFpdu, layout_fpdu_into};
use crate::pcap::TcpEndpoint;
use crate::tcp::layout_rest;
use rddp_proto::ddp::{OutSegment, Payload};
use rddp_wire::crc::crc_wire_bytes;
use rddp_wire::ddp::UNTAGGED_HDR_LEN;
use rddp_wire::mpa::MPA_CRC_LEN as CRC_LEN;
use rddp_wire::{Crc32c, DdpHeader, FpduEncoder, Opcode, RdmapControl};
use std::cell::Cell;
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;

/// Most segments gathered into one `sendmsg` (each FPDU is 3 iovecs without
/// Markers, a few more with them; IOV_MAX is 1024).
const GATHER_SEGMENTS: usize = 64;

/// FPDUs of a call whose scratch is set up small (see `write_batch`).
const FEW_SEGMENTS: usize = 2;

/// Most octets gathered into one `sendmsg`.
const GATHER_OCTETS: usize = 1 << 20;

/// Most iovecs in one `sendmsg` (Linux's IOV_MAX; more fail with EMSGSIZE).
const MAX_IOVECS: usize = 1024;

/// Iovecs of a call laid out on the stack (3 an FPDU without Markers); more
/// (Markers) go in a vector.
const STACK_IOVECS: usize = 3 * GATHER_SEGMENTS;

/// Slices of the small array tried first: two FPDUs without Markers.
const FEW_IOVECS: usize = 3 * FEW_SEGMENTS;

/// Whether the socket takes more now (poll(2), no wait): as much room as
/// the loop's WRITABLE edge means (TCP: a third of the send buffer or so).
/// An error says yes: the write then reports it.
fn writable_now(sock: &TcpStream) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(sock, PollFlags::OUT)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&now)).map_or(true, |n| n > 0)
}

/// An FPDU the socket took part of.
enum Rest {
    /// Its remaining octets, copied, and how many of them are written.
    Owned(Vec<u8>, usize, Sent),
    /// Still a lease.
    Lease(Box<Lease>),
}

/// The segment, its layout, how many octets are written, and the running CRC
/// over them (as they were sent).
struct Lease {
    seg: OutSegment,
    layout: FpduLayout,
    written: usize,
    digest: Crc32c,
}

/// What the socket accepted whole: one segment.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// Octets of the DDP segment (header + payload).
    pub len: usize,
    /// Its L flag: the last segment of its message.
    pub last: bool,
    /// The last segment of a Read Response (frees its IRD slot).
    pub read_response: bool,
}

/// Queued output of one MPA connection, and its socket's write side.
pub struct MpaOut {
    sock: Arc<TcpStream>,
    enc: FpduEncoder,
    /// The responder may transmit (RFC 5044 §7.1.2); the initiator from the start.
    pub gate_open: bool,
    /// This connection in the process's capture (`--pcap`).
    wire: Option<TcpEndpoint>,
    queue: VecDeque<OutSegment>,
    /// The layouts of the last gathered call, reused (their allocations).
    layouts: Vec<FpduLayout>,
    /// The FPDU the socket took part of (written first next time).
    rest: Option<Rest>,
    /// The last write found the socket's buffer full.
    blocked: bool,
    /// A write failed: the connection is lost.
    pub failed: Option<io::Error>,
    /// Close the connection once the queue is written: abortive (after a
    /// Terminate) or graceful.
    pub close: Option<bool>,
    /// The socket was shut down for writing (abortive: after a Terminate).
    pub shut: Option<bool>,
    /// Octets the loop's task may still write in its current run (`None`: no
    /// limit, a posting or busy-polling thread writes).
    pub budget: Option<usize>,
    /// A write stopped at the run's budget with more to write and the socket
    /// not full: the task runs again after the thread's other ready tasks.
    pub yielded: bool,
    /// `sendmsg` calls made (`QpStats::llp_writes`): a count of this
    /// connection's, under its queue pair's lock, where a process-wide
    /// atomic cost every message a locked instruction.
    writes: Cell<u64>,
    /// Octets of leases copied (`QpStats::tx_copied_octets`; see the module
    /// doc for when).
    lease_copied: Cell<u64>,
    /// The octets of the segments of one call copied out of application
    /// memory, reused (its allocation).
    app_copies: Vec<u8>,
}

impl MpaOut {
    /// `sendmsg` calls made so far.
    pub fn writes(&self) -> u64 {
        self.writes.get()
    }

    /// Octets of region leases copied so far.
    pub fn lease_copied(&self) -> u64 {
        self.lease_copied.get()
    }

    /// One non-blocking vectored send (no SIGPIPE), counted.
    fn send_now(&self, slices: &[IoSlice<'_>]) -> io::Result<usize> {
        let s = socket2::SockRef::from(&*self.sock);
        self.writes.set(self.writes.get() + 1);
        loop {
            match s.send_vectored_with_flags(slices, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) {
                Ok(0) if !slices.iter().all(|s| s.is_empty()) => {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    /// The transmit side of the connection on `sock`, framing with `enc` (its
    /// CRC and Marker settings, as negotiated); `gate_open` false holds every
    /// segment until the initiator's first FPDU (RFC 5044 §7.1.2); `wire`
    /// records what is sent in the process's capture.
    pub fn new(
        sock: Arc<TcpStream>,
        enc: FpduEncoder,
        gate_open: bool,
        wire: Option<TcpEndpoint>,
    ) -> Self {
        Self {
            sock,
            enc,
            gate_open,
            wire,
            queue: VecDeque::new(),
            layouts: Vec::new(),
            rest: None,
            blocked: false,
            failed: None,
            close: None,
            shut: None,
            budget: None,
            yielded: false,
            writes: Cell::new(0),
            lease_copied: Cell::new(0),
            app_copies: Vec::new(),
        }
    }

    /// Queue a DDP segment; [`Self::flush`] writes it.
    pub fn push(&mut self, seg: OutSegment) {
        self.queue.push_back(seg);
    }

    /// Nothing waits to be written.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.rest.is_none()
    }

    /// Output waits for the socket to take more (the loop should watch for
    /// WRITABLE).
    pub fn wants_writable(&self) -> bool {
        self.gate_open
            && self.blocked
            && !self.is_idle()
            && self.failed.is_none()
            && self.shut.is_none()
    }

    /// Write what the socket takes now, without waiting; `sent` hears of every
    /// segment accepted whole, in order. Then close if asked and nothing is left.
    pub fn flush(&mut self, sent: &mut impl FnMut(Sent)) {
        // After the socket was found full, look before writing: a write lays
        // out every FPDU it gathers (its CRC computed over its payload) and
        // what the socket does not take is laid out again next time. Posting
        // into a full socket made each Send's CRC two to three times over.
        // Still full: the loop watches for WRITABLE (`wants_writable`).
        self.blocked = self.blocked && !writable_now(&self.sock);
        if !self.blocked
            && self.gate_open
            && self.failed.is_none()
            && self.shut.is_none()
            && let Err(e) = self.write_all_now(sent)
        {
            // No shutdown yet: what the peer sent before (a Terminate, say) is
            // still to be read; the reading task ends the connection.
            self.failed = Some(e);
        }
        if let Some(abortive) = self.close
            && (self.is_idle() || self.failed.is_some())
        {
            self.shutdown(abortive);
        }
    }

    /// Shut the socket down for writing now, whatever is queued (abortive: after
    /// a Terminate; nothing more is sent). The read side stays open: the task
    /// reads and drops what the peer still sends before it closes the socket, so
    /// the kernel sends what is queued (the Terminate) and a FIN, not a reset.
    pub fn shutdown(&mut self, abortive: bool) {
        if self.shut.is_some_and(|a| a || !abortive) {
            return;
        }
        let _ = self.sock.shutdown(Shutdown::Write);
        if let Some(w) = self.wire.take() {
            w.closed();
        }
        self.shut = Some(abortive);
    }

    fn write_all_now(&mut self, sent: &mut impl FnMut(Sent)) -> io::Result<()> {
        // The task's budget for its run: a peer that takes octets as fast as
        // they are written (a long Read Response, a queue of Writes) would
        // otherwise keep the loop's thread in this call, the thread's other
        // connections and this one's own input unserved (a Read Request
        // beyond IRD was read only once the response before it had left).
        let spent = Cell::new(0usize);
        let mut sent = |s: Sent| {
            spent.set(spent.get() + s.len);
            sent(s)
        };
        loop {
            if self.rest.is_some() {
                self.write_rest(&mut sent)?;
                if self.blocked {
                    break;
                }
            }
            if self.queue.is_empty() {
                break;
            }
            if self.budget.is_some_and(|b| spent.get() >= b) {
                self.yielded = true;
                break;
            }
            self.write_batch(&mut sent)?;
            if self.blocked {
                break;
            }
        }
        if let Some(b) = &mut self.budget {
            *b = b.saturating_sub(spent.get());
        }
        Ok(())
    }

    /// Go on with the FPDU the socket took part of.
    fn write_rest(&mut self, sent: &mut impl FnMut(Sent)) -> io::Result<()> {
        let crc_on = self.enc.crc;
        let Some(rest) = self.rest.take() else {
            return Ok(());
        };
        match rest {
            Rest::Owned(bytes, mut done, seg) => {
                while done < bytes.len() {
                    match self.send_now(&[IoSlice::new(&bytes[done..])]) {
                        Ok(n) => done += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            self.blocked = true;
                            self.rest = Some(Rest::Owned(bytes, done, seg));
                            return Ok(());
                        }
                        Err(e) => return Err(e),
                    }
                }
                sent(seg);
            }
            Rest::Lease(lease) => {
                let Lease {
                    seg,
                    layout,
                    mut written,
                    mut digest,
                } = *lease;
                let len = layout.len();
                let body = len - CRC_LEN;
                // The region locked again, for this one write.
                let next = seg.payload.with(|p| {
                    let slices = range_slices(&layout, p, written, body);
                    let mut d = digest;
                    for s in &slices {
                        d.update(s);
                    }
                    let trailer = crc_wire_bytes(if crc_on { d.finalize() } else { 0 });
                    let mut all = slices.clone();
                    all.push(IoSlice::new(&trailer));
                    let n = match self.send_now(&all) {
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                        Err(e) => return Err(e),
                    };
                    let of_body = n.min(body - written);
                    for s in range_slices(&layout, p, written, written + of_body) {
                        digest.update(&s);
                    }
                    let at = written + n;
                    Ok(if at >= len {
                        None
                    } else if at > body {
                        // Stopped inside the CRC: its last octets, copied.
                        Some(Rest::Owned(trailer[at - body..].to_vec(), 0, summary(&seg)))
                    } else {
                        written = at;
                        Some(Rest::Lease(Box::new(Lease {
                            seg: seg.clone(),
                            layout: layout.clone(),
                            written,
                            digest,
                        })))
                    })
                })?;
                match next {
                    None => sent(summary(&seg)),
                    Some(r) => {
                        self.blocked = true;
                        self.rest = Some(r);
                    }
                }
            }
        }
        Ok(())
    }

    /// One gathered `sendmsg` of the FPDUs at the front of the queue.
    fn write_batch(&mut self, sent: &mut impl FnMut(Sent)) -> io::Result<()> {
        // Which segments: owned payloads, and leases of one region only. With a
        // capture, one at a time (each FPDU is recorded before it leaves; one the
        // socket did not start would be recorded twice).
        let most = if self.wire.is_some() {
            1
        } else {
            GATHER_SEGMENTS
        };
        let mut region: Option<&Arc<rddp_proto::mem::Region>> = None;
        let (mut count, mut octets) = (0, 0);
        for seg in self.queue.iter().take(most) {
            if let Payload::Region { region: r, .. } = &seg.payload {
                match region {
                    None => region = Some(r),
                    Some(first) if Arc::ptr_eq(first, r) => {}
                    Some(_) => break,
                }
            }
            if count > 0 && octets + seg.len() > GATHER_OCTETS {
                break;
            }
            count += 1;
            octets += seg.len();
        }
        // One FPDU (a ping-pong, Sends posted one by one): built on the
        // stack. Two: scratch for two only (the full arrays are 1.3 KiB to
        // fill).
        if count == 1 && self.wire.is_none() {
            self.write_lone(sent)
        } else if count <= FEW_SEGMENTS {
            self.write_gathered::<FEW_SEGMENTS>(count, sent)
        } else {
            self.write_gathered::<GATHER_SEGMENTS>(count, sent)
        }
    }

    /// The `count` (at most `N`) FPDUs at the front of the queue in one
    /// `sendmsg`; their leases are of one region ([`Self::write_batch`]).
    fn write_gathered<const N: usize>(
        &mut self,
        mut count: usize,
        sent: &mut impl FnMut(Sent),
    ) -> io::Result<()> {
        // The region's lock, for this one system call (the region borrowed
        // from the queue, not its Arc cloned: two locked instructions).
        let region = self
            .queue
            .iter()
            .take(count)
            .find_map(|seg| match &seg.payload {
                Payload::Region { region, .. } => Some(region),
                Payload::Bytes(_) => None,
            });
        // Application memory is never borrowed (rddp-appmem): each
        // segment's own octets are copied out of it, never the region whole.
        let data = region.filter(|r| !r.is_app_memory()).map(|r| r.data());
        let mut copies = std::mem::take(&mut self.app_copies);
        if let Some(r) = region.filter(|r| r.is_app_memory()) {
            let mut used = 0;
            for seg in self.queue.iter().take(count) {
                if let Payload::Region { offset, len, .. } = &seg.payload {
                    copy_app(r, *offset, *len, &mut copies, used);
                    used += *len;
                }
            }
            let copied = self.lease_copied.get() + used as u64;
            self.lease_copied.set(copied);
        }
        // Per-call scratch on the stack, and layouts reused from the last
        // call: nothing is allocated per FPDU or per call (a gathered call has
        // at most GATHER_SEGMENTS FPDUs).
        let mut payloads: [&[u8]; N] = [&[]; N];
        let mut copied_at = 0;
        for (p, seg) in payloads.iter_mut().zip(self.queue.iter().take(count)) {
            *p = match &seg.payload {
                Payload::Bytes(b) => &b[..],
                Payload::Region { offset, len, .. } => match &data {
                    Some(d) => &d[*offset..*offset + *len],
                    None => {
                        copied_at += *len;
                        &copies[copied_at - *len..copied_at]
                    }
                },
            };
        }
        let mut layouts = std::mem::take(&mut self.layouts);
        if layouts.len() < count {
            layouts.resize_with(count, FpduLayout::default);
        }
        let mut starts = [0u32; N];
        for (i, seg) in self.queue.iter().take(count).enumerate() {
            let mut hdr = [0u8; UNTAGGED_HDR_LEN];
            let n = seg.header.emit(&mut hdr).map_err(io::Error::other)?;
            starts[i] = self.enc.offset;
            layout_fpdu_into(&mut self.enc, &hdr[..n], payloads[i], &mut layouts[i]);
        }
        // At most IOV_MAX slices per call (with Markers an FPDU is a few
        // hundred): the FPDUs past that are laid out again next time.
        let mut slices_n = 0;
        if let Some(k) = layouts[..count].iter().position(|l| {
            slices_n += l.pieces.len();
            slices_n > MAX_IOVECS
        }) {
            // One FPDU always goes (it has at most a few hundred slices).
            let k = k.max(1);
            if k < count {
                self.enc.offset = starts[k];
                count = k;
            }
        }
        let (layouts_now, payloads) = (&layouts[..count], &payloads[..count]);
        if let Some(w) = &self.wire {
            // Recorded before it leaves: an answer recorded by a peer in this
            // process must come after it in the file.
            for (l, p) in layouts_now.iter().zip(payloads) {
                w.sent(&layout_rest(l, p, 0).0);
            }
        }
        let pieces = || {
            layouts_now
                .iter()
                .zip(payloads)
                .flat_map(|(l, p)| l.pieces.iter().map(move |piece| (piece, *p)))
                .map(|(piece, p)| match piece {
                    Piece::Own(b) => IoSlice::new(b),
                    Piece::Payload(r) => IoSlice::new(&p[r.clone()]),
                })
        };
        let sent_now = if slices_n <= FEW_IOVECS {
            // One or two FPDUs (a ping-pong, small Sends posted one by one):
            // an array that costs nothing to fill (the large one is 3 KiB of
            // slices set up per call: 3.6 % of a 64 B Send stream's client).
            let (a, k) = on_stack::<FEW_IOVECS>(pieces());
            self.send_now(&a[..k])
        } else if slices_n <= STACK_IOVECS {
            // Without Markers 3 slices an FPDU: on the stack.
            let (a, k) = on_stack::<STACK_IOVECS>(pieces());
            self.send_now(&a[..k])
        } else {
            self.send_now(&pieces().collect::<Vec<_>>())
        };
        let mut written = match sent_now {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        // Which FPDUs went whole, which one in part. Usually all went: the
        // octets laid out, from the first FPDU's stream offset to the end.
        let mut whole = 0;
        let mut part = None;
        if written == self.enc.offset.wrapping_sub(starts[0]) as usize {
            whole = count;
        }
        for (i, l) in layouts_now.iter().enumerate().skip(whole) {
            let len = l.len();
            if written >= len {
                written -= len;
                whole += 1;
                continue;
            }
            if written > 0 {
                let lease = matches!(self.queue[i].payload, Payload::Region { .. });
                part = Some(left_of(
                    l,
                    payloads[i],
                    written,
                    lease,
                    self.wire.is_some(),
                    &self.lease_copied,
                ));
                // The FPDUs after it were never started: lay them out again later.
                if i + 1 < count {
                    self.enc.offset = starts[i + 1];
                }
            } else {
                self.enc.offset = starts[i];
            }
            break;
        }
        self.layouts = layouts;
        drop(data);
        self.app_copies = copies;
        if whole < count {
            self.blocked = true;
        }
        for _ in 0..whole {
            if let Some(seg) = self.queue.pop_front() {
                sent(summary(&seg));
            }
        }
        if let Some(left) = part
            && let Some(seg) = self.queue.pop_front()
        {
            self.rest = Some(left.rest(seg));
        }
        Ok(())
    }

    /// The one FPDU at the front of the queue, without Markers: its head and
    /// trailer built on the stack ([`PlainFpdu`]) and written around its
    /// payload in one `sendmsg` (a ping-pong's every message); with Markers,
    /// as [`Self::write_gathered`] does. Not with a capture (which records
    /// each FPDU before it leaves).
    fn write_lone(&mut self, sent: &mut impl FnMut(Sent)) -> io::Result<()> {
        let Some(seg) = self.queue.front() else {
            return Ok(());
        };
        // The region's lock, for this one system call; application memory:
        // the segment's own octets copied (see write_gathered).
        let data = match &seg.payload {
            Payload::Region { region, .. } if !region.is_app_memory() => Some(region.data()),
            _ => None,
        };
        let mut copy = std::mem::take(&mut self.app_copies);
        let payload: &[u8] = match (&seg.payload, &data) {
            (Payload::Bytes(b), _) => b,
            (Payload::Region { offset, len, .. }, Some(d)) => &d[*offset..*offset + *len],
            (
                Payload::Region {
                    region,
                    offset,
                    len,
                },
                None,
            ) => {
                copy_app(region, *offset, *len, &mut copy, 0);
                let copied = self.lease_copied.get() + *len as u64;
                self.lease_copied.set(copied);
                &copy[..*len]
            }
        };
        let mut hdr = [0u8; UNTAGGED_HDR_LEN];
        let n = seg.header.emit(&mut hdr).map_err(io::Error::other)?;
        let start = self.enc.offset;
        let Some(f) = PlainFpdu::new(&mut self.enc, &hdr[..n], payload) else {
            drop(data);
            self.app_copies = copy;
            return self.write_gathered::<FEW_SEGMENTS>(1, sent);
        };
        let slices = [
            IoSlice::new(f.head()),
            IoSlice::new(payload),
            IoSlice::new(f.trailer()),
        ];
        let written = match self.send_now(&slices) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if written < f.len() {
            self.blocked = true;
            // Not started: laid out again next time.
            self.enc.offset = start;
            if written > 0 {
                // Taken in part: its layout (the same octets, the region
                // still locked) tells what is left, as for a gathered call.
                let lease = matches!(seg.payload, Payload::Region { .. });
                let mut layout = FpduLayout::default();
                layout_fpdu_into(&mut self.enc, &hdr[..n], payload, &mut layout);
                let left = left_of(&layout, payload, written, lease, false, &self.lease_copied);
                drop(data);
                if let Some(seg) = self.queue.pop_front() {
                    self.rest = Some(left.rest(seg));
                }
            }
            self.app_copies = copy;
            return Ok(());
        }
        drop(data);
        self.app_copies = copy;
        if let Some(seg) = self.queue.pop_front() {
            sent(summary(&seg));
        }
        Ok(())
    }
}

/// What is left of an FPDU the socket took `written` octets of (fewer than
/// all).
enum Left {
    /// Its remaining octets, copied.
    Owned(Vec<u8>),
    /// Its lease kept: its layout, the octets written and the CRC over them.
    Lease(FpduLayout, usize, Crc32c),
}

impl Left {
    fn rest(self, seg: OutSegment) -> Rest {
        match self {
            Left::Owned(bytes) => Rest::Owned(bytes, 0, summary(&seg)),
            Left::Lease(layout, written, digest) => Rest::Lease(Box::new(Lease {
                seg,
                layout,
                written,
                digest,
            })),
        }
    }
}

/// What is left of the FPDU `layout` over `payload` after `written` octets
/// went out: a lease stopped before its CRC goes on from the region, the
/// CRC so far over what went out; else (or with a capture, which recorded
/// the FPDU whole) the rest is copied, counted in `copied` where it is a
/// lease's payload.
fn left_of(
    layout: &FpduLayout,
    payload: &[u8],
    written: usize,
    lease: bool,
    capture: bool,
    copied: &Cell<u64>,
) -> Left {
    if lease && !capture && written <= layout.len() - CRC_LEN {
        let mut digest = Crc32c::new();
        for s in range_slices(layout, payload, 0, written) {
            digest.update(&s);
        }
        Left::Lease(layout.clone(), written, digest)
    } else {
        let (rest, of_payload) = layout_rest(layout, payload, written);
        if lease {
            copied.set(copied.get() + of_payload as u64);
        }
        Left::Owned(rest)
    }
}

/// Copies `len` octets of application memory at `offset` in `region` into
/// `out[at..at + len]` (zeros where the registration has ended: nothing of it
/// is read).
fn copy_app(
    region: &rddp_proto::mem::Region,
    offset: usize,
    len: usize,
    out: &mut Vec<u8>,
    at: usize,
) {
    // The buffer keeps its length from call to call: zeroed only where it
    // grows, never again for each segment.
    if out.len() < at + len {
        out.resize(at + len, 0);
    }
    let dst = &mut out[at..at + len];
    if !region.read_at(offset, dst) {
        dst.fill(0);
    }
}

/// What reporting `seg` as sent says (shared with the SCTP relay).
pub fn summary(seg: &OutSegment) -> Sent {
    let read_response = matches!(seg.header, DdpHeader::Tagged(h)
        if h.ctrl.last() && RdmapControl(h.rsvd_ulp).opcode() == Opcode::READ_RESPONSE);
    Sent {
        len: seg.len(),
        last: seg.header.last(),
        read_response,
    }
}

/// The octets `from..to` of `layout` laid over `payload`, as slices.
fn range_slices<'a>(
    layout: &'a FpduLayout,
    payload: &'a [u8],
    from: usize,
    to: usize,
) -> Vec<IoSlice<'a>> {
    let mut out = Vec::new();
    let mut at = 0;
    for piece in &layout.pieces {
        let b: &[u8] = match piece {
            Piece::Own(b) => b,
            Piece::Payload(r) => &payload[r.clone()],
        };
        let (start, end) = (at, at + b.len());
        at = end;
        let (lo, hi) = (from.max(start), to.min(end));
        if lo < hi {
            out.push(IoSlice::new(&b[lo - start..hi - start]));
        }
        if at >= to {
            break;
        }
    }
    out
}

/// Up to `N` slices in an array on the stack (the rest of `slices` is not
/// taken; callers pass at most `N`), and how many were filled.
fn on_stack<'a, const N: usize>(
    slices: impl Iterator<Item = IoSlice<'a>>,
) -> ([IoSlice<'a>; N], usize) {
    let mut a = [IoSlice::new(&[]); N];
    let mut k = 0;
    for (slot, sl) in a.iter_mut().zip(slices) {
        *slot = sl;
        k += 1;
    }
    (a, k)
}
