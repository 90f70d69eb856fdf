//! Send-queue completions in posting order. A verbs user reads a work
//! completion as "this request and every unsignaled one posted before it on
//! the same queue are done" (ibv_poll_cq(3)); with completions that follow
//! the work's end, a Send posted after a Read would complete before the Read's
//! response came, and an unsignaled Read would never be covered by anything.
//! So each request posted to the send queue takes a sequence number, and its
//! completion waits here until every earlier one has completed (a Read's
//! response, RFC 5040 §5.3, comes back after later Sends have left).
//!
//! Bounded: one entry a request posted and not yet completed, which the verbs
//! layer bounds by the send-queue depth. RDMAP's own Read RTR (RFC 6581) is
//! not a request of the ULP and takes no number: a peer that never answers it
//! holds back none of the ULP's completions.

use super::Completion;
use std::collections::VecDeque;

/// A send-queue request's place in posting order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SqSeq(u64);

#[derive(Debug, Default)]
pub(super) struct SqOrder {
    /// The sequence number of `slots[0]`.
    base: u64,
    /// From the oldest request not yet passed on: its completion once done.
    slots: VecDeque<Option<Completion>>,
}

impl SqOrder {
    /// A request is posted: its number.
    pub(super) fn posted(&mut self) -> SqSeq {
        let seq = self.base + self.slots.len() as u64;
        self.slots.push_back(None);
        SqSeq(seq)
    }

    /// Request `seq` completed with `c`: into `out` once every earlier one has
    /// (with it, the later ones that were waiting for it).
    pub(super) fn done(&mut self, seq: SqSeq, c: Completion, out: &mut VecDeque<Completion>) {
        // The common case, the oldest completing (a Send or Write with no Read
        // before it): straight out.
        if seq.0 == self.base && self.slots.len() == 1 {
            self.slots.clear();
            self.base += 1;
            out.push_back(c);
            return;
        }
        let Some(slot) = seq
            .0
            .checked_sub(self.base)
            .and_then(|i| self.slots.get_mut(usize::try_from(i).ok()?))
        else {
            // Not outstanding (a second completion of one request would be a
            // bug of this crate): passed on rather than lost.
            debug_assert!(false, "send-queue completion {seq:?} not outstanding");
            out.push_back(c);
            return;
        };
        debug_assert!(slot.is_none(), "send-queue request {seq:?} completed twice");
        *slot = Some(c);
        while let Some(Some(_)) = self.slots.front() {
            if let Some(Some(c)) = self.slots.pop_front() {
                out.push_back(c);
            }
            self.base += 1;
        }
    }

    /// Requests posted whose completion has not been passed on.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdmap::{WcOpcode, WcStatus};

    fn c(id: u64) -> Completion {
        Completion::new(id, WcOpcode::Send, WcStatus::Success, 0)
    }

    fn ids(out: &VecDeque<Completion>) -> Vec<u64> {
        out.iter().map(|c| c.wr_id).collect()
    }

    #[test]
    fn later_requests_wait_for_an_earlier_one() {
        let mut o = SqOrder::default();
        let mut out = VecDeque::new();
        let read = o.posted();
        let send = o.posted();
        let write = o.posted();
        o.done(send, c(2), &mut out);
        o.done(write, c(3), &mut out);
        assert!(out.is_empty(), "nothing before the Read: {:?}", ids(&out));
        o.done(read, c(1), &mut out);
        assert_eq!(ids(&out), [1, 2, 3]);
        assert_eq!(o.waiting(), 0);
        // Numbering goes on from there.
        let next = o.posted();
        o.done(next, c(4), &mut out);
        assert_eq!(ids(&out), [1, 2, 3, 4]);
    }

    #[test]
    fn a_gap_in_the_middle_holds_only_what_follows_it() {
        let mut o = SqOrder::default();
        let mut out = VecDeque::new();
        let s: Vec<_> = (0..4).map(|_| o.posted()).collect();
        o.done(s[0], c(0), &mut out);
        o.done(s[2], c(2), &mut out);
        o.done(s[3], c(3), &mut out);
        assert_eq!(ids(&out), [0]);
        o.done(s[1], c(1), &mut out);
        assert_eq!(ids(&out), [0, 1, 2, 3]);
    }
}
