//! Association setup and verification (RFC 5043): the DDP Adaptation
//! Layer Indication in INIT/INIT-ACK, the peer's indication checked before any DDP
//! procedure, equal stream counts, one local address.

use super::{DriverError, Options, SctpConnection, Transport};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};
use usrsctp_ffi::sys::{
    SCTP_ADAPTATION_INDICATION, SCTP_ASSOC_CHANGE, SCTP_COMM_UP, SCTP_SENDER_DRY_EVENT,
    SCTP_SHUTDOWN_EVENT,
};
use usrsctp_ffi::{ConnAddress, Encapsulation, Notification, Received, Socket, Target, stack};

/// Start (or join) the process's stack. UDP encapsulation port: `port`.
fn start(opts: &Options, port: u16) -> Result<(), DriverError> {
    let e = match opts.transport {
        Transport::UdpEncapsulation => Encapsulation::Udp(port),
        Transport::RawIp => Encapsulation::RawIp,
    };
    stack::init(e)?;
    Ok(())
}

/// A socket with every option that must precede INIT.
fn socket(opts: &Options, conn: bool) -> Result<Socket, DriverError> {
    let s = Socket::new(conn)?;
    if let Some(ind) = opts.announce {
        s.set_adaptation_layer(ind)?;
    }
    s.set_init_streams(opts.config.streams)?;
    for ev in [
        SCTP_ASSOC_CHANGE,
        SCTP_ADAPTATION_INDICATION,
        SCTP_SENDER_DRY_EVENT,
        SCTP_SHUTDOWN_EVENT,
    ] {
        s.subscribe(ev)?;
    }
    s.set_recv_rcvinfo(true)?;
    s.set_nodelay(true)?;
    if let Some(m) = opts.max_seg {
        s.set_maxseg(m)?;
    }
    if let Some(t) = opts.dead_peer_timeout {
        s.set_failure_detection(super::failure_detection(t))?;
    }
    Ok(s)
}

/// An endpoint "at ADDR": SCTP port = UDP encapsulation port = ADDR's port.
#[derive(Debug)]
pub struct Listener {
    sock: Socket,
    opts: Options,
}

impl Listener {
    /// Listen at `addr` (SCTP port and UDP encapsulation port both `addr`'s port),
    /// announcing the Adaptation Indication of `opts`. A port that sockets of
    /// this process dropped there still hold is waited for, at most
    /// [`usrsctp_ffi::reaper::CLOSE_AFTER`] and a second more.
    pub fn bind(addr: SocketAddrV4, opts: Options) -> Result<Self, DriverError> {
        start(&opts, addr.port())?;
        let sock = socket(&opts, false)?;
        bind_released(&sock, addr)?;
        sock.listen(8)?;
        Ok(Self { sock, opts })
    }

    /// Listen on an in-process AF_CONN address (tests: links the caller controls).
    pub fn bind_conn(addr: &ConnAddress, port: u16, opts: Options) -> Result<Self, DriverError> {
        start_any(&opts)?;
        let sock = socket(&opts, true)?;
        sock.bind(Target::Conn {
            id: addr.id(),
            port,
        })?;
        sock.listen(8)?;
        Ok(Self { sock, opts })
    }

    /// Wait for an association and verify it (RFC 5043).
    pub fn accept(&self, timeout: Duration) -> Result<SctpConnection, DriverError> {
        let s = self.sock.accept(timeout)?;
        verify(s, &self.opts)
    }
}

/// How long listening waits for a port this process's own sockets still hold.
/// usrsctp's SCTP ports belong to the process (the stack is in user space), so
/// a port in use is held by a socket of ours, and one that was just dropped
/// lets go of it in two steps: usrsctp-ffi's reaper closes a socket whose
/// association was up within `reaper::CLOSE_AFTER`, and usrsctp unbinds a
/// closed endpoint only once its last association is freed, which it defers
/// to a timer while another of its threads still references the association
/// (0.9.5.0 `sctp_pcb.c`: `sctp_free_assoc` starts the ASOCKILL timer and
/// `sctp_inpcb_free` returns before unhashing the port). Past this wait the
/// port is held by a live socket and the error stands.
const RELEASE_WAIT: Duration =
    usrsctp_ffi::reaper::CLOSE_AFTER.saturating_add(Duration::from_secs(1));
/// How often binding is tried again while waiting: usrsctp announces no
/// endpoint's release.
const RELEASE_POLL: Duration = Duration::from_millis(5);

/// Bind a listener's socket to `addr`, waiting (at most [`RELEASE_WAIT`]) for
/// sockets of this process dropped there to release the port.
fn bind_released(sock: &Socket, addr: SocketAddrV4) -> Result<(), DriverError> {
    let deadline = Instant::now() + RELEASE_WAIT;
    loop {
        match sock.bind(Target::Inet(addr)) {
            Err(usrsctp_ffi::Error::Io { err, .. })
                if err.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline =>
            {
                let left = deadline.saturating_duration_since(Instant::now());
                if usrsctp_ffi::reaper::condemned() == 0 || !usrsctp_ffi::reaper::wait_idle(left) {
                    std::thread::sleep(RELEASE_POLL.min(left));
                }
            }
            r => return Ok(r?),
        }
    }
}

