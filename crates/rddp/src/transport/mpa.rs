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
use rddp_mpa::fpdu::{Receiver, build_fpdu, terminate_for_wire};
use rddp_mpa::tcp::{effective_mss, write_fpdu};
use rddp_mpa::{MpaError, MpaOptions, Negotiated, PeerRequest, Role, Rtr};
use rddp_proto::ddp::OutSegment;
use rddp_wire::ddp::{TAGGED_HDR_LEN, UNTAGGED_HDR_LEN};
use rddp_wire::{FpduEncoder, Opcode, RdmapControl, TaggedHeader, TerminateCode, mulpdu};
use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::ops::ControlFlow;
use std::sync::{Arc, Condvar, Mutex};

const READ_BUF: usize = 256 * 1024;

/// Active open: an MPA connection to `addr`, ready to attach to a queue pair.
pub fn connect(addr: impl ToSocketAddrs, opts: &MpaOptions) -> Result<Connection, MpaError> {
    let (sock, neg, leftover) = rddp_mpa::connect_raw(addr, opts)?;
    let peer = sock.peer_addr().ok();
    into_connection(sock, peer, neg, leftover, opts)
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

    /// The next connection, accepted with the listener's private data.
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
        let (sock, peer, neg, leftover) = self.inner.accept_raw(decide)?;
        into_connection(sock, Some(peer), neg, leftover, &self.opts)
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
        write_fpdu(
            &mut sock,
            &build_fpdu(&mut enc, &hdr, bytes::Bytes::new()),
            None,
            neg.role,
        )?;
    }
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
        }),
        mulpdu: tx_mulpdu,
        ird,
        ord,
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
            out.push_back(Inbound::Error {
                code: terminate_for_wire(&e).code,
                detail: format!("MPA framing: {e}"),
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
        write_fpdu(
            &mut self.sock,
            &build_fpdu(&mut self.enc, &hdr[..n], seg.payload.clone()),
            None,
            self.role,
        )
    }

    fn close(&mut self, abortive: bool) {
        let how = if abortive {
            Shutdown::Both
        } else {
            Shutdown::Write
        };
        let _ = self.sock.shutdown(how);
        open_gate(&self.gate);
    }
}
