//! DDP over SCTP (RFC 5043) as a queue pair's LLP.
//!
//! One association per queue pair, one DDP Stream Session on stream 0. The
//! session machinery is rddp-sctp's (Initiate/Accept, DDP-SSN, unordered chunks,
//! the adaptation indication checked at setup); the session's segments are relayed
//! to and from the queue pair's own RDMAP engine. No thread per association or
//! queue pair: each association is a task on the process's event loop (rddp-io),
//! woken by usrsctp's upcall (data, send space, errors), by its queue pairs and
//! by a timer; it hands queued segments to SCTP with non-blocking sends (the
//! posting thread sends them itself when the connection is free and nothing
//! waits ahead of them: no hop per message, see `Relay::send`) and places
//! received ones into the queue pair itself, header first (`Placer`: RDMAP
//! decides from the DDP header, usrsctp's read puts the payload there), or,
//! while the queue pair's reads are held, queues them for the queue pair's task
//! (`crate::qp`); its DDP sink places them in any order and delivers them in
//! DDP-SSN order. The relay holds at most
//! `INBOUND_MAX_OCTETS` for the queue pair; beyond that the association reads
//! nothing more until the queue pair made room (backpressure through SCTP's
//! receive window). A segment counts as sent (its Send or Write completes) when
//! the adaptation took it for SCTP. RFC 5043 exchanges no IRD/ORD: the queue
//! pair's builder's values apply on both sides.
//! usrsctp is loaded at run time; without it every call here says which package
//! to install.

mod assoc;
mod relay;

use super::{Connection, Llp, LlpInfo};
pub use assoc::Notify;
use assoc::{AssocShared, AssocTask, Cmd, spawn_assoc};
use rddp_mpa::pcap::PcapFile;
use rddp_proto::mem::MemoryTable;
use rddp_sctp::Event;
use rddp_sctp::driver::{ChunkTap, DriverError, SctpConnection};
use rddp_wire::packet::{DataChunk, udp_sctp};
use relay::RelayEndpoint;
pub(crate) use relay::{Placer, Relay};
pub use relay::{SctpLlp, direct_sends_deferred};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use rddp_sctp::driver::Options as SctpOptions;
pub use rddp_sctp::driver::{DEAD_PEER_TIMEOUT, dead_peer_bound};

/// Whether libusrsctp can be loaded here; the error says which package to install.
pub fn available() -> Result<(), String> {
    usrsctp_ffi::available().map_err(|e| e.to_string())
}

/// The session's stream number.
const SID: u16 = 0;

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
    /// Listen for associations on `addr` (SCTP port = UDP encapsulation port =
    /// `addr`'s port).
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

/// A peer's DDP Stream Session Initiate, waiting for the ULP (RFC 5043: at most
/// `SctpOptions::config.max_pending_initiates` wait; one more is answered with
/// Terminate by the adaptation itself).
#[derive(Debug, Clone)]
pub struct SessionRequest {
    /// The SCTP stream of the session.
    pub sid: u16,
    /// The private data of its Initiate (at most 512 octets).
    pub private_data: Vec<u8>,
}

/// One association on the passive side; each accepted session is a connection
/// for its own queue pair.
pub struct Association {
    shared: Arc<AssocShared>,
    timeout: Duration,
}

impl Association {
    /// The next session Initiate, waiting up to `timeout`; `None` on timeout or
    /// when the association is gone. A request taken is answered only by
    /// [`Self::accept`] or [`Self::reject`].
    #[must_use = "a request taken waits for accept or reject"]
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

    /// Accept the session with `private_data`: a connection for a queue pair
    /// ([`crate::PreparedQueuePair::attach`]).
    #[must_use = "the accepted session runs only once its connection is attached"]
    pub fn accept(&self, req: &SessionRequest, private_data: &[u8]) -> Connection {
        let relay = Arc::new(Relay::default());
        let (mulpdu, task, conn) = {
            let st = self.shared.lock();
            (st.mulpdu, st.task.clone(), st.conn.clone())
        };
        if let Some(h) = task {
            relay.set_assoc(h);
        }
        if let Some(c) = conn {
            relay.set_conn(&c);
        }
        self.shared
            .command(Cmd::Accept(req.sid, relay.clone(), private_data.to_vec()));
        connection(relay, req.private_data.clone(), None, mulpdu)
    }

    /// Reject the session (only ever at the ULP's direction).
    pub fn reject(&self, req: &SessionRequest, private_data: &[u8]) {
        self.shared
            .command(Cmd::Reject(req.sid, private_data.to_vec()));
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