/// A free local UDP port for this process's encapsulation (the OS picks it).
fn free_udp_port() -> Result<u16, DriverError> {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .map_err(|e| DriverError::Setup(format!("no free UDP port: {e}")))?;
    s.local_addr()
        .map(|a| a.port())
        .map_err(|e| DriverError::Setup(e.to_string()))
}

/// The one local address that routes to `peer` (RFC 5043: a single address).
fn local_ip_for(peer: SocketAddrV4) -> Ipv4Addr {
    if peer.ip().is_loopback() {
        return Ipv4Addr::LOCALHOST;
    }
    let probe = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).and_then(|s| {
        s.connect(peer)?;
        s.local_addr()
    });
    match probe {
        Ok(std::net::SocketAddr::V4(a)) => *a.ip(),
        _ => Ipv4Addr::UNSPECIFIED,
    }
}

/// Connect to the endpoint at `addr` and verify the association.
pub fn connect(addr: SocketAddrV4, opts: Options) -> Result<SctpConnection, DriverError> {
    start_any(&opts)?;
    let s = socket(&opts, false)?;
    if opts.transport == Transport::UdpEncapsulation {
        s.set_remote_udp_encaps_port(addr.port())?;
    }
    s.bind(Target::Inet(SocketAddrV4::new(local_ip_for(addr), 0)))?;
    s.connect(Target::Inet(addr))?;
    verify(s, &opts)
}

/// Connect over the AF_CONN link of `local` to SCTP port `port` at its far end.
/// usrsctp names a link by one address used as both ends: packets leave through
/// `local`'s output and the far end feeds them to its own address (`conn_input`).
pub fn connect_conn(
    local: &ConnAddress,
    port: u16,
    opts: Options,
) -> Result<SctpConnection, DriverError> {
    start_any(&opts)?;
    let s = socket(&opts, true)?;
    s.bind(Target::Conn {
        id: local.id(),
        port: 0,
    })?;
    s.connect(Target::Conn {
        id: local.id(),
        port,
    })?;
    verify(s, &opts)
}

/// The UDP port of the running stack, or a free one for a new stack (one stack
/// per process: a client joins it).
/// Start the stack on any UDP port, or join the one running: a client's own
/// encapsulation port does not matter. Threads racing to start it may pick
/// different free ports; the one that loses joins the winner's stack.
fn start_any(opts: &Options) -> Result<(), DriverError> {
    match start(opts, running_port()?) {
        Err(DriverError::Sctp(usrsctp_ffi::Error::StackMismatch {
            running: Encapsulation::Udp(_),
            ..
        })) if opts.transport == Transport::UdpEncapsulation => Ok(()),
        r => r,
    }
}

fn running_port() -> Result<u16, DriverError> {
    match stack::running() {
        Some(Encapsulation::Udp(p)) => Ok(p),
        Some(Encapsulation::RawIp) => Ok(0),
        None => free_udp_port(),
    }
}

/// Wait for COMM_UP and the peer's Adaptation Layer Indication; anything else
/// first (data, or no indication in time) means no DDP: the association is aborted.
pub(crate) fn verify(s: Socket, opts: &Options) -> Result<SctpConnection, DriverError> {
    let r = check(s, opts);
    // Info, not a warning: the error goes back to the caller, who reports it.
    if let Err(e) = &r {
        tracing::info!("SCTP: association setup failed: {e}");
    }
    r
}

fn check(s: Socket, opts: &Options) -> Result<SctpConnection, DriverError> {
    let deadline = Instant::now() + opts.setup_timeout;
    let mut buf = vec![0u8; 1024];
    let mut up = false;
    let fail = |s: &Socket, e: DriverError| {
        let _ = s.abort();
        Err(e)
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // After COMM_UP the indication comes at once; a short wait is enough.
        let wait = if up {
            left.min(Duration::from_secs(1))
        } else {
            left
        };
        match s.recv(&mut buf, wait) {
            Ok(Received::Notification(Notification::AssocChange { state, .. })) => {
                if state != SCTP_COMM_UP && up {
                    // Ended after COMM_UP without an indication.
                    return Err(DriverError::NotDdp(format!(
                        "absent (association state {state})"
                    )));
                }
                if state != SCTP_COMM_UP {
                    return Err(DriverError::Setup(format!("association state {state}")));
                }
                up = true;
            }
            Ok(Received::Notification(Notification::Adaptation { indication })) => {
                if indication != rddp_wire::sctp::ADAPTATION_DDP {
                    return fail(&s, DriverError::NotDdp(format!("{indication:#010x}")));
                }
                break;
            }
            Ok(Received::Notification(_)) => {}
            Ok(Received::Data { .. }) => {
                return fail(&s, DriverError::NotDdp("absent (data came first)".into()));
            }
            Err(usrsctp_ffi::Error::Timeout(_)) if up => {
                return fail(&s, DriverError::NotDdp("absent".into()));
            }
            Err(e) => return Err(e.into()),
        }
    }
    let st = s.status()?;
    if st.instrms != st.outstrms {
        return fail(
            &s,
            DriverError::UnequalStreams {
                inbound: st.instrms,
                outbound: st.outstrms,
            },
        );
    }
    let mut cfg = opts.config;
    cfg.streams = st.outstrms.min(cfg.streams);
    tracing::info!(
        "SCTP: association up, the peer announced the DDP adaptation (0x00000001); {} streams, fragmentation point {}",
        cfg.streams,
        st.fragmentation_point
    );
    Ok(SctpConnection::new(s, cfg, st.fragmentation_point as usize))
}
