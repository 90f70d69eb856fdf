//! Counters per queue pair and per device (docs/features.md), read with
//! [`crate::QueuePair::stats`] and [`crate::Device::stats`] as plain structs.
//!
//! A queue pair's counters are its RDMAP engine's (`rddp_proto::stats`): kept by the
//! sans-IO engines where the work is done, so they follow the data path wherever
//! it runs. The device adds up its live queue pairs and those already closed.

use crate::device::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Weak};

pub use rddp_proto::stats::{CompletionCounts, StreamStats as QpStats, TerminateClasses};

/// Counters of a whole device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Queue pairs attached to an LLP so far.
    pub queue_pairs_attached: u64,
    /// Of those, the ones dropped since.
    pub queue_pairs_closed: u64,
    /// Requests the resource manager refused: a consumer over its quota, or a
    /// consumer the device had no room for.
    pub quota_refusals: u64,
    /// The sum of every queue pair's counters, closed ones included.
    pub totals: QpStats,
}

/// Something that can report a live queue pair's counters.
pub(crate) trait StatsSource: Send + Sync {
    fn stats(&self) -> QpStats;
}

/// The device's book of queue pairs: live ones by number, closed ones summed.
#[derive(Default)]
pub(crate) struct Registry {
    book: Mutex<Book>,
    quota_refusals: AtomicU64,
}

#[derive(Default)]
struct Book {
    live: HashMap<u32, Weak<dyn StatsSource>>,
    closed: QpStats,
    attached: u64,
    closed_count: u64,
}

impl Registry {
    pub(crate) fn attach(&self, qp_num: u32, src: Weak<dyn StatsSource>) {
        let mut b = lock(&self.book);
        b.live.insert(qp_num, src);
        b.attached += 1;
    }

    /// A queue pair is going away with these final counters (taken without the
    /// book locked, so the two locks are never held the other way round).
    pub(crate) fn retire(&self, qp_num: u32, last: &QpStats) {
        let mut b = lock(&self.book);
        if b.live.remove(&qp_num).is_some() {
            b.closed.add(last);
            b.closed_count += 1;
        }
    }

    pub(crate) fn refused(&self) {
        self.quota_refusals.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> DeviceStats {
        let b = lock(&self.book);
        let mut totals = b.closed;
        for src in b.live.values().filter_map(Weak::upgrade) {
            totals.add(&src.stats());
        }
        DeviceStats {
            queue_pairs_attached: b.attached,
            queue_pairs_closed: b.closed_count,
            quota_refusals: self.quota_refusals.load(Ordering::Relaxed),
            totals,
        }
    }
}
