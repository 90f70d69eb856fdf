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
    /// The oldest request whose completion has not been passed on.
    base: u64,
    /// The number the next request posted takes.
    next: u64,
    /// Completions that came before an earlier request's: `held[i]` is
    /// request `base + i`'s once done. Empty while completions come in
    /// order (nothing stored, nothing moved twice).
    held: VecDeque<Option<Completion>>,
}

impl SqOrder {
    /// A request is posted: its number.
    pub(super) fn posted(&mut self) -> SqSeq {
        let seq = SqSeq(self.next);
        self.next += 1;
        seq
    }

    /// Request `seq` completed with `c`: into `out` once every earlier one has
    /// (with it, the later ones that were waiting for it).
    // On every Send's and Write's way out: called, it cost about 40
    // instructions a ping-pong round trip more (callgrind).
    #[inline(always)]
    pub(super) fn done(&mut self, seq: SqSeq, c: Completion, out: &mut VecDeque<Completion>) {
        // The common case, the oldest completing with none held (a Send or
        // Write with no Read before it): straight out.
        if seq.0 == self.base && self.held.is_empty() {
            self.base += 1;
            out.push_back(c);
            return;
        }
        self.hold(seq, c, out);
    }

    fn hold(&mut self, seq: SqSeq, c: Completion, out: &mut VecDeque<Completion>) {
        let i = seq
            .0
            .checked_sub(self.base)
            .filter(|_| seq.0 < self.next)
            .and_then(|i| usize::try_from(i).ok());
        let Some(i) = i else {
            // Not outstanding (a completion of a request never posted or
            // already passed on would be a bug of this crate): passed on
            // rather than lost.
            debug_assert!(false, "send-queue completion {seq:?} not outstanding");
            out.push_back(c);
            return;
        };
        if self.held.len() <= i {
            self.held.resize_with(i + 1, || None);
        }
        debug_assert!(self.held[i].is_none(), "{seq:?} completed twice");
        self.held[i] = Some(c);
        while let Some(Some(_)) = self.held.front() {
            if let Some(Some(c)) = self.held.pop_front() {
                out.push_back(c);
            }
            self.base += 1;
        }
    }

    /// Requests posted whose completion has not been passed on.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> u64 {
        self.next - self.base
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

    proptest::proptest! {
        /// Requests posted in bursts and completed in any order: every
        /// completion comes out once, in posting order, and none before all
        /// earlier ones are done; nothing is held once all are.
        #[test]
        fn any_completion_order_comes_out_in_posting_order(
            bursts in proptest::collection::vec((1usize..6, proptest::collection::vec(proptest::num::u8::ANY, 0..6)), 1..20)
        ) {
            let mut o = SqOrder::default();
            let mut out = VecDeque::new();
            let mut open: Vec<(SqSeq, u64)> = Vec::new();
            let mut posted = 0u64;
            let mut done = std::collections::BTreeSet::new();
            let check = |out: &VecDeque<Completion>, done: &std::collections::BTreeSet<u64>| {
                let ids = ids(out);
                proptest::prop_assert!(ids.iter().copied().eq(0..ids.len() as u64), "{ids:?}");
                // Out exactly up to the first request not yet done.
                let first_open = (0..).find(|i| !done.contains(i)).unwrap_or(0);
                proptest::prop_assert_eq!(ids.len() as u64, first_open);
                Ok(())
            };
            for (n, picks) in bursts {
                for _ in 0..n {
                    open.push((o.posted(), posted));
                    posted += 1;
                }
                for p in picks {
                    if open.is_empty() {
                        break;
                    }
                    let (seq, id) = open.swap_remove(usize::from(p) % open.len());
                    o.done(seq, c(id), &mut out);
                    done.insert(id);
                    check(&out, &done)?;
                }
            }
            while let Some((seq, id)) = open.pop() {
                o.done(seq, c(id), &mut out);
                done.insert(id);
                check(&out, &done)?;
            }
            proptest::prop_assert_eq!(out.len() as u64, posted);
            proptest::prop_assert_eq!(o.waiting(), 0);
            proptest::prop_assert!(o.held.is_empty());
        }
    }
}
