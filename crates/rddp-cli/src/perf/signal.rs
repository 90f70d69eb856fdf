//! Which data Sends perf posts signaled (`SendFlags::unsignaled`), and what a
//! Send's completion says about those posted unsignaled before it.
//!
//! As perftest does (a completion every `cq_mod` work requests), a stream of
//! Sends asks for a completion only every so often: an unsignaled Send that
//! succeeds makes none, so there is no completion to push, wake for, poll and
//! count per message. Sends complete in posting order, so a Send's completion
//! (data or control, always signaled) says that every Send posted unsignaled
//! before it has completed too.

use std::collections::VecDeque;

/// The bookkeeping of one queue pair's Sends.
#[derive(Debug)]
pub(crate) struct Signaling {
    /// A data Send is signaled at least every this many (1: every one).
    every: u64,
    /// Unsignaled Sends posted since the last signaled one.
    since: u64,
    /// For each signaled Send not yet completed, oldest first: how many
    /// unsignaled Sends were posted just before it (its completion covers them).
    covers: VecDeque<u64>,
    /// Unsignaled Sends whose completion is not yet known.
    quiet: u64,
}

impl Default for Signaling {
    fn default() -> Self {
        Self {
            every: 1,
            since: 0,
            covers: VecDeque::new(),
            quiet: 0,
        }
    }
}

impl Signaling {
    /// From now on a data Send is signaled at least every `n` (at least 1).
    pub(crate) fn set_every(&mut self, n: u64) {
        self.every = n.max(1);
    }

    /// Whether the next data Send is to be signaled; `force` (the last of a
    /// run, whose completion the run waits for) makes it so.
    pub(crate) fn decide(&self, force: bool) -> bool {
        force || self.since + 1 >= self.every
    }

    /// A Send was posted, `signaled` or not.
    pub(crate) fn posted(&mut self, signaled: bool) {
        if signaled {
            self.covers.push_back(self.since);
            self.since = 0;
        } else {
            self.since += 1;
            self.quiet += 1;
        }
    }

    /// A Send's completion came: the unsignaled Sends it covers (completed
    /// too), besides itself.
    pub(crate) fn send_completed(&mut self) -> u64 {
        let n = self.covers.pop_front().unwrap_or(0);
        self.quiet -= n;
        n
    }

    /// Unsignaled Sends whose completion is not yet known.
    pub(crate) fn quiet(&self) -> u64 {
        self.quiet
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_send_is_signaled_by_default() {
        let mut s = Signaling::default();
        for _ in 0..5 {
            assert!(s.decide(false));
            s.posted(true);
        }
        assert_eq!(s.quiet(), 0);
        assert_eq!(s.send_completed(), 0);
    }

    #[test]
    fn a_signaled_send_covers_the_unsignaled_ones_before_it() {
        let mut s = Signaling::default();
        s.set_every(4);
        let mut signaled = Vec::new();
        for _ in 0..10 {
            let sig = s.decide(false);
            signaled.push(sig);
            s.posted(sig);
        }
        assert_eq!(
            signaled,
            [
                false, false, false, true, false, false, false, true, false, false
            ]
        );
        assert_eq!(s.quiet(), 8);
        // A control Send (always signaled) after them covers the last two.
        s.posted(true);
        assert_eq!(s.send_completed(), 3);
        assert_eq!(s.send_completed(), 3);
        assert_eq!(s.send_completed(), 2);
        assert_eq!(s.quiet(), 0);
    }

    #[test]
    fn the_last_send_of_a_run_is_signaled() {
        let mut s = Signaling::default();
        s.set_every(64);
        s.posted(false);
        assert!(!s.decide(false));
        assert!(s.decide(true));
    }
}
