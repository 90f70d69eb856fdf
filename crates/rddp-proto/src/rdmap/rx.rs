//! RDMAP's receive engine (RFC 5040): the checks RDMAP makes before DDP
//! places anything (RFC 5041 §7.1, Read Response matching), the segment's
//! way in, header first or whole, and the effects of each delivered message.
//!
//! Header first (docs/data-path.md, "Receive"): the LLP hands up a segment's
//! DDP header and payload length, RDMAP and DDP run every check that does not
//! need the payload (RDMAP version and opcode, opcode against QN, Read Request
//! shape, a Read Response against the ORQ, RFC 5041 §7.1's DDP checks incl.
//! STag, rights, bounds, TO wrap, MSN, receive buffer, message tiling) and say
//! where the payload goes. The LLP reads it straight there, checks its CRC over
//! the octets where they lie, and calls [`RdmapStream::finish_segment`]: only
//! then is anything delivered or completed.
//!
//! Driver contract (in sender order; the same for every LLP and every way of
//! reading):
//! 1. `begin_segment(mem, seq, head, payload_len, Begin::Alone)`: `Ok(target)`, or `Err` =
//!    refused, nothing placed. A refusal found from the header is held, not
//!    reported: the LLP's check of the same FPDU comes first (RFC 5041 §7.1);
//!    the LLP reads the payload and drops it;
//! 2. fill the [`Target`]: a region range (lock the region for each read), or
//!    [`RdmapStream::segment_buffers`] (the receive buffer, RDMAP's own Read
//!    Request / Terminate buffers included);
//! 3. `finish_segment(mem, crc_ok)` (`crc_ok` true for an LLP without a check
//!    of its own): delivers, or reports the held refusal (a failed check as
//!    2/0/0x02 instead).
//!
//! An LLP that holds whole segments uses [`RdmapStream::on_segment`], which
//! runs these three steps.
//!
//! Batches (see `ddp/sink/batch.rs`): several whole segments begun before any
//! is placed ([`RdmapStream::begin_segment`] with [`Begin::Ahead`]), so that one
//! vectored read puts every payload into its place
//! ([`RdmapStream::segment_buffers`] gives their receive buffers at once); then
//! [`RdmapStream::finish_segment`] for each, in order. Only messages whose
//! delivery changes nothing that a later segment's checks read may join: RDMA
//! Writes, Sends and Sends with Solicited Event, each one segment (a Read
//! Response pops the ORQ, a Send with Invalidate invalidates an STag, a Read
//! Request and a Terminate are RDMAP's own).

use super::terminate::{from_ddp_error, with_header};
use super::{AsyncEvent, Completion, INTERNAL_WR_ID, RdmapStream, WcOpcode, WcStatus};
use crate::ddp::{
    Begin, Delivery, Fits, Payload, RecvBuffer, SenderSeq, StreamError, StreamEvent, Target,
    place_whole, split_segment,
};
use crate::mem::{Access, AccessFault, MemoryTable, Stag};
use bytes::Bytes;
use rddp_wire::ddp::{DDP_VERSION, UNTAGGED_HDR_LEN};
use rddp_wire::rdmap::{RDMAP_VERSION, qn};
use rddp_wire::read_request::{READ_REQ_HDR_LEN, ReadRequestHeader};
use rddp_wire::{
    DdpControl, DdpHeader, Opcode, RdmapControl, TaggedHeader, Terminate, TerminateCode,
    UntaggedHeader,
};

/// An RDMAP-level refusal found before placement.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) code: TerminateCode,
    /// Echo the header (M=D=1) unless its layout is in doubt.
    echo: bool,
    detail: String,
}

/// The error of a refused segment: what `finish_segment` reported for a held
/// refusal, else the refusal `begin_segment` returned.
pub(crate) fn refused(settled: Result<(), StreamError>, begun: StreamError) -> StreamError {
    match settled {
        Err(StreamError::Closed) | Ok(()) => begun,
        Err(e) => e,
    }
}

fn refuse(code: TerminateCode, echo: bool, detail: String) -> Refusal {
    Refusal { code, echo, detail }
}

