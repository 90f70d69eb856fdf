//! A queue pair's MPA connection on the event loop: one rddp-io task per queue
//! pair, on one of the process's few I/O threads.
//!
//! * READABLE: [`QpTask::receive`] drives the connection's header-first
//!   `FpduReceiver` under the queue pair's lock until `WouldBlock` (never held
//!   across a wait: the socket is non-blocking): each payload is read from the
//!   socket straight into its region or receive buffer, the CRC checked over it
//!   before anything is delivered; runs of small FPDUs are taken in batches
//!   (one peek into the I/O thread's buffer, one vectored read that puts every
//!   payload straight into place: `rddp_mpa::fpdu::FpduReceiver::drive_buffered`).
//! * After a Terminate: shut down for writing once it is written, then read and
//!   drop until the peer closes or [`DRAIN`] passes, then close (a close with
//!   octets unread would reset the connection and lose the Terminate).
//! * WRITABLE: the queued output the posting threads could not write drains
//!   (`Shared::pump_in`, the same code the posting threads run).
//! * Close: both directions end here; a dropped queue pair's task lets a queued
//!   Terminate leave for a while, then closes the socket.

use super::busy::{Reader, RxHalf};
use super::{Shared, State};
use crate::device::lock;
use crate::error::Error;
use crate::transport::HoldInner;
use crate::transport::mpa_in::MpaIn;
use rddp_io::{Cx, Interest, Next, Task, TaskHandle};
use rddp_mpa::fpdu::{Peek, Placer, Progress, RdmapPlacer, Recorded, Refused};
use rddp_mpa::pcap::TcpEndpoint;
use rddp_proto::ddp::{Begin, Target};
use rddp_wire::TerminateCode;
use std::cell::RefCell;
use std::io::{self, IoSliceMut, Read};
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The I/O thread's buffer for batches of small FPDUs (what a peek shows;
/// their headers, PAD and CRC, never payload), shared by every connection on
/// that thread (a connection leaves nothing in it between runs).
const READ_AHEAD: usize = 16 * 1024;

/// Octets and FPDUs placed per run before the task lets the thread's other
/// connections go first (checked between FPDUs).
const RUN_OCTETS: usize = 4 << 20;
const RUN_FPDUS: usize = 1024;

/// Reads per run while dropping what a terminated peer still sends.
const READS_PER_RUN: usize = 16;

/// After an abortive close (our Terminate written, our side shut down for
/// writing): how long the task goes on reading and dropping what the peer still
/// sends before it closes the socket. Closing with unread octets makes the kernel
/// answer with a reset, which drops a Terminate still queued behind the
/// congestion window (RFC 5040 §5.4: the Terminate should reach the peer).
const DRAIN: Duration = Duration::from_secs(2);

