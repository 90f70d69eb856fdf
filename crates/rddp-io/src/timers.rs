//! One thread's deadlines: a min-heap of (deadline, task). A task that changes or
//! drops its deadline leaves its old entry behind; the entry is skipped when it
//! comes up (the owner checks it against the task's current deadline).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
}

impl Timers {
    pub(crate) fn insert(&mut self, at: Instant, task: u64) {
        self.heap.push(Reverse((at, task)));
    }

    /// How long the loop may sleep: until the earliest entry (stale ones too).
    pub(crate) fn timeout(&self, now: Instant) -> Option<Duration> {
        self.heap
            .peek()
            .map(|Reverse((at, _))| at.saturating_duration_since(now))
    }

    /// The next entry due by `now`, if any.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, u64)> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => self.heap.pop().map(|Reverse(e)| e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_entries_come_out_in_deadline_order() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        for (ms, id) in [(30, 3), (10, 1), (20, 2), (40, 4)] {
            t.insert(t0 + Duration::from_millis(ms), id);
        }
        assert_eq!(t.timeout(t0), Some(Duration::from_millis(10)));
        let now = t0 + Duration::from_millis(30);
        let due: Vec<_> = std::iter::from_fn(|| t.pop_due(now)).map(|e| e.1).collect();
        assert_eq!(due, [1, 2, 3]);
        assert_eq!(t.timeout(now), Some(Duration::from_millis(10)));
    }
}
