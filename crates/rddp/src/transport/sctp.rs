//! DDP over SCTP (RFC 5043) as a queue pair's LLP.
//!
//! One association per queue pair, one DDP Stream Session on stream 0. The
//! session machinery is rddp-sctp's (Initiate/Accept, DDP-SSN, unordered chunks,
//! the adaptation indication checked at setup); the session's segments are relayed
//! to and from the queue pair's own RDMAP engine. A driver thread owns the
//! association: it hands queued segments to SCTP and feeds received ones, placed
//! in any order and delivered in DDP-SSN order by the queue pair's DDP sink. The
//! relay holds at most `INBOUND_MAX_OCTETS` for the queue pair's reader; beyond
//! that the driver stops reading the association (backpressure through SCTP's
//! receive window). RFC 5043 exchanges no IRD/ORD: the queue pair's builder's
//! values apply on both sides.
//! usrsctp is loaded at run time; without it every call here says which package
//! to install.

use super::{Connection, Inbound, Llp, LlpInfo, SegmentReader, SegmentWriter};
use rddp_mpa::pcap::PcapFile;
use rddp_proto::ddp::{OutSegment, SegmentEndpoint, SenderSeq, SourceError, StreamError};
use rddp_proto::mem::MemoryTable;
use rddp_sctp::Event;
use rddp_sctp::driver::{ChunkTap, DriverError, SctpConnection};
use rddp_wire::packet::{DataChunk, udp_sctp};
use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use rddp_sctp::driver::Options as SctpOptions;

/// Whether libusrsctp can be loaded here; the error says which package to install.
pub fn available() -> Result<(), String> {
    usrsctp_ffi::available().map_err(|e| e.to_string())
}

/// The session's stream number.
const SID: u16 = 0;

/// Octets of received segments that may wait for the queue pair's reader. Beyond
/// it the driver stops reading the association, so SCTP's receive window holds the
/// peer back (backpressure) instead of a queue growing without bound.
const INBOUND_MAX_OCTETS: usize = 256 * 1024;

#[derive(Debug, Default)]
struct RelayState {
    inbound: VecDeque<Inbound>,
    /// Octets of the segments in `inbound`.
    inbound_octets: usize,
    outbound: VecDeque<OutSegment>,
    /// The queue pair asked to close: gracefully (session Terminate) or not.
    close: Option<bool>,
    /// The association is gone: the reader reports a lost connection.
    lost: bool,
}

#[derive(Debug, Default)]
struct Relay {
    st: Mutex<RelayState>,
    cv: Condvar,
}

impl Relay {
    fn lock(&self) -> MutexGuard<'_, RelayState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn push(&self, i: Inbound) {
        let mut st = self.lock();
        if st.lost {
            return; // nobody will read it
        }
        if let Inbound::Segment { bytes, .. } = &i {
            st.inbound_octets += bytes.len();
        }
        st.inbound.push_back(i);
        drop(st);
        self.cv.notify_all();
    }
    /// Whether the driver may read the next message for this relay.
    fn has_room(&self) -> bool {
        let st = self.lock();
        st.lost || st.inbound_octets < INBOUND_MAX_OCTETS
    }
    /// Wait up to `d` for the reader to make room (or the relay to be lost).
    fn wait_room(&self, d: Duration) {
        let st = self.lock();
        let _ = self.cv.wait_timeout_while(st, d, |st| {
            !st.lost && st.inbound_octets >= INBOUND_MAX_OCTETS
        });
    }
    fn lose(&self) {
        self.lock().lost = true;
        self.cv.notify_all();
    }
}

/// The session's upper layer inside rddp-sctp: a relay to the queue pair.
#[derive(Debug)]
struct RelayEndpoint(Arc<Relay>);

impl SegmentEndpoint for RelayEndpoint {
    fn on_segment(
        &mut self,
        _mem: &MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), StreamError> {
        self.0.push(Inbound::Segment {
            seq,
            bytes: seg.to_vec(),
        });
        Ok(())
    }
    fn poll_segment(&mut self) -> Option<OutSegment> {
        self.0.lock().outbound.pop_front()
    }
    fn drained(&self) -> bool {
        self.0.lock().outbound.is_empty()
    }
    fn set_mulpdu(&mut self, mulpdu: usize) -> Result<(), SourceError> {
        self.0.push(Inbound::Mulpdu(mulpdu));
        Ok(())
    }
    fn close(&mut self) {}
    fn on_llp_closed(&mut self, graceful: bool) {
        if graceful {
            self.0.push(Inbound::Closed);
        } else {
            self.0.lose();
        }
    }
}