impl RdmapStream {
    /// A DDP segment from the LLP held whole (`seq`: its place in the sender's
    /// order, its LLP check passed): [`Self::begin_segment`], the payload
    /// copied into its target, and [`Self::finish_segment`] (one set of rules
    /// for both entry points). Errors
    /// are handled here (Terminate queued, events raised); the result says whether
    /// the segment was accepted.
    pub fn on_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), StreamError> {
        let (head, payload) = split_segment(seg);
        let target = match self.begin_segment(mem, seq, head, payload.len(), Begin::Alone) {
            Ok(t) => t,
            // Held until the LLP's check: a whole segment passed it.
            Err(e) => return Err(refused(self.finish_segment(mem, true), e)),
        };
        let copied = match target {
            Target::Buffer { .. } => self
                .segment_buffers(|b| {
                    place_whole(&target, payload, || b.first_mut().map(|s| &mut **s))
                })
                .unwrap_or(0),
            _ => place_whole(&target, payload, || None),
        };
        // A Send's payload is the ULP's; a Read Request's or Terminate's is
        // RDMAP's own small message (not counted).
        let ulp = match target {
            Target::Buffer { .. } => {
                matches!(DdpHeader::parse(head), Ok(DdpHeader::Untagged(h)) if h.qn == qn::SEND)
            }
            _ => true,
        };
        if ulp {
            self.ddp.count_copied(copied, 0);
        }
        self.finish_segment(mem, true)
    }

    /// An RDMAP-level refusal before placement: Terminate (echoing the header
    /// when its layout is trusted), stream erroneous.
    pub(super) fn refuse_segment(
        &mut self,
        r: Refusal,
        head: &[u8],
        seg_len: usize,
    ) -> StreamError {
        self.counters.segments_refused += 1;
        let term = match (r.echo, DdpHeader::parse(head)) {
            (true, Ok(h)) => with_header(r.code, h, seg_len, None),
            _ => Terminate::bare(r.code),
        };
        self.ddp.fail(r.code);
        self.fatal(term, r.detail);
        StreamError::Erroneous(r.code)
    }

    /// A message DDP delivered after the stream died: its receive buffer comes
    /// back flushed (a receive is never stranded); RDMAP's own buffers and tagged
    /// messages need nothing (the Reads were flushed with the stream).
    pub(super) fn discard_delivery(&mut self, d: Delivery) {
        if let Delivery::Untagged { buffer, .. } = d
            && buffer.id < INTERNAL_WR_ID
        {
            let mut c = Completion::new(buffer.id, WcOpcode::Recv, WcStatus::Flushed, 0);
            c.buffer = Some(buffer.data);
            self.completions.push_back(c);
        }
    }

    /// RDMAP version and opcode (0/2/0x05, 0/2/0x06), opcode against QN, Read
    /// Request shape, and a Read Response against our outstanding Reads so that it
    /// is never placed past the sink it was asked for.
    pub(super) fn pre_check(
        &self,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
    ) -> Result<(), Refusal> {
        // Leave truncated segments and DDP version errors to DDP (RFC 5041 §7.1).
        let (Some(&c), Some(&r)) = (head.first(), head.get(1)) else {
            return Ok(());
        };
        if DdpControl(c).dv() != DDP_VERSION {
            return Ok(());
        }
        let ctrl = RdmapControl(r);
        if ctrl.rv() != RDMAP_VERSION {
            return Err(refuse(
                TerminateCode::RDMAP_INVALID_VERSION,
                false,
                format!("RDMAP version {} (only 1 exists)", ctrl.rv()),
            ));
        }
        let op = ctrl.opcode();
        if !op.is_known() || op.is_tagged() != DdpControl(c).tagged() {
            return Err(refuse(
                TerminateCode::RDMAP_UNEXPECTED_OPCODE,
                false,
                format!(
                    "opcode {:#x} is not valid on the {} model",
                    op.0,
                    if DdpControl(c).tagged() {
                        "tagged"
                    } else {
                        "untagged"
                    }
                ),
            ));
        }
        let Ok(hdr) = DdpHeader::parse(head) else {
            return Ok(());
        };
        let payload = head.len() + payload_len - hdr.len();
        match hdr {
            DdpHeader::Untagged(h) => {
                let want = match op {
                    Opcode::READ_REQUEST => qn::READ_REQUEST,
                    Opcode::TERMINATE => qn::TERMINATE,
                    _ => qn::SEND,
                };
                if h.qn < qn::COUNT && h.qn != want {
                    return Err(refuse(
                        TerminateCode::RDMAP_UNEXPECTED_OPCODE,
                        true,
                        format!("opcode {:#x} on queue {}", op.0, h.qn),
                    ));
                }
                if op == Opcode::READ_REQUEST
                    && (!h.ctrl.last() || h.mo != 0 || payload != READ_REQ_HDR_LEN)
                {
                    return Err(refuse(
                        TerminateCode::RDMAP_OP_UNSPECIFIED,
                        true,
                        format!(
                            "Read Request must be one {READ_REQ_HDR_LEN}-octet segment; got {payload} at MO {}",
                            h.mo
                        ),
                    ));
                }
                Ok(())
            }
            DdpHeader::Tagged(h) if op == Opcode::READ_RESPONSE => {
                if seq == self.ddp.sink().next_seq() {
                    self.check_read_response_in_order(&h, payload as u64)
                } else {
                    self.check_read_response(h.stag, h.to, payload as u64)
                }
            }
            DdpHeader::Tagged(_) => Ok(()),
        }
    }

    /// A Read Response segment in sender order (always on MPA): it belongs to the
    /// oldest outstanding Read (RFC 5040 §5.5: responses come back in request
    /// order; RFC 5040 §5.5), carries that Read's sink STag, starts where the
    /// response so far ends, and stays inside the Read's length, which its L=1
    /// segment must reach exactly: every octet of the sink once (as siw
    /// `siw_rresp_check_ntoh`). Checked before placement. A wrong STag is 1/1/0x00
    /// (invalid STag), a wrong TO or length 1/1/0x01 (base or bounds): DDP's codes,
    /// since the segment fails as a tagged placement into the sink (RFC 5040 §4.8).
    fn check_read_response_in_order(&self, h: &TaggedHeader, len: u64) -> Result<(), Refusal> {
        let Some(r) = self.orq.front() else {
            return Err(refuse(
                TerminateCode::RDMAP_UNEXPECTED_OPCODE,
                true,
                "Read Response with no outstanding Read Request".into(),
            ));
        };
        let want = u64::from(r.len);
        let progress = self.ddp.sink().tagged_in_progress();
        let done = match progress {
            // Another message is in progress: DDP refuses the segment (0/2/0x06).
            Some(p) if p.rsvd_ulp != h.rsvd_ulp => return Ok(()),
            Some(p) => p.len,
            // A zero-length message: its STag and TO are not checked (RFC 5041);
            // it answers a zero-length Read (the RFC 6581 RTR).
            None if len == 0 && h.ctrl.last() => {
                return if want == 0 {
                    Ok(())
                } else {
                    Err(refuse(
                        TerminateCode::DDP_BASE_BOUNDS,
                        true,
                        format!("zero-length Read Response to a Read of {want} octets"),
                    ))
                };
            }
            None => 0,
        };
        if h.stag != r.sink_stag {
            return Err(refuse(
                TerminateCode::DDP_INVALID_STAG,
                true,
                format!(
                    "Read Response to STag {:#010x}; the oldest Read's sink is {:#010x}",
                    h.stag, r.sink_stag
                ),
            ));
        }
        let at = r.sink_to.wrapping_add(done);
        let end = done + len;
        if h.to != at || end > want || (h.ctrl.last() && end != want) {
            return Err(refuse(
                TerminateCode::DDP_BASE_BOUNDS,
                true,
                format!(
                    "Read Response of {len} octets at TO {:#x}: the oldest Read wants {want} octets at {:#x}, {done} received",
                    h.to, r.sink_to
                ),
            ));
        }
        Ok(())
    }

    /// A Read Response segment that arrived ahead of an earlier one (an out-of-
    /// order LLP): which Read it answers is known only in sender order, so here
    /// it must fit inside the sink of some outstanding Read; the exact match is
    /// checked when DDP delivers the message ([`Self::complete_read`]), after DDP
    /// has checked that its segments tiled one range of one STag.
    fn check_read_response(&self, stag: u32, to: u64, len: u64) -> Result<(), Refusal> {
        if self.orq.is_empty() {
            return Err(refuse(
                TerminateCode::RDMAP_UNEXPECTED_OPCODE,
                true,
                "Read Response with no outstanding Read Request".into(),
            ));
        }
        if len == 0 {
            return Ok(());
        }
        let same_stag = self.orq.iter().any(|r| r.sink_stag == stag);
        let fits = self.orq.iter().any(|r| {
            r.sink_stag == stag
                && to >= r.sink_to
                && to
                    .checked_add(len)
                    .is_some_and(|e| e <= r.sink_to + u64::from(r.len))
        });
        if !same_stag {
            return Err(refuse(
                TerminateCode::DDP_INVALID_STAG,
                true,
                format!("Read Response to STag {stag:#010x}, which no outstanding Read names"),
            ));
        }
        if !fits {
            return Err(refuse(
                TerminateCode::DDP_BASE_BOUNDS,
                true,
                format!(
                    "Read Response of {len} octets at TO {to:#x} falls outside the requested sink"
                ),
            ));
        }
        Ok(())
    }

    /// Move DDP's events into RDMAP's: a DDP error becomes a Terminate; flushed
    /// receive buffers become flushed completions.
    pub(super) fn drain_ddp_events(&mut self) {
        while let Some(e) = self.ddp.poll_event() {
            match e {
                StreamEvent::Error(err) => {
                    let term = from_ddp_error(&err);
                    self.fatal(term, err.detail.clone());
                }
                StreamEvent::Flushed(RecvBuffer { id, data }) if id < INTERNAL_WR_ID => {
                    let status = self.first_recv_status.take().unwrap_or(WcStatus::Flushed);
                    let mut c = Completion::new(id, WcOpcode::Recv, status, 0);
                    c.buffer = Some(data);
                    self.completions.push_back(c);
                }
                StreamEvent::Flushed(_) => {}
                StreamEvent::Closed { graceful } => {
                    self.events.push_back(AsyncEvent::Closed { graceful })
                }
            }
        }
    }

    pub(super) fn on_delivery(&mut self, mem: &MemoryTable, d: Delivery) {
        match d {
            Delivery::Tagged {
                rsvd_ulp,
                stag,
                to,
                len,
            } => {
                if RdmapControl(rsvd_ulp).opcode() == Opcode::READ_RESPONSE {
                    self.complete_read(stag, to, len);
                }
                // An RDMA Write gives no completion at the data sink (RFC 5040 §5.5).
            }
            Delivery::Untagged {
                rsvd_ulp,
                qn,
                msn,
                len,
                buffer,
            } => {
                let hdr = UntaggedHeader::new(true, rsvd_ulp, qn, msn, 0);
                match qn {
                    qn::SEND => self.on_send(mem, hdr, len, buffer),
                    qn::READ_REQUEST => self.on_read_request(mem, hdr, buffer),
                    _ => self.on_terminate_received(&buffer.data[..len as usize]),
                }
            }
        }
    }

    /// The Read Response for the oldest outstanding Read, first-in first-out. DDP
    /// delivers a tagged message only if its segments tiled [to, to + len) of one
    /// STag, so this is the exact match of [`Self::check_read_response_in_order`]
    /// for responses that arrived out of order. A zero-length response to a
    /// zero-length Read is not checked (RFC 5041).
    fn complete_read(&mut self, stag: u32, to: u64, len: u64) {
        let code = match self.orq.front() {
            Some(r) if r.len == 0 && len == 0 => None,
            Some(_) if len == 0 => Some(TerminateCode::DDP_BASE_BOUNDS),
            Some(r) if r.sink_stag != stag => Some(TerminateCode::DDP_INVALID_STAG),
            Some(r) if r.sink_to == to && u64::from(r.len) == len => None,
            _ => Some(TerminateCode::DDP_BASE_BOUNDS),
        };
        match code {
            None => {
                let Some(r) = self.orq.pop_front() else {
                    return;
                };
                self.read_done(r, WcStatus::Success);
                self.pump_sq();
            }
            Some(code) => {
                let hdr = DdpHeader::Tagged(TaggedHeader::new(
                    true,
                    RdmapControl::new(Opcode::READ_RESPONSE).0,
                    stag,
                    to,
                ));
                let term = with_header(code, hdr, 14, None);
                self.fatal(term, format!("Read Response of {len} octets at STag {stag:#010x} TO {to:#x} does not match the oldest Read"));
            }
        }
    }

    fn on_send(&mut self, mem: &MemoryTable, hdr: UntaggedHeader, len: u32, buffer: RecvBuffer) {
        let op = RdmapControl(hdr.rsvd_ulp[0]).opcode();
        let mut c = Completion::new(buffer.id, WcOpcode::Recv, WcStatus::Success, len);
        c.qn_msn = Some((hdr.qn, hdr.msn));
        c.solicited = matches!(op, Opcode::SEND_SE | Opcode::SEND_SE_INVALIDATE);
        if op.carries_invalidate_stag() {
            let s = hdr.rsvd_ulp;
            let stag = u32::from_be_bytes([s[1], s[2], s[3], s[4]]);
            // Invalidate after placement, before delivery (RFC 5040 §5.5). Only
            // regions registered with `Access::REMOTE_INVALIDATE` may be (RFC 5042
            // §5). The code is "STag cannot be invalidated" (RFC 5040
            // §4.8): EType 1, Remote Protection, when the STag is valid but not the
            // peer's to invalidate (another PD or stream, or no such right), EType
            // 2, Remote Operation, when it names no valid region (as siw).
            if let Err(f) = mem.remote_invalidate(Stag(stag), self.ddp.pd(), self.ddp.id()) {
                let code = match f {
                    AccessFault::NotAssociated | AccessFault::AccessRights => {
                        TerminateCode::RDMAP_PROT_CANNOT_INVALIDATE
                    }
                    _ => TerminateCode::RDMAP_OP_CANNOT_INVALIDATE,
                };
                let term = with_header(code, DdpHeader::Untagged(hdr), 18 + len as usize, None);
                // The receive this Send consumed completes in error (it cannot be
                // flushed: it is no longer posted). Queued before the flush of the
                // others, so completions stay in posting order.
                c.status = WcStatus::LocalProtection;
                c.byte_len = 0;
                c.buffer = Some(buffer.data);
                self.completions.push_back(c);
                self.fatal(
                    term,
                    format!(
                        "Send with Invalidate names STag {stag:#010x}, which cannot be invalidated"
                    ),
                );
                return;
            }
            c.invalidated_stag = Some(stag);
        }
        c.buffer = Some(buffer.data);
        self.completions.push_back(c);
    }

    /// Serve a Read Request in arrival order, within IRD (RFC 5040 §5.2, §5.5).
    fn on_read_request(&mut self, mem: &MemoryTable, hdr: UntaggedHeader, buffer: RecvBuffer) {
        let rr = ReadRequestHeader::parse(&buffer.data).ok();
        // Give the internal buffer back to the Read Request queue.
        let _ = self.ddp.post_recv(qn::READ_REQUEST, buffer);
        let Some(rr) = rr else { return };
        let seg = 18 + READ_REQ_HDR_LEN;
        if self.irq_active >= self.cfg.ird {
            let term = with_header(
                TerminateCode::RDMAP_CATASTROPHIC_STREAM,
                DdpHeader::Untagged(hdr),
                seg,
                None,
            );
            self.fatal(
                term,
                format!(
                    "peer has more than IRD = {} RDMA Reads outstanding",
                    self.cfg.ird
                ),
            );
            return;
        }
        // The Read Response covers [sink TO, sink TO + size): if that wraps 2^64
        // it cannot be sent (RFC 5041 §5.2: a tagged message's TO range does not
        // wrap). The request itself is at fault: 0/1/0x04, TO wrap, with its
        // header (RFC 5040 §4.8), rather than a response dropped silently.
        if rr.sink_to.checked_add(u64::from(rr.size)).is_none() {
            let term = with_header(
                TerminateCode::RDMAP_TO_WRAP,
                DdpHeader::Untagged(hdr),
                seg,
                Some(rr),
            );
            self.fatal(
                term,
                format!(
                    "peer asked for {} octets at sink TO {:#x}: the Read Response would wrap 2^64",
                    rr.size, rr.sink_to
                ),
            );
            return;
        }
        // A zero-length Read (e.g. the RFC 6581 RTR) reads nothing: no checks, and
        // one zero-length Read Response (RFC 5041).
        if rr.size == 0 {
            self.respond_read(hdr, rr, Bytes::new());
            return;
        }
        let src = mem.remote_region(
            Stag(rr.src_stag),
            self.ddp.pd(),
            self.ddp.id(),
            Access::REMOTE_READ,
            rr.src_to,
            u64::from(rr.size),
        );
        match src {
            Ok(region) => {
                // The response leases the source range: the LLP reads it from the
                // region when it writes, no copy here.
                let offset = (rr.src_to - region.base_to()) as usize;
                let len = rr.size as usize;
                let lease = Payload::Region {
                    region,
                    offset,
                    len,
                };
                self.respond_read(hdr, rr, lease);
            }
            Err(f) => {
                let code = match f {
                    AccessFault::InvalidStag => TerminateCode::RDMAP_INVALID_STAG,
                    AccessFault::BaseBounds => TerminateCode::RDMAP_BASE_BOUNDS,
                    AccessFault::AccessRights => TerminateCode::RDMAP_ACCESS_VIOLATION,
                    AccessFault::NotAssociated => TerminateCode::RDMAP_STAG_NOT_ASSOCIATED,
                    AccessFault::ToWrap => TerminateCode::RDMAP_TO_WRAP,
                };
                let term = with_header(code, DdpHeader::Untagged(hdr), seg, Some(rr));
                self.fatal(
                    term,
                    format!(
                        "peer read {} octets at STag {:#010x} TO {:#x}: {}",
                        rr.size,
                        rr.src_stag,
                        rr.src_to,
                        code.describe()
                    ),
                );
            }
        }
    }
}

