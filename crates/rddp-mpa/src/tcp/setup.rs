//! Connection setup over real TCP (spec §4.9): drives [`Initiator`] and
//! [`Responder`] with socket reads bounded by their deadlines.

use super::conn::MpaConnection;
use super::io::{read_until, write_frame};
use super::mss::effective_mss;
use crate::error::MpaError;
use crate::fpdu::FpduConn;
use crate::options::MpaOptions;
use crate::setup::{Initiator, Negotiated, PeerRequest, Responder, Role, SetupStatus};
use rddp_proto::mem::MemoryTable;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Instant;

/// Octets read per call during setup: a Request/Reply is at most 532.
const SETUP_READ: usize = 4096;

fn bail<T>(sock: &TcpStream, e: MpaError) -> Result<T, MpaError> {
    let _ = sock.shutdown(Shutdown::Both);
    Err(e)
}

/// Active open up to FPDU mode: TCP connect, send the Request, wait for the Reply
/// (at most `opts.reply_timeout`). Returns the socket, what was agreed, and any
/// octets that followed the Reply (the start of FPDU mode). For an upper layer
/// that frames FPDUs itself (the verbs queue pair); [`connect`] builds on it.
pub fn connect_raw(
    addr: impl ToSocketAddrs,
    opts: &MpaOptions,
) -> Result<(TcpStream, Negotiated, Vec<u8>), MpaError> {
    let mut init = Initiator::new(opts, Instant::now())?;
    let mut sock = TcpStream::connect(addr)?;
    sock.set_nodelay(true)?;
    let tap = opts.tap.as_ref();
    if let Some(req) = init.poll_transmit() {
        write_frame(&mut sock, &req, tap, Role::Initiator)?;
    }
    let mut buf = vec![0u8; SETUP_READ];
    let leftover = loop {
        match read_until(&mut sock, &mut buf, init.deadline())? {
            None => init.on_timeout(Instant::now()),
            Some(0) => return bail(&sock, MpaError::ConnectionLost),
            Some(n) => {
                let used = init.on_bytes(&buf[..n]);
                if init.status() == SetupStatus::Established {
                    break buf[used..n].to_vec();
                }
            }
        }
        if init.status() == SetupStatus::Failed {
            if let Some(t) = init.poll_transmit() {
                let _ = write_frame(&mut sock, &t, tap, Role::Initiator);
            }
            let e = init
                .take_result()
                .and_then(Result::err)
                .unwrap_or(MpaError::Timeout);
            return bail(&sock, e);
        }
    };
    match init.take_result() {
        Some(Ok(n)) => Ok((sock, n, leftover)),
        Some(Err(e)) => bail(&sock, e),
        None => bail(&sock, MpaError::Timeout),
    }
}

/// Active open: [`connect_raw`], then FPDU mode with the RTR sent if one was agreed.
pub fn connect(addr: impl ToSocketAddrs, opts: MpaOptions) -> Result<MpaConnection, MpaError> {
    let (sock, neg, leftover) = connect_raw(addr, &opts)?;
    let emss = opts.emss.unwrap_or_else(|| effective_mss(&sock));
    let conn = FpduConn::new(neg, &opts, emss)?;
    let mut c = MpaConnection::new(sock, conn, &opts, leftover)?;
    c.flush()?;
    Ok(c)
}

/// A passive MPA endpoint: accepts TCP connections and answers their Requests
/// with `opts` (private data, CRC, Markers, Rev, RTR types).
#[derive(Debug)]
pub struct MpaListener {
    listener: TcpListener,
    opts: MpaOptions,
}

/// Bind and listen (use port 0 for a free port; see [`MpaListener::local_addr`]).
/// Fails at once on an IRD or ORD that no Reply could carry (above 14 bits).
pub fn listen(addr: impl ToSocketAddrs, opts: MpaOptions) -> Result<MpaListener, MpaError> {
    crate::setup::check_ird_ord(&opts)?;
    Ok(MpaListener {
        listener: TcpListener::bind(addr)?,
        opts,
    })
}

