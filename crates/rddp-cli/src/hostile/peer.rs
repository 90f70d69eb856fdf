//! One hostile connection: its kind, where its setup is, and how it ended.

use super::wire::{self, Incoming};
use mio::net::TcpStream;
use rddp_wire::FpduEncoder;
use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Kind {
    /// Opens TCP and never sends its MPA Request.
    Slowloris,
    /// Sets up, then sends one bogus FPDU (a Write to an invalid STag) one
    /// octet per interval.
    SlowBytes,
    /// Sets up, then sends Sends as fast as TCP takes them, past every buffer
    /// the target posted.
    Flood,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Slowloris => "slowloris",
            Self::SlowBytes => "slow_bytes",
            Self::Flood => "flood",
        }
    }
}

enum Phase {
    Connecting,
    /// Request (being) sent, Reply awaited.
    Setup,
    /// FPDU mode (the target has answered).
    Fpdu,
}

pub(super) struct Peer {
    pub kind: Kind,
    pub sock: TcpStream,
    phase: Phase,
    pub started: Instant,
    /// When the TCP connection was established.
    pub opened: Option<Instant>,
    out: Vec<u8>,
    setup_in: Vec<u8>,
    incoming: Option<Incoming>,
    enc: FpduEncoder,
    /// SlowBytes: the bogus FPDU and how much of it went out.
    bogus: Vec<u8>,
    pub bogus_sent: usize,
    pub next_byte: Instant,
    interval: Duration,
    /// Flood: the next MSN and the Sends written.
    msn: u32,
    pub sends: u64,
    /// Octets the target sent (setup Reply included).
    pub received: u64,
    /// A write failed (the target closed), and how: nothing more is written.
    write_failed: Option<ErrorKind>,
    /// The last write found the socket full (the writable event says when not).
    blocked: bool,
}

/// How a peer ended (the outcome names the README and the tests count).
#[derive(Debug, Clone)]
pub(super) struct Ended {
    pub kind: Kind,
    pub outcome: String,
    /// From TCP established (as this side saw it) to the end.
    pub lifetime: Option<Duration>,
    /// From the connect call to the end: the target's setup deadline runs from
    /// its accept, which is between the two.
    pub since_connect: Duration,
    pub sends: u64,
    pub echoes: u64,
    pub bogus_sent: usize,
}

/// The peer wants another look (read or write) or has ended.
pub(super) enum Step {
    Continue,
    Ended(Ended),
}

impl Peer {
    pub(super) fn new(kind: Kind, sock: TcpStream, now: Instant, interval: Duration) -> Self {
        Self {
            kind,
            sock,
            phase: Phase::Connecting,
            started: now,
            opened: None,
            out: Vec::new(),
            setup_in: Vec::new(),
            incoming: None,
            enc: FpduEncoder::new(false, false),
            bogus: Vec::new(),
            bogus_sent: 0,
            next_byte: now,
            interval,
            msn: 1,
            sends: 0,
            received: 0,
            write_failed: None,
            blocked: false,
        }
    }

    /// A flood peer with Sends still to write: looked at every turn of the loop.
    pub(super) fn busy(&self) -> bool {
        self.kind == Kind::Flood
            && matches!(self.phase, Phase::Fpdu)
            && !self.terminated()
            && self.write_failed.is_none()
            && !self.blocked
    }

    pub(super) fn is_connecting(&self) -> bool {
        matches!(self.phase, Phase::Connecting)
    }

    /// The Terminate has arrived: nothing more is sent.
    fn terminated(&self) -> bool {
        self.incoming
            .as_ref()
            .is_some_and(|i| i.terminate.is_some())
    }

    pub(super) fn end(&self, outcome: impl Into<String>, now: Instant) -> Step {
        Step::Ended(Ended {
            kind: self.kind,
            outcome: outcome.into(),
            lifetime: self.opened.map(|o| now - o),
            since_connect: now - self.started,
            sends: self.sends,
            echoes: self.incoming.as_ref().map_or(0, |i| i.others),
            bogus_sent: self.bogus_sent,
        })
    }

