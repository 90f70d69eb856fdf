//! DDP over SCTP (RFC 5043) as the scripted peer speaks it: a raw usrsctp
//! association (UDP encapsulation, the Adaptation Layer Indication for DDP),
//! chunks of our own making, DDP-SSNs included, so that a case may break the
//! session rules; every chunk the peer sends is read back with its stream,
//! PPID and DDP-SSN. Every wait is bounded by the caller's deadline, every
//! octet sent counted against the case's budget; nothing here panics on what
//! the peer sends.

use rddp_wire::sctp::{
    ADAPTATION_DDP, PPID_DDP_SEGMENT, PPID_SESSION_CONTROL, SessionControl, SessionFunction,
};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};
use usrsctp_ffi::sys::{
    SCTP_ADAPTATION_INDICATION, SCTP_ASSOC_CHANGE, SCTP_COMM_UP, SCTP_SENDER_DRY_EVENT,
    SCTP_SHUTDOWN_EVENT,
};
use usrsctp_ffi::{Encapsulation, Error, Notification, Received, RecvInfo, Socket, Target, stack};

/// Streams we ask for, inbound and outbound alike (RFC 5043: equal numbers).
pub(super) const STREAMS: u16 = 16;

/// A chunk the peer sent: its stream, PPID, DDP-SSN and what follows the DDP-SSN.
#[derive(Debug, Clone)]
pub(super) struct Chunk {
    pub sid: u16,
    pub ppid: u32,
    pub ssn: u16,
    pub body: Vec<u8>,
}

impl Chunk {
    /// The Session Control function, if this is a well-formed one.
    pub(super) fn control(&self) -> Option<SessionFunction> {
        self.session_control().map(|c| c.function)
    }

    pub(super) fn session_control(&self) -> Option<SessionControl> {
        if self.ppid != PPID_SESSION_CONTROL {
            return None;
        }
        let mut p = self.ssn.to_be_bytes().to_vec();
        p.extend_from_slice(&self.body);
        SessionControl::parse(&p).ok()
    }
}

/// One association to the peer under test.
pub(super) struct Assoc {
    sock: Socket,
    buf: Vec<u8>,
    next_ssn: Vec<u16>,
    /// Chunks read but not yet taken, in arrival order.
    inbox: VecDeque<Chunk>,
    budget: usize,
    /// Everything we sent is acknowledged (SCTP sender-dry).
    pub dry: bool,
    /// The association ended (lost, shut down, or aborted by the peer).
    pub lost: bool,
    /// A chunk came ordered, or in parts (RFC 5043: every DDP chunk is one
    /// whole unordered message); what it was.
    pub irregular: Option<String>,
    /// The peer's Adaptation Layer Indication, if it sent one.
    pub indication: Option<u32>,
    /// The largest message SCTP sends here without fragmenting it.
    pub fragmentation_point: usize,
    /// Inbound and outbound streams of the association.
    pub streams: (u16, u16),
}

/// Start this process's usrsctp stack (UDP encapsulation on a free port), or
/// join the one running.
fn start_stack() -> Result<(), String> {
    usrsctp_ffi::available().map_err(|e| format!("libusrsctp is not available: {e}"))?;
    let port = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| s.local_addr())
        .map_err(|e| format!("no free UDP port: {e}"))?
        .port();
    match stack::init(Encapsulation::Udp(port)) {
        Ok(_)
        | Err(Error::StackMismatch {
            running: Encapsulation::Udp(_),
            ..
        }) => Ok(()),
        Err(e) => Err(format!("usrsctp: {e}")),
    }
}

fn e(op: &str) -> impl Fn(Error) -> String + '_ {
    move |err| format!("usrsctp {op}: {err}")
}

