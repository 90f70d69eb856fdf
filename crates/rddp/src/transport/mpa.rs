//! MPA over TCP (RFC 5044, RFC 6581) as a queue pair's LLP.
//!
//! Setup is rddp-mpa's ([`rddp_mpa::connect_raw`], [`rddp_mpa::MpaListener::accept_raw`]);
//! after it, this module frames the queue pair's DDP segments as FPDUs (CRC,
//! Markers as negotiated) and hands received ones up whole. RFC 6581 RTRs are
//! ordinary RDMAP messages: the initiator's zero-length Write goes out here, its
//! zero-length Read through the queue pair's RDMAP engine (so MSNs and ORD count
//! it), and the responder sends nothing before the initiator's first FPDU (§4.9),
//! which must be the agreed RTR.
//!
//! Receive path copies: the kernel fills a 256 KiB read buffer; a whole FPDU is
//! CRC-checked there and its DDP segment copied once into a segment buffer, which
//! RDMAP places (a second copy) into the region. rddp-mpa's own DDP-level
//! connection places tagged payloads straight from the socket instead.

use super::{Connection, Inbound, LlpInfo, SegmentReader, SegmentWriter};
use crate::error::Error;
use crate::qp::{PreparedQueuePair, QueuePair};
use rddp_mpa::fpdu::{Receiver, build_fpdu, layout_fpdu, terminate_for_wire};
use rddp_mpa::pcap::{PcapFile, Tap, TcpEndpoint};
use rddp_mpa::tcp::{effective_mss, layout_rest, try_write_layout, write_fpdu};
use rddp_mpa::{MpaError, MpaOptions, Negotiated, PeerRequest, Role, Rtr};
use rddp_proto::ddp::{OutSegment, Payload, count_lease_copy};
use rddp_wire::ddp::{TAGGED_HDR_LEN, UNTAGGED_HDR_LEN};
use rddp_wire::{FpduEncoder, Opcode, RdmapControl, TaggedHeader, TerminateCode, mulpdu};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::ops::ControlFlow;
use std::sync::{Arc, Condvar, Mutex};

const READ_BUF: usize = 256 * 1024;

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
    /// data)` accepts, `Err(private data)` refuses with R=1.
    pub fn accept_with(
        &self,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
    ) -> Result<Connection, MpaError> {
        self.accept_with_ird_ord(self.opts.ird, self.opts.ord, decide)
    }

    /// As [`Self::accept_with`], negotiating IRD `ird` and ORD `ord` (spec §4.10)
    /// instead of the listener's: a queue pair's own, see
    /// [`PreparedQueuePair::accept_mpa`].
    pub fn accept_with_ird_ord(
        &self,
        ird: u16,
        ord: u16,
        decide: impl FnOnce(&PeerRequest) -> Result<Vec<u8>, Vec<u8>>,
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
        let conn = listener.accept_with_ird_ord(wire(ird), wire(ord), decide)?;
        self.attach(conn)
    }
}

/// "May the responder transmit yet?" shared by the two halves (spec §4.9).
type Gate = Arc<(Mutex<bool>, Condvar)>;

fn open_gate(g: &Gate) {
    let (m, cv) = &**g;
    *m.lock().unwrap_or_else(|p| p.into_inner()) = true;
    cv.notify_all();
}

