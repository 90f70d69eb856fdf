//! [`FpduConn`]: a DDP-level test driver of one MPA connection in FPDU mode,
//! sans-IO (RFC 5044 §4, §7.1.2, §8; RFC 6581; RFC 5040 §4.8), for tests of
//! rddp-mpa's engine without RDMAP above it. No product code runs it: a
//! verbs queue pair runs the same receiver ([`FpduReceiver`]) with an
//! `RdmapStream` as its engine (`RdmapPlacer`). Here the engine is a bare
//! `DdpStream`, so this driver absorbs the RFC 6581 RTR and a Terminate itself.
//!
//! Octets go in from a buffer ([`FpduConn::on_bytes`], payload copied into place)
//! or straight from the socket ([`FpduConn::drive`], payload read into place) and
//! become DDP segments for the owned [`DdpStream`], both through the one
//! header-first receiver ([`super::FpduReceiver`]; SenderSeq = running count,
//! TCP keeps order); segments
//! the stream sends come out as whole FPDUs ([`FpduConn::poll_transmit`]). Every
//! fatal error queues a Terminate as the last FPDU and marks the connection dead;
//! the driver closes once [`FpduConn::wants_close`].

mod rtr;

use rddp_mpa::fpdu::{
    FpduReceiver, OutFpdu, Placer, Progress, Refused, RxConfig, build_fpdu, terminate_for_ddp,
    terminate_fpdu,
};
use rddp_mpa::{MpaError, Negotiated, Role, Rtr};
use rddp_proto::ddp::{
    Begin, DdpConfig, DdpStream, Delivery, RecvBuffer, StreamError, StreamEvent, Target,
};
use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_wire::ddp::UNTAGGED_HDR_LEN;
use rddp_wire::rdmap::qn;
use rddp_wire::terminate::TERM_MAX_BODY;
use rddp_wire::{FpduEncoder, Terminate, TerminateCode, mulpdu};
use std::collections::VecDeque;
use std::io::{self, Read};

/// The driver's DDP stream and its protection domain (the tests' tables
/// register their regions in PD 1).
const STREAM: StreamId = StreamId(1);
const PD: PdId = PdId(1);

/// Receive-buffer id of the buffer posted on QN 2 for the peer's Terminate.
const TERM_BUF_ID: u64 = u64::MAX - 1;

/// An MPA connection in FPDU mode over any byte stream, sans-IO: a DDP stream
/// whose segments it frames as FPDUs (CRC, Markers as negotiated) and unframes
/// from the octets it is fed.
#[derive(Debug)]
pub(crate) struct FpduConn {
    pub(super) neg: Negotiated,
    pub(super) stream: DdpStream,
    pub(super) enc: FpduEncoder,
    pub(super) rx: FpduReceiver,
    pub(super) emss: usize,
    pub(super) rx_seq: u64,
    /// Responder: no FPDU leaves before the initiator's first valid FPDU (RFC 5044 §7.1.2).
    pub(super) may_send: bool,
    /// The RTR still expected: the responder's first message, or the initiator's
    /// zero-length Read Response.
    pub(super) rtr_wait: Option<Rtr>,
    pub(super) established: bool,
    pub(super) raw: Vec<Delivery>,
    pub(super) deliveries: VecDeque<Delivery>,
    pub(super) out: VecDeque<OutFpdu>,
    pub(super) dead: bool,
    pub(super) error: Option<MpaError>,
    /// Payload octets read straight from the socket into place ([`Self::drive`]).
    pub(super) direct_bytes: u64,
}