/// A refusal found from a segment's header, not yet reported: the LLP's check
/// of the same FPDU comes first (RFC 5041 §7.1; a corrupted header must
/// give 2/0/0x02, not the error its corruption happens to look like).
#[derive(Debug)]
pub(super) enum HeldRefusal {
    Rdmap {
        seq: SenderSeq,
        r: Refusal,
        head: [u8; UNTAGGED_HDR_LEN],
        hlen: usize,
        seg_len: usize,
    },
    /// DDP holds its own until `DdpStream::finish_segment`.
    Ddp { seq: SenderSeq },
}

impl RdmapStream {
    /// Begin the segment at sender position `seq` whose DDP header is `head` (the
    /// segment's first `min(length, header length)` octets) followed by
    /// `payload_len` payload octets. `Ok`: where the payload goes.
    ///
    /// [`Begin::Alone`]: `Err` = refused, nothing placed; a refusal found from
    /// the header (`StreamError::Erroneous`) is held until
    /// [`Self::finish_segment`] says whether the LLP's check of the same FPDU
    /// passed (the LLP reads the payload and drops it in between).
    /// `StreamError::Closed`: the stream is dead, nothing held.
    ///
    /// [`Begin::Ahead`]: begun while the batch's earlier segments wait for
    /// their payloads (a batch, `begin_ahead`), every check passed as `Alone` would
    /// make them in order. `StreamError::NotAhead`: it cannot join the batch,
    /// would be refused, or the LLP cannot take its target in this batch;
    /// nothing changed, nothing reported (the LLP takes it alone next, and a
    /// refusal is reported then).
    pub fn begin_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        how: Begin<'_>,
    ) -> Result<Target, StreamError> {
        if let Begin::Ahead(fits) = how {
            return self.begin_ahead(mem, seq, head, payload_len, fits);
        }
        self.rx_begun.clear();
        self.rx_held = None;
        if self.terminated {
            return Err(StreamError::Closed);
        }
        let seg_len = head.len().saturating_add(payload_len);
        if let Err(r) = self.pre_check(seq, head, payload_len) {
            let code = r.code;
            let mut h = [0u8; UNTAGGED_HDR_LEN];
            let hlen = head.len().min(UNTAGGED_HDR_LEN);
            h[..hlen].copy_from_slice(&head[..hlen]);
            self.rx_held = Some(HeldRefusal::Rdmap {
                seq,
                r,
                head: h,
                hlen,
                seg_len,
            });
            return Err(StreamError::Erroneous(code));
        }
        match self
            .ddp
            .begin_segment(mem, seq, head, payload_len, Begin::Alone)
        {
            Ok(t) => {
                self.rx_begun.push_back(seq);
                Ok(t)
            }
            Err(StreamError::Erroneous(code)) => {
                // Held by DDP (or the stream was erroneous already: then
                // `finish_segment` reports nothing new).
                self.rx_held = Some(HeldRefusal::Ddp { seq });
                Err(StreamError::Erroneous(code))
            }
            Err(e) => {
                self.drain_ddp_events();
                Err(e)
            }
        }
    }

    /// The LLP checked the held refusal's FPDU: a failed check is reported as
    /// such (2/0/0x02), else the refusal itself (Terminate queued, events).
    fn settle_refusal(&mut self, held: HeldRefusal, crc_ok: bool) -> StreamError {
        let seq = match &held {
            HeldRefusal::Rdmap { seq, .. } | HeldRefusal::Ddp { seq, .. } => *seq,
        };
        if !crc_ok {
            if let HeldRefusal::Ddp { .. } = held {
                // DDP drops its refusal.
                let _ = self.ddp.finish_segment(false);
            }
            let code = TerminateCode::MPA_CRC_ERROR;
            self.llp_error(
                code,
                format!("MPA framing: MPA CRC mismatch (FPDU {seq} after setup)"),
            );
            return StreamError::Erroneous(code);
        }
        match held {
            HeldRefusal::Rdmap {
                r,
                head,
                hlen,
                seg_len,
                ..
            } => self.refuse_segment(r, &head[..hlen], seg_len),
            HeldRefusal::Ddp { .. } => {
                let err = self.ddp.finish_segment(true).err();
                self.drain_ddp_events();
                err.unwrap_or(StreamError::Closed)
            }
        }
    }

    /// The begun segment's payload is in its target and the LLP checked it
    /// (`crc_ok`; true where the LLP has no check of its own). Only now is it
    /// delivered, completed or acted on. A failed check: Terminate 2/0/0x02,
    /// nothing of the segment delivered (its placed octets are undefined, RFC
    /// 5044 §4.4), the stream dead. After a refused [`Self::begin_segment`]:
    /// the held refusal is reported now (or the failed check instead).
    pub fn finish_segment(&mut self, mem: &MemoryTable, crc_ok: bool) -> Result<(), StreamError> {
        if let Some(held) = self.rx_held.take() {
            return Err(self.settle_refusal(held, crc_ok));
        }
        let Some(seq) = self.rx_begun.pop_front() else {
            return Err(StreamError::Closed);
        };
        if self.terminated {
            let _ = self.ddp.finish_segment(false);
            return Err(StreamError::Closed);
        }
        if !crc_ok {
            let _ = self.ddp.finish_segment(false);
            let code = TerminateCode::MPA_CRC_ERROR;
            self.llp_error(
                code,
                format!(
                    "MPA framing: MPA CRC mismatch (FPDU {seq} after setup); its placed octets are undefined"
                ),
            );
            return Err(StreamError::Erroneous(code));
        }
        let res = self.ddp.finish_segment(true);
        self.drain_ddp_events();
        // One segment can release a batch of deliveries (an out-of-order LLP). If
        // one of them ends the stream, the rest still give their buffers back.
        while let Some(d) = self.ddp.poll_delivery() {
            if self.terminated {
                self.discard_delivery(d);
            } else {
                self.on_delivery(mem, d);
            }
        }
        res
    }
}

