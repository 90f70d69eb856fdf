//! A queue pair's MPA connection on the event loop: one rddp-io task per queue
//! pair, on one of the process's few I/O threads.
//!
//! * READABLE: [`QpTask::receive`] reads into the I/O thread's read buffer until
//!   `WouldBlock` and hands each ULPDU to the engine under the queue pair's lock
//!   (one lock per read, never held across a wait: the socket is non-blocking).
//! * WRITABLE: the queued output the posting threads could not write drains
//!   (`Shared::pump_in`, the same code the posting threads run).
//! * Close: both directions end here; a dropped queue pair's task lets a queued
//!   Terminate leave for a while, then closes the socket.

use super::{Shared, State};
use crate::device::lock;
use crate::error::Error;
use crate::transport::HoldInner;
use crate::transport::mpa_in::{MpaIn, Upcalls};
use rddp_io::{Cx, Interest, Next, Task, TaskHandle};
use rddp_proto::mem::MemoryTable;
use rddp_wire::TerminateCode;
use std::cell::RefCell;
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The I/O thread's read buffer, shared by every connection on that thread.
const READ_BUF: usize = 256 * 1024;

/// Reads per run before the task lets the thread's other connections go first.
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
        input,
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
    input: MpaIn,
    hold: Option<Arc<HoldInner>>,
    /// The peer closed, or the connection is lost: nothing more to read.
    read_done: bool,
    /// The engine was told the connection is lost.
    lost: bool,
    /// Shut down for writing after a Terminate: read and drop until the peer
    /// closes or this passes ([`DRAIN`]), then close.
    drain_until: Option<Instant>,
}

enum RxEnd {
    /// Everything there was read (`WouldBlock`).
    Blocked,
    /// Read [`READS_PER_RUN`] times; more may be there.
    More,
    /// The peer closed its side.
    Closed,
    Lost(io::Error),
}

/// The engine, as the receive half sees it.
struct Up<'a> {
    st: &'a mut State,
    mem: &'a MemoryTable,
}

impl Upcalls for Up<'_> {
    fn segment(&mut self, seq: u64, ulpdu: &[u8]) {
        // Refusals are handled inside the engine (Terminate, events). The
        // placement locks only the region it writes.
        let _ = self.st.rdmap.on_segment(self.mem, seq, ulpdu);
    }

    fn error(&mut self, code: TerminateCode, detail: String) {
        self.st.rdmap.llp_error(code, detail);
    }

    fn open_gate(&mut self) {
        if let Some(io) = &mut self.st.mpa {
            io.out.gate_open = true;
        }
    }
}

impl QpTask {
    /// Read from the socket and feed the engine until `WouldBlock` (the one
    /// place that reads; a header-first receiver placing straight into regions
    /// replaces the body of this function).
    fn receive(&mut self) -> RxEnd {
        if !self.input.pending.is_empty() {
            let p = std::mem::take(&mut self.input.pending);
            self.feed(&p);
        }
        BUF.with_borrow_mut(|buf| {
            if buf.len() < READ_BUF {
                buf.resize(READ_BUF, 0);
            }
            for _ in 0..READS_PER_RUN {
                match (&*self.sock).read(buf) {
                    Ok(0) => return RxEnd::Closed,
                    Ok(n) => {
                        if let Some(w) = &self.input.wire {
                            w.received(&buf[..n]);
                        }
                        self.feed(&buf[..n]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return RxEnd::Blocked,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return RxEnd::Lost(e),
                }
            }
            RxEnd::More
        })
    }

    fn feed(&mut self, octets: &[u8]) {
        let mut st = lock(&self.shared.state);
        let mem = self.shared.pd.inner.consumer.device().mem();
        self.input.feed(octets, &mut Up { st: &mut st, mem });
        // Answers (a Read Response, an echo) leave at once, from this thread.
        self.shared.pump_in(&mut st, true);
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
        let end = if !self.read_done && !held {
            self.hold = None;
            match self.receive() {
                RxEnd::Blocked => None,
                RxEnd::More => {
                    more = true;
                    None
                }
                RxEnd::Closed => Some((true, None)),
                RxEnd::Lost(e) => Some((false, Some(e))),
            }
        } else {
            None
        };
        let shared = self.shared.clone();
        let mut guard = lock(&shared.state);
        let st = &mut *guard;
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
            // (its Terminate, say) was read above, before this.
            self.ended(st, false, Some(e));
            shared.pump_in(st, true);
        }
        let Some(io) = &mut st.mpa else {
            return Next::Done;
        };
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
        let interest = match (self.read_done, write) {
            (false, false) => Some(Interest::READABLE),
            (false, true) => Some(Interest::READABLE | Interest::WRITABLE),
            (true, true) => Some(Interest::WRITABLE),
            (true, false) => Some(Interest::READABLE),
        };
        if more {
            // Read READS_PER_RUN times and not yet to WouldBlock: no new edge
            // will come, so run again after the thread's other ready tasks.
            cx.handle().wake();
        }
        let deadline = match (io.linger, self.drain_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Next::Wait { interest, deadline }
    }
}
