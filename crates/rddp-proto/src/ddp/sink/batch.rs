//! Batched header-first receive (docs/data-path.md,
//! "Receive"): an LLP that learned several whole segments' headers at once
//! (MPA: a peek at the socket) begins each of them before any is placed, so
//! that one vectored read puts every payload into its place, and then finishes
//! them in order. Each segment is checked completely before placement, as
//! [`DdpSink::begin_segment`] checks one (RFC 5041 §7.1), against the
//! state the segments before it leave behind. That state is the same as before
//! them only for whole one-segment messages, so only those join a batch:
//!
//! * Last flag set; untagged with MO 0; no message in progress (tagged, or on
//!   the untagged queue) when the batch's first segment begins;
//! * at most one segment per receive buffer: a second untagged segment for a
//!   QN and MSN begun in the same batch is left out (taken alone, after the
//!   batch, it is refused as it would be in order);
//! * on a shared pool with a soft limit, a queue's later segment joins only if
//!   the buffers its begun segments hold, with one more, stay within the limit
//!   (in order those are delivered first: a batch must not raise a SoftLimit
//!   event, or fewer of them, than taking the segments one by one);
//! * a segment whose pool has no buffer for it is not begun (taken alone, it
//!   is refused, and the pool counts that one refused request, not two);
//! * a Send with payload for a receive posted into a region is not begun (a
//!   pool's such receive stays taken for it; taken alone it is placed there).
//!
//! Anything else is not begun (`NotBegun::NotAhead`, nothing changed): the LLP ends the
//! batch before it and takes that segment alone, as before. So is a segment
//! whose target the LLP cannot take in this batch (`fits`: MPA reads into one
//! region per batch, and not into overlapping ranges of it).

/// What an LLP says of a batch segment's target before it is begun: whether
/// it can take it in this batch.
pub type Fits<'a> = &'a mut dyn FnMut(&Target) -> bool;

/// How an LLP begins a segment (`begin_segment` of [`crate::ddp::DdpStream`]
/// and [`crate::rdmap::RdmapStream`]): one entry point, two sets of rules.
pub enum Begin<'a> {
    /// The next segment in sender order (or, on an out-of-order LLP, any
    /// segment), nothing else begun: every check of RFC 5041 §7.1 before
    /// placement; a refusal is held until `finish_segment` (the LLP's own
    /// check of the same segment comes first). A segment begun before and not
    /// finished is abandoned.
    Alone,
    /// Ahead of the payloads of the segments begun before it and not yet
    /// finished (a batch: one read places them all, then each is finished in
    /// order). It joins only under the rules above (a whole one-segment
    /// message whose delivery changes nothing a later segment's checks read)
    /// and if `fits` takes its target; else `Err(StreamError::NotAhead)`:
    /// nothing changed, nothing held or reported, and the LLP takes it
    /// [`Begin::Alone`] once those before it are finished (a refusal is
    /// reported then).
    Ahead(Fits<'a>),
}

impl std::fmt::Debug for Begin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Alone => "Alone",
            Self::Ahead(_) => "Ahead",
        })
    }
}

use super::*;
use crate::ddp::Target;

impl DdpSink {
    /// Begin the segment at `seq` while the batch's earlier segments (all
    /// begun, none finished) wait for their payloads ([`Begin::Ahead`]):
    /// `Some(target)` as [`Begin::Alone`] would give it in order; `None` if it
    /// cannot join the batch, would be refused, or `fits` says no to its
    /// target (nothing changed: the caller takes it alone, where a refusal is
    /// reported).
    pub(super) fn begin_ahead(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        fits: Fits<'_>,
    ) -> Option<Target> {
        if !self.order.is_idle() || seq != self.order.next() + self.begun.len() as u64 {
            return None;
        }
        let seg_len = head.len().checked_add(payload_len)?;
        let hdr = parse_header(head, seg_len).ok()?;
        if hdr.len() != head.len() {
            return None;
        }
        let len = u32::try_from(payload_len).ok()?;
        let (meta, target, buffer) = match hdr {
            DdpHeader::Tagged(h) => {
                if !h.ctrl.last() || self.tagged.is_some() {
                    return None;
                }
                let (meta, target) = self
                    .check_tagged(mem, &h, payload_len, seg_len, true)
                    .ok()?;
                (meta, target, None)
            }
            DdpHeader::Untagged(h) => {
                let q = self.queues.get(h.qn as usize)?;
                let twice = self
                    .begun
                    .iter()
                    .any(|b| matches!(b.buffer, Some((qn, msn, _)) if (qn, msn) == (h.qn, h.msn)));
                // In order the queue's earlier begun messages are delivered
                // (their pool buffers released) before this one takes a buffer.
                let behind = self
                    .begun
                    .iter()
                    .any(|b| matches!(b.buffer, Some((qn, ..)) if qn == h.qn));
                if !h.ctrl.last()
                    || h.mo != 0
                    || q.in_progress.is_some()
                    || twice
                    || (behind && !q.may_hold_one_more())
                    || !q.has_buffers_for(h.msn)
                {
                    return None;
                }
                let (meta, target) = self.check_untagged(&h, payload_len, seg_len, true).ok()?;
                // A receive posted into a region is taken alone, header first
                // (a batch reads into one region, for its tagged segments).
                // An ordered queue's check changed nothing. A pool's receive
                // was taken for this MSN, which keeps it: taken alone the
                // segment finds it (the pool counts one take, as in order;
                // `may_hold_one_more` above kept the soft limit's count).
                if matches!(target, Target::Region { .. }) {
                    return None;
                }
                (meta, target, Some((h.qn, h.msn, 0)))
            }
        };
        // A tagged segment's checks changed nothing; an untagged one's target
        // is never a region here (see above).
        if !fits(&target) {
            return None;
        }
        self.begun.push_back(Begun {
            seq,
            meta,
            len,
            buffer,
        });
        Some(target)
    }

    /// The receive-buffer octets of every begun untagged segment with payload,
    /// oldest first; `None` if one is gone (flushed since).
    pub(super) fn begun_buffers(&mut self) -> Option<Vec<&mut [u8]>> {
        // (QN, MSN, MO, length) of the wanted octets, oldest first.
        let want: Vec<(u32, u32, usize, usize)> = self
            .begun
            .iter()
            .filter_map(|b| b.buffer.map(|(qn, msn, mo)| (qn, msn, mo, b.len as usize)))
            .filter(|&(.., len)| len > 0)
            .collect();
        let mut out: Vec<Option<&mut [u8]>> = (0..want.len()).map(|_| None).collect();
        for (qn, q) in self.queues.iter_mut().enumerate() {
            let mine: Vec<usize> = (0..want.len())
                .filter(|&i| want[i].0 as usize == qn)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let bufs = q.buffers_of(mine.iter().map(|&i| want[i].1))?;
            for (&i, buf) in mine.iter().zip(bufs) {
                let (.., mo, len) = want[i];
                out[i] = Some(buf.get_mut(mo..mo + len)?);
            }
        }
        out.into_iter().collect()
    }
}