thread_local! {
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Start the task of a queue pair whose transmit half is already in `shared`.
pub(super) fn spawn(
    shared: Arc<Shared>,
    sock: Arc<TcpStream>,
    input: MpaIn,
    hold: Option<Arc<HoldInner>>,
) -> Result<TaskHandle, Error> {
    let driver = rddp_io::Driver::global().map_err(|e| Error::Mpa(e.into()))?;
    let task = QpTask {
        shared: shared.clone(),
        sock,
        hold: hold.clone(),
        read_done: false,
        lost: false,
        drain_until: None,
    };
    let h = driver
        .spawn(Box::new(task))
        .map_err(|e| Error::Mpa(e.into()))?;
    if let Some(io) = &mut lock(&shared.state).mpa {
        io.handle = Some(h.clone());
        io.rx = Some(RxHalf::new(input));
    }
    // Output queued before the handle was known is looked at now.
    h.wake();
    if let Some(hold) = hold {
        let w = h.clone();
        hold.on_release(Box::new(move || w.wake()));
    }
    Ok(h)
}

struct QpTask {
    shared: Arc<Shared>,
    sock: Arc<TcpStream>,
    hold: Option<Arc<HoldInner>>,
    /// The peer closed, or the connection is lost: nothing more to read.
    read_done: bool,
    /// The engine was told the connection is lost.
    lost: bool,
    /// Shut down for writing after a Terminate: read and drop until the peer
    /// closes or this passes ([`DRAIN`]), then close.
    drain_until: Option<Instant>,
}

pub(super) enum RxEnd {
    /// Everything there was read (`WouldBlock`).
    Blocked,
    /// Used its budget for this run; more may be there.
    More,
    /// The peer closed its side.
    Closed,
    Lost(io::Error),
}

/// A queue pair's socket as the receiver reads it, each call that returned
/// octets counted in `reads` (`QpStats::llp_reads`: the connection's own
/// count, under its queue pair's lock, where a process-wide atomic cost
/// every message a locked instruction).
struct Counted<'a> {
    sock: &'a TcpStream,
    reads: &'a mut u64,
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

    /// The socket's own descriptor: payloads bound for application memory are
    /// read straight into it (each such read counted as any other).
    fn read_fd(
        &mut self,
        read: &mut dyn FnMut(BorrowedFd<'_>) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        let r = read(self.sock.as_fd());
        Some(self.counted(r))
    }
}

/// RDMAP under the QP lock as the receiver's engine, with a budget per run so
/// one busy connection does not hold its I/O thread (checked between FPDUs).
struct Budgeted<'a> {
    inner: RdmapPlacer<'a>,
    octets: usize,
    fpdus: usize,
}

impl Budgeted<'_> {
    fn spent(&self) -> bool {
        self.octets >= RUN_OCTETS || self.fpdus >= RUN_FPDUS
    }
}

impl Placer for Budgeted<'_> {
    fn begin(
        &mut self,
        seq: u64,
        head: &[u8],
        payload_len: usize,
        how: Begin<'_>,
    ) -> Result<Target, Refused> {
        let ahead = matches!(how, Begin::Ahead(_));
        let r = self.inner.begin(seq, head, payload_len, how);
        // One ahead of a batch counts only if it joined (taken alone next,
        // it is counted then).
        if !ahead || r.is_ok() {
            self.fpdus += 1;
            self.octets += head.len() + payload_len;
        }
        r
    }

    fn finish(&mut self, crc_ok: bool) {
        self.inner.finish(crc_ok);
    }

    fn framing_error(&mut self, code: TerminateCode, detail: String) {
        self.inner.framing_error(code, detail);
    }

    fn with_buffers(
        &mut self,
        f: &mut dyn FnMut(&mut [&mut [u8]]) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        self.inner.with_buffers(f)
    }

    fn more(&mut self) -> bool {
        self.inner.more() && !self.spent()
    }
}

