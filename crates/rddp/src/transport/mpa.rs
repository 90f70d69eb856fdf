//! MPA over TCP (RFC 5044, RFC 6581) as a queue pair's LLP.
//!
//! Setup is rddp-mpa's ([`rddp_mpa::connect_raw`], [`rddp_mpa::MpaListener::accept_raw`]);
//! after it, this module frames the queue pair's DDP segments as FPDUs (CRC,
//! Markers as negotiated) and hands received ones up whole. RFC 6581 RTRs are
//! ordinary RDMAP messages: the initiator's zero-length Write goes out here, its
//! zero-length Read through the queue pair's RDMAP engine (so MSNs and ORD count
//! it), and the responder sends nothing before the initiator's first FPDU (RFC 5044 §7.1.2),
//! which must be the agreed RTR.
//!
//! After setup the socket is non-blocking and the queue pair runs it on the
//! process's event loop (`crate::qp`'s task; `mpa_in` and rddp-mpa's `MpaOut` are the two
//! directions). Receive: header first (rddp-mpa's `FpduReceiver`), RDMAP decides
//! where the payload goes, and it is read from the socket straight into the
//! region or receive buffer (no copy; runs of small FPDUs are taken in
//! batches, one peek and one vectored read each, through the I/O thread's
//! buffer, their payloads still straight into place).

use super::mpa_in::MpaIn;
use super::{Connection, HoldInner, Llp, LlpInfo};
use crate::error::Error;
use crate::qp::{PreparedQueuePair, QueuePair};
use rddp_mpa::fpdu::write_rtr_fpdu;
use rddp_mpa::pcap::{PcapFile, Tap, TcpEndpoint};
use rddp_mpa::tcp::{effective_mss, write_fpdu};
use rddp_mpa::{MpaError, MpaOptions, Negotiated, PeerRequest, Role, Rtr};
use rddp_wire::{FpduEncoder, mulpdu};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;

/// Active open: an MPA connection to `addr`, ready to attach to a queue pair.
pub fn connect(addr: impl ToSocketAddrs, opts: &MpaOptions) -> Result<Connection, MpaError> {
    let cap = crate::capture::current();
    let tap = cap.as_ref().map(|_| Tap::new());
    let tapped;
    let opts = match &tap {
        Some(t) => {
            tapped = MpaOptions {
                tap: Some(t.clone()),
                ..opts.clone()
            };
            &tapped
        }
        None => opts,
    };
    let (sock, neg, leftover) = rddp_mpa::connect_raw(addr, opts)?;
    let peer = sock.peer_addr().ok();
    let wire = endpoint(cap, tap, &sock, &neg);
    into_connection(sock, peer, neg, leftover, opts, wire)
}

/// This connection in the process's capture, if one runs (see [`crate::capture`]).
fn endpoint(
    cap: Option<PcapFile>,
    tap: Option<Tap>,
    sock: &TcpStream,
    neg: &Negotiated,
) -> Option<TcpEndpoint> {
    let (cap, tap) = (cap?, tap?);
    let (local, peer) = (sock.local_addr().ok()?, sock.peer_addr().ok()?);
    let ours = tap.records().into_iter().next().map(|(_, o)| o);
    let ours = ours.unwrap_or_default();
    let theirs = tap.received();
    let (request, reply) = match neg.role {
        Role::Initiator => (&ours, &theirs),
        Role::Responder => (&theirs, &ours),
    };
    Some(cap.mpa_endpoint(local, peer, neg.role, request, reply))
}

/// A passive MPA endpoint handing out connections for queue pairs.
pub struct Listener {
    inner: rddp_mpa::MpaListener,
    opts: MpaOptions,
}

impl Listener {
    /// Listen on `addr` (port 0 picks a free port).
    pub fn bind(addr: impl ToSocketAddrs, opts: MpaOptions) -> Result<Self, MpaError> {
        Ok(Self {
            inner: rddp_mpa::listen(addr, opts.clone())?,
            opts,
        })
    }