/// A socket as both sides use it: the Adaptation Layer Indication for DDP,
/// [`STREAMS`] each way, the notifications the cases read, no Nagle.
fn socket() -> Result<Socket, String> {
    let s = Socket::new(false).map_err(e("socket"))?;
    s.set_adaptation_layer(ADAPTATION_DDP)
        .map_err(e("adaptation layer"))?;
    s.set_init_streams(STREAMS).map_err(e("streams"))?;
    for ev in [
        SCTP_ASSOC_CHANGE,
        SCTP_ADAPTATION_INDICATION,
        SCTP_SENDER_DRY_EVENT,
        SCTP_SHUTDOWN_EVENT,
    ] {
        s.subscribe(ev).map_err(e("subscribe"))?;
    }
    s.set_recv_rcvinfo(true).map_err(e("rcvinfo"))?;
    s.set_nodelay(true).map_err(e("nodelay"))?;
    Ok(s)
}

/// `--role responder`: where the peer under test associates with us, as
/// `rddp target --transport sctp` listens (SCTP port = UDP encapsulation
/// port). This process's usrsctp stack is started on that port.
pub(crate) struct Listening {
    sock: Socket,
    pub addr: SocketAddrV4,
}

impl Listening {
    /// Listen at `addr` (port 0: a free UDP port, then SCTP on the same one).
    pub(super) fn bind(mut addr: SocketAddrV4) -> Result<Self, String> {
        usrsctp_ffi::available().map_err(|e| format!("libusrsctp is not available: {e}"))?;
        if addr.port() == 0 {
            let port = UdpSocket::bind(SocketAddrV4::new(*addr.ip(), 0))
                .and_then(|s| s.local_addr())
                .map_err(|e| format!("no free UDP port on {}: {e}", addr.ip()))?
                .port();
            addr.set_port(port);
        }
        stack::init(Encapsulation::Udp(addr.port()))
            .map_err(|err| format!("usrsctp on UDP port {}: {err}", addr.port()))?;
        let s = socket()?;
        s.bind(Target::Inet(addr))
            .map_err(|err| format!("cannot listen on {addr}: {err}"))?;
        s.listen(8).map_err(e("listen"))?;
        Ok(Self { sock: s, addr })
    }

    /// The next association the peer opens, waited for at most `wait`, up
    /// (COMM_UP) within `bound` of its arrival; the case's deadline runs
    /// from then.
    pub(super) fn accept(
        &self,
        wait: Duration,
        bound: Duration,
        budget: usize,
    ) -> Result<(Assoc, Instant), String> {
        let s = self.sock.accept(wait).map_err(|err| match err {
            Error::Timeout(_) => {
                format!("the peer did not associate within {wait:?} (--accept-wait)")
            }
            err => format!("usrsctp accept: {err}"),
        })?;
        let deadline = Instant::now() + bound;
        let a = Assoc::establish(s, deadline, budget)?;
        Ok((a, deadline))
    }
}

impl Assoc {
    /// An association to `addr` (SCTP port = UDP encapsulation port =
    /// `addr`'s port), up before `deadline`. The peer's Adaptation Layer
    /// Indication is recorded, not required: a case judges it.
    pub(super) fn connect(
        addr: SocketAddrV4,
        deadline: Instant,
        budget: usize,
    ) -> Result<Self, String> {
        start_stack()?;
        let s = socket()?;
        s.set_remote_udp_encaps_port(addr.port())
            .map_err(e("encapsulation port"))?;
        // One local address (RFC 5043: no multi-homing by default).
        let local = if addr.ip().is_loopback() {
            Ipv4Addr::LOCALHOST
        } else {
            Ipv4Addr::UNSPECIFIED
        };
        s.bind(Target::Inet(SocketAddrV4::new(local, 0)))
            .map_err(e("bind"))?;
        s.connect(Target::Inet(addr)).map_err(e("connect"))?;
        Self::establish(s, deadline, budget).map_err(|why| format!("{why} with {addr}"))
    }

