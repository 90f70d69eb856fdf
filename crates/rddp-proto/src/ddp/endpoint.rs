//! What an LLP adaptation drives above it: a DDP stream, or a relay to an engine
//! that owns its DDP stream elsewhere (a verbs queue pair's RDMAP).

use super::{DdpStream, OutSegment, SenderSeq, SourceError, StreamError};
use crate::mem::MemoryTable;

/// The layer above an LLP adaptation, segment by segment (seed 000's LLP contract:
/// whole segments with their sender order in, segments out, MULPDU changes, close).
pub trait SegmentEndpoint: Send + std::fmt::Debug {
    fn on_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), StreamError>;
    fn poll_segment(&mut self) -> Option<OutSegment>;
    /// Whether every queued message has been handed to the LLP.
    fn drained(&self) -> bool;
    fn set_mulpdu(&mut self, mulpdu: usize) -> Result<(), SourceError>;
    /// Graceful teardown requested by the peer or the ULP.
    fn close(&mut self);
    fn on_llp_closed(&mut self, graceful: bool);
}

impl SegmentEndpoint for DdpStream {
    fn on_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), StreamError> {
        DdpStream::on_segment(self, mem, seq, seg)
    }
    fn poll_segment(&mut self) -> Option<OutSegment> {
        DdpStream::poll_segment(self)
    }
    fn drained(&self) -> bool {
        DdpStream::drained(self)
    }
    fn set_mulpdu(&mut self, mulpdu: usize) -> Result<(), SourceError> {
        DdpStream::set_mulpdu(self, mulpdu)
    }
    fn close(&mut self) {
        DdpStream::close(self)
    }
    fn on_llp_closed(&mut self, graceful: bool) {
        DdpStream::on_llp_closed(self, graceful)
    }
}
