//! Connection setup over real TCP (RFC 5044 §7.1.2): [`Initiator`] and [`Responder`]
//! run on the process's event loop (rddp-io), each connection with its own
//! deadline on the loop's timers, no thread per connection; the caller gets the
//! socket back in blocking mode once setup has ended.

use super::accept::{Backlog, ListenTask, Requested};
use super::dial;
use super::io::write_frame;
use super::liveness::set_dead_peer_timeout;
use crate::error::MpaError;
use crate::options::MpaOptions;
use crate::setup::{Initiator, Negotiated, PeerRequest, Role};
use rddp_io::{Driver, TaskHandle};
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Instant;

/// The kernel's queue of connections not yet taken by the loop (capped by
/// net.core.somaxconn): the loop takes them as fast as they come, this only
/// absorbs a burst.
const LISTEN_BACKLOG: i32 = 1024;

fn bail<T>(sock: &TcpStream, e: MpaError) -> Result<T, MpaError> {
    super::log::failed(sock.peer_addr().ok(), &e);
    let _ = sock.shutdown(Shutdown::Both);
    Err(e)
}

/// Active open up to FPDU mode: TCP connect, send the Request, wait for the Reply
/// (at most `opts.reply_timeout`). Returns the socket, what was agreed, and any
/// octets that followed the Reply (the start of FPDU mode). For an upper layer
/// that frames FPDUs itself (the verbs queue pair).
///
/// The TCP connect blocks this thread; the MPA exchange runs on the event loop
/// while this thread waits for its outcome.
pub fn connect_raw(
    addr: impl ToSocketAddrs,
    opts: &MpaOptions,
) -> Result<(TcpStream, Negotiated, Vec<u8>), MpaError> {
    let init = Initiator::new(opts, Instant::now())?;
    let sock = TcpStream::connect(addr)?;
    // After the SYN (std makes and connects the socket in one call): the
    // MPA Request and everything after carry it.
    set_tos(&socket2::SockRef::from(&sock), opts.tos)?;
    if let Some(n) = opts.recv_buffer {
        // After the SYN: Linux chose the window scale from the largest buffer
        // allowed (tcp_rmem), so this one is still reachable.
        socket2::SockRef::from(&sock).set_recv_buffer_size(n)?;
    }
    sock.set_nodelay(true)?;
    set_dead_peer_timeout(&sock, opts.dead_peer_timeout)?;
    super::open_receive_window(&sock, opts.initial_receive_window, opts.recv_buffer)?;
    dial::run(sock, init, opts.tap.clone())
}

/// A passive MPA endpoint: accepts TCP connections and answers their Requests
/// with `opts` (private data, CRC, Markers, Rev, RTR types).
///
/// Connections are accepted and their Requests read on the event loop as they
/// come, whether or not an accept call waits: each accept call takes the next
/// setup that ended (a Request to answer, or the reason it failed), in the order
/// they ended. Dropping the listener closes its socket and every connection not
/// yet taken.
#[derive(Debug)]
pub struct MpaListener {
    local: SocketAddr,
    opts: MpaOptions,
    backlog: Arc<Backlog>,
    task: TaskHandle,
}

/// Bind and listen (use port 0 for a free port; see [`MpaListener::local_addr`]).
/// Fails at once on an IRD or ORD that no Reply could carry (above 14 bits).
pub fn listen(addr: impl ToSocketAddrs, opts: MpaOptions) -> Result<MpaListener, MpaError> {
    crate::setup::check_ird_ord(&opts)?;
    let listener = bind(addr, opts.recv_buffer, opts.tos)?;
    let local = listener.local_addr()?;
    let backlog = Arc::new(Backlog::new());
    let task = Driver::global()?.spawn(Box::new(ListenTask {
        listener,
        opts: opts.clone(),
        backlog: backlog.clone(),
    }))?;
    Ok(MpaListener {
        local,
        opts,
        backlog,
        task,
    })
}

/// A non-blocking listening socket on the first address of `addr` that binds.
fn bind(
    addr: impl ToSocketAddrs,
    recv_buffer: Option<usize>,
    tos: Option<u8>,
) -> io::Result<TcpListener> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        let s = Socket::new(Domain::for_address(a), Type::STREAM, Some(Protocol::TCP))?;
        // Accepted sockets inherit it (their SYN-ACK carries it too).
        set_tos(&socket2::SockRef::from(&s), tos)?;
        // As std's TcpListener::bind: a port in TIME_WAIT may be bound again.
        s.set_reuse_address(true)?;
        if let Some(n) = recv_buffer {
            // Before listen: accepted sockets inherit it, and their SYN-ACK
            // announces a window scale for it.
            s.set_recv_buffer_size(n)?;
        }
        match s.bind(&a.into()).and_then(|()| s.listen(LISTEN_BACKLOG)) {
            Ok(()) => {
                s.set_nonblocking(true)?;
                return Ok(s.into());
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any addresses",
        )
    }))
}