/// One association in the process's capture (`--pcap`, see [`crate::capture`]):
/// each message as one UDP-encapsulated SCTP packet with one DATA chunk. The
/// SCTP ports shown are the UDP ports (the real ones are usrsctp's own).
#[derive(Debug)]
struct SctpWire {
    file: PcapFile,
    local: SocketAddrV4,
    peer: SocketAddrV4,
    /// TSN of our next message (the peer's come from SCTP's receive info).
    tsn: u32,
    /// The peer records its messages itself (it is in this process).
    peer_here: bool,
}

impl SctpWire {
    fn new(file: PcapFile, local: SocketAddrV4, peer: SocketAddrV4, peer_here: bool) -> Self {
        Self {
            file,
            local,
            peer,
            tsn: 1,
            peer_here,
        }
    }

    fn write(&self, from: SocketAddrV4, to: SocketAddrV4, c: &DataChunk<'_>) {
        let ports = (from.port(), to.port());
        let id = self.file.next_id();
        let pkt = udp_sctp(from.into(), to.into(), ports, 0, id, c);
        self.file.write_packet(&pkt);
    }
}

impl ChunkTap for SctpWire {
    fn sent(&mut self, sid: u16, ppid: u32, payload: &[u8]) {
        let c = DataChunk {
            tsn: self.tsn,
            sid,
            ssn: 0,
            ppid,
            unordered: true,
            payload,
        };
        self.tsn = self.tsn.wrapping_add(1);
        self.write(self.local, self.peer, &c);
    }

    fn received(&mut self, tsn: u32, sid: u16, ppid: u32, payload: &[u8]) {
        if self.peer_here {
            return;
        }
        let c = DataChunk {
            tsn,
            sid,
            ssn: 0,
            ppid,
            unordered: true,
            payload,
        };
        self.write(self.peer, self.local, &c);
    }
}

/// The UDP encapsulation port of this process's SCTP stack.
fn stack_port() -> u16 {
    match usrsctp_ffi::stack::running() {
        Some(usrsctp_ffi::Encapsulation::Udp(p)) => p,
        _ => 0,
    }
}

/// The local address that routes to `peer` (as the SCTP driver binds).
fn local_ip_for(peer: SocketAddrV4) -> Ipv4Addr {
    if peer.ip().is_loopback() {
        return Ipv4Addr::LOCALHOST;
    }
    let probe = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).and_then(|s| {
        s.connect(peer)?;
        s.local_addr()
    });
    match probe {
        Ok(SocketAddr::V4(a)) => *a.ip(),
        _ => Ipv4Addr::UNSPECIFIED,
    }
}

fn err(e: DriverError) -> io::Error {
    io::Error::other(e.to_string())
}

/// Active side: an association to `addr` (SCTP port = UDP encapsulation port =
/// `addr`'s port), then a session on stream 0 with `private_data` in its Initiate.
pub fn connect(
    addr: SocketAddrV4,
    opts: SctpOptions,
    private_data: &[u8],
) -> io::Result<Connection> {
    let cap = crate::capture::current();
    let peer_here = cap.is_some() && crate::capture::sctp_client(addr);
    let mut conn = rddp_sctp::driver::connect(addr, opts.clone()).map_err(err)?;
    if let Some(file) = cap {
        let local = SocketAddrV4::new(local_ip_for(addr), stack_port());
        conn.set_tap(Box::new(SctpWire::new(file, local, addr, peer_here)));
    }
    let relay = Arc::new(Relay::default());
    conn.adaptation()
        .initiate_relay(SID, Box::new(RelayEndpoint(relay.clone())), private_data)
        .map_err(io::Error::other)?;
    let scratch = MemoryTable::new();
    let mut answer = None;
    conn.run_until(&scratch, opts.setup_timeout, |c| {
        while let Some(e) = c.poll_event() {
            match e {
                Event::Accepted { private_data, .. } => answer = Some(Ok(private_data)),
                Event::Closed { reason, .. } => {
                    answer = Some(Err(format!("session refused: {reason:?}")))
                }
                _ => {}
            }
        }
        answer.is_some()
    })
    .map_err(err)?;
    let peer_pd = answer
        .unwrap_or_else(|| Err("no answer".into()))
        .map_err(|e| {
            tracing::info!("SCTP: session with {addr} on stream {SID}: {e}");
            io::Error::other(e)
        })?;
    tracing::info!("SCTP: session with {addr} on stream {SID} accepted by the peer");
    Ok(start(conn, relay, peer_pd, Some(addr)))
}

