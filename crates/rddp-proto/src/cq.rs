//! Completion queues and the rule that keeps them from overflowing (docs/receive-strategies.md).
//!
//! A [`CompletionQueue`] may serve one stream or many. Every source of completions
//! attached to it reserves its worst case first ([`CompletionQueue::reserve`]); a
//! reservation that does not fit is refused. What bounds a source's completions is
//! the thing that bounds its buffers:
//!
//! * an ordered receive queue: its depth (the queue refuses posts beyond it);
//! * a shared receive queue (strategy 2): the whole pool, because one peer may
//!   complete every buffer of it. The RDDP working group's note on sharing
//!   buffers and credits says the CQ "may be sized to allow for every buffer in
//!   the pool to be completed to it"; streams of the same pool share one
//!   reservation, so a CQ with the pool's scope pays for the pool once;
//! * per-stream credits (strategy 3): the stream's credit limit (grants beyond it are
//!   refused). The same note: this "allows safe pooling of completion queues across
//!   multiple DDP Streams without having to match the scope of the Buffer Pool".
//!
//! Completions pushed without a reservation can still overflow; an overflow is
//! refused, counted and returned as an error, never dropped silently.

use crate::ddp::{Delivery, PoolId};
use crate::mem::StreamId;
use rddp_wire::TerminateCode;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// What a completion reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionStatus {
    /// The work completed; for a receive, the message filled the buffer.
    Success,
    /// The buffer was handed back by teardown.
    Flushed,
    /// The stream failed with this code.
    Error(TerminateCode),
}

/// One completion. Minimal on purpose: the verbs layer wraps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The ULP's identifier of the work request (the buffer's id for receives).
    pub wr_id: u64,
    /// How the work ended.
    pub status: CompletionStatus,
    /// ULP opcode (RDMAP puts its opcode here; DDP receives use the RsvdULP's first
    /// octet).
    pub opcode: u8,
    /// Octets the work moved; for a receive, the message's length.
    pub byte_len: u32,
    /// The untagged queue the message arrived on (RFC 5041 §4.3).
    pub qn: u32,
    /// The message's sequence number on that queue (RFC 5041 §4.3).
    pub msn: u32,
    /// The stream the completion comes from.
    pub stream: StreamId,
}

impl Completion {
    /// The receive completion of an untagged delivery; `None` for tagged ones.
    pub fn recv(stream: StreamId, d: &Delivery) -> Option<Self> {
        match d {
            Delivery::Untagged {
                rsvd_ulp,
                qn,
                msn,
                len,
                buffer,
            } => Some(Self {
                wr_id: buffer.id,
                status: CompletionStatus::Success,
                opcode: rsvd_ulp[0],
                byte_len: *len,
                qn: *qn,
                msn: *msn,
                stream,
            }),
            Delivery::Tagged { .. } => None,
        }
    }
}

/// Who generates completions into a CQ; the unit of reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CqSource {
    /// One untagged queue of one stream (ordered RQ or per-stream credits).
    Queue {
        /// The stream.
        stream: StreamId,
        /// The queue's number on that stream.
        qn: u32,
    },
    /// Every queue drawing on one shared receive queue.
    Pool(PoolId),
    /// Anything else the ULP accounts for (e.g. a send queue), by its own number.
    Ulp(u64),
}

/// Why a CQ refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CqError {
    /// The source's worst case does not fit in the capacity not yet reserved.
    #[error(
        "the CQ cannot hold the {need} completions {from:?} can generate: {free} of {capacity} unreserved"
    )]
    WouldOverflow {
        /// The source that asked.
        from: CqSource,
        /// Completions it asked room for.
        need: usize,
        /// Capacity not reserved by other sources.
        free: usize,
        /// The CQ's capacity.
        capacity: usize,
    },
    /// The source already holds a reservation of another size: every holder of a
    /// shared source (the streams of one pool) must ask for the same worst case.
    #[error("{from:?} already reserved {reserved} completions on this CQ; asked {asked}")]
    Mismatch {
        /// The source that asked.
        from: CqSource,
        /// What it holds already.
        reserved: usize,
        /// What it asked for now.
        asked: usize,
    },
    /// The source already has more buffers or credits outstanding than the limit
    /// it would reserve for, so the reservation could not bound its completions.
    #[error("{from:?} already has {now} buffers or credits, more than the limit {limit}")]
    AboveLimit {
        /// The source that asked.
        from: CqSource,
        /// Buffers or credits it has now.
        now: u64,
        /// The limit it asked to reserve for.
        limit: u64,
    },
    /// The queue number names no untagged queue of the stream.
    #[error("queue {0} does not exist")]
    InvalidQn(u32),
    /// The queue already holds `capacity` completions: this one was refused and counted.
    #[error("CQ overflow: {capacity} completions are waiting")]
    Overflow {
        /// The CQ's capacity, all of it taken.
        capacity: usize,
    },
}

