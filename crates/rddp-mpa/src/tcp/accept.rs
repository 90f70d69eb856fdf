//! The passive side of setup on the event loop (rddp-io): one task accepts TCP
//! connections, one task per connection reads its Request with the responder's
//! deadline (RFC 5044 §7.1.2). A connection costs its socket and its [`Responder`]
//! while it waits, no thread: a peer that stays silent, or stops halfway through
//! its Request, holds nothing another connection needs.
//!
//! What comes out (a Request to answer, or why the setup failed) waits in the
//! [`Backlog`] for [`super::MpaListener`]'s accept calls, in the order setups
//! ended. The ULP's decision and the Reply stay with the accept call.

use super::nb::{Outbox, read_nb};
use crate::error::MpaError;
use crate::options::MpaOptions;
use crate::pcap::Tap;
use crate::setup::{Responder, Role, SetupStatus};
use rddp_io::{Cx, Next, Task, TaskHandle};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Octets read per call during setup: a Request is at most 532.
const SETUP_READ: usize = 4096;

/// Setups handed out but not yet taken by an accept call, beyond which the
/// listener stops accepting TCP connections (the kernel's listen queue then
/// holds the rest, as it does for a blocking listener).
pub(crate) const BACKLOG_MAX: usize = 1024;

/// How soon a paused listener (backlog full, or out of file descriptors) tries again.
const RETRY: Duration = Duration::from_millis(20);

/// How long a refusal (Reply with R=1) may take to leave before the socket is
/// closed anyway.
const LINGER: Duration = Duration::from_secs(1);

/// A connection whose Request has arrived, its socket back in blocking mode.
#[derive(Debug)]
pub(crate) struct Requested {
    pub sock: TcpStream,
    pub peer: SocketAddr,
    pub resp: Responder,
    /// The Request's octets as read (for the accept call's capture tap).
    pub received: Vec<u8>,
}

