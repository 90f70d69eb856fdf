//! DDP over SCTP (RFC 5043) as a queue pair's LLP.
//!
//! One association per queue pair, one DDP Stream Session on stream 0. The
//! session machinery is rddp-sctp's (Initiate/Accept, DDP-SSN, unordered chunks,
//! the adaptation indication checked at setup); the session's segments are relayed
//! to and from the queue pair's own RDMAP engine. No thread per association or
//! queue pair: each association is a task on the process's event loop (rddp-io),
//! woken by usrsctp's upcall (data, send space, errors), by its queue pairs and
//! by a timer; it hands queued segments to SCTP with non-blocking sends and feeds
//! received ones to the queue pair's task (`crate::qp`), whose DDP sink places them
//! in any order and delivers them in DDP-SSN order. The relay holds at most
//! `INBOUND_MAX_OCTETS` for the queue pair; beyond that the association reads
//! nothing more until the queue pair made room (backpressure through SCTP's
//! receive window). A segment counts as sent (its Send or Write completes) when
//! the adaptation took it for SCTP. RFC 5043 exchanges no IRD/ORD: the queue
//! pair's builder's values apply on both sides.
//! usrsctp is loaded at run time; without it every call here says which package
//! to install.

use super::mpa_out::{Sent, summary};
use super::{Connection, HoldInner, Inbound, Llp, LlpInfo};
use rddp_io::{Cx, Next, Task, TaskHandle};
use rddp_mpa::pcap::PcapFile;
use rddp_proto::ddp::{OutSegment, SegmentEndpoint, SenderSeq, SourceError, StreamError};
use rddp_proto::mem::MemoryTable;
use rddp_sctp::Event;
use rddp_sctp::driver::{ChunkTap, DriverError, SctpConnection};
use rddp_wire::packet::{DataChunk, udp_sctp};
use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
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
    /// Segments the adaptation took from `outbound` (handed to SCTP), not yet
    /// reported to the queue pair (its completions, its budget, its IRD).
    taken: Vec<Sent>,
    /// The queue pair asked to close: gracefully (session Terminate) or not.
    close: Option<bool>,
    /// The association is gone: the queue pair reads a lost connection.
    lost: bool,
    /// The queue pair's task: woken when something arrives or was taken.
    qp: Option<TaskHandle>,
    /// The association's task: woken when output is queued, room is made, or
    /// the queue pair closes.
    assoc: Option<TaskHandle>,
}

/// One session's relay between the association's task and its queue pair
/// (both on the event loop; no thread of their own).
#[derive(Debug, Default)]
pub(crate) struct Relay {
    st: Mutex<RelayState>,
    /// For [`SctpLlp::recv`] (tests, tools without a queue pair).
    cv: Condvar,
}

