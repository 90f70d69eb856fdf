//! Work-queue accounting for a verbs layer over the RDMAP engine: the rules that
//! keep a completion queue from overflowing and make every posted receive come
//! back exactly once ("care must be taken in scoping and sizing the
//! Completion Queue", docs/receive-strategies.md). Plain data, no threads: any driver applies them the same way.
//!
//! * A slot of a work queue is taken when work is posted (a send-queue request, a
//!   receive, a buffer posted to a shared pool, a credit granted) and given back
//!   only when its completion has been taken from the CQ: a [`Held`] rides with
//!   each completion in the CQ. A queue therefore never has more completions
//!   waiting than its limit, which is what it reserved on the CQ; posting beyond
//!   fails with [`QueueFull`], which names the limit.
//! * A [`Slots`] owns the CQ reservation it is counted against, so the reservation
//!   lasts until the last completion holding one of its slots is polled, even after
//!   the queue pair is gone: no later queue pair is granted room still occupied.
//! * Shared pools (strategy 2): the pool's slots count free, held and completed
//!   buffers alike, so held plus free never exceed the pool size each CQ reserved.
//!   Per-stream credits (strategy 3): a credit counts until the completion of the
//!   message it enabled is polled.
//! * [`RecvLedger`]: the receives posted on a queue pair's own receive queue and not
//!   yet completed. A receive completion not in it is not passed on (none invented
//!   or doubled); once the stream is closed, those still in it complete as flushed
//!   (none lost).

use crate::cq::{CqError, CqLedger, CqReservation, CqSource};
use crate::ddp::PoolId;
use crate::mem::StreamId;
use crate::rdmap::{Completion, WcOpcode, WcStatus};
use rddp_wire::rdmap::qn;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Which queue a slot belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkQueue {
    /// The send queue: a slot per work request until its completion is polled.
    Send,
    /// A queue pair's own receive queue: a slot per posted receive.
    Recv,
    /// A shared receive queue: a slot per buffer, free, held or completed.
    SharedRecv,
    /// A per-stream credit window: a slot per credit granted.
    Credits,
}

impl WorkQueue {
    fn counts(self) -> &'static str {
        match self {
            Self::Send => "work requests posted and not yet polled from the send CQ",
            Self::Recv => "receives posted and not yet polled from the receive CQ",
            Self::SharedRecv => "buffers free, in use, or completed and not yet polled",
            Self::Credits => "credits granted whose completions are not yet polled",
        }
    }
}

impl fmt::Display for WorkQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Send => "send queue",
            Self::Recv => "receive queue",
            Self::SharedRecv => "shared receive queue",
            Self::Credits => "credit window",
        })
    }
}

/// Posting refused: the queue is at its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the {queue} holds its maximum of {limit} {}; poll the completion queue first", .queue.counts())]
pub struct QueueFull {
    /// The queue that refused.
    pub queue: WorkQueue,
    /// Its limit: the completions it reserved on its CQ.
    pub limit: usize,
}

/// The slots of one work queue: a bounded count, shared by its handles.
#[derive(Debug, Clone)]
pub struct Slots {
    inner: Arc<SlotsInner>,
}

#[derive(Debug)]
struct SlotsInner {
    queue: WorkQueue,
    limit: usize,
    used: AtomicUsize,
    /// Released when the last handle (the queue's or a waiting completion's) goes.
    _reservation: Option<CqReservation>,
}

impl Slots {
    /// `limit` slots of `queue`, none taken, counted against no reservation.
    pub fn new(queue: WorkQueue, limit: usize) -> Self {
        Self::build(queue, limit, None)
    }

    /// Slots counted against `reservation`, which they keep alive.
    pub fn with_reservation(queue: WorkQueue, limit: usize, reservation: CqReservation) -> Self {
        Self::build(queue, limit, Some(reservation))
    }

    fn build(queue: WorkQueue, limit: usize, reservation: Option<CqReservation>) -> Self {
        Self {
            inner: Arc::new(SlotsInner {
                queue,
                limit,
                used: AtomicUsize::new(0),
                _reservation: reservation,
            }),
        }
    }

    /// The queue the slots belong to.
    pub fn queue(&self) -> WorkQueue {
        self.inner.queue
    }

    /// Most slots that may be taken at once.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Slots taken and not given back.
    pub fn used(&self) -> usize {
        self.inner.used.load(Ordering::Acquire)
    }

    /// Take `n` slots, all or none.
    pub fn take(&self, n: usize) -> Result<(), QueueFull> {
        let limit = self.inner.limit;
        self.inner
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|&t| t <= limit)
            })
            .map(|_| ())
            .map_err(|_| QueueFull {
                queue: self.inner.queue,
                limit,
            })
    }

    /// Give back `n` slots (never below zero).
    pub fn give_back(&self, n: usize) {
        let _ = self
            .inner
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(n))
            });
    }
}