fn into_connection(
    mut sock: TcpStream,
    peer: Option<SocketAddr>,
    neg: Negotiated,
    leftover: Vec<u8>,
    opts: &MpaOptions,
    wire: Option<TcpEndpoint>,
) -> Result<Connection, MpaError> {
    // Setup read with deadlines; FPDU mode blocks until data or close.
    sock.set_read_timeout(None)?;
    let emss = opts.emss.unwrap_or_else(|| effective_mss(&sock));
    let tx_mulpdu = mulpdu(emss, neg.markers_tx);
    let mut enc = FpduEncoder::new(neg.crc, neg.markers_tx);
    let initiator = neg.role == Role::Initiator;
    // The initiator's Write RTR leaves first (RFC 6581; siw's STag 1, spec §7.8).
    if initiator && neg.rtr == Some(Rtr::Write) {
        let hdr = TaggedHeader::new(true, RdmapControl::new(Opcode::RDMA_WRITE).0, 1, 0).to_bytes();
        let f = build_fpdu(&mut enc, &hdr, bytes::Bytes::new());
        if let Some(w) = &wire {
            w.sent(&f.to_vec());
        }
        write_fpdu(&mut sock, &f, None, neg.role)?;
    }
    if let Some(w) = &wire {
        w.received(&leftover);
    }
    tracing::debug!(
        "MPA: FPDU mode: EMSS {emss}, MULPDU {tx_mulpdu}{}",
        if initiator {
            ""
        } else {
            "; nothing leaves before the initiator's first FPDU (spec §4.9)"
        }
    );
    let gate: Gate = Arc::new((Mutex::new(initiator), Condvar::new()));
    let (ird, ord) = neg
        .ird_ord
        .map_or((u32::from(opts.ird), u32::from(opts.ord)), |(i, o)| {
            (u32::from(i), u32::from(o))
        });
    let reader = MpaReader {
        sock: sock.try_clone()?,
        // Receive limit: our own EMSS, as rddp-mpa does (the peer's MULPDU is not
        // known; a longer ULPDU is refused with a Terminate).
        rx: Receiver::new(neg.crc, neg.markers_rx, mulpdu(emss, false).max(tx_mulpdu)),
        buf: vec![0; READ_BUF],
        pending: leftover,
        out: VecDeque::new(),
        seq: 0,
        gate: gate.clone(),
        expect_rtr: if initiator { None } else { neg.rtr },
        failed: false,
        wire: wire.clone(),
    };
    let abort_sock = sock.try_clone()?;
    let abort_gate = gate.clone();
    Ok(Connection {
        reader: Box::new(reader),
        writer: Box::new(MpaWriter {
            sock,
            enc,
            gate,
            role: neg.role,
            wire,
        }),
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
        abort: Box::new(move || {
            let _ = abort_sock.shutdown(Shutdown::Both);
            open_gate(&abort_gate);
        }),
    })
}

struct MpaReader {
    sock: TcpStream,
    rx: Receiver,
    buf: Vec<u8>,
    /// Octets read but not yet fed (the setup's leftover first).
    pending: Vec<u8>,
    out: VecDeque<Inbound>,
    seq: u64,
    gate: Gate,
    /// Responder in peer-to-peer mode: the RTR the first FPDU must be.
    expect_rtr: Option<Rtr>,
    failed: bool,
    /// This connection in the process's capture (`--pcap`).
    wire: Option<TcpEndpoint>,
}

impl MpaReader {
    fn feed(&mut self, input: &[u8]) {
        let Self {
            rx,
            out,
            seq,
            gate,
            expect_rtr,
            ..
        } = self;
        let res = rx.feed(input, |ulpdu| {
            if *seq == 0 {
                if let Some(want) = expect_rtr.take()
                    && !is_rtr(want, ulpdu)
                {
                    out.push_back(Inbound::Error {
                        code: TerminateCode::MPA_NO_MATCHING_RTR,
                        detail: format!(
                            "the initiator's first FPDU is not the agreed {want:?} RTR"
                        ),
                    });
                    return ControlFlow::Break(());
                }
                // The responder may transmit now (spec §4.9).
                open_gate(gate);
            }
            out.push_back(Inbound::Segment {
                seq: *seq,
                bytes: ulpdu.to_vec(),
            });
            *seq += 1;
            ControlFlow::Continue(())
        });
        if let Err(e) = res {
            // Which FPDU (counted from 0 after setup) failed, so a capture or an
            // impairing bridge can tell which one was refused.
            out.push_back(Inbound::Error {
                code: terminate_for_wire(&e).code,
                detail: format!("MPA framing: {e} (FPDU {seq} after setup)"),
            });
        }
        if matches!(out.back(), Some(Inbound::Error { .. })) {
            self.failed = true;
            // The initiator is sending FPDUs, so it is in FPDU mode: the Terminate
            // for its bad first FPDU (wrong RTR, bad CRC) may go out (spec §4.9).
            open_gate(&self.gate);
        }
    }
}

