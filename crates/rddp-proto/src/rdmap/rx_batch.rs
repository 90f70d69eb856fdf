//! Batched header-first receive for RDMAP (see `ddp/sink/batch.rs`): several whole
//! segments begun before any is placed ([`RdmapStream::begin_segment`] with
//! [`Begin::Ahead`]), so that one vectored read puts every
//! payload into its place ([`RdmapStream::segment_buffers`] gives their receive
//! buffers at once); then [`RdmapStream::finish_segment`] for each, in
//! order. Only messages whose delivery changes nothing that a later segment's
//! checks read may join: RDMA Writes, Sends and Sends with Solicited Event,
//! each one segment (a Read Response pops the ORQ, a Send with Invalidate
//! invalidates an STag, a Read Request and a Terminate are RDMAP's own).

use super::RdmapStream;
use crate::ddp::{Begin, Fits, SenderSeq, StreamError, Target};
use crate::mem::MemoryTable;
use rddp_wire::{Opcode, RdmapControl};

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
