//! Header-first receive for RDMAP (issue 11 point 3; docs/data-path.md,
//! "Receive"): the LLP hands up a segment's DDP header and payload length, RDMAP
//! and DDP run every check that does not need the payload (RDMAP version and
//! opcode, opcode against QN, Read Request shape, a Read Response against the
//! ORQ, spec §2.10's DDP checks incl. STag, rights, bounds, TO wrap, MSN, receive
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
use crate::ddp::{SenderSeq, StreamError, Target};
use crate::mem::MemoryTable;
use rddp_wire::TerminateCode;

impl RdmapStream {
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
        self.rx_begun = None;
        if self.terminated {
            return Err(StreamError::Closed);
        }
        let seg_len = head.len().saturating_add(payload_len);
        if let Err(r) = self.pre_check(seq, head, payload_len) {
            return Err(self.refuse_segment(r, head, seg_len));
        }
        match self.ddp.begin_segment(mem, seq, head, payload_len) {
            Ok(t) => {
                self.rx_begun = Some(seq);
                Ok(t)
            }
            Err(e) => {
                self.drain_ddp_events();
                Err(e)
            }
        }
    }

    /// The receive-buffer octets of the begun untagged segment's payload (a
    /// posted receive buffer, a shared-pool buffer, or RDMAP's own buffer for a
    /// Read Request or Terminate); `None` if none is begun or the stream died.
    pub fn segment_buffer(&mut self) -> Option<&mut [u8]> {
        if self.terminated || self.rx_begun.is_none() {
            return None;
        }
        self.ddp.begun_buffer()
    }

    /// The begun segment's payload is in its target and the LLP checked it
    /// (`crc_ok`; true where the LLP has no check of its own). Only now is it
    /// delivered, completed or acted on. A failed check: Terminate 2/0/0x02,
    /// nothing of the segment delivered (its placed octets are undefined, spec
    /// §4.3), the stream dead.
    pub fn finish_segment(&mut self, mem: &MemoryTable, crc_ok: bool) -> Result<(), StreamError> {
        let Some(seq) = self.rx_begun.take() else {
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