fn wake(h: Option<TaskHandle>) {
    if let Some(h) = h {
        h.wake();
    }
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
        let was_empty = st.inbound.is_empty();
        st.inbound.push_back(i);
        let qp = was_empty.then(|| st.qp.clone()).flatten();
        drop(st);
        self.cv.notify_all();
        wake(qp);
    }
    /// Whether the association may read the next message for this relay.
    fn has_room(&self) -> bool {
        let st = self.lock();
        st.lost || st.inbound_octets < INBOUND_MAX_OCTETS
    }
    fn lose(&self) {
        let mut st = self.lock();
        st.lost = true;
        let (qp, assoc) = (st.qp.clone(), st.assoc.clone());
        drop(st);
        self.cv.notify_all();
        wake(qp);
        wake(assoc);
    }
    fn close_requested(&self) -> Option<bool> {
        self.lock().close
    }
    pub(crate) fn outbound_idle(&self) -> bool {
        self.lock().outbound.is_empty()
    }
    fn set_assoc(&self, h: TaskHandle) {
        self.lock().assoc = Some(h);
    }

    /// The next thing that arrived (`None`: nothing yet). Taking a segment may
    /// make room: the association then reads again.
    pub(crate) fn pop(&self) -> Option<io::Result<Inbound>> {
        let mut st = self.lock();
        match st.inbound.pop_front() {
            Some(i) => {
                let mut assoc = None;
                if let Inbound::Segment { bytes, .. } = &i {
                    let full = st.inbound_octets >= INBOUND_MAX_OCTETS;
                    st.inbound_octets -= bytes.len();
                    if full && st.inbound_octets < INBOUND_MAX_OCTETS {
                        assoc = st.assoc.clone();
                    }
                }
                drop(st);
                wake(assoc);
                Some(Ok(i))
            }
            None if st.lost => Some(Err(io::ErrorKind::ConnectionReset.into())),
            None => None,
        }
    }

    /// Hand segments to the association (its task is woken once); `false` if the
    /// association is gone.
    pub(crate) fn send(&self, segs: impl IntoIterator<Item = OutSegment>) -> bool {
        let mut st = self.lock();
        if st.lost {
            return false;
        }
        let before = st.outbound.len();
        st.outbound.extend(segs);
        let assoc = (st.outbound.len() > before)
            .then(|| st.assoc.clone())
            .flatten();
        drop(st);
        wake(assoc);
        true
    }

    /// Segments SCTP took since the last call, in order.
    pub(crate) fn take_sent(&self, out: &mut Vec<Sent>) {
        out.append(&mut self.lock().taken);
    }

    pub(crate) fn set_qp(&self, h: TaskHandle) {
        self.lock().qp = Some(h);
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lock().lost
    }

    /// Close the session: abortive (after a Terminate) or graceful.
    pub(crate) fn close(&self, abortive: bool) {
        let mut st = self.lock();
        if st.close != Some(false) {
            st.close = Some(!abortive);
        }
        let assoc = st.assoc.clone();
        drop(st);
        wake(assoc);
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
        // Taken now to be handed to SCTP at once (the adaptation pulls one
        // segment per chunk it sends): the queue pair hears it was sent.
        let mut st = self.0.lock();
        let seg = st.outbound.pop_front()?;
        let was_empty = st.taken.is_empty();
        st.taken.push(summary(&seg));
        let qp = was_empty.then(|| st.qp.clone()).flatten();
        drop(st);
        wake(qp);
        Some(seg)
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
    start(conn, relay, peer_pd, Some(addr))
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
        let task = AssocTask::new(conn, Vec::new(), Some(shared.clone()));
        let h = spawn_assoc(task)?;
        shared.lock().task = Some(h);
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
    /// The association's task.
    task: Option<TaskHandle>,
    /// Told when a request arrives or the association is lost.
    notify: Option<Notify>,
}

/// See [`Association::set_notify`].
pub type Notify = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct AssocShared {
    st: Mutex<AssocState>,
    cv: Condvar,
}