impl FpduConn {
    /// FPDU mode with the negotiated settings; `emss` is TCP's effective MSS. The
    /// initiator queues its RTR; the responder prepares to absorb it.
    pub(crate) fn new(neg: Negotiated, emss: usize) -> Result<Self, MpaError> {
        let cfg = DdpConfig {
            mulpdu: mulpdu(emss, neg.markers_tx),
            ..DdpConfig::default()
        };
        let mut stream = DdpStream::new(STREAM, PD, cfg).map_err(|e| MpaError::Stream(e.into()))?;
        stream.post_recv(
            qn::TERMINATE,
            RecvBuffer {
                id: TERM_BUF_ID,
                data: vec![0; TERM_MAX_BODY],
            },
        )?;
        let initiator = neg.role == Role::Initiator;
        let mut rtr_wait = None;
        match (neg.role, neg.rtr) {
            (Role::Initiator, Some(Rtr::Write)) => rtr::send_write(&mut stream)?,
            (Role::Initiator, Some(Rtr::Read)) => {
                rtr::send_read(&mut stream)?;
                rtr_wait = Some(Rtr::Read);
            }
            (Role::Responder, Some(r)) => {
                if r == Rtr::Read {
                    rtr::post_read_buffer(&mut stream)?;
                }
                rtr_wait = Some(r);
            }
            (_, None) => {}
        }
        Ok(Self {
            enc: FpduEncoder::new(neg.crc, neg.markers_tx),
            rx: FpduReceiver::new(
                RxConfig {
                    crc: neg.crc,
                    markers: neg.markers_rx,
                    max_ulpdu: mulpdu(emss, neg.markers_rx),
                    // The RTR is checked on delivery (`sort_deliveries`).
                    expect_rtr: None,
                },
                Vec::new(),
            ),
            emss,
            rx_seq: 0,
            may_send: initiator,
            established: initiator || rtr_wait.is_none(),
            rtr_wait,
            stream,
            neg,
            raw: Vec::new(),
            deliveries: VecDeque::new(),
            out: VecDeque::new(),
            dead: false,
            error: None,
            direct_bytes: 0,
        })
    }

    /// What connection setup agreed.
    pub(crate) fn negotiated(&self) -> &Negotiated {
        &self.neg
    }

    /// The DDP stream, for the ULP's sends, receive buffers and state.
    pub(crate) fn stream(&self) -> &DdpStream {
        &self.stream
    }

    /// The DDP stream, to send, post receives and take deliveries.
    pub(crate) fn stream_mut(&mut self) -> &mut DdpStream {
        &mut self.stream
    }

    /// The TCP effective MSS MULPDU was last computed from.
    pub(crate) fn emss(&self) -> usize {
        self.emss
    }

    /// TCP's effective MSS changed: recompute MULPDU (RFC 5044 §4). Sends use the
    /// new value at once. The receive limit only grows: FPDUs the peer built for
    /// a larger EMSS stay legal after it shrinks (RFC 5044 §4).
    pub(crate) fn set_emss(&mut self, emss: usize) -> Result<(), MpaError> {
        self.stream
            .set_mulpdu(mulpdu(emss, self.neg.markers_tx))
            .map_err(|e| MpaError::Stream(e.into()))?;
        let rx = mulpdu(emss, self.neg.markers_rx).max(self.rx.max_ulpdu());
        self.rx.set_max_ulpdu(rx);
        self.emss = emss;
        Ok(())
    }

    /// Setup is complete for the ULP: always for the initiator; for the responder
    /// once the RTR (peer-to-peer) arrived, or at once without one.
    pub(crate) fn is_established(&self) -> bool {
        self.established
    }

    /// Whether FPDUs may leave (the responder waits for the initiator's first).
    pub(crate) fn may_send(&self) -> bool {
        self.may_send
    }

    /// A Terminate was sent or received, or the TCP connection ended.
    pub(crate) fn is_dead(&self) -> bool {
        self.dead
    }

    /// Dead and nothing left to send: close the socket.
    pub(crate) fn wants_close(&self) -> bool {
        self.dead && self.out.is_empty()
    }

    /// Why the connection died (taken once).
    pub(crate) fn take_error(&mut self) -> Option<MpaError> {
        self.error.take()
    }

    /// The next message for the ULP (RTRs and Terminates are absorbed here).
    pub(crate) fn poll_delivery(&mut self) -> Option<Delivery> {
        self.deliveries.pop_front()
    }

    /// The next FPDU to write whole, or `None`.
    pub(crate) fn poll_transmit(&mut self) -> Option<OutFpdu> {
        if let Some(f) = self.out.pop_front() {
            return Some(f);
        }
        if self.dead || !self.may_send {
            return None;
        }
        let seg = self.stream.poll_segment()?;
        let mut hdr = [0u8; UNTAGGED_HDR_LEN];
        let n = seg.header.emit(&mut hdr).ok()?;
        // This DDP-only connection builds each FPDU whole: a lease is copied.
        self.stream.count_copied(0, seg.payload.leased_len());
        Some(build_fpdu(&mut self.enc, &hdr[..n], seg.payload.to_bytes()))
    }

    /// The TCP connection ended (`graceful`: FIN, else reset/error): RFC 5044 §8,
    /// local 2/0/0x01, nothing sent.
    pub(crate) fn on_llp_closed(&mut self, graceful: bool) {
        self.stream.on_llp_closed(graceful);
        if !self.dead && self.error.is_none() {
            self.error = Some(MpaError::ConnectionLost);
        }
        self.dead = true;
    }

