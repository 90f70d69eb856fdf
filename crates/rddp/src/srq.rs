//! Shared receive queues: one pool of receive buffers for many queue pairs
//! (docs/receive-strategies.md strategies 2 and 3).

use crate::error::Error;
use crate::mr::MemoryRegion;
use crate::pd::ProtectionDomain;
use crate::quota::Resource;
use rddp_proto::ddp::{BufferOrdering, BufferPool, PoolConfig, PoolError, PoolEvent, RecvBuffer};
use rddp_proto::wq::{Slots, WorkQueue};

/// How queue pairs draw on the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrqMode {
    /// Strategy 2: a new MSN takes a buffer when it first arrives; a stream holding
    /// more than `soft_limit` undelivered buffers raises an event (no hard action).
    Shared {
        /// Buffers a stream may hold undelivered before
        /// [`crate::PoolEvent::SoftLimit`] is raised.
        soft_limit: usize,
    },
    /// Strategy 3: each queue pair's MSNs are enabled by explicit credits
    /// ([`crate::QueuePair::grant_credits`]); no peer can cause a shortage elsewhere.
    Credits,
}

/// A shared receive queue in one protection domain (`ibv_srq`).
pub struct SharedReceiveQueue {
    pub(crate) pool: BufferPool,
    pub(crate) pd: ProtectionDomain,
    pub(crate) mode: SrqMode,
    /// Buffers free, held by a message, or completed and not yet polled: at most
    /// `max_wr`, the pool size each receive CQ reserved.
    pub(crate) slots: Slots,
}

impl SharedReceiveQueue {
    /// A pool of at most `max_wr` buffers (`ibv_create_srq`), `ordering` as
    /// docs/receive-strategies.md describes. A buffer counts against `max_wr`
    /// from its posting until its completion has been taken from the CQ.
    pub fn new(
        pd: &ProtectionDomain,
        mode: SrqMode,
        ordering: BufferOrdering,
        max_wr: usize,
    ) -> Self {
        let cfg = match mode {
            SrqMode::Shared { soft_limit } => PoolConfig::shared(ordering, max_wr, soft_limit),
            SrqMode::Credits => PoolConfig::credits(ordering, max_wr),
        };
        Self {
            pool: BufferPool::new(cfg),
            pd: pd.clone(),
            mode,
            slots: Slots::new(WorkQueue::SharedRecv, max_wr),
        }
    }

    /// How its queue pairs draw on the pool.
    pub fn mode(&self) -> SrqMode {
        self.mode
    }

    /// Post a receive buffer of `len` octets (`ibv_post_srq_recv`; charged to
    /// the PD's consumer until its completion). Refused: [`Error::Quota`] (the
    /// consumer's receive buffers), [`Error::QueueFull`] (`max_wr` posted and
    /// not polled), [`Error::Srq`] (the pool refused it).
    pub fn post_recv(&self, wr_id: u64, len: usize) -> Result<(), Error> {
        self.post_with(|pool| {
            pool.post(RecvBuffer {
                id: wr_id,
                data: vec![0; len],
            })
        })
    }

    /// Post a receive whose Send lands in `len` octets of `mr` at `offset`
    /// (`ibv_post_srq_recv` with one SGE in an MR), for whichever queue pair's
    /// message takes it: the payload goes from the LLP straight there, header
    /// first, as with [`crate::QueuePair::post_recv_mr`] (its completion's
    /// `buffer` is empty; `byte_len` says how much was filled). `mr` must be
    /// in the shared receive queue's protection domain. Charged and counted
    /// as [`Self::post_recv`].
    pub fn post_recv_mr(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
    ) -> Result<(), Error> {
        let place = mr.span(&self.pd, offset, len)?;
        self.post_with(|pool| pool.post_in_region(wr_id, place))
    }

    /// Charge the consumer and take a slot, then post with `post`; on its
    /// refusal both are given back.
    fn post_with(
        &self,
        post: impl FnOnce(&BufferPool) -> Result<(), PoolError>,
    ) -> Result<(), Error> {
        let consumer = &self.pd.inner.consumer;
        consumer.charge(Resource::ReceiveBuffers, 1)?;
        if let Err(e) = self.slots.take(1) {
            consumer.refund(Resource::ReceiveBuffers, 1);
            return Err(Error::QueueFull(e));
        }
        post(&self.pool).map_err(|e| {
            self.slots.give_back(1);
            consumer.refund(Resource::ReceiveBuffers, 1);
            Error::Srq(e)
        })
    }

    /// Buffers posted and not yet taken by a message.
    pub fn free(&self) -> usize {
        self.pool.free()
    }

    /// Arm the low-water limit (verbs' `srq_limit`; 0 disarms): the first
    /// message that leaves fewer than `limit` buffers posted and not taken
    /// raises [`crate::PoolEvent::LowWater`] (`IBV_EVENT_SRQ_LIMIT_REACHED`)
    /// and disarms it. [`Error::SrqLimit`] above `max_wr`.
    pub fn arm_limit(&self, limit: usize) -> Result<(), Error> {
        let max_wr = self.pool.config().max_buffers;
        if limit > max_wr {
            return Err(Error::SrqLimit { limit, max_wr });
        }
        self.pool.arm_limit(limit);
        Ok(())
    }

    /// The armed low-water limit; 0 when none is armed (or it was raised).
    pub fn armed_limit(&self) -> usize {
        self.pool.armed_limit()
    }

    /// Run `hook` when the low-water limit is crossed, on the thread whose
    /// message took the buffer, while the pool is locked: it must not call
    /// back into this queue (a verbs layer queues an asynchronous event).
    pub fn set_low_water_hook(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.pool.set_low_water_hook(hook);
    }

    /// Take the next asynchronous event, without waiting: a stream over its
    /// soft limit, a stream whose oldest message can no longer get a buffer
    /// (arrival ordering's hazard), or the armed low-water limit crossed.
    #[must_use]
    pub fn poll_event(&self) -> Option<PoolEvent> {
        self.pool.poll_event()
    }
}

impl Drop for SharedReceiveQueue {
    fn drop(&mut self) {
        let n = self.pool.drain().len();
        self.slots.give_back(n);
        self.pd
            .inner
            .consumer
            .refund(Resource::ReceiveBuffers, n as u64);
    }
}