    /// The association of `s` (connecting, or just accepted) once it is up
    /// (COMM_UP), before `deadline`, with the peer's Adaptation Layer
    /// Indication if it sent one.
    fn establish(s: Socket, deadline: Instant, budget: usize) -> Result<Self, String> {
        let mut a = Self {
            sock: s,
            buf: vec![0; 1 << 16],
            next_ssn: vec![0; usize::from(STREAMS)],
            inbox: VecDeque::new(),
            budget,
            dry: false,
            lost: false,
            irregular: None,
            indication: None,
            fragmentation_point: 0,
            streams: (0, 0),
        };
        let mut up = false;
        // The indication comes with the association's setup; once up, it is
        // waited for only briefly.
        let mut until = deadline;
        while !(up && a.indication.is_some()) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if up {
                    break;
                }
                return Err("no SCTP association in time".into());
            }
            match a.sock.recv(&mut a.buf, left.min(Duration::from_millis(50))) {
                Ok(Received::Notification(Notification::AssocChange { state, .. })) => {
                    if state != SCTP_COMM_UP {
                        return Err(format!("the SCTP association failed (state {state})"));
                    }
                    up = true;
                    until = until.min(Instant::now() + Duration::from_millis(500));
                }
                Ok(Received::Notification(Notification::Adaptation { indication })) => {
                    a.indication = Some(indication);
                }
                Ok(Received::Notification(_)) | Err(Error::Timeout(_)) => {}
                // The peer's first chunk right behind COMM_UP (it is the
                // active side of a session): kept for the case.
                Ok(Received::Data {
                    len,
                    info,
                    complete,
                }) if up => a.keep(len, info, complete),
                Ok(Received::Data { .. }) => {
                    return Err("data before the association was up".into());
                }
                Err(err) => return Err(format!("usrsctp receive: {err}")),
            }
        }
        let st = a.sock.status().map_err(e("status"))?;
        a.fragmentation_point = st.fragmentation_point as usize;
        a.streams = (st.instrms, st.outstrms);
        Ok(a)
    }

    /// The next DDP-SSN of `sid` (RFC 5043: the SSN an ordered message would
    /// have had: from 0, one per message, modulo 2^16).
    pub(super) fn take_ssn(&mut self, sid: u16) -> u16 {
        let s = &mut self.next_ssn[usize::from(sid % STREAMS)];
        let ssn = *s;
        *s = s.wrapping_add(1);
        ssn
    }

    /// Send `body` after the next DDP-SSN of `sid`, unordered (RFC 5043).
    pub(super) fn send(&mut self, sid: u16, ppid: u32, body: &[u8]) -> Result<u16, String> {
        let ssn = self.take_ssn(sid);
        self.send_ssn(sid, ppid, ssn, body)?;
        Ok(ssn)
    }

    /// Send `body` with DDP-SSN `ssn`, within the case's budget.
    pub(super) fn send_ssn(
        &mut self,
        sid: u16,
        ppid: u32,
        ssn: u16,
        body: &[u8],
    ) -> Result<(), String> {
        let n = 2 + body.len();
        if n > self.budget {
            return Err(format!(
                "the case would send more than its bound ({} octets left)",
                self.budget
            ));
        }
        if self.lost {
            return Err("the association has ended".into());
        }
        self.budget -= n;
        let mut p = ssn.to_be_bytes().to_vec();
        p.extend_from_slice(body);
        self.sock
            .send_wait(sid, ppid, true, &p, Duration::from_secs(2))
            .map_err(|err| format!("send on stream {sid}: {err}"))?;
        self.dry = false;
        Ok(())
    }

    /// A Session Control message: any function code, any private data.
    pub(super) fn control(&mut self, sid: u16, function: u16, pd: &[u8]) -> Result<u16, String> {
        let mut b = function.to_be_bytes().to_vec();
        b.extend_from_slice(pd);
        self.send(sid, PPID_SESSION_CONTROL, &b)
    }

    /// One DDP segment (PPID 16) on `sid`.
    pub(super) fn segment(&mut self, sid: u16, seg: &[u8]) -> Result<u16, String> {
        self.send(sid, PPID_DDP_SEGMENT, seg)
    }

    /// A message of `len` octets in `buf`: into the inbox as a chunk, noted
    /// if it came ordered or in parts (RFC 5043: one whole unordered message).
    fn keep(&mut self, len: usize, info: RecvInfo, complete: bool) {
        if !complete || !info.unordered {
            self.irregular.get_or_insert_with(|| {
                format!(
                    "a chunk on stream {} (PPID {}) {}",
                    info.sid,
                    info.ppid,
                    if complete {
                        "sent ordered"
                    } else {
                        "larger than 64 KiB"
                    }
                )
            });
        }
        if len >= 2 {
            self.inbox.push_back(Chunk {
                sid: info.sid,
                ppid: info.ppid,
                ssn: u16::from_be_bytes([self.buf[0], self.buf[1]]),
                body: self.buf[2..len].to_vec(),
            });
        } else {
            self.irregular
                .get_or_insert_with(|| "a chunk without a DDP-SSN".into());
        }
    }

    /// Read one message or notification, waiting at most `timeout`; false if
    /// nothing came (or the association is gone).
    fn read_one(&mut self, timeout: Duration) -> bool {
        if self.lost {
            return false;
        }
        match self.sock.recv(&mut self.buf, timeout) {
            Ok(Received::Data {
                len,
                info,
                complete,
            }) => {
                self.keep(len, info, complete);
                true
            }
            Ok(Received::Notification(Notification::SenderDry)) => {
                self.dry = true;
                true
            }
            Ok(Received::Notification(Notification::AssocChange { state, .. }))
                if state == SCTP_COMM_UP =>
            {
                true
            }
            Ok(Received::Notification(
                Notification::AssocChange { .. } | Notification::Shutdown,
            )) => {
                self.lost = true;
                false
            }
            Ok(Received::Notification(_)) => true,
            Err(Error::Timeout(_)) => false,
            Err(_) => {
                self.lost = true;
                false
            }
        }
    }

    /// The next chunk the peer sent on `sid` before `until` (chunks of other
    /// streams stay in the inbox).
    pub(super) fn next_on(&mut self, sid: u16, until: Instant) -> Option<Chunk> {
        loop {
            if let Some(i) = self.inbox.iter().position(|c| c.sid == sid) {
                return self.inbox.remove(i);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.lost {
                return None;
            }
            self.read_one(left.min(Duration::from_millis(50)));
        }
    }

    /// The next chunk the peer sent on any stream before `until`.
    pub(super) fn next_any(&mut self, until: Instant) -> Option<Chunk> {
        loop {
            if let Some(c) = self.inbox.pop_front() {
                return Some(c);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.lost {
                return None;
            }
            self.read_one(left.min(Duration::from_millis(50)));
        }
    }

    /// Every chunk the peer sends on `sid` until `until`.
    pub(super) fn collect_on(&mut self, sid: u16, until: Instant) -> Vec<Chunk> {
        let mut got = Vec::new();
        while let Some(c) = self.next_on(sid, until) {
            got.push(c);
        }
        got
    }

    /// Wait until everything we sent is acknowledged (sender-dry): nothing of
    /// ours is outstanding, so a stream number may be used again (RFC 5043).
    pub(super) fn wait_dry(&mut self, until: Instant) -> bool {
        while !self.dry && !self.lost && Instant::now() < until {
            self.read_one(Duration::from_millis(50));
        }
        self.dry
    }

    /// A graceful SHUTDOWN of the association; the socket is closed once it is
    /// gone (usrsctp-ffi's reaper), never blocking here.
    pub(super) fn close(self) {
        if !self.lost {
            let _ = self.sock.shutdown();
        }
    }
}