    /// Octets from a buffer; returns how many were used. All of them, except
    /// for a responder waiting for the RTR: it stops right after the first FPDU
    /// (so a driver can absorb the RTR before the ULP's memory table is at hand),
    /// and the caller feeds the rest again. After the connection died every
    /// octet is reported used (discarded). Payloads are copied from `input` into
    /// place (counted in the stream's statistics).
    pub(crate) fn on_bytes(&mut self, mem: &MemoryTable, input: &[u8]) -> usize {
        if self.dead {
            return input.len();
        }
        let mut src = Slice(input);
        let before = self.rx.placed_octets();
        let _ = self.run_rx(mem, &mut src, false);
        let copied = (self.rx.placed_octets() - before) as usize;
        self.stream.count_copied(copied, 0);
        if self.dead {
            return input.len();
        }
        let read = input.len() - src.0.len();
        if read == 0 {
            return 0;
        }
        // A pause (the RTR) can leave the receiver's read-ahead holding octets
        // of the next FPDU; they are not used yet: the caller feeds them again
        // (else a short tail after the RTR would sit unseen until more octets
        // come, and a framing error in it would go unnoticed).
        read - self.rx.unread_ahead()
    }

    /// Read FPDUs straight from `src` (a socket: blocking, with a timeout, or
    /// non-blocking), payloads into their regions and receive buffers, until it
    /// would block, ends or the connection dies; the responder waiting for the
    /// RTR pauses after the first FPDU, as for [`Self::on_bytes`]. On end of
    /// stream or an I/O error the connection is closed (`on_llp_closed`).
    pub(crate) fn drive(&mut self, mem: &MemoryTable, src: &mut impl Read) -> io::Result<Progress> {
        if self.dead {
            return Ok(Progress::Stopped);
        }
        let before = self.rx.placed_octets();
        let got = self.run_rx(mem, src, true);
        self.direct_bytes += self.rx.placed_octets() - before;
        match &got {
            Ok(Progress::Eof { .. }) => self.on_llp_closed(true),
            Err(_) => self.on_llp_closed(false),
            Ok(_) => {}
        }
        got
    }

    /// Payload octets placed straight from the socket so far.
    pub(crate) fn direct_bytes(&self) -> u64 {
        self.direct_bytes
    }

    /// `hand_up`: pause between FPDUs while a delivery waits for the ULP (a
    /// blocking source would otherwise sit on it until the next FPDU comes).
    fn run_rx(
        &mut self,
        mem: &MemoryTable,
        src: &mut impl Read,
        hand_up: bool,
    ) -> io::Result<Progress> {
        let mut rx = std::mem::take(&mut self.rx);
        let stop_after_first = self.neg.role == Role::Responder && self.rtr_wait.is_some();
        let mut p = ConnPlacer {
            conn: self,
            mem,
            stop_after_first,
            seen: false,
            hand_up,
        };
        let copied = rx.copied_octets();
        let got = rx.drive(src, &mut p);
        // The setup's leftover octets, copied into place by the receiver.
        self.stream
            .count_copied((rx.copied_octets() - copied) as usize, 0);
        self.rx = rx;
        got
    }

    /// The stream refused a segment: send its error as a Terminate (RFC 5040 §4.8).
    pub(super) fn ddp_failed(&mut self) {
        let mut term = Terminate::bare(TerminateCode::DDP_LOCAL_CATASTROPHIC);
        let mut detail = String::from("DDP stream refused a segment");
        while let Some(ev) = self.stream.poll_event() {
            if let StreamEvent::Error(e) = ev {
                term = terminate_for_ddp(&e);
                detail = e.to_string();
            }
        }
        self.fail_local(term, detail);
    }

    /// Absorb RTRs and Terminates; queue the rest for the ULP.
    pub(super) fn sort_deliveries(&mut self) {
        for d in std::mem::take(&mut self.raw) {
            if self.dead {
                break;
            }
            if let Delivery::Untagged {
                qn: q, len, buffer, ..
            } = &d
                && *q == qn::TERMINATE
            {
                self.on_terminate(buffer.data.get(..*len as usize).unwrap_or(&[]));
                continue;
            }
            match (self.neg.role, self.rtr_wait) {
                (Role::Responder, Some(Rtr::Write)) => {
                    self.rtr_wait = None;
                    if !rtr::is_write(&d) {
                        return self.bad_rtr();
                    }
                    self.established = true;
                }
                (Role::Responder, Some(Rtr::Read)) => {
                    self.rtr_wait = None;
                    let Some((stag, to)) = rtr::read_request(&d) else {
                        return self.bad_rtr();
                    };
                    if rtr::send_read_response(&mut self.stream, stag, to).is_err() {
                        return self.bad_rtr();
                    }
                    self.established = true;
                }
                (Role::Initiator, Some(Rtr::Read)) if rtr::is_read_response(&d) => {
                    self.rtr_wait = None;
                }
                _ => self.deliveries.push_back(d),
            }
        }
    }