impl AssocShared {
    fn lock(&self) -> MutexGuard<'_, AssocState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Wake whoever waits for requests (and the notify function).
    fn tell(&self) {
        self.cv.notify_all();
        let n = self.lock().notify.clone();
        if let Some(n) = n {
            n();
        }
    }
    fn command(&self, c: Cmd) {
        let mut st = self.lock();
        st.cmds.push_back(c);
        let h = st.task.clone();
        drop(st);
        wake(h);
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

    /// Call `notify` whenever a session Initiate arrives or the association
    /// ends (at once if requests are already waiting): a ULP serving many
    /// associations from one thread takes them with `next_request(ZERO)`.
    /// Called from the event loop's thread: it must not block.
    pub fn set_notify(&self, notify: Notify) {
        let mut st = self.shared.lock();
        st.notify = Some(notify.clone());
        let now = !st.requests.is_empty() || st.lost;
        drop(st);
        if now {
            notify();
        }
    }

    /// Whether the association ended.
    pub fn is_lost(&self) -> bool {
        self.shared.lock().lost
    }

    /// Accept the session with `private_data`: a connection for a queue pair.
    pub fn accept(&self, req: &SessionRequest, private_data: &[u8]) -> Connection {
        let relay = Arc::new(Relay::default());
        let (mulpdu, task) = {
            let st = self.shared.lock();
            (st.mulpdu, st.task.clone())
        };
        if let Some(h) = task {
            relay.set_assoc(h);
        }
        self.shared
            .command(Cmd::Accept(req.sid, relay.clone(), private_data.to_vec()));
        connection(relay, req.private_data.clone(), None, mulpdu)
    }

    /// Reject the session (only ever at the ULP's direction, seed 001).
    pub fn reject(&self, req: &SessionRequest, private_data: &[u8]) {
        self.shared
            .command(Cmd::Reject(req.sid, private_data.to_vec()));
    }
}

/// Runs per association task: messages received (or chunks sent) before it
/// lets the loop's other tasks go first.
const MESSAGES_PER_RUN: usize = 64;

/// How long a closing association lets queued output (a Terminate) leave.
const LINGER: Duration = Duration::from_secs(2);

/// When an idle association looks again anyway (the path's fragmentation point;
/// a safety net only: every upcall wakes the task). Cheap with thousands of
/// associations.
const IDLE_CHECK: Duration = Duration::from_millis(500);

/// When a blocked send tries again if no upcall says there is space.
const BLOCKED_CHECK: Duration = Duration::from_millis(1);

/// Spawn an association's task on the process's event loop; usrsctp's upcall
/// wakes it (data, send space, errors).
fn spawn_assoc(task: AssocTask) -> io::Result<TaskHandle> {
    let driver = rddp_io::Driver::global()?;
    let slot: Arc<OnceLock<TaskHandle>> = Arc::new(OnceLock::new());
    let s2 = slot.clone();
    task.conn.set_wake(Some(Arc::new(move || {
        if let Some(h) = s2.get() {
            h.wake();
        }
    })));
    let relays: Vec<Arc<Relay>> = task.sessions.iter().map(|s| s.relay.clone()).collect();
    let h = driver.spawn(Box::new(task))?;
    let _ = slot.set(h.clone());
    for r in relays {
        r.set_assoc(h.clone());
    }
    // Anything that came before the handle was known is looked at now.
    h.wake();
    Ok(h)
}

struct Session {
    sid: u16,
    relay: Arc<Relay>,
    /// Our Session Terminate was asked for.
    terminated: bool,
}

/// One association on the event loop: the ULP's accepts and rejects in (passive
/// side), session requests out, each session's segments relayed to and from its
/// queue pair. No thread of its own: woken by usrsctp's upcall, by its queue
/// pairs, and by a timer.
struct AssocTask {
    conn: SctpConnection,
    scratch: MemoryTable,
    sessions: Vec<Session>,
    /// The passive side's ULP (requests, accepts); `None`: the active side, whose
    /// one session is the association (its end ends the association).
    shared: Option<Arc<AssocShared>>,
    /// Closing: queued output may leave until then; then SHUTDOWN.
    linger: Option<Instant>,
    /// After the linger: the relays are lost (an abortive close), or not.
    lose_after: bool,
    /// The timer asked for (kept while it is ahead and no sooner one is
    /// needed, so that a busy association does not fill the loop's timer heap).
    check_at: Instant,
}

impl AssocTask {
    fn new(
        conn: SctpConnection,
        relays: Vec<Arc<Relay>>,
        shared: Option<Arc<AssocShared>>,
    ) -> Self {
        Self {
            conn,
            scratch: MemoryTable::new(),
            sessions: relays
                .into_iter()
                .map(|relay| Session {
                    sid: SID,
                    relay,
                    terminated: false,
                })
                .collect(),
            shared,
            linger: None,
            lose_after: false,
            check_at: Instant::now(),
        }
    }

    /// The association is gone: every session's queue pair and the ULP learn it.
    fn lose_all(&mut self) -> Next {
        for s in &self.sessions {
            s.relay.lose();
        }
        if let Some(sh) = &self.shared {
            sh.lock().lost = true;
            sh.tell();
        }
        Next::Done
    }

    fn commands(&mut self) {
        let Some(shared) = &self.shared else {
            return;
        };
        let cmds: Vec<Cmd> = {
            let mut st = shared.lock();
            st.mulpdu = self.conn.adaptation().max_segment();
            st.cmds.drain(..).collect()
        };
        for c in cmds {
            match c {
                Cmd::Accept(sid, relay, pd) => {
                    let ep = Box::new(RelayEndpoint(relay.clone()));
                    match self.conn.adaptation().accept_relay(sid, ep, &pd) {
                        Ok(()) => {
                            tracing::info!("SCTP: session on stream {sid} accepted");
                            self.sessions.push(Session {
                                sid,
                                relay,
                                terminated: false,
                            });
                        }
                        Err(e) => {
                            tracing::warn!("SCTP: session on stream {sid} not accepted: {e}");
                            relay.lose();
                        }
                    }
                }
                Cmd::Reject(sid, pd) => {
                    tracing::info!("SCTP: session on stream {sid} rejected by the ULP");
                    let _ = self.conn.adaptation().reject(sid, &pd);
                }
            }
        }
    }

    /// A queue pair that closes (after its Terminate, or gracefully) ends its
    /// session with Session Terminate. On the active side an abortive close
    /// ends the association after the linger.
    fn closes(&mut self, now: Instant) {
        let active = self.shared.is_none();
        for s in self.sessions.iter_mut() {
            match s.relay.close_requested() {
                Some(false) if active => {
                    // What the queue pair already handed over (its Terminate,
                    // say) still leaves, briefly; then the association ends.
                    self.linger.get_or_insert(now + LINGER);
                    self.lose_after = true;
                }
                Some(_) if !s.terminated => {
                    s.terminated = true;
                    let _ = self.conn.adaptation().terminate(s.sid);
                }
                _ => {}
            }
        }
    }