impl MpaListener {
    pub fn local_addr(&self) -> Result<SocketAddr, MpaError> {
        Ok(self.listener.local_addr()?)
    }

    /// Accept one connection and run the responder's setup: wait for the Request
    /// (at most `request_timeout`), accept it, send the Reply, and in peer-to-peer
    /// mode wait (same deadline) for the RTR. A refused Request (Reply with R=1 or
    /// close) returns [`MpaError::Refused`]; the listener stays usable.
    pub fn accept(&self) -> Result<MpaConnection, MpaError> {
        let pd = self.opts.private_data.clone();
        self.accept_with(move |_| Ok(pd))
    }

    /// Accept one connection up to FPDU mode: wait for the Request (at most
    /// `request_timeout`), let `decide` answer it (`Ok(reply private data)` to
    /// accept, `Err(private data)` to refuse with R=1), send the Reply. Returns the
    /// socket, the peer, what was agreed and any octets after the Request. For an
    /// upper layer that frames FPDUs itself (the verbs queue pair), which must then
    /// send nothing before the initiator's first FPDU (spec §4.9).
    pub fn accept_raw(
        &self,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<(TcpStream, SocketAddr, Negotiated, Vec<u8>), MpaError> {
        self.accept_raw_opts(&self.opts, decide)
    }

    /// As [`Self::accept_raw`], answering with `opts` instead of the listener's own
    /// (the verbs queue pair negotiates its own IRD/ORD this way, spec §4.10).
    pub fn accept_raw_opts(
        &self,
        opts: &MpaOptions,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<(TcpStream, SocketAddr, Negotiated, Vec<u8>), MpaError> {
        crate::setup::check_ird_ord(opts)?;
        let (mut sock, peer) = self.listener.accept()?;
        sock.set_nodelay(true)?;
        let tap = opts.tap.as_ref();
        let mut resp = Responder::new(opts, Instant::now());
        let mut buf = vec![0u8; SETUP_READ];
        let mut leftover = Vec::new();
        while matches!(resp.status(), SetupStatus::Pending) {
            match read_until(&mut sock, &mut buf, resp.deadline())? {
                None => resp.on_timeout(Instant::now()),
                Some(0) => return bail(&sock, MpaError::ConnectionLost),
                Some(n) => {
                    let used = resp.on_bytes(&buf[..n]);
                    leftover = buf[used..n].to_vec();
                }
            }
        }
        if resp.status() == SetupStatus::Requested
            && let Some(req) = resp.request()
        {
            match decide(req) {
                Ok(pd) => resp.accept_with(pd)?,
                Err(pd) => resp.reject(pd)?,
            }
        }
        if let Some(reply) = resp.poll_transmit() {
            write_frame(&mut sock, &reply, tap, Role::Responder)?;
        }
        match resp.take_result() {
            Some(Ok(n)) => Ok((sock, peer, n, leftover)),
            Some(Err(e)) => bail(&sock, e),
            None => bail(&sock, MpaError::Timeout),
        }
    }

    /// As [`Self::accept`], letting the ULP decide per Request: `decide` sees the
    /// initiator's Request (its private data included) and returns `Ok(reply
    /// private data)` to accept or `Err(private data)` to refuse with R=1.
    pub fn accept_with(
        &self,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<MpaConnection, MpaError> {
        let opts = &self.opts;
        let deadline = Some(Instant::now() + opts.request_timeout);
        let (sock, _, neg, leftover) = self.accept_raw(decide)?;
        let emss = opts.emss.unwrap_or_else(|| effective_mss(&sock));
        let conn = FpduConn::new(neg, opts, emss)?;
        let mut c = MpaConnection::new(sock, conn, opts, leftover)?;
        // The RTR is zero-length (Write) or lands in our own QN 1 buffer (Read):
        // no ULP region is touched, so an empty table serves until it is absorbed.
        let scratch = MemoryTable::new();
        c.wait_established(&scratch, deadline)?;
        Ok(c)
    }
}
