//! The one place the tool turns an address into connected LLPs (MPA/TCP, SCTP).

use rddp::transport::{Connection, mpa, sctp};
use rddp_mpa::{MpaError, MpaOptions};
use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, SocketAddrV4, ToSocketAddrs};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Mpa,
    Sctp,
}

/// Responder-side policies.
#[derive(Debug, Clone)]
pub(crate) struct ListenOpts {
    pub crc_required: bool,
    pub refuse_markers: bool,
    pub sctp_max_pending: usize,
    pub sctp_accept_delay: Duration,
    pub sctp_reject: bool,
    /// MPA: how long a connection may take to send its Request (and, in
    /// peer-to-peer mode, its RTR) before it is closed (RFC 5044 §7.1.2).
    pub setup_timeout: Duration,
    /// MPA: SO_RCVBUF of every accepted socket (`MpaOptions::recv_buffer`).
    pub recv_buffer: Option<usize>,
}

impl Default for ListenOpts {
    fn default() -> Self {
        Self {
            crc_required: false,
            refuse_markers: false,
            sctp_max_pending: 16,
            sctp_accept_delay: Duration::ZERO,
            sctp_reject: false,
            setup_timeout: MpaOptions::default().request_timeout,
            recv_buffer: None,
        }
    }
}

pub(crate) trait Listener: Send + Sync {
    fn local_addr(&self) -> String;
    /// The next connection, set up and ready to attach; a refused or failed setup
    /// is an error for that connection only.
    fn accept(&self) -> Result<Connection, String>;
}

/// Listen on `addr`; errors are one line saying what happened and what to try.
pub(crate) fn listen(
    t: Transport,
    addr: &str,
    opts: &ListenOpts,
) -> Result<Box<dyn Listener>, String> {
    match t {
        Transport::Mpa => {
            let mpa = MpaOptions {
                // Required: our Reply sets C=1, which turns CRC on (RFC 5044: either
                // side's C bit). Optional: the initiator's C bit decides.
                crc: opts.crc_required,
                request_timeout: opts.setup_timeout,
                recv_buffer: opts.recv_buffer,
                ..MpaOptions::default()
            };
            let inner = mpa::Listener::bind(addr, mpa).map_err(|e| listen_error(addr, &e))?;
            Ok(Box::new(MpaListen {
                inner,
                refuse_markers: opts.refuse_markers,
            }))
        }
        Transport::Sctp => {
            let mut at = v4(addr)?;
            if at.port() == 0 {
                // usrsctp's UDP encapsulation port is the listening port: pick one.
                at.set_port(free_udp_port(at)?);
            }
            let mut o = sctp::SctpOptions::default();
            o.config.max_pending_initiates = opts.sctp_max_pending.max(1);
            let inner =
                sctp::Listener::bind(at, o).map_err(|e| format!("cannot listen on {at}: {e}"))?;
            Ok(Box::new(SctpListen::start(
                inner,
                at,
                opts.sctp_accept_delay,
                opts.sctp_reject,
            )))
        }
    }
}

fn v4(addr: &str) -> Result<SocketAddrV4, String> {
    match addr
        .to_socket_addrs()
        .map_err(|e| format!("bad address {addr}: {e}"))?
        .next()
    {
        Some(SocketAddr::V4(a)) => Ok(a),
        _ => Err(format!(
            "bad address {addr}: SCTP here needs an IPv4 address"
        )),
    }
}

