//! The receiving side: RDMAP checks before DDP places anything (spec §2.10 step 3,
//! Read Response matching), then the effects of each delivered message.

use super::terminate::{from_ddp_error, with_header};
use super::{AsyncEvent, Completion, INTERNAL_WR_ID, RdmapStream, WcOpcode, WcStatus};
use crate::ddp::{Delivery, RecvBuffer, SenderSeq, StreamError, StreamEvent};
use crate::mem::{AccessFault, MemoryTable, Stag};
use bytes::Bytes;
use rddp_wire::ddp::DDP_VERSION;
use rddp_wire::rdmap::{RDMAP_VERSION, qn};
use rddp_wire::read_request::{READ_REQ_HDR_LEN, ReadRequestHeader};
use rddp_wire::{
    DdpControl, DdpHeader, Opcode, RdmapControl, Terminate, TerminateCode, UntaggedHeader,
};

/// An RDMAP-level refusal found before placement.
struct Refusal {
    code: TerminateCode,
    /// Echo the header (M=D=1) unless its layout is in doubt.
    echo: bool,
    detail: String,
}

fn refuse(code: TerminateCode, echo: bool, detail: String) -> Refusal {
    Refusal { code, echo, detail }
}

impl RdmapStream {
    /// A DDP segment from the LLP (`seq`: its place in the sender's order). Errors
    /// are handled here (Terminate queued, events raised); the result says whether
    /// the segment was accepted.
    pub fn on_segment(
        &mut self,
        mem: &mut MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), StreamError> {
        if self.terminated {
            return Err(StreamError::Closed);
        }
        if let Err(r) = self.pre_check(seg) {
            let term = match (r.echo, DdpHeader::parse(seg)) {
                (true, Ok(h)) => with_header(r.code, h, seg.len(), None),
                _ => Terminate::bare(r.code),
            };
            self.ddp.fail(r.code);
            self.fatal(term, r.detail);
            return Err(StreamError::Erroneous(r.code));
        }
        let res = self.ddp.on_segment(mem, seq, seg);
        self.drain_ddp_events();
        while let Some(d) = self.ddp.poll_delivery() {
            if self.terminated {
                // The stream died on an earlier message (or this segment):
                // later ones are not acted on, but their buffers complete.
                self.flush_delivery(d);
                continue;
            }
            self.on_delivery(mem, d);
        }
        res
    }

    /// A message delivered after the stream died: hand a Send's receive buffer
    /// back as flushed (RDMAP's own buffers and tagged messages need nothing:
    /// outstanding Reads were flushed when the stream died).
    fn flush_delivery(&mut self, d: Delivery) {
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
    fn pre_check(&self, seg: &[u8]) -> Result<(), Refusal> {
        // Leave truncated segments and DDP version errors to DDP (spec §2.10 step 2).
        let (Some(&c), Some(&r)) = (seg.first(), seg.get(1)) else {
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
        let Ok(hdr) = DdpHeader::parse(seg) else {
            return Ok(());
        };
        let payload = seg.len() - hdr.len();
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
                self.check_read_response(h.stag, h.to, payload as u64)
            }
            DdpHeader::Tagged(_) => Ok(()),
        }
    }

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

    fn on_delivery(&mut self, mem: &mut MemoryTable, d: Delivery) {
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
                // An RDMA Write gives no completion at the data sink (spec §3.7 rule 9).
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

    /// The Read Response for the oldest outstanding Read, first-in first-out.
    fn complete_read(&mut self, stag: u32, to: u64, len: u64) {
        match self.orq.front() {
            Some(r) if r.sink_stag == stag && r.sink_to == to && u64::from(r.len) == len => {
                let r = *r;
                self.orq.pop_front();
                self.completions.push_back(Completion::new(
                    r.wr_id,
                    WcOpcode::RdmaRead,
                    WcStatus::Success,
                    r.len,
                ));
                self.pump_sq();
            }
            _ => {
                let hdr = DdpHeader::Tagged(rddp_wire::TaggedHeader::new(
                    true,
                    RdmapControl::new(Opcode::READ_RESPONSE).0,
                    stag,
                    to,
                ));
                let term = with_header(TerminateCode::DDP_BASE_BOUNDS, hdr, 14, None);
                self.fatal(term, format!("Read Response of {len} octets at STag {stag:#010x} TO {to:#x} does not match the oldest Read"));
            }
        }
    }

    fn on_send(
        &mut self,
        mem: &mut MemoryTable,
        hdr: UntaggedHeader,
        len: u32,
        buffer: RecvBuffer,
    ) {
        let op = RdmapControl(hdr.rsvd_ulp[0]).opcode();
        let mut c = Completion::new(buffer.id, WcOpcode::Recv, WcStatus::Success, len);
        c.qn_msn = Some((hdr.qn, hdr.msn));
        c.solicited = matches!(op, Opcode::SEND_SE | Opcode::SEND_SE_INVALIDATE);
        if op.carries_invalidate_stag() {
            let s = hdr.rsvd_ulp;
            let stag = u32::from_be_bytes([s[1], s[2], s[3], s[4]]);
            // Invalidate after placement, before delivery (spec §3.7 rule 7).
            if let Err(f) = mem.remote_invalidate(Stag(stag), self.ddp.pd(), self.ddp.id()) {
                let code = match f {
                    AccessFault::NotAssociated => TerminateCode::RDMAP_PROT_CANNOT_INVALIDATE,
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

    /// Serve a Read Request in arrival order, within IRD (spec §3.4, §3.7).
    fn on_read_request(&mut self, mem: &mut MemoryTable, hdr: UntaggedHeader, buffer: RecvBuffer) {
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
        // A zero-length Read (e.g. the RFC 6581 RTR) reads nothing: no checks, and
        // one zero-length Read Response (spec §2.8).
        if rr.size == 0 {
            self.respond_read(rr.sink_stag, rr.sink_to, Bytes::new());
            return;
        }
        let src = mem.read_remote(
            Stag(rr.src_stag),
            self.ddp.pd(),
            self.ddp.id(),
            rr.src_to,
            rr.size as usize,
        );
        match src {
            Ok(data) => {
                let data = Bytes::copy_from_slice(data);
                self.respond_read(rr.sink_stag, rr.sink_to, data);
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
