//! The active side of setup on the event loop (rddp-io): send the Request, wait
//! for the Reply until the initiator's deadline (RFC 5044 §7.1.2), hand the socket back
//! in blocking mode. The caller's thread waits for the outcome; the waiting for
//! the peer happens on the loop.

use super::nb::{Outbox, read_nb};
use crate::error::MpaError;
use crate::pcap::Tap;
use crate::setup::{Initiator, Negotiated, Role, SetupStatus};
use rddp_io::{Cx, Driver, Next, Task};
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::time::{Duration, Instant};

/// Octets read per call during setup: a Reply is at most 532.
const SETUP_READ: usize = 4096;

/// How long a Terminate after a bad Reply may take to leave.
const LINGER: Duration = Duration::from_secs(1);

/// The socket, what was agreed, and the octets after the Reply.
pub(crate) type Dialed = (TcpStream, Negotiated, Vec<u8>);

/// Run the initiator's setup on `sock` (connected) on the process's event loop.
pub(crate) fn run(sock: TcpStream, init: Initiator, tap: Option<Tap>) -> Result<Dialed, MpaError> {
    sock.set_nonblocking(true)?;
    let (tx, rx) = sync_channel(1);
    let task = InitiatorTask {
        sock,
        init,
        tap,
        out: None,
        leftover: Vec::new(),
        error: None,
        done: tx,
    };
    Driver::global()?.spawn(Box::new(task))?;
    rx.recv().unwrap_or(Err(MpaError::ConnectionLost))
}

struct InitiatorTask {
    sock: TcpStream,
    init: Initiator,
    tap: Option<Tap>,
    /// The Request, or the Terminate after a bad Reply, and when to give up on it.
    out: Option<(Outbox, Instant)>,
    leftover: Vec<u8>,
    error: Option<MpaError>,
    done: SyncSender<Result<Dialed, MpaError>>,
}

impl InitiatorTask {
    /// Queue what the initiator has to send; `Some` if the task must wait to
    /// write it (or is done).
    fn send(&mut self, now: Instant) -> Option<Next> {
        if let Some(b) = self.init.poll_transmit() {
            if let Some(t) = &self.tap {
                t.record(Role::Initiator, b.clone());
            }
            let until = self.init.deadline().unwrap_or(now + LINGER);
            self.out = Some((Outbox::new(b), until));
        }
        let (out, until) = self.out.as_mut()?;
        match out.flush(&self.sock) {
            Ok(true) => {
                self.out = None;
                None
            }
            Ok(false) if now < *until => Some(Next::writable(Some(*until))),
            Ok(false) => {
                self.error = Some(MpaError::Timeout);
                Some(Next::Done)
            }
            Err(e) => {
                self.error = Some(e.into());
                Some(Next::Done)
            }
        }
    }
}

impl Task for InitiatorTask {
    fn fd(&self) -> Option<RawFd> {
        Some(self.sock.as_raw_fd())
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        if let Some(next) = self.send(cx.now) {
            return next;
        }
        if self.init.status() == SetupStatus::Failed {
            return Next::Done;
        }
        let mut buf = [0u8; SETUP_READ];
        loop {
            match read_nb(&self.sock, &mut buf) {
                Ok(Some(0)) => {
                    self.error = Some(MpaError::ConnectionLost);
                    return Next::Done;
                }
                Ok(Some(n)) => {
                    let used = self.init.on_bytes(&buf[..n]);
                    if let Some(t) = &self.tap {
                        t.record_received(&buf[..used]);
                    }
                    match self.init.status() {
                        SetupStatus::Established => {
                            self.leftover = buf[used..n].to_vec();
                            return Next::Done;
                        }
                        SetupStatus::Failed => return self.send(cx.now).unwrap_or(Next::Done),
                        _ => {}
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.error = Some(e.into());
                    return Next::Done;
                }
            }
        }
        self.init.on_timeout(cx.now);
        if self.init.status() == SetupStatus::Failed {
            return self.send(cx.now).unwrap_or(Next::Done);
        }
        Next::readable(self.init.deadline())
    }

    fn finish(mut self: Box<Self>) {
        let peer = self.sock.peer_addr().ok();
        let r = match (self.error.take(), self.init.take_result()) {
            (None, Some(Ok(n))) => match self.sock.set_nonblocking(false) {
                Ok(()) => {
                    super::log::established(peer, &n);
                    let Self {
                        sock,
                        leftover,
                        done,
                        ..
                    } = *self;
                    let _ = done.send(Ok((sock, n, leftover)));
                    return;
                }
                Err(e) => Err(e.into()),
            },
            (Some(e), _) | (None, Some(Err(e))) => Err(e),
            (None, None) => Err(MpaError::Timeout),
        };
        if let Err(e) = &r {
            super::log::failed(peer, e);
        }
        let _ = self.sock.shutdown(Shutdown::Both);
        let _ = self.done.send(r);
    }

    fn failed(mut self: Box<Self>, err: io::Error) {
        self.error = Some(err.into());
        self.finish();
    }
}
