//! Header-first receive for RDMAP (docs/data-path.md,
//! "Receive"): the LLP hands up a segment's DDP header and payload length, RDMAP
//! and DDP run every check that does not need the payload (RDMAP version and
//! opcode, opcode against QN, Read Request shape, a Read Response against the
//! ORQ, RFC 5041 §7.1's DDP checks incl. STag, rights, bounds, TO wrap, MSN, receive
//! buffer, message tiling) and say where the payload goes. The LLP reads it
//! straight there, checks its CRC over the octets where they lie, and calls
//! [`RdmapStream::finish_segment`]: only then is anything delivered or completed.
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

use super::RdmapStream;
use super::rx::Refusal;
use crate::ddp::{Begin, SenderSeq, StreamError, Target};
use crate::mem::MemoryTable;
use rddp_wire::TerminateCode;
use rddp_wire::ddp::UNTAGGED_HDR_LEN;

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
    /// their payloads (`rx_batch.rs`), every check passed as `Alone` would
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