    /// The responder's first message was not the agreed RTR (RFC 6581): we send
    /// 2/0/0x07 "No matching RTR option".
    fn bad_rtr(&mut self) {
        self.fail_local(
            Terminate::bare(TerminateCode::MPA_NO_MATCHING_RTR),
            "the initiator's first message was not the agreed RTR".into(),
        );
    }

    /// A Terminate from the peer: stop, report, close; never answer it (RFC 5040 §4.8).
    fn on_terminate(&mut self, body: &[u8]) {
        // As the peer meant it, siw's bitfield layout included.
        let term = rddp_wire::ReceivedTerminate::decode(body)
            .terminate
            .unwrap_or_else(|| Terminate::bare(TerminateCode::MPA_LOCAL_CATASTROPHIC));
        self.stream.abort();
        self.dead = true;
        self.error = Some(MpaError::RemoteTerminate(term));
    }

    /// Queue `term` as the last FPDU, abort the stream, remember the error.
    pub(super) fn fail_local(&mut self, term: Terminate, detail: String) {
        if self.dead {
            return;
        }
        self.out
            .push_back(OutFpdu::from_vec(terminate_fpdu(&term, &mut self.enc)));
        self.stream.abort();
        self.dead = true;
        self.error = Some(MpaError::LocalTerminate {
            terminate: term,
            detail,
        });
    }
}

/// A byte slice as a source that would block at its end.
struct Slice<'a>(&'a [u8]);

impl Read for Slice<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.0.read(buf)?;
        Ok(n)
    }
}

/// [`FpduConn`]'s DDP stream as the receiver's engine.
struct ConnPlacer<'a> {
    conn: &'a mut FpduConn,
    mem: &'a MemoryTable,
    stop_after_first: bool,
    seen: bool,
    hand_up: bool,
}

impl Placer for ConnPlacer<'_> {
    fn begin(
        &mut self,
        seq: u64,
        head: &[u8],
        payload_len: usize,
        how: Begin<'_>,
    ) -> Result<Target, Refused> {
        // No batches: every FPDU is taken alone.
        if let Begin::Ahead(_) = how {
            return Err(Refused::NotAhead);
        }
        if self.conn.dead {
            return Err(Refused::Now);
        }
        match self
            .conn
            .stream
            .begin_segment(self.mem, seq, head, payload_len, Begin::Alone)
        {
            Ok(t) => Ok(t),
            // Held until the FPDU's CRC (RFC 5041 §7.1), reported at `finish`.
            Err(StreamError::Erroneous(_)) => Err(Refused::Held),
            Err(_) => {
                self.conn.ddp_failed();
                Err(Refused::Now)
            }
        }
    }

    fn with_buffers(
        &mut self,
        f: &mut dyn FnMut(&mut [&mut [u8]]) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        self.conn.stream.segment_buffers(|b| f(b))
    }

    fn finish(&mut self, crc_ok: bool) {
        let c = &mut *self.conn;
        if !crc_ok {
            // The placed octets are undefined (RFC 5044 §4): nothing delivered.
            let _ = c.stream.finish_segment(false);
            c.fail_local(
                Terminate::bare(TerminateCode::MPA_CRC_ERROR),
                "MPA CRC mismatch on a directly placed FPDU (placed octets undefined)".into(),
            );
            return;
        }
        if c.stream.finish_segment(true).is_err() {
            return c.ddp_failed();
        }
        c.rx_seq += 1;
        c.may_send = true;
        self.seen = true;
        while let Some(d) = c.stream.poll_delivery() {
            c.raw.push(d);
        }
        c.sort_deliveries();
    }

    fn framing_error(&mut self, code: TerminateCode, detail: String) {
        self.conn.fail_local(Terminate::bare(code), detail);
    }

    fn more(&mut self) -> bool {
        let rtr_pause = self.stop_after_first && self.seen;
        let hand_up = self.hand_up && !self.conn.deliveries.is_empty();
        !(self.conn.dead || rtr_pause || hand_up)
    }
}