impl Drop for MpaListener {
    fn drop(&mut self) {
        self.backlog.close(&self.task);
    }
}

impl MpaListener {
    /// The address it listens on (the port chosen when bound to port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, MpaError> {
        Ok(self.local)
    }

    /// The options it answers Requests with.
    pub fn options(&self) -> &MpaOptions {
        &self.opts
    }

    /// Accept one connection up to FPDU mode: take the next connection whose
    /// Request has arrived (or the error of one whose setup failed), let `decide` answer it (`Ok(reply private data)` to
    /// accept, `Err(private data)` to refuse with R=1), send the Reply. Returns the
    /// socket, the peer, what was agreed and any octets after the Request. For an
    /// upper layer that frames FPDUs itself (the verbs queue pair), which must then
    /// send nothing before the initiator's first FPDU (RFC 5044 §7.1.2).
    pub fn accept_raw(
        &self,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<(TcpStream, SocketAddr, Negotiated, Vec<u8>), MpaError> {
        self.accept_raw_opts(&self.opts, decide)
    }

    /// As [`Self::accept_raw`], answering with `opts` instead of the listener's own
    /// (the verbs queue pair negotiates its own IRD/ORD this way, RFC 6581).
    pub fn accept_raw_opts(
        &self,
        opts: &MpaOptions,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<(TcpStream, SocketAddr, Negotiated, Vec<u8>), MpaError> {
        self.accept_raw_full(opts, |r, _| decide(r), opts.tap.as_ref())
    }

    /// As [`Self::accept_raw`], recording this connection's setup frames in `tap`
    /// instead of the listener's (a capture per connection).
    pub fn accept_raw_tapped(
        &self,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
        tap: Option<&crate::pcap::Tap>,
    ) -> Result<(TcpStream, SocketAddr, Negotiated, Vec<u8>), MpaError> {
        self.accept_raw_full(&self.opts, |r, _| decide(r), tap)
    }

    /// As [`Self::accept_raw`], answering with `opts` and recording the setup
    /// frames in `tap`; `decide` also sees the connection's `(local, peer)`
    /// addresses (a CM reports them with the request) and may give the
    /// Reply its own IRD/ORD ([`crate::Accept`]).
    pub fn accept_raw_full<A: Into<crate::Accept>>(
        &self,
        opts: &MpaOptions,
        decide: impl FnOnce(&PeerRequest, (SocketAddr, SocketAddr)) -> Result<A, Vec<u8>>,
        tap: Option<&crate::pcap::Tap>,
    ) -> Result<(TcpStream, SocketAddr, Negotiated, Vec<u8>), MpaError> {
        crate::setup::check_ird_ord(opts)?;
        let Requested {
            mut sock,
            peer,
            mut resp,
            received,
        } = self.backlog.pop()?;
        set_dead_peer_timeout(&sock, opts.dead_peer_timeout)?;
        // The listener's SO_RCVBUF is what the socket inherited.
        super::open_receive_window(&sock, opts.initial_receive_window, self.opts.recv_buffer)?;
        if let Some(t) = tap {
            t.record_received(&received);
        }
        // The Request was read with the listener's options; the Reply is this
        // call's (e.g. a queue pair's IRD/ORD).
        resp.set_options(opts);
        if let Some(req) = resp.request() {
            let local = sock.local_addr()?;
            match decide(req, (local, peer)).map(Into::into) {
                Ok(crate::Accept {
                    private_data,
                    ird_ord,
                }) => {
                    if let Some((ird, ord)) = ird_ord {
                        let mut o = opts.clone();
                        (o.ird, o.ord) = (ird, ord);
                        crate::setup::check_ird_ord(&o)?;
                        resp.set_options(&o);
                    }
                    resp.accept_with(private_data)?;
                }
                Err(pd) => resp.reject(pd)?,
            }
        }
        if let Some(reply) = resp.poll_transmit() {
            write_frame(&mut sock, &reply, tap, Role::Responder)?;
        }
        match resp.take_result() {
            // A Request followed by more octets fails on the loop: none are left.
            Some(Ok(n)) => {
                super::log::established(Some(peer), &n);
                Ok((sock, peer, n, Vec::new()))
            }
            Some(Err(e)) => bail(&sock, e),
            None => bail(&sock, MpaError::Timeout),
        }
    }
}

/// Set the socket's IP type of service (`tos`: IP_TOS over IPv4, IPV6_TCLASS
/// over IPv6); `None` leaves it.
fn set_tos(s: &socket2::SockRef<'_>, tos: Option<u8>) -> io::Result<()> {
    let Some(t) = tos else {
        return Ok(());
    };
    match s.local_addr()?.as_socket() {
        Some(SocketAddr::V6(_)) => s.set_tclass_v6(u32::from(t)),
        _ => s.set_tos_v4(u32::from(t)),
    }
}
