//! The message slots of an untagged queue, keyed by unwrapped MSN
//! (`recv_queue.rs`). An ordered receive queue (docs/receive-strategies.md, strategy 1) posts a
//! buffer for the MSN after the last one and delivers from the oldest: its keys
//! are always one run, kept in a ring (`Run`: a push and a pop a message, where
//! a `BTreeMap` cost about 300 instructions a message in the ping-pong). Pooled
//! queues under arrival ordering hold a buffer for an MSN far ahead without the
//! gap before it (`Sparse`). A `Run` asked to hold a key off its end becomes
//! `Sparse` (never for strategy 1, whose keys are the run's by construction).

use std::collections::{BTreeMap, VecDeque};

#[derive(Debug)]
pub(crate) enum SlotMap<V> {
    /// Keys `first .. first + q.len()`.
    Run {
        first: u64,
        q: VecDeque<V>,
    },
    Sparse(BTreeMap<u64, V>),
}

impl<V> SlotMap<V> {
    /// For an ordered queue (keys one run).
    pub(super) fn run() -> Self {
        Self::Run {
            first: 0,
            q: VecDeque::new(),
        }
    }

    /// For a pooled queue (keys sparse).
    pub(super) fn sparse() -> Self {
        Self::Sparse(BTreeMap::new())
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Self::Run { q, .. } => q.len(),
            Self::Sparse(m) => m.len(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn get(&self, key: u64) -> Option<&V> {
        match self {
            Self::Run { first, q } => {
                let i = usize::try_from(key.checked_sub(*first)?).ok()?;
                q.get(i)
            }
            Self::Sparse(m) => m.get(&key),
        }
    }

    pub(super) fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        match self {
            Self::Run { first, q } => {
                let i = usize::try_from(key.checked_sub(*first)?).ok()?;
                q.get_mut(i)
            }
            Self::Sparse(m) => m.get_mut(&key),
        }
    }

    pub(super) fn contains_key(&self, key: u64) -> bool {
        match self {
            Self::Run { first, q } => {
                key >= *first && usize::try_from(key - first).is_ok_and(|i| i < q.len())
            }
            Self::Sparse(m) => m.contains_key(&key),
        }
    }

    /// Hold `v` at `key` (replacing what was there).
    pub(super) fn insert(&mut self, key: u64, v: V) {
        if let Self::Run { first, q } = self {
            if q.is_empty() {
                *first = key;
            }
            let end = *first + q.len() as u64;
            if key == end {
                q.push_back(v);
                return;
            }
            if let Some(slot) = key.checked_sub(*first).and_then(|i| q.get_mut(i as usize)) {
                *slot = v;
                return;
            }
            self.make_sparse();
        }
        if let Self::Sparse(m) = self {
            m.insert(key, v);
        }
    }

    fn make_sparse(&mut self) {
        if let Self::Run { first, q } = self {
            let first = *first;
            let m = std::mem::take(q)
                .into_iter()
                .enumerate()
                .map(|(i, v)| (first + i as u64, v))
                .collect();
            *self = Self::Sparse(m);
        }
    }

    /// The smallest key and its value.
    pub(super) fn first(&self) -> Option<(u64, &V)> {
        match self {
            Self::Run { first, q } => q.front().map(|v| (*first, v)),
            Self::Sparse(m) => m.first_key_value().map(|(k, v)| (*k, v)),
        }
    }

    /// The largest key.
    pub(super) fn last_key(&self) -> Option<u64> {
        match self {
            Self::Run { first, q } => q.len().checked_sub(1).map(|i| first + i as u64),
            Self::Sparse(m) => m.last_key_value().map(|(k, _)| *k),
        }
    }

    /// Remove the smallest key's value.
    pub(super) fn pop_first(&mut self) -> Option<(u64, V)> {
        match self {
            Self::Run { first, q } => {
                let v = q.pop_front()?;
                let k = *first;
                *first += 1;
                Some((k, v))
            }
            Self::Sparse(m) => m.pop_first(),
        }
    }

    /// The keys `lo..=hi` held, in order, with their values.
    pub(super) fn range_mut(
        &mut self,
        lo: u64,
        hi: u64,
    ) -> Box<dyn Iterator<Item = (u64, &mut V)> + '_> {
        match self {
            Self::Run { first, q } => {
                let first = *first;
                let from = lo.saturating_sub(first);
                let to = hi.saturating_sub(first).saturating_add(1);
                let (from, to) = (from.min(q.len() as u64), to.min(q.len() as u64));
                Box::new(
                    q.range_mut(from as usize..to.max(from) as usize)
                        .enumerate()
                        .map(move |(i, v)| (first + from + i as u64, v))
                        .filter(move |(k, _)| *k >= lo && *k <= hi),
                )
            }
            Self::Sparse(m) => Box::new(m.range_mut(lo..=hi).map(|(k, v)| (*k, v))),
        }
    }