/// The slots one completion holds until it is taken from the CQ: one of each
/// [`Slots`] in it is given back when it is dropped. A completion holds at most
/// two (a shared pool's buffer and the queue pair's own count), so no allocation.
#[derive(Debug, Default)]
pub struct Held {
    slots: [Option<Slots>; 2],
}

impl Held {
    /// Also hold one slot (already taken) of `s`; [`WorkQueues::completed`] never
    /// asks for more than two.
    fn and(mut self, s: &Slots) -> Self {
        let free = self.slots.iter_mut().find(|x| x.is_none());
        debug_assert!(free.is_some(), "a completion holds at most two slots");
        if let Some(x) = free {
            *x = Some(s.clone());
        }
        self
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        for s in self.slots.iter().flatten() {
            s.give_back(1);
        }
    }
}

/// The receives posted on one queue and not yet completed, oldest first. An
/// ordered receive queue completes them in the order posted (each Send takes
/// the next buffer, RFC 5040 §5.3, and DDP delivers in order, RFC 5041 §5.3),
/// so a completion is the oldest one and taking it is O(1); another (a
/// repeated wr_id, say) is looked for.
#[derive(Debug, Default)]
pub struct RecvLedger {
    outstanding: VecDeque<u64>,
}

impl RecvLedger {
    /// A receive `wr_id` was posted: it is now outstanding.
    pub fn posted(&mut self, wr_id: u64) {
        self.outstanding.push_back(wr_id);
    }

    /// Whether `wr_id` was outstanding (and is no longer: its oldest posting).
    pub fn completes(&mut self, wr_id: u64) -> bool {
        if self.outstanding.front() == Some(&wr_id) {
            self.outstanding.pop_front();
            return true;
        }
        match self.outstanding.iter().position(|&id| id == wr_id) {
            Some(i) => {
                self.outstanding.remove(i);
                true
            }
            None => false,
        }
    }

    /// Receives still outstanding, in the order posted (each wr_id as often
    /// as it is).
    pub fn outstanding(&self) -> Vec<u64> {
        self.outstanding.iter().copied().collect()
    }

    /// Receives outstanding.
    pub fn len(&self) -> usize {
        self.outstanding.len()
    }

    /// Whether no receive is outstanding.
    pub fn is_empty(&self) -> bool {
        self.outstanding.is_empty()
    }
}

/// How a queue pair receives Sends, for its reservation on the receive CQ.
#[derive(Debug, Clone)]
pub enum RecvPlan {
    /// Its own ordered receive queue of this depth.
    Own {
        /// The queue's depth: most receives posted at once.
        depth: usize,
    },
    /// A shared receive queue of strategy 2: `slots` are the pool's (limit: its
    /// size); the CQ reserves the whole pool, once for all its queue pairs.
    Pool {
        /// The shared receive queue.
        pool: PoolId,
        /// The pool's slots.
        slots: Slots,
    },
    /// A pool with per-stream credits (strategy 3), at most `limit` outstanding.
    Credits {
        /// The slots of the queue pair's credits.
        slots: Slots,
        /// Most credits outstanding at once.
        limit: usize,
    },
}

#[derive(Debug)]
enum RecvSide {
    Own {
        slots: Slots,
        ledger: RecvLedger,
    },
    /// `keep`: unbounded, owns this queue pair's hold on the pool's reservation.
    Pool {
        pool: Slots,
        keep: Slots,
    },
    Credits {
        pool: Slots,
        credits: Slots,
    },
}

/// The work queues of one queue pair, as a verbs layer accounts for them.
#[derive(Debug)]
pub struct WorkQueues {
    sq: Slots,
    rq: RecvSide,
}

