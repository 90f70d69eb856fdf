//! Header-first receive for RDMAP (docs/data-path.md,
//! "Receive"): the LLP hands up a segment's DDP header and payload length, RDMAP
//! and DDP run every check that does not need the payload (RDMAP version and
//! opcode, opcode against QN, Read Request shape, a Read Response against the
//! ORQ, RFC 5041 §7.1's DDP checks incl. STag, rights, bounds, TO wrap, MSN, receive
//! buffer, message tiling) and say where the payload goes. The LLP reads it
//! straight there, checks its CRC over the octets where they lie, and calls
//! [`RdmapStream::finish_segment`]: only then is anything delivered or completed.
//!
//! Driver contract (one segment at a time, in sender order on MPA):
//! 1. `begin_segment(mem, seq, head, payload_len)`: `Err` = refused (Terminate
//!    queued exactly as `on_segment` would, nothing placed; read no payload);
//! 2. fill the [`Target`]: a region range (lock the region for each read), or
//!    [`RdmapStream::segment_buffer`] (the receive buffer, RDMAP's own Read
//!    Request / Terminate buffers included);
//! 3. `finish_segment(mem, crc_ok)`.

use super::RdmapStream;
use super::rx::Refusal;
use crate::ddp::{DdpError, SenderSeq, StreamError, Target};
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
    Ddp {
        seq: SenderSeq,
        e: DdpError,
    },
}

impl RdmapStream {
    /// As [`Self::begin_segment`], but a refusal is held, not reported, until
    /// the LLP checked the segment's FPDU: the LLP reads the refused payload
    /// (dropping it) and its CRC, then calls [`Self::settle_refusal`]. `Err`:
    /// refused (held if [`Self::has_held_refusal`]), nothing placed.
    pub fn begin_segment_crc_first(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
    ) -> Result<Target, StreamError> {
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
        match self.ddp.begin_segment_held(mem, seq, head, payload_len) {
            Ok(t) => {
                self.rx_begun.push_back(seq);
                Ok(t)
            }
            Err(Ok(e)) => {
                self.drain_ddp_events();
                Err(e)
            }
            Err(Err(e)) => {
                let code = e.code;
                self.rx_held = Some(HeldRefusal::Ddp { seq, e });
                Err(StreamError::Erroneous(code))
            }
        }
    }

    /// A refusal of [`Self::begin_segment_crc_first`] waits for its FPDU's check.
    pub fn has_held_refusal(&self) -> bool {
        self.rx_held.is_some()
    }

    /// The LLP checked the held refusal's FPDU: a failed CRC is reported as
    /// such (2/0/0x02), else the refusal itself (Terminate queued, events).
    pub fn settle_refusal(&mut self, crc_ok: bool) {
        let Some(held) = self.rx_held.take() else {
            return;
        };
        let seq = match &held {
            HeldRefusal::Rdmap { seq, .. } | HeldRefusal::Ddp { seq, .. } => *seq,
        };
        if !crc_ok {
            self.llp_error(
                TerminateCode::MPA_CRC_ERROR,
                format!("MPA framing: MPA CRC mismatch (FPDU {seq} after setup)"),
            );
            return;
        }
        match held {
            HeldRefusal::Rdmap {
                r,
                head,
                hlen,
                seg_len,
                ..
            } => {
                self.refuse_segment(r, &head[..hlen], seg_len);
            }
            HeldRefusal::Ddp { e, .. } => {
                self.ddp.refuse_held(e);
                self.drain_ddp_events();
            }
        }
    }

    /// Begin the segment at sender position `seq` whose DDP header is `head` (the
    /// segment's first `min(length, header length)` octets) followed by
    /// `payload_len` payload octets. `Ok`: where the payload goes. `Err`: refused
    /// (Terminate queued, stream erroneous, events raised), nothing placed.
    pub fn begin_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
    ) -> Result<Target, StreamError> {
        self.rx_begun.clear();
        if self.terminated {
            return Err(StreamError::Closed);
        }
        let seg_len = head.len().saturating_add(payload_len);
        if let Err(r) = self.pre_check(seq, head, payload_len) {
            return Err(self.refuse_segment(r, head, seg_len));
        }
        match self.ddp.begin_segment(mem, seq, head, payload_len) {
            Ok(t) => {
                self.rx_begun.push_back(seq);
                Ok(t)
            }
            Err(e) => {
                self.drain_ddp_events();
                Err(e)
            }
        }
    }

    /// The posted receive buffer a Send arriving next would fill from its
    /// first octet, and that Send's MSN: for an LLP that reads a lone small
    /// FPDU in one system call, its payload straight into this buffer before
    /// the header is known (MPA, `fpdu/rx_direct/lone.rs`), and then begins the segment as
    /// usual. `None` while a segment is begun, once the stream died, or when
    /// Sends take buffers from a pool.
    pub fn next_send_buffer(&mut self) -> Option<(u32, &mut [u8])> {
        if self.terminated || !self.rx_begun.is_empty() {
            return None;
        }
        self.ddp.next_posted(rddp_wire::rdmap::qn::SEND)
    }

    /// The receive-buffer octets of the begun untagged segment's payload (a
    /// posted receive buffer, a shared-pool buffer, or RDMAP's own buffer for a
    /// Read Request or Terminate); `None` if none is begun or the stream died.
    pub fn segment_buffer(&mut self) -> Option<&mut [u8]> {
        if self.terminated || self.rx_begun.is_empty() {
            return None;
        }
        self.ddp.begun_buffer()
    }

    /// The begun segment's payload is in its target and the LLP checked it
    /// (`crc_ok`; true where the LLP has no check of its own). Only now is it
    /// delivered, completed or acted on. A failed check: Terminate 2/0/0x02,
    /// nothing of the segment delivered (its placed octets are undefined, RFC
    /// 5044 §4.4), the stream dead.
    pub fn finish_segment(&mut self, mem: &MemoryTable, crc_ok: bool) -> Result<(), StreamError> {
        let Some(seq) = self.rx_begun.pop_front() else {
            return Err(StreamError::Closed);
        };
        if self.terminated {
            self.ddp.abandon_segment();
            return Err(StreamError::Closed);
        }
        if !crc_ok {
            self.ddp.abandon_segment();
            let code = TerminateCode::MPA_CRC_ERROR;
            self.llp_error(
                code,
                format!(
                    "MPA framing: MPA CRC mismatch (FPDU {seq} after setup); its placed octets are undefined"
                ),
            );
            return Err(StreamError::Erroneous(code));
        }
        let res = self.ddp.finish_segment();
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