/// Whether a ULPDU is the RFC 6581 RTR of kind `want`.
fn is_rtr(want: Rtr, u: &[u8]) -> bool {
    let op = u.get(1).map(|c| RdmapControl(*c).opcode());
    match want {
        Rtr::Write => {
            u.len() == TAGGED_HDR_LEN && u[0] & 0x80 != 0 && op == Some(Opcode::RDMA_WRITE)
        }
        Rtr::Read => {
            u.len() == UNTAGGED_HDR_LEN + rddp_wire::READ_REQ_HDR_LEN
                && u[0] & 0x80 == 0
                && op == Some(Opcode::READ_REQUEST)
                && u[UNTAGGED_HDR_LEN + 12..UNTAGGED_HDR_LEN + 16] == [0; 4]
        }
    }
}

impl SegmentReader for MpaReader {
    fn read(&mut self) -> io::Result<Inbound> {
        loop {
            if let Some(i) = self.out.pop_front() {
                return Ok(i);
            }
            if self.failed {
                // Nothing after a framing error is trusted: wait for the close.
                let n = self.sock.read(&mut self.buf)?;
                if let Some(w) = &self.wire {
                    w.received(&self.buf[..n]);
                }
                if n == 0 {
                    return Ok(Inbound::Closed);
                }
                continue;
            }
            if !self.pending.is_empty() {
                let p = std::mem::take(&mut self.pending);
                self.feed(&p);
                continue;
            }
            let n = self.sock.read(&mut self.buf)?;
            if let Some(w) = &self.wire {
                w.received(&self.buf[..n]);
            }
            if n == 0 {
                return Ok(Inbound::Closed);
            }
            let buf = std::mem::take(&mut self.buf);
            self.feed(&buf[..n]);
            self.buf = buf;
        }
    }
}

struct MpaWriter {
    sock: TcpStream,
    enc: FpduEncoder,
    gate: Gate,
    role: Role,
    /// This connection in the process's capture (`--pcap`).
    wire: Option<TcpEndpoint>,
}

impl SegmentWriter for MpaWriter {
    fn write_segment(&mut self, seg: &OutSegment) -> io::Result<()> {
        {
            let (m, cv) = &*self.gate;
            let mut open = m.lock().unwrap_or_else(|p| p.into_inner());
            while !*open {
                open = cv.wait(open).unwrap_or_else(|p| p.into_inner());
            }
        }
        let mut hdr = [0u8; UNTAGGED_HDR_LEN];
        let n = seg.header.emit(&mut hdr).map_err(io::Error::other)?;
        if self.wire.is_some() || !matches!(seg.payload, Payload::Region { .. }) {
            // Owned octets, or a capture (which records a copy anyway).
            let f = build_fpdu(&mut self.enc, &hdr[..n], seg.payload.to_bytes());
            // Recorded before it leaves: an answer recorded by a peer in this
            // process must come after it in the file.
            if let Some(w) = &self.wire {
                w.sent(&f.to_vec());
            }
            return write_fpdu(&mut self.sock, &f, None, self.role);
        }
        // A region lease: the CRC is computed and the FPDU written straight from
        // the locked region, without waiting on the socket. Whatever the socket
        // does not take at once is copied (counted) and written after the
        // region's lock is let go, so a slow peer never holds the region.
        let (enc, sock) = (&mut self.enc, &self.sock);
        let rest = seg.payload.with(|p| {
            let layout = layout_fpdu(enc, &hdr[..n], p);
            let done = try_write_layout(sock, &layout, p)?;
            Ok::<_, io::Error>((done < layout.len()).then(|| layout_rest(&layout, p, done)))
        })?;
        if let Some((rest, of_payload)) = rest {
            count_lease_copy(of_payload);
            self.sock.write_all(&rest)?;
        }
        Ok(())
    }

    fn close(&mut self, abortive: bool) {
        let how = if abortive {
            Shutdown::Both
        } else {
            Shutdown::Write
        };
        let _ = self.sock.shutdown(how);
        if let Some(w) = self.wire.take() {
            w.closed();
        }
        open_gate(&self.gate);
    }
}