    /// Every value, in key order; the map is left empty (of the same kind).
    pub(super) fn take_all(&mut self) -> Vec<V> {
        match self {
            Self::Run { q, .. } => std::mem::take(q).into_iter().collect(),
            Self::Sparse(m) => std::mem::take(m).into_values().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push,
        InsertAt(u64),
        Pop,
        Get(u64),
        Range(u64, u64),
        TakeAll,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => Just(Op::Push),
            1 => (0u64..40).prop_map(Op::InsertAt),
            4 => Just(Op::Pop),
            3 => (0u64..40).prop_map(Op::Get),
            2 => (0u64..40, 0u64..40).prop_map(|(a, b)| Op::Range(a.min(b), a.max(b))),
            1 => Just(Op::TakeAll),
        ]
    }

    proptest! {
        /// A run behaves as a `BTreeMap` of the same keys, for every operation
        /// a queue makes (and for the ones only a sparse queue makes, which
        /// turn it sparse).
        #[test]
        fn a_run_is_a_btreemap(ops in proptest::collection::vec(op(), 0..120)) {
            let mut run = SlotMap::run();
            let mut model: BTreeMap<u64, u32> = BTreeMap::new();
            let mut next = 5u64;
            let mut val = 0u32;
            for op in ops {
                match op {
                    Op::Push => {
                        // An ordered queue posts after its last key, or at the
                        // next expected MSN when empty.
                        let k = model.last_key_value().map_or(next, |(k, _)| k + 1);
                        val += 1;
                        run.insert(k, val);
                        model.insert(k, val);
                    }
                    Op::InsertAt(k) => {
                        val += 1;
                        run.insert(k, val);
                        model.insert(k, val);
                    }
                    Op::Pop => {
                        let got = run.pop_first();
                        let want = model.pop_first();
                        if let Some((k, _)) = want {
                            next = k + 1;
                        }
                        prop_assert_eq!(got, want);
                    }
                    Op::Get(k) => {
                        prop_assert_eq!(run.get_mut(k).copied(), model.get(&k).copied());
                        prop_assert_eq!(run.contains_key(k), model.contains_key(&k));
                    }
                    Op::Range(lo, hi) => {
                        let got: Vec<(u64, u32)> = run.range_mut(lo, hi).map(|(k, v)| (k, *v)).collect();
                        let want: Vec<(u64, u32)> = model.range(lo..=hi).map(|(k, v)| (*k, *v)).collect();
                        prop_assert_eq!(got, want);
                    }
                    Op::TakeAll => {
                        let got = run.take_all();
                        let want: Vec<u32> = std::mem::take(&mut model).into_values().collect();
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(run.len(), model.len());
                prop_assert_eq!(run.first().map(|(k, v)| (k, *v)), model.first_key_value().map(|(k, v)| (*k, *v)));
                prop_assert_eq!(run.last_key(), model.last_key_value().map(|(k, _)| *k));
            }
        }
    }

    #[test]
    fn an_ordered_queue_stays_a_run() {
        let mut m = SlotMap::run();
        for k in 1..=100u64 {
            m.insert(k, k);
            if k % 3 == 0 {
                m.pop_first();
            }
        }
        assert!(
            matches!(m, SlotMap::Run { .. }),
            "posts after the last key, pops from the first"
        );
        m.insert(1000, 0);
        assert!(matches!(m, SlotMap::Sparse(_)), "a key off the run's end");
    }
}
