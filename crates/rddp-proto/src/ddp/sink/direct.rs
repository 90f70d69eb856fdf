//! Header-first receive (docs/data-path.md): the LLP hands up a segment's DDP
//! header and its payload length before the payload itself, the sink runs every
//! check of RFC 5041 §7.1 (order, version, tagged: STag, association, rights, TO wrap,
//! bounds, message continuity; untagged: QN, MSN, buffer, MO, length, tiling) and
//! says where the payload goes ([`Target`]). The LLP reads the payload straight
//! into that place, verifies its own integrity check (MPA CRC) over the octets
//! where they lie, and only then calls [`DdpSink::finish_segment`]`(true)`, which
//! does the rest (statistics, sender-order bookkeeping, delivery). If the check
//! fails the LLP calls `finish_segment(false)`: the placed octets are undefined
//! and nothing is delivered (RFC 5044 §4.4). [`DdpSink::on_segment`] is these
//! three steps over a segment held whole (one set of rules).

use super::*;
use crate::ddp::place_whole;

/// Where the payload of a segment accepted by [`DdpSink::begin_segment`] goes.
#[derive(Debug, Clone)]
pub enum Target {
    /// No payload octets.
    Nothing,
    /// Data octets `offset..offset + len` of `region` (lock it with
    /// [`crate::mem::Region::data_mut`] for each read).
    Region {
        /// The region the payload goes into.
        region: RegionRef,
        /// Offset of the payload's first octet in the region's data.
        offset: usize,
        /// Payload octets.
        len: usize,
    },
    /// `len` octets of the engine's receive buffer for this segment:
    /// [`DdpSink::segment_buffers`] gives exactly them.
    Buffer {
        /// Payload octets.
        len: usize,
    },
}

impl Target {
    /// Payload octets the target takes.
    pub fn len(&self) -> usize {
        match self {
            Self::Nothing => 0,
            Self::Region { len, .. } | Self::Buffer { len } => *len,
        }
    }

    /// Whether no payload octet goes anywhere.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The segment between `begin_segment` and `finish_segment`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Begun {
    pub(super) seq: SenderSeq,
    pub(super) meta: SegMeta,
    pub(super) len: u32,
    /// Untagged: (QN, MSN, MO) of the receive buffer octets.
    pub(super) buffer: Option<(u32, u32, usize)>,
}

/// Why [`DdpSink::begin_segment`] began nothing (and changed nothing).
#[derive(Debug)]
pub enum NotBegun {
    /// [`Begin::Alone`]: a check of RFC 5041 §7.1 refused it.
    Refused(DdpError),
    /// [`Begin::Ahead`]: it cannot join the batch (the LLP takes it alone
    /// once those before it are finished; a refusal is reported then).
    NotAhead,
}