fn free_udp_port(at: SocketAddrV4) -> Result<u16, String> {
    let s = std::net::UdpSocket::bind(SocketAddrV4::new(*at.ip(), 0))
        .map_err(|e| format!("no free UDP port: {e}"))?;
    s.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// Connect to `addr` (`recv_buffer`: MPA's SO_RCVBUF, `MpaOptions::recv_buffer`).
pub(crate) fn connect(
    t: Transport,
    addr: &str,
    crc: bool,
    recv_buffer: Option<usize>,
) -> Result<Connection, String> {
    match t {
        Transport::Mpa => {
            let opts = MpaOptions {
                crc,
                recv_buffer,
                ..MpaOptions::default()
            };
            mpa::connect(addr, &opts).map_err(|e| connect_error(addr, &e))
        }
        Transport::Sctp => {
            let _ = crc; // SCTP protects every packet with its own CRC32c.
            let at = v4(addr)?;
            sctp::connect(at, sctp::SctpOptions::default(), &[]).map_err(|e| {
                format!("cannot connect to {addr} over SCTP: {e} (is `rddp perf server --transport sctp` or `rddp target --transport sctp` listening there?)")
            })
        }
    }
}

/// SCTP for the tool: every association may carry many sessions. Each session
/// Initiate is handed to the ULP's rule (accept after `delay`, or reject), each
/// decided on its own: several Initiates wait at once, up to the adaptation's
/// bound, and one more is answered with Terminate by the adaptation (RFC 5043).
struct SctpListen {
    at: SocketAddrV4,
    sessions: Mutex<Receiver<Connection>>,
}

impl SctpListen {
    /// Two threads for all associations: one accepts them, one decides on
    /// their Initiates (woken by each association's notify), never one per
    /// association.
    fn start(inner: sctp::Listener, at: SocketAddrV4, delay: Duration, reject: bool) -> Self {
        let (tx, rx) = channel();
        let (dtx, drx) = channel::<Decide>();
        let notify_tx = dtx.clone();
        std::thread::spawn(move || serve_associations(&drx, &notify_tx, delay, reject, &tx));
        std::thread::spawn(move || {
            loop {
                match inner.accept_association(Duration::from_secs(1)) {
                    Ok(assoc) => {
                        if dtx.send(Decide::New(assoc)).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                    // A failed association setup (e.g. a peer without the DDP
                    // adaptation indication) ends that association only.
                    Err(_) => {}
                }
            }
        });
        Self {
            at,
            sessions: Mutex::new(rx),
        }
    }
}

/// What the deciding thread hears.
enum Decide {
    New(sctp::Association),
    /// Association `id` has requests waiting, or ended.
    Ready(u64),
}

fn serve_associations(
    rx: &Receiver<Decide>,
    notify_tx: &Sender<Decide>,
    delay: Duration,
    reject: bool,
    tx: &Sender<Connection>,
) {
    let mut assocs: HashMap<u64, sctp::Association> = HashMap::new();
    let mut next_id = 0u64;
    // Initiates waiting for their decision, each due `delay` after it arrived
    // (the same delay for all: arrival order is deadline order).
    let mut due: VecDeque<(Instant, u64, sctp::SessionRequest)> = VecDeque::new();
    loop {
        let wait = due.front().map_or(Duration::from_secs(3600), |(at, _, _)| {
            at.saturating_duration_since(Instant::now())
        });
        match rx.recv_timeout(wait) {
            Ok(Decide::New(a)) => {
                let id = next_id;
                next_id += 1;
                let n = notify_tx.clone();
                a.set_notify(std::sync::Arc::new(move || {
                    let _ = n.send(Decide::Ready(id));
                }));
                assocs.insert(id, a);
            }
            Ok(Decide::Ready(id)) => {
                if let Some(a) = assocs.get(&id) {
                    while let Some(req) = a.next_request(Duration::ZERO) {
                        due.push_back((Instant::now() + delay, id, req));
                    }
                    if a.is_lost() {
                        assocs.remove(&id);
                    }
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
        }
        while let Some((_, id, req)) = due.pop_front_if(|(at, _, _)| *at <= Instant::now()) {
            let Some(a) = assocs.get(&id) else {
                continue;
            };
            if reject {
                a.reject(&req, b"rejected");
            } else if tx.send(a.accept(&req, &[])).is_err() {
                return;
            }
        }
    }
}

impl Listener for SctpListen {
    fn local_addr(&self) -> String {
        self.at.to_string()
    }

    fn accept(&self) -> Result<Connection, String> {
        let rx = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        rx.recv()
            .map_err(|_| "the SCTP listener stopped".to_string())
    }
}

fn listen_error(addr: &str, e: &MpaError) -> String {
    use std::io::ErrorKind;
    let hint = match e {
        MpaError::Io(io) if io.kind() == ErrorKind::AddrInUse => {
            "the port is in use; pick another, or port 0 for a free one"
        }
        MpaError::Io(io) if io.kind() == ErrorKind::AddrNotAvailable => {
            "that address is not on this machine; try 127.0.0.1:0 or 0.0.0.0:PORT"
        }
        MpaError::Io(io) if io.kind() == ErrorKind::PermissionDenied => {
            "ports below 1024 need privileges; pick a higher port"
        }
        _ if addr.parse::<std::net::SocketAddr>().is_err() => {
            "give IP:PORT or HOST:PORT, e.g. 127.0.0.1:0"
        }
        _ => "check the address and the port",
    };
    format!("cannot listen on {addr}: {e} ({hint})")
}

fn connect_error(addr: &str, e: &MpaError) -> String {
    let hint = match e {
        MpaError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "nothing listens there; start `rddp perf server` or `rddp target` first"
        }
        MpaError::BadKey | MpaError::InvalidFrame(..) => {
            "the peer does not speak MPA; check the address and port"
        }
        MpaError::Timeout => "the peer accepted TCP but never answered the MPA Request",
        MpaError::Rejected { .. } => "the peer refused the connection",
        _ => "check the address, the port and that the peer runs rddp",
    };
    format!("cannot connect to {addr}: {e} ({hint})")
}

struct MpaListen {
    inner: mpa::Listener,
    refuse_markers: bool,
}

impl Listener for MpaListen {
    fn local_addr(&self) -> String {
        self.inner
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default()
    }

    fn accept(&self) -> Result<Connection, String> {
        let refuse = self.refuse_markers;
        self.inner
            .accept_with(|req| {
                if refuse && req.flags.markers() {
                    Err(b"markers refused".to_vec())
                } else {
                    Ok(Vec::new())
                }
            })
            .map_err(|e| format!("connection setup failed: {e}"))
    }
}