/// The reservation book of a completion queue: its capacity and what attached
/// sources reserved. Kept apart from the entries so that any queue of completions
/// (this crate's [`CompletionQueue`], the verbs layer's) applies the same rule.
#[derive(Debug, Clone)]
pub struct CqLedger {
    inner: Arc<Mutex<LedgerInner>>,
}

#[derive(Debug)]
struct LedgerInner {
    capacity: usize,
    reserved: usize,
    /// Reserved amount and number of holders of each source.
    sources: BTreeMap<CqSource, (usize, usize)>,
}

impl CqLedger {
    /// A ledger for a CQ of `capacity` completions, nothing reserved.
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(LedgerInner {
                capacity,
                reserved: 0,
                sources: BTreeMap::new(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LedgerInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Most completions the CQ holds at once.
    pub fn capacity(&self) -> usize {
        self.lock().capacity
    }

    /// Completions reserved by attached sources.
    pub fn reserved(&self) -> usize {
        self.lock().reserved
    }

    /// Reserve room for the `worst_case` completions `source` can have waiting.
    /// Refused if the CQ cannot hold them on top of what is reserved. A source that
    /// already holds a reservation (another stream of the same pool) shares it.
    pub fn reserve(&self, source: CqSource, worst_case: usize) -> Result<CqReservation, CqError> {
        let mut q = self.lock();
        if let Some((amount, refs)) = q.sources.get_mut(&source) {
            if *amount != worst_case {
                return Err(CqError::Mismatch {
                    from: source,
                    reserved: *amount,
                    asked: worst_case,
                });
            }
            *refs += 1;
        } else {
            let free = q.capacity - q.reserved;
            if worst_case > free {
                return Err(CqError::WouldOverflow {
                    from: source,
                    need: worst_case,
                    free,
                    capacity: q.capacity,
                });
            }
            q.reserved += worst_case;
            q.sources.insert(source, (worst_case, 1));
        }
        Ok(CqReservation {
            ledger: self.clone(),
            source,
        })
    }
}

impl AsRef<CqLedger> for CqLedger {
    fn as_ref(&self) -> &CqLedger {
        self
    }
}

/// A completion queue; clones are handles to the same queue.
#[derive(Debug, Clone)]
pub struct CompletionQueue {
    ledger: CqLedger,
    entries: Arc<Mutex<Entries>>,
}

#[derive(Debug)]
struct Entries {
    q: VecDeque<Completion>,
    overflows: u64,
}

impl AsRef<CqLedger> for CompletionQueue {
    fn as_ref(&self) -> &CqLedger {
        &self.ledger
    }
}

impl CompletionQueue {
    /// An empty queue of `capacity` completions, nothing reserved.
    pub fn new(capacity: usize) -> Self {
        Self {
            ledger: CqLedger::new(capacity),
            entries: Arc::new(Mutex::new(Entries {
                q: VecDeque::new(),
                overflows: 0,
            })),
        }
    }

    fn entries(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Most completions the queue holds at once.
    pub fn capacity(&self) -> usize {
        self.ledger.capacity()
    }

    /// Completions reserved by attached sources.
    pub fn reserved(&self) -> usize {
        self.ledger.reserved()
    }

    /// Completions waiting to be polled.
    pub fn len(&self) -> usize {
        self.entries().q.len()
    }

    /// Whether no completion is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Completions refused because the queue was full.
    pub fn overflows(&self) -> u64 {
        self.entries().overflows
    }

    /// See [`CqLedger::reserve`].
    pub fn reserve(&self, source: CqSource, worst_case: usize) -> Result<CqReservation, CqError> {
        self.ledger.reserve(source, worst_case)
    }

    /// Queue a completion. A full queue refuses it, counts it and says so.
    pub fn push(&self, c: Completion) -> Result<(), CqError> {
        let capacity = self.ledger.capacity();
        let mut e = self.entries();
        if e.q.len() >= capacity {
            e.overflows += 1;
            return Err(CqError::Overflow { capacity });
        }
        e.q.push_back(c);
        Ok(())
    }

    /// Take the oldest completion, if any.
    pub fn poll(&self) -> Option<Completion> {
        self.entries().q.pop_front()
    }
}

/// A source's reservation on a CQ; released when dropped.
#[derive(Debug)]
pub struct CqReservation {
    ledger: CqLedger,
    source: CqSource,
}

impl CqReservation {
    /// The source the reservation is for.
    pub fn source(&self) -> CqSource {
        self.source
    }

    /// The ledger the reservation is held on.
    pub fn ledger(&self) -> &CqLedger {
        &self.ledger
    }
}

impl Drop for CqReservation {
    fn drop(&mut self) {
        let mut q = self.ledger.lock();
        let Some((amount, refs)) = q.sources.get_mut(&self.source) else {
            return;
        };
        *refs -= 1;
        if *refs == 0 {
            let amount = *amount;
            q.sources.remove(&self.source);
            q.reserved -= amount;
        }
    }
}