/// Passive side: SCTP listening at `addr`.
pub struct Listener {
    inner: rddp_sctp::driver::Listener,
    addr: SocketAddrV4,
    timeout: Duration,
}

impl Listener {
    pub fn bind(addr: SocketAddrV4, opts: SctpOptions) -> io::Result<Self> {
        let timeout = opts.setup_timeout;
        let inner = rddp_sctp::driver::Listener::bind(addr, opts).map_err(err)?;
        if crate::capture::current().is_some() {
            crate::capture::sctp_listener(addr);
        }
        Ok(Self {
            inner,
            addr,
            timeout,
        })
    }

    /// The next association (waits up to `wait`; `ErrorKind::TimedOut` if none
    /// came). Its sessions are then taken one by one with
    /// [`Association::next_request`].
    pub fn accept_association(&self, wait: Duration) -> io::Result<Association> {
        let mut conn = self.inner.accept(wait).map_err(|e| match e {
            DriverError::Sctp(t @ usrsctp_ffi::Error::Timeout(_)) => {
                io::Error::new(io::ErrorKind::TimedOut, t.to_string())
            }
            e => err(e),
        })?;
        if let Some(file) = crate::capture::current() {
            let here = crate::capture::sctp_accepted(self.addr);
            // A client of this process: its end as it records it. Another peer:
            // its primary address (its UDP port is not known; its SCTP port
            // stands in).
            let peer = if here {
                SocketAddrV4::new(local_ip_for(self.addr), stack_port())
            } else {
                conn.peer_addr()
                    .unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
            };
            let wire = SctpWire::new(file, self.addr, peer, here);
            conn.set_tap(Box::new(wire));
            tracing::debug!("SCTP: association from {peer} recorded in the capture");
        }
        let shared = Arc::new(AssocShared::default());
        let s2 = shared.clone();
        std::thread::spawn(move || drive_association(conn, &s2));
        Ok(Association {
            shared,
            timeout: self.timeout,
        })
    }

    /// The next association and its first session, accepted with `private_data`
    /// (waits up to `wait` for an association).
    pub fn accept(&self, wait: Duration, private_data: &[u8]) -> io::Result<Connection> {
        let pd = private_data.to_vec();
        self.accept_with(wait, move |_| Ok(pd))
    }

    /// As [`Self::accept`], the ULP deciding from the Initiate's private data:
    /// `Ok(private data)` accepts, `Err(private data)` rejects (Session Reject,
    /// only ever at the ULP's direction). Times out as `ErrorKind::TimedOut`.
    pub fn accept_with(
        &self,
        wait: Duration,
        decide: impl FnOnce(&[u8]) -> Result<Vec<u8>, Vec<u8>>,
    ) -> io::Result<Connection> {
        let assoc = self.accept_association(wait)?;
        let req = assoc
            .next_request(assoc.timeout)
            .ok_or_else(|| io::Error::other("no session Initiate"))?;
        match decide(&req.private_data) {
            Ok(pd) => Ok(assoc.accept(&req, &pd)),
            Err(pd) => {
                assoc.reject(&req, &pd);
                Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "session rejected by the ULP",
                ))
            }
        }
    }
}

/// A peer's DDP Stream Session Initiate, waiting for the ULP (seed 001: at most
/// `SctpOptions::config.max_pending_initiates` wait; one more is answered with
/// Terminate by the adaptation itself).
#[derive(Debug, Clone)]
pub struct SessionRequest {
    pub sid: u16,
    pub private_data: Vec<u8>,
}

enum Cmd {
    Accept(u16, Arc<Relay>, Vec<u8>),
    Reject(u16, Vec<u8>),
}

#[derive(Default)]
struct AssocState {
    requests: VecDeque<SessionRequest>,
    cmds: VecDeque<Cmd>,
    mulpdu: usize,
    lost: bool,
}

#[derive(Default)]
struct AssocShared {
    st: Mutex<AssocState>,
    cv: Condvar,
}

