//! Recovering the sender's order of segments that were placed out of order.
//!
//! Placement happens on arrival; the per-segment facts that delivery needs are kept
//! here until every earlier segment has arrived, then released in sender order.
//! The state is bounded by `max_reorder` entries.

use super::SenderSeq;
use std::collections::VecDeque;

/// What in-order processing needs to know of one placed segment.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SegMeta {
    Tagged {
        last: bool,
        rsvd_ulp: u8,
        stag: u32,
        to: u64,
        len: u32,
    },
    Untagged {
        last: bool,
        rsvd_ulp: [u8; 5],
        qn: u32,
        msn: u32,
        mo: u32,
        len: u32,
    },
}

#[derive(Debug)]
pub(crate) enum OrderError {
    /// The sequence number was already seen (a duplicate or replay).
    Duplicate(SenderSeq),
    /// The sequence number is beyond the reorder window.
    OutOfWindow { seq: SenderSeq, next: SenderSeq },
}

#[derive(Debug)]
pub(crate) struct SenderOrder {
    /// Sequence number of `pending[0]`: the oldest segment not yet seen.
    next: SenderSeq,
    pending: VecDeque<Option<SegMeta>>,
    max_reorder: usize,
}

impl SenderOrder {
    pub(super) fn new(max_reorder: usize) -> Self {
        Self {
            next: 0,
            pending: VecDeque::new(),
            max_reorder,
        }
    }

    /// Sequence number of the oldest segment not yet seen.
    pub(super) fn next(&self) -> SenderSeq {
        self.next
    }

    /// Nothing arrived ahead of `next` (always so on an in-order LLP).
    pub(super) fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Check that `seq` may be accepted, before anything is placed.
    pub(super) fn check(&self, seq: SenderSeq) -> Result<(), OrderError> {
        if seq < self.next {
            return Err(OrderError::Duplicate(seq));
        }
        let off = seq - self.next;
        if off > self.max_reorder as u64 {
            return Err(OrderError::OutOfWindow {
                seq,
                next: self.next,
            });
        }
        if matches!(self.pending.get(off as usize), Some(Some(_))) {
            return Err(OrderError::Duplicate(seq));
        }
        Ok(())
    }

    /// Record a placed segment (after a successful [`Self::check`]) and call `f` for
    /// every segment that is now in sender order, oldest first.
    pub(super) fn arrive<E>(
        &mut self,
        seq: SenderSeq,
        meta: SegMeta,
        mut f: impl FnMut(SegMeta) -> Result<(), E>,
    ) -> Result<(), E> {
        let off = (seq - self.next) as usize;
        if off == 0 && self.pending.is_empty() {
            // In-order LLP fast path: nothing to remember.
            self.next += 1;
            return f(meta);
        }
        if self.pending.len() <= off {
            self.pending.resize(off + 1, None);
        }
        self.pending[off] = Some(meta);
        while let Some(Some(m)) = self.pending.front() {
            let m = *m;
            self.pending.pop_front();
            self.next += 1;
            f(m)?;
        }
        Ok(())
    }

    /// Segments placed but still waiting for an earlier one.
    pub(super) fn waiting(&self) -> usize {
        self.pending.iter().filter(|m| m.is_some()).count()
    }
}