impl DdpSink {
    /// Validate the segment whose DDP header is `head` (the first
    /// `min(segment length, header length)` octets) and whose payload is
    /// `payload_len` octets, at sender position `seq`, under the rules `how`
    /// names; nothing is placed or changed when it is not begun. Begun, the
    /// caller fills the target, then calls [`Self::finish_segment`]. Alone, a
    /// segment begun before and not finished is forgotten.
    pub fn begin_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        how: Begin<'_>,
    ) -> Result<Target, NotBegun> {
        match how {
            Begin::Alone => self
                .begin_alone(mem, seq, head, payload_len)
                .map_err(NotBegun::Refused),
            Begin::Ahead(fits) => self
                .begin_ahead(mem, seq, head, payload_len, fits)
                .ok_or(NotBegun::NotAhead),
        }
    }

    fn begin_alone(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
    ) -> Result<Target, DdpError> {
        self.begun.clear();
        let seg_len = head.len().saturating_add(payload_len);
        // LLP-level order information first (RFC 5041 §7.1).
        self.order.check(seq).map_err(|e| order_error(e, seg_len))?;
        let hdr = parse_header(head, seg_len)?;
        // A header parsed from `head` may leave octets of it unused: they are payload.
        let payload_len = seg_len - hdr.len();
        let len = u32::try_from(payload_len).map_err(|_| {
            DdpError::new(
                TerminateCode::DDP_LOCAL_CATASTROPHIC,
                Some(hdr),
                seg_len,
                format!("segment of {seg_len} octets is longer than DDP can describe"),
            )
        })?;
        // In sender order (always on MPA) the rules that span segments are
        // checked before placement too; otherwise when the gap before it fills.
        let in_order = seq == self.order.next();
        let (meta, target, buffer) = match hdr {
            DdpHeader::Tagged(h) => {
                let (meta, target) = self.check_tagged(mem, &h, payload_len, seg_len, in_order)?;
                (meta, target, None)
            }
            DdpHeader::Untagged(h) => {
                let (meta, target) = self.check_untagged(&h, payload_len, seg_len, in_order)?;
                (meta, target, Some((h.qn, h.msn, h.mo as usize)))
            }
        };
        self.begun.push_back(Begun {
            seq,
            meta,
            len,
            buffer,
        });
        Ok(target)
    }

    /// The receive-buffer octets of the begun untagged segment (its MO onwards,
    /// its payload length), or `None` (tagged, none begun, or flushed since).
    /// Of a batch's segments, the oldest.
    fn begun_buffer(&mut self) -> Option<&mut [u8]> {
        let b = *self.begun.front()?;
        let (qn, msn, mo) = b.buffer?;
        let slot = self.queues.get_mut(qn as usize)?.slot(msn)?;
        slot.buf.data.get_mut(mo..mo + b.len as usize)
    }

    /// Run `f` over the receive-buffer octets of the begun untagged segments'
    /// payloads, oldest first: one slice (on the stack, no allocation) for a
    /// segment begun alone, those with payload of a batch. `None` if one is
    /// gone (flushed since) or, alone, the segment is tagged.
    pub fn segment_buffers<R>(&mut self, f: impl FnOnce(&mut [&mut [u8]]) -> R) -> Option<R> {
        if self.begun.len() == 1 {
            let b = self.begun_buffer()?;
            return Some(f(&mut [b]));
        }
        let mut bufs = self.begun_buffers()?;
        Some(f(&mut bufs))
    }

    /// What the receive buffer that an untagged message of queue `qn`
    /// arriving next would fill from MO 0 holds now, and that message's MSN
    /// (a look, not a receive: a test sees that nothing was placed before the
    /// checks). Only on an ordered queue (strategy 1), whose buffers are posted
    /// for their MSNs; `None` under the pooled strategies (a buffer is taken
    /// only when its message arrives), for a receive posted into a region, and
    /// while a segment is begun or waits for an earlier one.
    pub fn next_posted(&self, qn: u32) -> Option<(u32, &[u8])> {
        if !self.begun.is_empty() || !self.order.is_idle() {
            return None;
        }
        self.queues.get(qn as usize)?.next_posted()
    }

    /// The begun segment's payload is in place and the LLP checked it
    /// (`llp_ok`: its CRC, or true where it has none): account for it and
    /// deliver what it completes (of a batch: the oldest begun). A failed
    /// check: the segment is forgotten, with a batch's other begun segments
    /// (the stream fails), and nothing is delivered or reported here (the LLP
    /// reports its own error).
    pub fn finish_segment(&mut self, llp_ok: bool) -> Result<(), DdpError> {
        if !llp_ok {
            self.begun.clear();
            return Ok(());
        }
        let Some(b) = self.begun.pop_front() else {
            return Err(DdpError::new(
                TerminateCode::DDP_LOCAL_CATASTROPHIC,
                None,
                0,
                "finish without a begun segment".into(),
            ));
        };
        self.account(b.seq, b.meta, b.len)
    }

    /// Handle one DDP segment (header + payload) that the LLP received whole, `seq`
    /// being its position in the sender's order. Nothing is placed unless every
    /// check passes; on error the caller must treat the stream as erroneous. The
    /// payload is copied into place (counted: [`crate::ddp::SinkStats::octets_copied`]).
    pub fn on_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), DdpError> {
        let (head, payload) = split_segment(seg);
        let target = self.begin_alone(mem, seq, head, payload.len())?;
        let copied = place_whole(&target, payload, || self.begun_buffer());
        self.count_copied(copied);
        self.finish_segment(true)
    }
}

/// A whole segment as (header octets, rest): the header as long as its T bit says,
/// or all of a segment shorter than that.
pub fn split_segment(seg: &[u8]) -> (&[u8], &[u8]) {
    let hl = seg
        .first()
        .map_or(UNTAGGED_HDR_LEN, |&c| DdpControl(c).header_len());
    seg.split_at(hl.min(seg.len()))
}
