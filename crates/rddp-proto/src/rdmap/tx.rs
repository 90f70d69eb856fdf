//! The sending side: work requests -> DDP messages, ORD and fences, completions of
//! Sends and Writes when their last segment leaves.

use super::sq_order::SqSeq;
use super::terminate::with_header;
use super::{Completion, OutRead, RdmapStream, TxTrack, WcOpcode, WcStatus, WorkRequest};
use crate::ddp::{OutSegment, Payload, StreamError};
use crate::mem::{Access, MemoryTable, Stag};
use bytes::Bytes;
use rddp_wire::ddp::UNTAGGED_HDR_LEN;
use rddp_wire::rdmap::qn;
use rddp_wire::read_request::{READ_REQ_HDR_LEN, ReadRequestHeader};
use rddp_wire::{DdpHeader, Opcode, RdmapControl, TerminateCode, UntaggedHeader};

impl RdmapStream {
    /// Post a work request. Checks needing only local state fail at once as a
    /// completion (never a panic): a Read's sink, a Read with ORD 0. After the
    /// stream died, or once graceful teardown began ([`Self::close`]), it completes
    /// as flushed. `mem` is the local memory table (a Read's sink STag is checked
    /// here).
    pub fn post(&mut self, mem: &MemoryTable, wr: WorkRequest) {
        self.post_as(mem, wr, true);
    }

    /// [`Self::post`]; `signaled` false: a request that succeeds yields a
    /// [`Completion`] with `signaled` false, for the verbs layer to count and
    /// not to pass on (a verbs work request without `IBV_SEND_SIGNALED` on a
    /// queue pair with `sq_sig_all` 0). A failure always completes.
    /// Completions come out in posting order (`sq_order.rs`), so a signaled
    /// one covers the unsignaled ones before it.
    pub fn post_as(&mut self, mem: &MemoryTable, wr: WorkRequest, signaled: bool) {
        // Its completion, whenever it comes, waits for every earlier one
        // (`sq_order.rs`).
        let seq = self.sq_order.posted();
        if self.flushes_new_work() || self.closing {
            let c = Completion::new(wr.wr_id(), wr.opcode(), WcStatus::Flushed, 0);
            self.sq_done(seq, c);
            return;
        }
        if let WorkRequest::Read {
            wr_id,
            local_stag,
            local_to,
            len,
            ..
        } = wr
        {
            // ORD 0 (the peer announced IRD 0, RFC 6581): no Read can ever leave, and
            // one waiting in the send queue would hold back everything behind it.
            if self.cfg.ord == 0 {
                let c = Completion::new(wr_id, WcOpcode::RdmaRead, WcStatus::LocalQpOperation, 0);
                self.sq_done(seq, c);
                return;
            }
            // The response lands through DDP's tagged checks, so the sink must be a
            // valid region of this stream with remote write (RFC 5040 §5.2). A
            // zero-length Read places nothing (the RFC 6581 RTR): no sink needed.
            let ok = len == 0
                || mem
                    .remote_region(
                        Stag(local_stag),
                        self.ddp.pd(),
                        self.ddp.id(),
                        Access::REMOTE_WRITE,
                        local_to,
                        u64::from(len),
                    )
                    .is_ok();
            if !ok {
                let c = Completion::new(wr_id, WcOpcode::RdmaRead, WcStatus::LocalProtection, 0);
                self.sq_done(seq, c);
                return;
            }
        }
        self.sq.push_back((wr, signaled, seq));
        self.pump_sq();
    }

    /// Hand waiting requests to DDP while ORD and fences allow, in posting order.
    pub(super) fn pump_sq(&mut self) {
        while let Some((wr, _, _)) = self.sq.front() {
            if wr.fenced() && !self.orq.is_empty() {
                return;
            }
            if matches!(wr, WorkRequest::Read { .. }) && self.orq.len() >= self.cfg.ord as usize {
                return;
            }
            let Some((wr, signaled, seq)) = self.sq.pop_front() else {
                return;
            };
            self.submit_as(wr, seq, signaled);
        }
    }

    /// Queue RDMAP's own RFC 6581 Read RTR: a zero-length Read, the first message
    /// of an initiator that chose it (RFC 6581). It takes an ORD slot like any
    /// Read, but no completion of it ever reaches the ULP. Refused unless it can
    /// leave now: a live stream, a free ORD slot, nothing waiting ahead of it.
    pub fn post_read_rtr(&mut self) -> Result<(), RtrRefused> {
        if self.terminated || !self.sq.is_empty() || self.orq.len() >= self.cfg.ord as usize {
            return Err(RtrRefused { ord: self.cfg.ord });
        }
        let rtr = OutRead {
            wr_id: super::INTERNAL_WR_ID,
            sink_stag: 1,
            sink_to: 0,
            len: 0,
            seq: None,
            signaled: true,
        };
        // A fresh live stream takes it; if it did not, there is nothing to
        // complete (no ULP request).
        let _ = self.send_read_request(rtr, 1, 0);
        Ok(())
    }