    /// The address it listens on (the port chosen when bound to port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, MpaError> {
        self.inner.local_addr()
    }

    /// The next connection, accepted with the listener's private data and
    /// negotiated with its options' IRD/ORD; a queue pair that wants its builder's
    /// IRD/ORD negotiated uses [`PreparedQueuePair::accept_mpa`] instead.
    pub fn accept(&self) -> Result<Connection, MpaError> {
        let pd = self.opts.private_data.clone();
        self.accept_with(move |_| Ok(pd))
    }

    /// The next connection, the ULP deciding from the Request: `Ok(reply private
    /// data)` accepts (or `Ok(`[`rddp_mpa::Accept`]`)`, with the Reply's own
    /// IRD/ORD), `Err(private data)` refuses with R=1.
    pub fn accept_with<A: Into<rddp_mpa::Accept>>(
        &self,
        decide: impl FnOnce(&PeerRequest) -> Result<A, Vec<u8>>,
    ) -> Result<Connection, MpaError> {
        self.accept_with_ird_ord(self.opts.ird, self.opts.ord, |r, _| decide(r))
    }

    /// As [`Self::accept_with`], negotiating IRD `ird` and ORD `ord` (RFC 6581)
    /// instead of the listener's: a queue pair's own, see
    /// [`PreparedQueuePair::accept_mpa`]. `decide` also sees the connection's
    /// `(local, peer)` addresses, and may give other IRD/ORD once it has seen
    /// the Request ([`rddp_mpa::Accept`], as `rdma_accept` does).
    pub fn accept_with_ird_ord<A: Into<rddp_mpa::Accept>>(
        &self,
        ird: u16,
        ord: u16,
        decide: impl FnOnce(&PeerRequest, (SocketAddr, SocketAddr)) -> Result<A, Vec<u8>>,
    ) -> Result<Connection, MpaError> {
        let mut opts = self.opts.clone();
        (opts.ird, opts.ord) = (ird, ord);
        let cap = crate::capture::current();
        let tap = cap.as_ref().map(|_| Tap::new());
        let (sock, peer, neg, leftover) =
            self.inner.accept_raw_full(&opts, decide, tap.as_ref())?;
        let wire = endpoint(cap, tap, &sock, &neg);
        into_connection(sock, Some(peer), neg, leftover, &opts, wire)
    }
}

// The passive MPA side of a queue pair (its active side is
// `PreparedQueuePair::connect_mpa`).
impl PreparedQueuePair {
    /// Accept the next MPA connection on `listener` with the listener's private
    /// data, negotiating this queue pair's IRD/ORD (RFC 6581) rather than the
    /// listener's, and attach. ([`PreparedQueuePair::attach`] of a connection from
    /// [`Listener::accept`] runs with what the listener's options negotiated.)
    pub fn accept_mpa(self, listener: &Listener) -> Result<QueuePair, Error> {
        let pd = listener.opts.private_data.clone();
        self.accept_mpa_with(listener, move |_| Ok(pd))
    }