/// Read from the socket and place until `WouldBlock` (the task's, or a
/// busy-polling thread's, see `super::busy`): header first, each payload
/// straight from the socket into its region or receive buffer (runs of small
/// FPDUs in batches through `buf`, the thread's buffer), under the QP lock for
/// the whole run (each read is one non-blocking system call; lock order QP ->
/// table -> region). `in_task`: the loop's own task calls (it decides itself what
/// to wait for, so it is not woken).
pub(super) fn receive(shared: &Shared, st: &mut State, buf: &mut Vec<u8>, in_task: bool) -> RxEnd {
    let mem = shared.pd.inner.consumer.device().mem();
    let State { rdmap, mpa, .. } = st;
    let Some(io) = mpa else {
        return RxEnd::Closed;
    };
    let Some(input) = io.rx.as_mut().map(|h| &mut h.input) else {
        return RxEnd::Blocked;
    };
    let mut p = Budgeted {
        inner: RdmapPlacer::new(rdmap, mem),
        octets: 0,
        fpdus: 0,
    };
    let mut sock = &*io.sock;
    let counted = Counted {
        sock,
        reads: &mut io.reads,
    };
    let got = match &input.wire {
        Some(w) => {
            let mut src = Recorded {
                inner: counted,
                record: |b: &[u8]| w.received(b),
            };
            input.rx.drive_buffered(&mut src, &mut p, buf)
        }
        None => input.rx.drive_buffered(&mut { counted }, &mut p, buf),
    };
    let (first, spent) = (p.inner.first_fpdu_seen, p.spent());
    let dead = input.rx.is_dead() || rdmap.is_terminated();
    // The responder may send from now on (RFC 5044 §7.1.2); also its Terminate
    // for the initiator's bad first FPDU (the initiator is in FPDU mode).
    if (first || dead) && std::mem::take(&mut input.gate_closed) {
        io.out.gate_open = true;
    }
    let end = match got {
        Ok(Progress::WouldBlock) => RxEnd::Blocked,
        Ok(Progress::Eof { .. }) => RxEnd::Closed,
        Ok(Progress::Paused) if spent && !dead => RxEnd::More,
        // Nothing more is placed: read and drop until the peer closes
        // (a Terminate is queued; the task closes once it left).
        Ok(Progress::Paused | Progress::Stopped) => discard(&mut sock, buf, &input.wire),
        Err(e) => RxEnd::Lost(e),
    };
    if dead && let Some(h) = &mut io.rx {
        // The task takes it from here (shutdown, drain, close).
        h.open = false;
    }
    // Answers (a Read Response, an echo, a Terminate) leave at once, from
    // this thread; completions go to their CQs.
    shared.pump_in(st, in_task);
    end
}

/// [`receive`] with the calling thread's batch buffer; `None` when this
/// thread is already receiving (a CQ's notify function that busy-polls).
pub(super) fn receive_here(shared: &Shared, st: &mut State, in_task: bool) -> Option<RxEnd> {
    BUF.with(|b| {
        let mut buf = b.try_borrow_mut().ok()?;
        if buf.len() < READ_AHEAD {
            buf.resize(READ_AHEAD, 0);
        }
        Some(receive(shared, st, &mut buf, in_task))
    })
}

impl QpTask {
    /// After a failed write: read what the peer sent before the connection
    /// broke, until the socket has nothing more (a reset stream brings no new
    /// octets, so this ends; bounded all the same).
    fn read_before_loss(&mut self, shared: &Shared, st: &mut State) {
        for _ in 0..64 {
            if !matches!(receive_here(shared, st, true), Some(RxEnd::More)) {
                return;
            }
        }
    }

    /// The LLP ended: tell the engine (once), close our side too.
    fn ended(&mut self, st: &mut State, graceful: bool, err: Option<io::Error>) {
        self.read_done = true;
        if self.lost {
            return;
        }
        self.lost = true;
        if let Some(e) = &err {
            crate::trace::llp_lost(self.shared.qp_num, e);
        }
        st.rdmap.on_llp_closed(graceful);
        if !st.close_sent {
            st.close_sent = true;
            if let Some(io) = &mut st.mpa {
                io.out.close = Some(!graceful);
            }
        }
    }
}