impl RdmapStream {
    /// [`Self::begin_segment`] with [`crate::ddp::Begin::Ahead`]: only RDMA
    /// Writes, Sends and Sends with Solicited Event join, with no refusal held
    /// and the stream alive; DDP's rules of a batch then apply
    /// (`ddp/sink/batch.rs`). `NotAhead`: nothing changed.
    pub(super) fn begin_ahead(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        fits: Fits<'_>,
    ) -> Result<Target, StreamError> {
        let op = head.get(1).map(|&r| RdmapControl(r).opcode());
        if self.terminated
            || self.rx_held.is_some()
            || !op
                .is_some_and(|op| [Opcode::RDMA_WRITE, Opcode::SEND, Opcode::SEND_SE].contains(&op))
            || self.pre_check(seq, head, payload_len).is_err()
        {
            return Err(StreamError::NotAhead);
        }
        let t = self
            .ddp
            .begin_segment(mem, seq, head, payload_len, Begin::Ahead(fits))
            .map_err(|_| StreamError::NotAhead)?;
        self.rx_begun.push_back(seq);
        Ok(t)
    }

    /// Run `f` over the receive-buffer octets of the begun untagged segments'
    /// payloads, oldest first: a posted receive buffer, a shared-pool buffer,
    /// or RDMAP's own buffer for a Read Request or Terminate (one slice for
    /// the one segment begun header first, with no allocation; those of a
    /// batch's Sends with payload). `None` if none is begun, a buffer is gone
    /// or the stream died.
    pub fn segment_buffers<R>(&mut self, f: impl FnOnce(&mut [&mut [u8]]) -> R) -> Option<R> {
        if self.terminated || self.rx_begun.is_empty() {
            return None;
        }
        self.ddp.segment_buffers(f)
    }
}