impl WorkQueues {
    /// Reserve on the CQs what the queue pair of `stream` can have waiting: its send
    /// queue depth on `send_cq` (as [`CqSource::Ulp`] `ulp_id`), and on `recv_cq` what
    /// `plan` bounds, as the same source the DDP sink's `bind_cq` uses for QN 0 (the
    /// sink's binding then shares it).
    pub fn reserve(
        send_cq: &CqLedger,
        recv_cq: &CqLedger,
        stream: StreamId,
        ulp_id: u64,
        max_send_wr: usize,
        plan: RecvPlan,
    ) -> Result<Self, CqError> {
        let queue = CqSource::Queue {
            stream,
            qn: qn::SEND,
        };
        let rq = match plan {
            RecvPlan::Own { depth } => {
                let r = recv_cq.reserve(queue, depth)?;
                RecvSide::Own {
                    slots: Slots::with_reservation(WorkQueue::Recv, depth, r),
                    ledger: RecvLedger::default(),
                }
            }
            RecvPlan::Pool { pool, slots } => {
                let r = recv_cq.reserve(CqSource::Pool(pool), slots.limit())?;
                RecvSide::Pool {
                    keep: Slots::with_reservation(WorkQueue::SharedRecv, usize::MAX, r),
                    pool: slots,
                }
            }
            RecvPlan::Credits { slots, limit } => {
                let r = recv_cq.reserve(queue, limit)?;
                RecvSide::Credits {
                    credits: Slots::with_reservation(WorkQueue::Credits, limit, r),
                    pool: slots,
                }
            }
        };
        let r = send_cq.reserve(CqSource::Ulp(ulp_id), max_send_wr)?;
        Ok(Self {
            sq: Slots::with_reservation(WorkQueue::Send, max_send_wr, r),
            rq,
        })
    }

    /// A send-queue request is posted.
    pub fn post_send(&self) -> Result<(), QueueFull> {
        self.sq.take(1)
    }

    /// The request counted by [`Self::post_send`] was not posted after all.
    pub fn unpost_send(&self) {
        self.sq.give_back(1);
    }

    /// A receive is posted through the queue pair (with a shared receive queue, it
    /// goes to the pool).
    pub fn post_recv(&mut self, wr_id: u64) -> Result<(), QueueFull> {
        match &mut self.rq {
            RecvSide::Own { slots, ledger } => {
                slots.take(1)?;
                ledger.posted(wr_id);
                Ok(())
            }
            RecvSide::Pool { pool, .. } | RecvSide::Credits { pool, .. } => pool.take(1),
        }
    }

    /// The receive counted by [`Self::post_recv`] was not posted after all.
    pub fn unpost_recv(&mut self, wr_id: u64) {
        match &mut self.rq {
            RecvSide::Own { slots, ledger } => {
                if ledger.completes(wr_id) {
                    slots.give_back(1);
                }
            }
            RecvSide::Pool { pool, .. } | RecvSide::Credits { pool, .. } => pool.give_back(1),
        }
    }

    /// `n` credits are granted (strategy 3). Other receive models have no credits;
    /// the engine refuses the grant.
    pub fn grant(&self, n: u32) -> Result<(), QueueFull> {
        match &self.rq {
            RecvSide::Credits { credits, .. } => credits.take(n as usize),
            _ => Ok(()),
        }
    }

    /// The credits counted by [`Self::grant`] were not granted after all.
    pub fn ungrant(&self, n: u32) {
        if let RecvSide::Credits { credits, .. } = &self.rq {
            credits.give_back(n as usize);
        }
    }

    /// The engine completed `c`: what it holds until it is taken from the CQ, or
    /// `None` if it must not reach the CQ (a receive that is not outstanding: it
    /// would be invented or doubled; an unsignaled success, whose slot is given
    /// back at once).
    pub fn completed(&mut self, c: &Completion) -> Option<Held> {
        if !c.signaled {
            // An unsignaled success (`Completion::signaled`): nothing goes to
            // the CQ, so its send-queue slot comes back now (no hold made and
            // dropped: an Arc's count up and down, two locked instructions).
            self.sq.give_back(1);
            return None;
        }
        if c.opcode != WcOpcode::Recv {
            return Some(Held::default().and(&self.sq));
        }
        match &mut self.rq {
            RecvSide::Own { slots, ledger } => ledger
                .completes(c.wr_id)
                .then(|| Held::default().and(slots)),
            RecvSide::Pool { pool, keep } => {
                // `keep` is unbounded: it only counts, to keep the reservation.
                let _ = keep.take(1);
                Some(Held::default().and(pool).and(keep))
            }
            RecvSide::Credits { pool, credits } => Some(Held::default().and(pool).and(credits)),
        }
    }

    /// Once the stream is closed nothing more comes back from the engine: every
    /// receive of the own queue still outstanding completes as flushed (its buffer
    /// is gone), with what it holds.
    pub fn flush_unreturned(&mut self) -> Vec<(Completion, Held)> {
        let RecvSide::Own { ledger, .. } = &self.rq else {
            return Vec::new();
        };
        ledger
            .outstanding()
            .into_iter()
            .filter_map(|id| {
                let c = Completion::new(id, WcOpcode::Recv, WcStatus::Flushed, 0);
                self.completed(&c).map(|h| (c, h))
            })
            .collect()
    }

    /// Receives of the own queue posted and not yet completed.
    pub fn recvs_outstanding(&self) -> usize {
        match &self.rq {
            RecvSide::Own { ledger, .. } => ledger.len(),
            _ => 0,
        }
    }
}