    /// `seq`: its place in the send queue ([`Self::post_as`]); `signaled`: see
    /// [`Self::post_as`].
    fn submit_as(&mut self, wr: WorkRequest, seq: SqSeq, signaled: bool) {
        let wr_id = wr.wr_id();
        let opcode = wr.opcode();
        let res = match wr {
            WorkRequest::Send {
                payload,
                solicited,
                invalidate,
                ..
            } => {
                let op = match (solicited, invalidate.is_some()) {
                    (false, false) => Opcode::SEND,
                    (false, true) => Opcode::SEND_INVALIDATE,
                    (true, false) => Opcode::SEND_SE,
                    (true, true) => Opcode::SEND_SE_INVALIDATE,
                };
                let len = payload.len() as u32;
                let r =
                    self.ddp
                        .send_untagged(qn::SEND, rsvd(op, invalidate.unwrap_or(0)), payload);
                r.map(|_| {
                    self.tx.push_back(TxTrack::Send {
                        wr_id,
                        len,
                        signaled,
                        seq,
                    })
                })
            }
            WorkRequest::Write {
                payload,
                remote_stag,
                remote_to,
                ..
            } => {
                let len = payload.len() as u32;
                let ctrl = RdmapControl::new(Opcode::RDMA_WRITE).0;
                let r = self.ddp.send_tagged(ctrl, remote_stag, remote_to, payload);
                r.map(|_| {
                    self.tx.push_back(TxTrack::Write {
                        wr_id,
                        len,
                        signaled,
                        seq,
                    })
                })
            }
            WorkRequest::Read {
                local_stag,
                local_to,
                len,
                remote_stag,
                remote_to,
                ..
            } => {
                let out = OutRead {
                    wr_id,
                    sink_stag: local_stag,
                    sink_to: local_to,
                    len,
                    seq: Some(seq),
                    signaled,
                };
                self.send_read_request(out, remote_stag, remote_to)
            }
        };
        if let Err(e) = res {
            // Too long or TO wrap: a local error of this request. A stream that
            // no longer takes messages (dead, closed) flushes it.
            let gone = matches!(e, StreamError::Closed | StreamError::Erroneous(_));
            let status = if self.terminated || gone {
                WcStatus::Flushed
            } else {
                WcStatus::LocalLength
            };
            self.sq_done(seq, Completion::new(wr_id, opcode, status, 0));
        }
    }

    /// The Read Request for `out` (RFC 5040 §4.4) into DDP, and `out` onto the
    /// ORQ, where its response is matched (the ULP's Reads and the RTR alike).
    fn send_read_request(
        &mut self,
        out: OutRead,
        src_stag: u32,
        src_to: u64,
    ) -> Result<(), StreamError> {
        let hdr = ReadRequestHeader {
            sink_stag: out.sink_stag,
            sink_to: out.sink_to,
            size: out.len,
            src_stag,
            src_to,
        };
        let body = Bytes::copy_from_slice(&hdr.to_bytes());
        self.ddp
            .send_untagged(qn::READ_REQUEST, rsvd(Opcode::READ_REQUEST, 0), body)?;
        self.tx.push_back(TxTrack::ReadRequest);
        self.orq.push_back(out);
        Ok(())
    }

    /// Queue the Read Response for an accepted Read Request (`hdr`, `rr`), served
    /// in arrival order. If it cannot be queued (graceful teardown has begun, so
    /// no message may enter the stream) the peer's Read would wait forever: the
    /// stream ends with 0/2/0x07, catastrophic error localized to the RDMAP
    /// stream, and the Read Request header (RFC 5040 §4.8, M=D=R=1).
    pub(super) fn respond_read(
        &mut self,
        hdr: UntaggedHeader,
        rr: ReadRequestHeader,
        data: impl Into<Payload>,
    ) {
        let ctrl = RdmapControl::new(Opcode::READ_RESPONSE).0;
        match self.ddp.send_tagged(ctrl, rr.sink_stag, rr.sink_to, data) {
            Ok(()) => {
                self.tx.push_back(TxTrack::ReadResponse);
                self.irq_active += 1;
            }
            Err(e) => {
                let code = TerminateCode::RDMAP_CATASTROPHIC_STREAM;
                let seg = UNTAGGED_HDR_LEN + READ_REQ_HDR_LEN;
                let term = with_header(code, DdpHeader::Untagged(hdr), seg, Some(rr));
                self.fatal(
                    term,
                    format!(
                        "cannot send the Read Response for {} octets at sink STag {:#010x} TO {:#x}: {e}",
                        rr.size, rr.sink_stag, rr.sink_to
                    ),
                );
            }
        }
    }

    /// The next segment for the LLP. When a message's last segment leaves, a Send or
    /// Write completes (with [`Self::complete_when_sent`]: when the LLP reports it
    /// written) and a Read Response frees its IRD slot.
    pub fn poll_segment(&mut self) -> Option<OutSegment> {
        let seg = self.ddp.poll_segment()?;
        if seg.header.last() {
            let track = self.tx.pop_front();
            if let Some(TxTrack::ReadResponse) = track
                && !self.hold_ird_until_sent
            {
                self.irq_active = self.irq_active.saturating_sub(1);
            }
            if self.complete_when_sent {
                // Sends, Writes and our Terminate wait for `segment_sent`.
                if let Some(t) = track {
                    self.unsent.push_back(t);
                }
                return Some(seg);
            }
            self.track_sent(track);
        }
        Some(seg)
    }
}

/// The Read RTR cannot leave now (RFC 6581: it takes an ORD slot, so it needs
/// ORD of at least 1, and it is the initiator's first message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the RFC 6581 Read RTR cannot be sent: it needs a free ORD slot (ORD is {ord}) on a live stream with nothing queued ahead of it"
)]
pub struct RtrRefused {
    /// The stream's ORD, as agreed at connection setup.
    pub ord: u32,
}

/// RsvdULP of an untagged RDMAP message: control octet, then the Invalidate STag.
pub(super) fn rsvd(op: Opcode, inval: u32) -> [u8; 5] {
    let s = inval.to_be_bytes();
    [RdmapControl::new(op).0, s[0], s[1], s[2], s[3]]
}