/// Ended setups waiting for an accept call.
#[derive(Debug)]
pub(crate) struct Backlog {
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct State {
    ready: VecDeque<Result<Requested, MpaError>>,
    /// The listener is being dropped: tasks stop, results are dropped.
    closed: bool,
    /// The accepting task has finished (its socket is closed).
    stopped: bool,
    /// Setups still reading their Request, woken to close when the listener goes.
    pending: HashMap<u64, TaskHandle>,
}

impl Backlog {
    pub(super) fn new() -> Self {
        Self {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, r: Result<Requested, MpaError>) {
        let mut s = self.lock();
        if !s.closed {
            s.ready.push_back(r);
            self.cv.notify_all();
        }
    }

    fn is_closed(&self) -> bool {
        self.lock().closed
    }

    fn is_full(&self) -> bool {
        self.lock().ready.len() >= BACKLOG_MAX
    }

    /// The next ended setup, waiting for one.
    pub(super) fn pop(&self) -> Result<Requested, MpaError> {
        let mut s = self.lock();
        loop {
            if let Some(r) = s.ready.pop_front() {
                return r;
            }
            if s.stopped {
                return Err(MpaError::Io(io::Error::other("the MPA listener stopped")));
            }
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The listener is dropped: drop what waits (closing those sockets), wake the
    /// accepting task, and wait (briefly) for it to close its socket.
    pub(super) fn close(&self, listener: &TaskHandle) {
        let (ready, pending) = {
            let mut s = self.lock();
            s.closed = true;
            (std::mem::take(&mut s.ready), std::mem::take(&mut s.pending))
        };
        drop(ready);
        for h in pending.values() {
            h.wake();
        }
        listener.wake();
        let s = self.lock();
        let _ = self
            .cv
            .wait_timeout_while(s, Duration::from_secs(2), |s| !s.stopped);
    }

    /// A setup task started: returns false if the listener is already closed.
    fn started(&self, h: TaskHandle) -> bool {
        let mut s = self.lock();
        if !s.closed {
            s.pending.insert(h.id(), h);
        }
        !s.closed
    }

    fn ended(&self, id: u64) {
        self.lock().pending.remove(&id);
    }

    fn stopped(&self) {
        self.lock().stopped = true;
        self.cv.notify_all();
    }
}

/// Accepts TCP connections and spawns a [`ResponderTask`] for each.
pub(crate) struct ListenTask {
    pub listener: TcpListener,
    pub opts: MpaOptions,
    pub backlog: Arc<Backlog>,
}

impl Task for ListenTask {
    fn fd(&self) -> Option<RawFd> {
        Some(self.listener.as_raw_fd())
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        if self.backlog.is_closed() {
            return Next::Done;
        }
        loop {
            if self.backlog.is_full() {
                return Next::readable(Some(cx.now + RETRY));
            }
            match self.listener.accept() {
                Ok((sock, peer)) => {
                    let b = self.backlog.clone();
                    // The deadline runs from this accept, not from when the loop
                    // woke: one wake-up may accept connections for many
                    // milliseconds, and each may wait its whole timeout (RFC 5044 §7.1.2).
                    let now = Instant::now();
                    match ResponderTask::new(sock, peer, &self.opts, now, b) {
                        Ok(t) => {
                            cx.spawn(Box::new(t));
                        }
                        Err(e) => self.backlog.push(Err(e.into())),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::readable(None),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                // Out of file descriptors (or memory): say so to the ULP, and try
                // again soon; the connection waits in the kernel's queue.
                Err(e) => {
                    self.backlog.push(Err(e.into()));
                    return Next::readable(Some(cx.now + RETRY));
                }
            }
        }
    }

    fn finish(self: Box<Self>) {
        let backlog = self.backlog.clone();
        drop(self);
        backlog.stopped();
    }

    fn failed(self: Box<Self>, err: io::Error) {
        self.backlog.push(Err(err.into()));
        self.finish();
    }
}

/// One connection's setup up to its Request (or its failure).
pub(crate) struct ResponderTask {
    sock: TcpStream,
    peer: SocketAddr,
    resp: Responder,
    /// The listener's tap: records a refusal made here and what it answered.
    tap: Option<Tap>,
    /// The octets the responder took (at most a Request, or what it refused).
    received: Vec<u8>,
    /// A refusal (Reply with R=1) on its way out, and when to give up on it.
    out: Option<(Outbox, Instant)>,
    /// Why setup failed, when the responder does not say (socket errors).
    error: Option<MpaError>,
    backlog: Option<Arc<Backlog>>,
    /// This task's id, once it has run.
    id: Option<u64>,
}

impl ResponderTask {
    fn new(
        sock: TcpStream,
        peer: SocketAddr,
        opts: &MpaOptions,
        now: Instant,
        backlog: Arc<Backlog>,
    ) -> io::Result<Self> {
        sock.set_nonblocking(true)?;
        sock.set_nodelay(true)?;
        Ok(Self {
            sock,
            peer,
            resp: Responder::new(opts, now),
            tap: opts.tap.clone(),
            received: Vec::new(),
            out: None,
            error: None,
            backlog: Some(backlog),
            id: None,
        })
    }

    fn lost(&mut self, e: MpaError) -> Next {
        self.error = Some(e);
        Next::Done
    }

    /// Setup failed: send the refusal the responder made, if any, then close.
    fn refuse(&mut self, now: Instant) -> Next {
        match self.resp.poll_transmit() {
            Some(reply) => {
                if let Some(t) = &self.tap {
                    t.record(Role::Responder, reply.clone());
                }
                self.out = Some((Outbox::new(reply), now + LINGER));
                self.flush(now)
            }
            None => Next::Done,
        }
    }

    fn flush(&mut self, now: Instant) -> Next {
        let Some((out, until)) = &mut self.out else {
            return Next::Done;
        };
        match out.flush(&self.sock) {
            Ok(false) if now < *until => Next::writable(Some(*until)),
            _ => Next::Done,
        }
    }
}

impl Task for ResponderTask {
    fn fd(&self) -> Option<RawFd> {
        Some(self.sock.as_raw_fd())
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        let Some(backlog) = &self.backlog else {
            return Next::Done;
        };
        if self.id.is_none() {
            let h = cx.handle();
            self.id = Some(h.id());
            if !backlog.started(h) {
                return Next::Done;
            }
        }
        if backlog.is_closed() {
            return Next::Done;
        }
        if self.out.is_some() {
            return self.flush(cx.now);
        }
        let mut buf = [0u8; SETUP_READ];
        loop {
            match read_nb(&self.sock, &mut buf) {
                Ok(Some(0)) => return self.lost(MpaError::ConnectionLost),
                Ok(Some(n)) => {
                    let used = self.resp.on_bytes(&buf[..n]);
                    self.received.extend_from_slice(&buf[..used]);
                    match self.resp.status() {
                        SetupStatus::Pending => {}
                        SetupStatus::Requested => return Next::Done,
                        _ => return self.refuse(cx.now),
                    }
                }
                Ok(None) => break,
                Err(e) => return self.lost(e.into()),
            }
        }
        self.resp.on_timeout(cx.now);
        if self.resp.status() == SetupStatus::Failed {
            return self.refuse(cx.now);
        }
        Next::readable(self.resp.deadline())
    }

    fn finish(mut self: Box<Self>) {
        let Some(backlog) = self.backlog.take() else {
            return;
        };
        if let Some(id) = self.id {
            backlog.ended(id);
        }
        if self.resp.status() == SetupStatus::Requested && self.error.is_none() {
            // The accept call answers it with a blocking write.
            match self.sock.set_nonblocking(false) {
                Ok(()) => {
                    let Self {
                        sock,
                        peer,
                        resp,
                        received,
                        ..
                    } = *self;
                    backlog.push(Ok(Requested {
                        sock,
                        peer,
                        resp,
                        received,
                    }));
                }
                Err(e) => backlog.push(Err(e.into())),
            }
            return;
        }
        let _ = self.sock.shutdown(Shutdown::Both);
        let e = self
            .error
            .take()
            .or_else(|| self.resp.take_result().and_then(Result::err))
            .unwrap_or(MpaError::Timeout);
        if let Some(t) = &self.tap {
            t.record_received(&self.received);
        }
        super::log::failed(Some(self.peer), &e);
        backlog.push(Err(e));
    }

    fn failed(mut self: Box<Self>, err: io::Error) {
        self.error = Some(err.into());
        self.finish();
    }
}
