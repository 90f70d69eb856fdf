//! Batched header-first receive for RDMAP (see `ddp/sink/batch.rs`): several whole
//! segments begun before any is placed, so that one vectored read puts every
//! payload into its place ([`RdmapStream::segment_buffers`] gives their receive
//! buffers at once); then [`RdmapStream::finish_segment`] for each, in
//! order. Only messages whose delivery changes nothing that a later segment's
//! checks read may join: RDMA Writes, Sends and Sends with Solicited Event,
//! each one segment (a Read Response pops the ORQ, a Send with Invalidate
//! invalidates an STag, a Read Request and a Terminate are RDMAP's own).

use super::RdmapStream;
use crate::ddp::{Fits, SenderSeq, Target};
use crate::mem::MemoryTable;
use rddp_wire::{Opcode, RdmapControl};

impl RdmapStream {
    /// Begin the segment at `seq` while the batch's earlier segments wait for
    /// their payloads. `Some(target)`: every check passed, as
    /// [`Self::begin_segment`] would make them in order. `None`: it cannot
    /// join the batch, would be refused, or the LLP cannot take its target in
    /// this batch (`fits`); nothing changed, nothing reported (the LLP takes
    /// it alone next, and a refusal is reported then).
    pub fn begin_more(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        fits: Fits<'_>,
    ) -> Option<Target> {
        if self.terminated || self.rx_held.is_some() {
            return None;
        }
        let op = RdmapControl(*head.get(1)?).opcode();
        if ![Opcode::RDMA_WRITE, Opcode::SEND, Opcode::SEND_SE].contains(&op) {
            return None;
        }
        self.pre_check(seq, head, payload_len).ok()?;
        let t = self.ddp.begin_more(mem, seq, head, payload_len, fits)?;
        self.rx_begun.push_back(seq);
        Some(t)
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