    /// As [`Self::accept_mpa`], the ULP deciding from the Request: `Ok(reply
    /// private data)` accepts, `Err(private data)` refuses with R=1.
    pub fn accept_mpa_with(
        self,
        listener: &Listener,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<QueuePair, Error> {
        // The builder refused IRD/ORD above the 14-bit field (RFC 6581).
        let (ird, ord) = self.ird_ord();
        let wire = |v: u32| u16::try_from(v).unwrap_or(u16::MAX);
        let conn = listener.accept_with_ird_ord(wire(ird), wire(ord), |r, _| decide(r))?;
        self.attach(conn)
    }
}

/// An MPA connection in FPDU mode, for a queue pair to run on the event loop:
/// the non-blocking socket and what setup agreed for each direction.
pub struct MpaLlp {
    pub(crate) sock: TcpStream,
    /// Framing of what we send (CRC, Markers, the stream offset so far).
    pub(crate) enc: FpduEncoder,
    /// A responder that agreed an RTR (RFC 6581): its gate opens with it.
    pub(crate) rtr_expected: bool,
    /// The receive half.
    pub(crate) input: MpaIn,
    /// This connection in the process's capture (`--pcap`), for what we send.
    pub(crate) wire: Option<TcpEndpoint>,
    /// Read nothing until released ([`super::Connection::hold_reads`]).
    pub(crate) hold: Option<Arc<HoldInner>>,
    /// MULPDU follows TCP's EMSS (RFC 5044 §4); `None`: the EMSS was fixed
    /// by [`MpaOptions::emss`].
    pub(crate) emss: Option<EmssWatch>,
}

/// Segments cut between two reads of TCP_MAXSEG (one system call each),
/// once past the first few.
const EMSS_CHECK_SEGMENTS: u32 = 64;

/// RFC 5044 §4: recompute MULPDU when EMSS changes. TCP's EMSS is re-read now
/// and then (TCP_MAXSEG grows after the handshake: on loopback 32,768 at
/// first, up to 65,483 later); a change gives the MULPDU of the next segments.
#[derive(Debug)]
pub(crate) struct EmssWatch {
    emss: usize,
    markers_tx: bool,
    segments: u32,
}

impl EmssWatch {
    /// After a segment was cut: the MULPDU of the next ones if TCP's EMSS
    /// changed since the last look.
    pub(crate) fn on_segment(&mut self, sock: &TcpStream) -> Option<usize> {
        self.segments = self.segments.wrapping_add(1);
        // Often at first (segments 1, 2, 4, ... 32: TCP_MAXSEG grows soon
        // after the handshake, and a queue pair may send only a few), then
        // every EMSS_CHECK_SEGMENTS.
        if !self.segments.is_power_of_two() && !self.segments.is_multiple_of(EMSS_CHECK_SEGMENTS) {
            return None;
        }
        let now = effective_mss(sock);
        if now == self.emss {
            return None;
        }
        tracing::debug!(
            "MPA: EMSS {} -> {now}, MULPDU {}",
            self.emss,
            mulpdu(now, self.markers_tx)
        );
        self.emss = now;
        Some(mulpdu(now, self.markers_tx))
    }
}

fn into_connection(
    mut sock: TcpStream,
    peer: Option<SocketAddr>,
    neg: Negotiated,
    leftover: Vec<u8>,
    opts: &MpaOptions,
    wire: Option<TcpEndpoint>,
) -> Result<Connection, MpaError> {
    sock.set_read_timeout(None)?;
    let emss = opts.emss.unwrap_or_else(|| effective_mss(&sock));
    let tx_mulpdu = mulpdu(emss, neg.markers_tx);
    let mut enc = FpduEncoder::new(neg.crc, neg.markers_tx);
    let initiator = neg.role == Role::Initiator;
    // The initiator's Write RTR leaves first (RFC 6581; siw's STag 1),
    // into the socket's empty send buffer (still blocking here), after the
    // delay the ULP asked for.
    if initiator && neg.rtr == Some(Rtr::Write) {
        if !opts.rtr_delay.is_zero() {
            std::thread::sleep(opts.rtr_delay);
        }
        let f = write_rtr_fpdu(&mut enc);
        if let Some(w) = &wire {
            w.sent(&f.to_vec());
        }
        write_fpdu(&mut sock, &f, None, neg.role)?;
    }
    if let Some(w) = &wire {
        w.received(&leftover);
    }
    // FPDU mode runs on the event loop.
    sock.set_nonblocking(true)?;
    tracing::debug!(
        "MPA: FPDU mode: EMSS {emss}, MULPDU {tx_mulpdu}{}",
        if initiator {
            ""
        } else {
            "; nothing leaves before the initiator's first FPDU (RFC 5044 §7.1.2)"
        }
    );
    let (ird, ord) = neg
        .ird_ord
        .map_or((u32::from(opts.ird), u32::from(opts.ord)), |(i, o)| {
            (u32::from(i), u32::from(o))
        });
    // Receive limit: whatever ULPDU_Length can say. The peer's MULPDU comes
    // from its own EMSS (RFC 5044 §4), not known here and not ours
    // (loopback's TCP_MAXSEG is 32,768 right after the handshake, 65,483 later),
    // so a limit from our EMSS refused honest peers with 2/0/0x02. Nothing is
    // buffered by length: payloads go straight into place after DDP's checks.
    let max_ulpdu = rddp_wire::mpa::MAX_ULPDU;
    let expect_rtr = if initiator { None } else { neg.rtr };
    let input = MpaIn::new(
        neg.crc,
        neg.markers_rx,
        max_ulpdu,
        leftover,
        expect_rtr,
        !initiator,
        wire.clone(),
    );
    Ok(Connection {
        llp: Llp::Mpa(Box::new(MpaLlp {
            sock,
            enc,
            rtr_expected: expect_rtr.is_some(),
            input,
            wire,
            hold: None,
            emss: opts.emss.is_none().then_some(EmssWatch {
                emss,
                markers_tx: neg.markers_tx,
                segments: 0,
            }),
        })),
        mulpdu: tx_mulpdu,
        ird,
        ord,
        ird_ord_negotiated: true,
        peer_private_data: neg.peer_private_data.clone(),
        info: LlpInfo {
            transport: "mpa",
            peer,
            mpa_rev: Some(neg.rev),
            crc: neg.crc,
            markers_rx: neg.markers_rx,
            markers_tx: neg.markers_tx,
            rtr: neg.rtr.map(|r| match r {
                Rtr::Write => "write",
                Rtr::Read => "read",
            }),
        },
        send_read_rtr: initiator && neg.rtr == Some(Rtr::Read),
    })
}