    fn events(&mut self, now: Instant) {
        while let Some(e) = self.conn.poll_event() {
            match e {
                Event::InitiateRequest { sid, private_data } => {
                    let Some(shared) = &self.shared else {
                        continue;
                    };
                    tracing::debug!(
                        "SCTP: the peer asks for a session on stream {sid} ({} octets of private data)",
                        private_data.len()
                    );
                    shared
                        .lock()
                        .requests
                        .push_back(SessionRequest { sid, private_data });
                    shared.tell();
                }
                Event::Closed { sid, reason } => {
                    tracing::info!("SCTP: session on stream {sid} closed: {reason:?}");
                    self.sessions.retain(|s| {
                        if s.sid == sid {
                            s.relay.push(Inbound::Closed);
                        }
                        s.sid != sid
                    });
                    if self.shared.is_none() && self.linger.is_none() {
                        // The active side's one session ended: so does the
                        // association, once what is queued has left.
                        self.linger = Some(now + LINGER);
                    }
                }
                _ => {}
            }
        }
    }
}

impl Task for AssocTask {
    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        let now = cx.now;
        self.commands();
        self.closes(now);
        let mut more = false;
        let mut all_out = false;
        for i in 0..=MESSAGES_PER_RUN {
            all_out = match self.conn.flush() {
                Ok(a) => a,
                Err(_) => return self.lose_all(),
            };
            // Backpressure: while one session's queue pair lags, read nothing more
            // from the association (SCTP has one receive window for all streams);
            // the queue pair wakes us when it made room.
            if self.sessions.iter().any(|s| !s.relay.has_room()) {
                break;
            }
            if i == MESSAGES_PER_RUN {
                more = true;
                break;
            }
            match self.conn.poll(&self.scratch, Duration::ZERO) {
                Ok(true) => self.events(now),
                Ok(false) => break,
                Err(_) => {
                    self.events(now);
                    return self.lose_all();
                }
            }
            self.closes(now);
        }
        if let Some(t) = self.linger {
            let drained = all_out && self.sessions.iter().all(|s| s.relay.outbound_idle());
            if drained || now >= t {
                let _ = self.conn.shutdown();
                if self.lose_after {
                    return self.lose_all();
                }
                return Next::Done;
            }
        }
        if more {
            cx.handle().wake();
        }
        let check = if self.conn.is_blocked() || self.linger.is_some() {
            BLOCKED_CHECK
        } else {
            IDLE_CHECK
        };
        let want = now + check;
        if self.check_at <= now || want < self.check_at {
            self.check_at = want;
        }
        Next::Wait {
            interest: None,
            deadline: Some(self.check_at),
        }
    }
}

/// The queue pair's side of one session (`Llp::Sctp`): its relay, driven by
/// the queue pair's task on the event loop.
pub struct SctpLlp {
    pub(crate) relay: Arc<Relay>,
    pub(crate) hold: Option<Arc<HoldInner>>,
}

impl SctpLlp {
    /// Wait up to `timeout` for what the session delivers, without a queue pair
    /// (tests: a reader that does not read holds the peer back). `TimedOut` if
    /// nothing came.
    pub fn recv(&self, timeout: Duration) -> io::Result<Inbound> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.relay.pop() {
                return r;
            }
            let st = self.relay.lock();
            if !st.inbound.is_empty() || st.lost {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            let _ = self.relay.cv.wait_timeout(st, left);
        }
    }
}

fn start(
    conn: SctpConnection,
    relay: Arc<Relay>,
    peer_pd: Vec<u8>,
    peer: Option<SocketAddrV4>,
) -> io::Result<Connection> {
    let mut conn = conn;
    let mulpdu = conn.adaptation().max_segment();
    spawn_assoc(AssocTask::new(conn, vec![relay.clone()], None))?;
    Ok(connection(relay, peer_pd, peer, mulpdu))
}

/// A queue pair's view of one relayed session.
fn connection(
    relay: Arc<Relay>,
    peer_pd: Vec<u8>,
    peer: Option<SocketAddrV4>,
    mulpdu: usize,
) -> Connection {
    Connection {
        llp: Llp::Sctp(Box::new(SctpLlp { relay, hold: None })),
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