impl AssocShared {
    fn lock(&self) -> MutexGuard<'_, AssocState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One association on the passive side; each accepted session is a connection
/// for its own queue pair.
pub struct Association {
    shared: Arc<AssocShared>,
    timeout: Duration,
}

impl Association {
    /// The next session Initiate, waiting up to `timeout`; `None` on timeout or
    /// when the association is gone.
    pub fn next_request(&self, timeout: Duration) -> Option<SessionRequest> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            if let Some(r) = st.requests.pop_front() {
                return Some(r);
            }
            if st.lost {
                return None;
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            st = self
                .shared
                .cv
                .wait_timeout(st, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Whether the association ended.
    pub fn is_lost(&self) -> bool {
        self.shared.lock().lost
    }

    /// Accept the session with `private_data`: a connection for a queue pair.
    pub fn accept(&self, req: &SessionRequest, private_data: &[u8]) -> Connection {
        let relay = Arc::new(Relay::default());
        let mulpdu = {
            let mut st = self.shared.lock();
            st.cmds
                .push_back(Cmd::Accept(req.sid, relay.clone(), private_data.to_vec()));
            st.mulpdu
        };
        connection(relay, req.private_data.clone(), None, mulpdu)
    }

    /// Reject the session (only ever at the ULP's direction, seed 001).
    pub fn reject(&self, req: &SessionRequest, private_data: &[u8]) {
        self.shared
            .lock()
            .cmds
            .push_back(Cmd::Reject(req.sid, private_data.to_vec()));
    }
}

/// The passive association's thread: the ULP's accepts and rejects in, session
/// requests out, each accepted session relayed to its queue pair.
fn drive_association(mut conn: SctpConnection, shared: &AssocShared) {
    let scratch = MemoryTable::new();
    let mut relays: Vec<(u16, Arc<Relay>, bool)> = Vec::new();
    loop {
        let cmds: Vec<Cmd> = {
            let mut st = shared.lock();
            st.mulpdu = conn.adaptation().max_segment();
            st.cmds.drain(..).collect()
        };
        for c in cmds {
            match c {
                Cmd::Accept(sid, relay, pd) => {
                    let ep = Box::new(RelayEndpoint(relay.clone()));
                    match conn.adaptation().accept_relay(sid, ep, &pd) {
                        Ok(()) => {
                            tracing::info!("SCTP: session on stream {sid} accepted");
                            relays.push((sid, relay, false));
                        }
                        Err(e) => {
                            tracing::warn!("SCTP: session on stream {sid} not accepted: {e}");
                            relay.lose();
                        }
                    }
                }
                Cmd::Reject(sid, pd) => {
                    tracing::info!("SCTP: session on stream {sid} rejected by the ULP");
                    let _ = conn.adaptation().reject(sid, &pd);
                }
            }
        }
        // A queue pair that closes (after its Terminate, or gracefully) ends its
        // session with Session Terminate; the association carries on.
        for (sid, relay, terminated) in relays.iter_mut() {
            if !*terminated && relay.lock().close.is_some() {
                *terminated = true;
                let _ = conn.adaptation().terminate(*sid);
            }
        }
        // Backpressure: while one session's queue pair lags, read nothing more
        // from the association (SCTP has one receive window for all its streams).
        if let Some((_, full, _)) = relays.iter().find(|(_, r, _)| !r.has_room()) {
            let full = full.clone();
            if conn.flush().is_err() {
                lose_all(&relays, shared);
                return;
            }
            full.wait_room(Duration::from_millis(2));
            continue;
        }
        let busy = relays.iter().any(|(_, r, _)| !r.lock().outbound.is_empty());
        let wait = if busy {
            Duration::ZERO
        } else {
            Duration::from_millis(2)
        };
        let ok = conn.flush().is_ok() && conn.poll(&scratch, wait).is_ok();
        while let Some(e) = conn.poll_event() {
            match e {
                Event::InitiateRequest { sid, private_data } => {
                    tracing::debug!(
                        "SCTP: the peer asks for a session on stream {sid} ({} octets of private data)",
                        private_data.len()
                    );
                    shared
                        .lock()
                        .requests
                        .push_back(SessionRequest { sid, private_data });
                    shared.cv.notify_all();
                }
                Event::Closed { sid, reason } => {
                    tracing::info!("SCTP: session on stream {sid} closed: {reason:?}");
                    relays.retain(|(s, r, _)| {
                        if *s == sid {
                            r.push(Inbound::Closed);
                        }
                        *s != sid
                    });
                }
                _ => {}
            }
        }
        if !ok {
            lose_all(&relays, shared);
            return;
        }
    }
}

/// The association is gone: every session's queue pair and the ULP learn it.
fn lose_all(relays: &[(u16, Arc<Relay>, bool)], shared: &AssocShared) {
    for (_, r, _) in relays {
        r.lose();
    }
    shared.lock().lost = true;
    shared.cv.notify_all();
}

fn start(
    conn: SctpConnection,
    relay: Arc<Relay>,
    peer_pd: Vec<u8>,
    peer: Option<SocketAddrV4>,
) -> Connection {
    let mut conn = conn;
    let mulpdu = conn.adaptation().max_segment();
    let driver = relay.clone();
    std::thread::spawn(move || drive(conn, &driver));
    connection(relay, peer_pd, peer, mulpdu)
}

/// A queue pair's view of one relayed session.
fn connection(
    relay: Arc<Relay>,
    peer_pd: Vec<u8>,
    peer: Option<SocketAddrV4>,
    mulpdu: usize,
) -> Connection {
    let abort = relay.clone();
    Connection {
        llp: Llp::Threads {
            reader: Box::new(Reader(relay.clone())),
            writer: Box::new(Writer(relay)),
            abort: Box::new(move || {
                abort.lock().close = Some(false);
                abort.lose();
            }),
        },
        mulpdu,
        // RFC 5043 negotiates no IRD/ORD: the queue pair's builder decides.
        ird: 0,
        ord: 0,
        ird_ord_negotiated: false,
        peer_private_data: peer_pd,
        info: LlpInfo {
            transport: "sctp",
            peer: peer.map(Into::into),
            ..LlpInfo::default()
        },
        send_read_rtr: false,
    }
}

/// The association's thread: segments out, chunks in, close when asked.
fn drive(mut conn: SctpConnection, relay: &Relay) {
    let scratch = MemoryTable::new();
    let mut terminated = false;
    loop {
        let close = relay.lock().close;
        match close {
            Some(false) => {
                // Abortive close: what the queue pair already handed over (its
                // Terminate, say) still leaves, briefly, then the association ends.
                linger(&mut conn, relay, &scratch);
                let _ = conn.shutdown();
                relay.lose();
                return;
            }
            Some(true) if !terminated => {
                terminated = true;
                let _ = conn.adaptation().terminate(SID);
            }
            _ => {}
        }
        if conn.flush().is_err() {
            relay.lose();
            return;
        }
        if !relay.has_room() {
            // Backpressure: read nothing more until the queue pair has caught up.
            relay.wait_room(Duration::from_millis(2));
            continue;
        }
        let busy = !relay.lock().outbound.is_empty();
        let wait = if busy {
            Duration::ZERO
        } else {
            Duration::from_millis(2)
        };
        if conn.poll(&scratch, wait).is_err() {
            relay.lose();
            return;
        }
        while let Some(e) = conn.poll_event() {
            if let Event::Closed { sid, reason } = e {
                tracing::info!("SCTP: session on stream {sid} closed: {reason:?}");
                relay.push(Inbound::Closed);
                linger(&mut conn, relay, &scratch);
                let _ = conn.shutdown();
                return;
            }
        }
    }
}

/// Hand what is queued to SCTP, for at most 2 s (SHUTDOWN then delivers it).
fn linger(conn: &mut SctpConnection, relay: &Relay, scratch: &MemoryTable) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match conn.flush() {
            Ok(true) if relay.lock().outbound.is_empty() => return,
            Ok(_) => {}
            Err(_) => return,
        }
        if conn.poll(scratch, Duration::from_millis(1)).is_err() {
            return;
        }
    }
}

struct Reader(Arc<Relay>);

impl SegmentReader for Reader {
    fn read(&mut self) -> io::Result<Inbound> {
        let mut st = self.0.lock();
        loop {
            if let Some(i) = st.inbound.pop_front() {
                if let Inbound::Segment { bytes, .. } = &i {
                    let full = st.inbound_octets >= INBOUND_MAX_OCTETS;
                    st.inbound_octets -= bytes.len();
                    if full && st.inbound_octets < INBOUND_MAX_OCTETS {
                        drop(st);
                        self.0.cv.notify_all(); // the driver may read again
                    }
                }
                return Ok(i);
            }
            if st.lost {
                return Err(io::ErrorKind::ConnectionReset.into());
            }
            st = self.0.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

struct Writer(Arc<Relay>);

impl SegmentWriter for Writer {
    fn write_segment(&mut self, seg: &OutSegment) -> io::Result<()> {
        let mut st = self.0.lock();
        if st.lost {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        st.outbound.push_back(seg.clone());
        Ok(())
    }

    fn close(&mut self, abortive: bool) {
        let mut st = self.0.lock();
        if st.close != Some(false) {
            st.close = Some(!abortive);
        }
    }
}
