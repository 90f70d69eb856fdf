//! The sending side: work requests -> DDP messages, ORD and fences, completions of
//! Sends and Writes when their last segment leaves.

use super::{Completion, OutRead, RdmapStream, TxTrack, WcOpcode, WcStatus, WorkRequest};
use crate::ddp::{OutSegment, Payload};
use crate::mem::{Access, MemoryTable, Stag};
use bytes::Bytes;
use rddp_wire::rdmap::qn;
use rddp_wire::read_request::ReadRequestHeader;
use rddp_wire::{Opcode, RdmapControl};

impl RdmapStream {
    /// Post a work request. Checks needing only local state fail at once as a
    /// completion (never a panic): a Read's sink, a Read with ORD 0. After the
    /// stream died it completes as flushed.
    /// `mem` is the local memory table (a Read's sink STag is checked here).
    pub fn post(&mut self, mem: &MemoryTable, wr: WorkRequest) {
        if self.terminated {
            self.completions.push_back(Completion::new(
                wr.wr_id(),
                wr.opcode(),
                WcStatus::Flushed,
                0,
            ));
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
                self.completions.push_back(Completion::new(
                    wr_id,
                    WcOpcode::RdmaRead,
                    WcStatus::LocalQpOperation,
                    0,
                ));
                return;
            }
            // The response lands through DDP's tagged checks, so the sink must be a
            // valid region of this stream with remote write (spec §3.4). A
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
                self.completions.push_back(Completion::new(
                    wr_id,
                    WcOpcode::RdmaRead,
                    WcStatus::LocalProtection,
                    0,
                ));
                return;
            }
        }
        self.sq.push_back(wr);
        self.pump_sq();
    }

    /// Hand waiting requests to DDP while ORD and fences allow, in posting order.
    pub(super) fn pump_sq(&mut self) {
        while let Some(wr) = self.sq.front() {
            if wr.fenced() && !self.orq.is_empty() {
                return;
            }
            if matches!(wr, WorkRequest::Read { .. }) && self.orq.len() >= self.cfg.ord as usize {
                return;
            }
            let Some(wr) = self.sq.pop_front() else {
                return;
            };
            self.submit(wr);
        }
    }

    fn submit(&mut self, wr: WorkRequest) {
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
                r.map(|_| self.tx.push_back(TxTrack::Send { wr_id, len }))
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
                r.map(|_| self.tx.push_back(TxTrack::Write { wr_id, len }))
            }
            WorkRequest::Read {
                local_stag,
                local_to,
                len,
                remote_stag,
                remote_to,
                ..
            } => {
                let hdr = ReadRequestHeader {
                    sink_stag: local_stag,
                    sink_to: local_to,
                    size: len,
                    src_stag: remote_stag,
                    src_to: remote_to,
                };
                let body = Bytes::copy_from_slice(&hdr.to_bytes());
                let r =
                    self.ddp
                        .send_untagged(qn::READ_REQUEST, rsvd(Opcode::READ_REQUEST, 0), body);
                r.map(|_| {
                    self.tx.push_back(TxTrack::ReadRequest);
                    self.orq.push_back(OutRead {
                        wr_id,
                        sink_stag: local_stag,
                        sink_to: local_to,
                        len,
                    });
                })
            }
        };
        if res.is_err() {
            // Too long, TO wrap, or the stream refuses: a local error of this request.
            let status = if self.terminated {
                WcStatus::Flushed
            } else {
                WcStatus::LocalLength
            };
            self.completions
                .push_back(Completion::new(wr_id, opcode, status, 0));
        }
    }

    /// Queue the Read Response for an accepted Read Request (served in arrival order).
    pub(super) fn respond_read(&mut self, sink_stag: u32, sink_to: u64, data: impl Into<Payload>) {
        let ctrl = RdmapControl::new(Opcode::READ_RESPONSE).0;
        if self.ddp.send_tagged(ctrl, sink_stag, sink_to, data).is_ok() {
            self.tx.push_back(TxTrack::ReadResponse);
            self.irq_active += 1;
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
            match track {
                Some(TxTrack::Send { wr_id, len }) => {
                    self.completions.push_back(Completion::new(
                        wr_id,
                        WcOpcode::Send,
                        WcStatus::Success,
                        len,
                    ));
                }
                Some(TxTrack::Write { wr_id, len }) => {
                    self.completions.push_back(Completion::new(
                        wr_id,
                        WcOpcode::RdmaWrite,
                        WcStatus::Success,
                        len,
                    ));
                }
                Some(TxTrack::Terminate) => self.terminate_sent = true,
                Some(TxTrack::ReadResponse | TxTrack::ReadRequest | TxTrack::Flushed) | None => {}
            }
        }
        Some(seg)
    }
}

/// RsvdULP of an untagged RDMAP message: control octet, then the Invalidate STag.
pub(super) fn rsvd(op: Opcode, inval: u32) -> [u8; 5] {
    let s = inval.to_be_bytes();
    [RdmapControl::new(op).0, s[0], s[1], s[2], s[3]]
}
