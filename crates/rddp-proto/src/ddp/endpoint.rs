//! What an LLP adaptation drives above it: a DDP stream, or a relay to an engine
//! that owns its DDP stream elsewhere (a verbs queue pair's RDMAP).

use super::{Begin, DdpStream, OutSegment, SenderSeq, SourceError, StreamError, Target};
use crate::mem::MemoryTable;

/// The layer above an LLP adaptation, segment by segment (RFC 5041 §3's LLP contract:
/// whole segments with their sender order in, segments out, MULPDU changes, close).
pub trait SegmentEndpoint: Send + std::fmt::Debug {
    /// A received segment, whole, at sender position `seq`: validated, then placed
    /// (RFC 5041 §7.1). A refusal makes the stream erroneous and places nothing.
    fn on_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), StreamError>;
    /// The next segment for the LLP to send, if any.
    fn poll_segment(&mut self) -> Option<OutSegment>;
    /// Whether every queued message has been handed to the LLP.
    fn drained(&self) -> bool;
    /// The LLP's MULPDU changed (RFC 5041 §3); refused if it cannot hold an untagged
    /// header and one octet.
    fn set_mulpdu(&mut self, mulpdu: usize) -> Result<(), SourceError>;
    /// Graceful teardown requested by the peer or the ULP.
    fn close(&mut self);
    /// The LLP stream is gone (`graceful`: closed in order, else reset or lost).
    /// The stream closes: unsent messages are dropped, posted receives flushed
    /// back (RFC 5041 §6).
    fn on_llp_closed(&mut self, graceful: bool);

    /// The LLP accepted every octet of the oldest segment [`Self::poll_segment`]
    /// gave it and not yet reported here (an LLP that can refuse a segment it
    /// took, e.g. a full send buffer, reports each once it is in).
    fn segment_accepted(&mut self) {}

    /// The LLP copied payload in user space: `rx` received octets on their
    /// way into place, `tx` octets of region leases on their way out (counted
    /// in the stream's statistics). Default: not counted.
    fn count_copied(&mut self, rx: usize, tx: usize) {
        let _ = (rx, tx);
    }

    /// Header-first receive (docs/data-path.md) for an LLP that knows a
    /// segment's length before reading it (DDP over SCTP): `head` is the
    /// segment's DDP header, `payload_len` octets follow, and `fill` reads
    /// them into the slice it is given (all of it; `false`: the LLP failed).
    /// An endpoint that decides from the header where the payload goes reads
    /// it straight there; this default reads it into a segment of its own and
    /// calls [`Self::on_segment`] (a copy, counted: [`Self::count_copied`]).
    /// A refused segment's payload may be left unread: the LLP drains it.
    fn place_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Result<(), StreamError> {
        let mut seg = Vec::with_capacity(head.len() + payload_len);
        seg.extend_from_slice(head);
        seg.resize(head.len() + payload_len, 0);
        if !fill(&mut seg[head.len()..]) {
            return Err(StreamError::Closed);
        }
        self.count_copied(payload_len, 0);
        self.on_segment(mem, seq, &seg)
    }
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
    fn count_copied(&mut self, rx: usize, tx: usize) {
        DdpStream::count_copied(self, rx, tx)
    }
    /// Straight into place: the header decides, the payload is read there.
    fn place_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Result<(), StreamError> {
        let t = match self.begin_segment(mem, seq, head, payload_len, Begin::Alone) {
            Ok(t) => t,
            // Held until the LLP's check, which the segment passed.
            Err(e) => {
                return Err(match self.finish_segment(true) {
                    Err(StreamError::Closed) | Ok(()) => e,
                    Err(settled) => settled,
                });
            }
        };
        let ok = match t {
            Target::Buffer { .. } => self
                .segment_buffers(|b| {
                    fill_target(&t, payload_len, fill, || b.first_mut().map(|s| &mut **s))
                })
                .unwrap_or(false),
            _ => fill_target(&t, payload_len, fill, || None),
        };
        if !ok {
            let _ = self.finish_segment(false);
            return Err(StreamError::Closed);
        }
        self.finish_segment(true)
    }
}

/// Copy the payload of a segment held whole into the target its header got
/// (what `begin_segment` returned): its last `t.len()` octets (the leading
/// octets of a payload longer than its target are not placed, as
/// [`fill_target`]), into a region range or the receive buffer `buffer`
/// gives. Returns the octets copied (none without a buffer).
pub fn place_whole<'a>(
    t: &Target,
    payload: &[u8],
    buffer: impl FnOnce() -> Option<&'a mut [u8]>,
) -> usize {
    let payload = &payload[payload.len().saturating_sub(t.len())..];
    let mut at = 0;
    let mut copy = |dst: &mut [u8]| match payload.get(at..at + dst.len()) {
        Some(src) => {
            dst.copy_from_slice(src);
            at += dst.len();
            true
        }
        None => false,
    };
    if fill_target(t, payload.len(), &mut copy, buffer) {
        at
    } else {
        0
    }
}

/// Read a begun segment's payload with `fill` into its target (an LLP that
/// reads header-first): a region range (locked meanwhile) or the receive
/// buffer `buffer` gives. A payload longer than the target (its leading octets
/// are not placed, as [`super::split_segment`]'s caller does) has those read
/// and dropped first. `false`: the LLP failed, or no buffer.
pub fn fill_target<'a>(
    t: &Target,
    payload_len: usize,
    fill: &mut dyn FnMut(&mut [u8]) -> bool,
    buffer: impl FnOnce() -> Option<&'a mut [u8]>,
) -> bool {
    let skip = payload_len.saturating_sub(t.len());
    if skip > 0 && !fill(&mut vec![0; skip]) {
        return false;
    }
    match t {
        Target::Nothing => true,
        Target::Region {
            region,
            offset,
            len,
        } => region.fill_at(*offset, *len, fill),
        Target::Buffer { .. } => buffer().is_some_and(fill),
    }
}