impl Task for QpTask {
    fn fd(&self) -> Option<RawFd> {
        Some(self.sock.as_raw_fd())
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        let mut more = false;
        let held = self.hold.as_ref().is_some_and(|h| !h.is_released());
        if !held {
            self.hold = None;
        }
        let shared = self.shared.clone();
        let mut guard = lock(&shared.state);
        let st = &mut *guard;
        // What this run writes is bounded as what it reads is; a posting or
        // busy-polling thread writes without a budget (`MpaOut::budget`).
        if let Some(io) = &mut st.mpa {
            io.out.budget = Some(RUN_OCTETS);
        }
        // A busy-polling thread may be the reader now (`super::busy`); an end it
        // met is taken over here.
        let (busy, met) = match st.mpa.as_mut().and_then(|io| io.rx.as_mut()) {
            Some(h) => (h.reader.settle(cx.now), h.end.take()),
            None => (false, None),
        };
        let got = match met {
            Some(end) => Some(end),
            None if !self.read_done && !held && !busy => receive_here(&shared, st, true),
            None => None,
        };
        let end = match got {
            None | Some(RxEnd::Blocked) => None,
            Some(RxEnd::More) => {
                more = true;
                None
            }
            Some(RxEnd::Closed) => Some((true, None)),
            Some(RxEnd::Lost(e)) => Some((false, Some(e))),
        };
        if let Some((graceful, err)) = end {
            self.ended(st, graceful, err);
        }
        shared.pump_in(st, true);
        let failed = st.mpa.as_mut().and_then(|io| {
            io.out
                .failed
                .as_ref()
                .map(|e| io::Error::new(e.kind(), e.to_string()))
        });
        if let Some(e) = failed
            && !more
        {
            // A write failed: the connection is lost. What the peer sent before
            // its reset (its Terminate, say: RFC 5040 §5.4) is still readable
            // (Linux keeps received octets after a reset) and may have come
            // after the read above, or under a busy poller's lease: read it
            // now, whoever holds the receive side (we hold the QP lock).
            if !self.read_done && !held {
                self.read_before_loss(&shared, st);
            }
            self.ended(st, false, Some(e));
            shared.pump_in(st, true);
        }
        let Some(io) = &mut st.mpa else {
            return Next::Done;
        };
        io.out.budget = None;
        if std::mem::take(&mut io.out.yielded) {
            more = true;
        }
        let lingered = io.linger.is_some_and(|t| cx.now >= t);
        if lingered {
            io.out.shutdown(true);
        }
        let shut = io.out.shut;
        if shut == Some(true) && !self.read_done && self.drain_until.is_none() {
            self.drain_until = Some(cx.now + DRAIN);
        }
        let drained = self.drain_until.is_some_and(|t| cx.now >= t);
        if lingered || drained || (self.read_done && shut.is_some()) {
            if !self.lost {
                // Dropped: whatever was still posted is flushed.
                self.ended(st, false, None);
                shared.pump_in(st, true);
            }
            return Next::Done;
        }
        let Some(io) = &mut st.mpa else {
            return Next::Done;
        };
        let write = io.out.wants_writable();
        io.armed = write;
        // Another thread may read while this task reads nothing itself.
        let dead = st.rdmap.is_terminated();
        let Some(io) = &mut st.mpa else {
            return Next::Done;
        };
        let open = !self.read_done && !held && self.drain_until.is_none() && !dead;
        let lease = io.rx.as_mut().and_then(|h| {
            let open = open && !h.input.rx.is_dead();
            h.open = open;
            if !open {
                h.reader = Reader::Loop;
            }
            h.reader.lease_end()
        });
        let interest = match (self.read_done, write) {
            // A busy-polling thread reads: the loop does not watch for it.
            (false, false) if lease.is_some() => None,
            (false, true) if lease.is_some() => Some(Interest::WRITABLE),
            (false, false) => Some(Interest::READABLE),
            (false, true) => Some(Interest::READABLE | Interest::WRITABLE),
            (true, true) => Some(Interest::WRITABLE),
            (true, false) => Some(Interest::READABLE),
        };
        if more {
            // Used the run's budget, not yet at WouldBlock (reading) or with
            // the socket not full (writing): no new edge will come, so run
            // again after the thread's other ready tasks.
            cx.handle().wake();
        }
        let deadline = [io.linger, self.drain_until, lease]
            .into_iter()
            .flatten()
            .min();
        Next::Wait { interest, deadline }
    }
}

/// Read and drop what the peer sends (after a Terminate), at most
/// [`READS_PER_RUN`] reads.
fn discard(sock: &mut &TcpStream, buf: &mut [u8], wire: &Option<TcpEndpoint>) -> RxEnd {
    for _ in 0..READS_PER_RUN {
        match sock.read(buf) {
            Ok(0) => return RxEnd::Closed,
            Ok(n) => {
                if let Some(w) = wire {
                    w.received(&buf[..n]);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return RxEnd::Blocked,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return RxEnd::Lost(e),
        }
    }
    RxEnd::More
}