    /// The socket is ready (or a timer fired): do what can be done now.
    pub(super) fn poke(&mut self, now: Instant) -> Step {
        self.blocked = false;
        if self.is_connecting() {
            match self.sock.take_error() {
                Ok(Some(e)) | Err(e) => return self.end(format!("connect failed: {e}"), now),
                Ok(None) => {}
            }
            match self.sock.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NotConnected => return Step::Continue,
                Err(e) => return self.end(format!("connect failed: {e}"), now),
            }
            self.opened = Some(now);
            self.phase = match self.kind {
                Kind::Slowloris => Phase::Fpdu,
                _ => {
                    self.out = wire::request();
                    Phase::Setup
                }
            };
        }
        if let Some(s) = self.read(now) {
            return s;
        }
        if let Some(s) = self.write(now) {
            return s;
        }
        Step::Continue
    }

    fn read(&mut self, now: Instant) -> Option<Step> {
        let mut buf = [0u8; 65536];
        loop {
            let n = match self.sock.read(&mut buf) {
                Ok(0) => return Some(self.closed(None, now)),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Some(self.closed(Some(e), now)),
            };
            self.received += n as u64;
            let mut b = &buf[..n];
            if matches!(self.phase, Phase::Setup) {
                self.setup_in.extend_from_slice(b);
                match wire::reply(&self.setup_in) {
                    Ok(None) => continue,
                    Err(e) => return Some(self.end(format!("setup failed: {e}"), now)),
                    Ok(Some((crc, used))) => {
                        self.phase = Phase::Fpdu;
                        self.enc = FpduEncoder::new(crc, false);
                        self.incoming = Some(Incoming::new(crc));
                        if self.kind == Kind::SlowBytes {
                            self.bogus = wire::bogus_write(crc);
                            self.next_byte = now;
                        }
                        // What followed the Reply is the first of FPDU mode.
                        let rest = self.setup_in.split_off(used);
                        b = &[];
                        if let Some(i) = &mut self.incoming {
                            i.feed(&rest);
                        }
                    }
                }
            }
            let broken = self.incoming.as_mut().and_then(|i| {
                i.feed(b);
                i.broken.clone()
            });
            if let Some(e) = broken {
                return Some(self.end(format!("target sent a bad FPDU: {e}"), now));
            }
        }
    }

    /// The target closed (EOF) or reset the connection.
    fn closed(&self, err: Option<std::io::Error>, now: Instant) -> Step {
        // A reset shows as the error of a read, or of the write before it (which
        // takes the error; the read then sees the end of the stream).
        let kind = err.map(|e| e.kind()).or(self.write_failed);
        let reset = kind == Some(ErrorKind::ConnectionReset);
        let how = kind.map_or_else(String::new, |k| format!(" ({k})"));
        match (&self.kind, &self.incoming) {
            (Kind::Slowloris, _) if self.received == 0 => self.end("closed", now),
            (Kind::Slowloris, _) => self.end("answered", now),
            (_, Some(i)) => match &i.terminate {
                Some(code) => self.end(format!("terminate {code}"), now),
                None if reset => self.end("reset without terminate", now),
                None => self.end("closed without terminate", now),
            },
            (_, None) => self.end(format!("closed during setup{how}"), now),
        }
    }

    fn write(&mut self, now: Instant) -> Option<Step> {
        if self.write_failed.is_some() {
            return None;
        }
        if matches!(self.phase, Phase::Fpdu) && !self.terminated() {
            match self.kind {
                Kind::SlowBytes => {
                    if self.out.is_empty()
                        && now >= self.next_byte
                        && self.bogus_sent < self.bogus.len()
                    {
                        self.out.push(self.bogus[self.bogus_sent]);
                        self.bogus_sent += 1;
                        self.next_byte = now + self.interval;
                    }
                }
                Kind::Flood => {}
                Kind::Slowloris => return None,
            }
        }
        // A flood peer writes at most this much per look, so that one fast
        // connection cannot keep the loop from the others.
        let mut budget = 256 * 1024usize;
        loop {
            if self.out.is_empty() {
                if self.kind == Kind::Flood
                    && budget > 0
                    && matches!(self.phase, Phase::Fpdu)
                    && !self.terminated()
                {
                    // Some 22 KiB of Sends at a time.
                    for _ in 0..256 {
                        wire::flood_send(&mut self.enc, self.msn, &mut self.out);
                        self.msn = self.msn.wrapping_add(1);
                        self.sends += 1;
                    }
                } else {
                    return None;
                }
            }
            match self.sock.write(&self.out) {
                Ok(n) => {
                    self.out.drain(..n);
                    budget = budget.saturating_sub(n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.blocked = true;
                    return None;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // The target closed: what it said before it did, and its close,
                // are read as they come.
                Err(e) => {
                    self.out.clear();
                    self.write_failed = Some(e.kind());
                    return self.read(now);
                }
            }
        }
    }
}
