//! Untagged receive buffers of one queue (QN) and the rule that says which MSNs are
//! valid (docs/receive-strategies.md):
//!
//! * [`RecvModel::OrderedQueue`] (strategy 1): each posted buffer is pre-assigned to
//!   the next MSN; an MSN is valid iff it already has a buffer (else 1/2/0x02).
//! * [`RecvModel::Credits`] (strategy 3): the ULP grants credits, each enabling the
//!   next MSN; an MSN is valid iff it lies in the granted range (else 1/2/0x03); a
//!   buffer is taken from the queue's pool when the MSN's first segment arrives, and
//!   a valid MSN with no buffer left is a fault (1/2/0x02).
//! * A queue attached to a shared [`BufferPool`] follows the pool's strategy:
//!   strategy 2 (every new MSN presumed valid, buffers from the pool, soft limit) or
//!   strategy 3 (per-stream credits, buffers from the pool), with the pool's
//!   [`BufferOrdering`].

use super::pool::{BufferOrdering, BufferPool, PoolError, PoolStrategy, Posted, QueueKey};
use super::slots::SlotMap;
use crate::cq::{CqError, CqLedger, CqReservation, CqSource};
use crate::mem::{RegionRef, StreamId};
use rddp_wire::TerminateCode;

/// A receive buffer the ULP posts for one untagged message. Owned by DDP from
/// posting until delivery (or flush), then handed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvBuffer {
    /// The ULP's own identifier (a verbs wr_id).
    pub id: u64,
    /// Capacity is `data.len()`; a delivery says how many octets the message filled.
    pub data: Vec<u8>,
}

/// Where a receive posted into a registered region puts its message: `len`
/// octets of `region`'s data from `offset` (as an `ibv_sge` of a receive
/// names an MR's memory). Several posted receives may name the same octets
/// (as perftest's do): each message overwrites what the one before left, and
/// the application reads a message from the region after its completion and
/// before reposting. On any queue: an ordered one's slot holds it, a pool
/// (shared receive queue, credits) hands it to the message that takes it.
#[derive(Debug, Clone)]
pub struct RegionSpan {
    /// The registered region the message goes into.
    pub region: RegionRef,
    /// Offset of the span's first octet in the region's data.
    pub offset: usize,
    /// Octets in the span: the longest message it takes.
    pub len: usize,
}

impl RegionSpan {
    /// Whether the span lies within the region's data: placement indexes the
    /// data by it, so a receive is refused at posting otherwise.
    pub fn within_region(&self) -> bool {
        let end = self.offset.checked_add(self.len).map(|e| e as u64);
        end.is_some_and(|e| e <= self.region.len())
    }
}

/// How a queue decides that an MSN is valid and when a buffer is associated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecvModel {
    /// Strategy 1: each posted buffer is pre-assigned to the next MSN; an MSN is
    /// valid iff it has a buffer (else 1/2/0x02, RFC 5041 §7.2).
    #[default]
    OrderedQueue,
    /// Strategy 3: an MSN is valid iff it lies in the granted range (else 1/2/0x03);
    /// its buffer is taken from the queue's pool when its first segment arrives.
    Credits,
}

/// One buffer and the progress of the message that is filling it.
#[derive(Debug)]
pub(crate) struct MsgSlot {
    pub buf: RecvBuffer,
    /// A receive posted into a region: the message goes there, `buf.data`
    /// is empty. Boxed: every slot of every queue (RDMAP's own Read Request
    /// slots too) carries the field, and an idle queue pair holds dozens of
    /// slots (unboxed it cost `rddp target` 0.85 KiB an idle connection).
    pub place: Option<Box<RegionSpan>>,
    /// Payload octets of segments already processed in sender order.
    pub ordered_bytes: u64,
    /// Message length, known once the L=1 segment is processed in sender order.
    pub end: Option<u32>,
    /// RsvdULP of the L=1 segment (RDMAP control, Invalidate STag).
    pub rsvd_ulp: [u8; 5],
    /// RDMAP control octet of the first segment processed in sender order.
    pub ctrl: Option<u8>,
}

impl MsgSlot {
    fn new(buf: RecvBuffer) -> Self {
        Self {
            buf,
            place: None,
            ordered_bytes: 0,
            end: None,
            rsvd_ulp: [0; 5],
            ctrl: None,
        }
    }

    /// A pool's receive, taken for a message.
    fn posted(p: Posted) -> Self {
        let mut slot = Self::new(p.buf);
        slot.place = p.place;
        slot
    }

    /// Octets the message may fill.
    pub(super) fn capacity(&self) -> usize {
        self.place.as_ref().map_or(self.buf.data.len(), |p| p.len)
    }
}

/// Why a queue refuses a local request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PostRefused {
    /// The queue's (CQ-reserved) depth is reached.
    Depth(usize),
    /// A receive's span passes the end of its region's data.
    OutsideRegion,
    /// The pool holds its maximum.
    PoolFull(usize),
}

#[derive(Debug)]
enum Model {
    /// Strategy 1.
    Ordered,
    /// Strategies 2 and 3. `private`: the pool belongs to this queue alone
    /// ([`RecvModel::Credits`]) and its free buffers are flushed with it.
    Pooled {
        pool: BufferPool,
        private: bool,
        strategy: PoolStrategy,
        ordering: BufferOrdering,
        soft_limit: Option<usize>,
    },
}

#[derive(Debug)]
pub(crate) struct UntaggedQueue {
    key: QueueKey,
    model: Model,
    /// MSN of the oldest undelivered message.
    expected_msn: u32,
    /// `expected_msn` counted without wrapping: the key of its slot.
    expected_abs: u64,
    /// Messages with a buffer, keyed by unwrapped MSN. Sparse: under arrival
    /// ordering an MSN far ahead holds one entry, not the gap before it.
    slots: SlotMap<MsgSlot>,
    /// Strategy 3: MSNs `expected_msn .. expected_msn + window` are valid.
    window: u64,
    /// Most buffers (ordered) or credits (strategy 3) the queue may have: the
    /// worst case reserved on its CQ.
    limit: Option<u64>,
    /// Strategy 2: above the soft limit since the last event.
    over_soft: bool,
    /// Gap last reported to the pool.
    gap: Option<u32>,
    cq: Option<CqReservation>,
    /// The MSN whose segments are being processed in sender order and whose
    /// L=1 segment has not come yet: no other MSN of this queue may interleave.
    pub(crate) in_progress: Option<u32>,
}

impl UntaggedQueue {
    pub(super) fn new(stream: StreamId, qn: u32, model: RecvModel) -> Self {
        let model = match model {
            RecvModel::OrderedQueue => Model::Ordered,
            RecvModel::Credits => Model::Pooled {
                pool: BufferPool::new(super::pool::PoolConfig::credits(
                    BufferOrdering::Arrival,
                    usize::MAX,
                )),
                private: true,
                strategy: PoolStrategy::StreamCredits,
                ordering: BufferOrdering::Arrival,
                soft_limit: None,
            },
        };
        Self::with_model(stream, qn, model)
    }

    /// A queue drawing its buffers from a shared pool.
    pub(super) fn pooled(stream: StreamId, qn: u32, pool: &BufferPool) -> Self {
        let cfg = pool.config();
        Self::with_model(
            stream,
            qn,
            Model::Pooled {
                pool: pool.clone(),
                private: false,
                strategy: cfg.strategy,
                ordering: cfg.ordering,
                soft_limit: cfg.soft_limit,
            },
        )
    }

    fn with_model(stream: StreamId, qn: u32, model: Model) -> Self {
        let slots = match model {
            Model::Ordered => SlotMap::run(),
            Model::Pooled { .. } => SlotMap::sparse(),
        };
        Self {
            key: QueueKey::new(stream, qn),
            model,
            expected_msn: 1,
            expected_abs: 1,
            slots,
            window: 0,
            limit: None,
            over_soft: false,
            gap: None,
            cq: None,
            in_progress: None,
        }
    }

    pub(super) fn post(&mut self, buf: RecvBuffer) -> Result<(), PostRefused> {
        match &self.model {
            Model::Ordered => {
                let n = self.slots.len() as u64;
                if self.limit.is_some_and(|l| n >= l) {
                    return Err(PostRefused::Depth(n as usize));
                }
                self.slots.insert(self.expected_abs + n, MsgSlot::new(buf));
                Ok(())
            }
            Model::Pooled { pool, .. } => pool.post(buf).map_err(pool_refused),
        }
    }

    /// Post a receive whose message goes into `place`: the next MSN's slot
    /// (ordered queue) or the queue's pool. `id` as [`RecvBuffer::id`].
    pub(super) fn post_in_region(&mut self, id: u64, place: RegionSpan) -> Result<(), PostRefused> {
        if let Model::Pooled { pool, .. } = &self.model {
            return pool.post_in_region(id, place).map_err(pool_refused);
        }
        if !place.within_region() {
            return Err(PostRefused::OutsideRegion);
        }
        let n = self.slots.len() as u64;
        if self.limit.is_some_and(|l| n >= l) {
            return Err(PostRefused::Depth(n as usize));
        }
        let mut slot = MsgSlot::new(RecvBuffer {
            id,
            data: Vec::new(),
        });
        slot.place = Some(Box::new(place));
        self.slots.insert(self.expected_abs + n, slot);
        Ok(())
    }

    /// Strategy 3: enable the next `n` MSNs. False under other strategies, or if
    /// the window would pass the credit limit reserved on the CQ (nothing granted).
    pub(super) fn grant(&mut self, n: u32) -> bool {
        if !matches!(
            self.model,
            Model::Pooled {
                strategy: PoolStrategy::StreamCredits,
                ..
            }
        ) {
            return false;
        }
        let w = (self.window + u64::from(n)).min(u64::from(u32::MAX));
        if self.limit.is_some_and(|l| w > l) {
            return false;
        }
        self.window = w;
        true
    }

    /// Validate `msn` for a newly arrived segment and return its buffer, associating
    /// buffers from the pool on the MSN's first segment.
    pub(super) fn slot_for_arrival(&mut self, msn: u32) -> Result<&mut MsgSlot, TerminateCode> {
        // MSNs behind `expected_msn` (delivered) wrap to a huge distance.
        let d = u64::from(msn.wrapping_sub(self.expected_msn));
        let key = self.expected_abs + d;
        let Model::Pooled {
            pool,
            strategy,
            ordering,
            soft_limit,
            ..
        } = &self.model
        else {
            // Strategy 1: valid iff a buffer is already associated.
            return self
                .slots
                .get_mut(key)
                .ok_or(TerminateCode::DDP_INVALID_MSN_NO_BUFFER);
        };
        // Strategy 3: valid iff within the granted range. Strategy 2: a new MSN is
        // presumed valid; one in the half of the MSN space behind the next expected
        // (serial number arithmetic) is a delivered one replayed, not a new one.
        let range = match strategy {
            PoolStrategy::StreamCredits => self.window,
            PoolStrategy::SharedCredits => 1 << 31,
        };
        if d >= range {
            return Err(TerminateCode::DDP_INVALID_MSN_RANGE);
        }
        if !self.slots.contains_key(key) {
            // First segment of this MSN: associate buffers now.
            let first = self.first_to_take(*ordering, key);
            let was = self.slots.len();
            let mut p = pool.lock();
            let n = usize::try_from(key - first + 1).unwrap_or(usize::MAX);
            let mut k = first;
            let slots = &mut self.slots;
            let ok = p.take(n, |b| {
                slots.insert(k, MsgSlot::posted(b));
                k += 1;
            });
            if !ok {
                // An empty pool: 1/2/0x02 on the stream that needed the buffer.
                return Err(TerminateCode::DDP_INVALID_MSN_NO_BUFFER);
            }
            let now = self.slots.len();
            if let Some(limit) = *soft_limit
                && now > limit
                && !self.over_soft
            {
                self.over_soft = true;
                p.soft_limit(self.key, now, limit);
            }
            self.gap = gap_of(&self.slots, self.expected_abs, self.expected_msn);
            p.update(self.key, was, now, self.gap);
        }
        self.slots
            .get_mut(key)
            .ok_or(TerminateCode::DDP_INVALID_MSN_NO_BUFFER)
    }

    /// The first slot key a new message at `key` takes a pool buffer for.
    fn first_to_take(&self, ordering: BufferOrdering, key: u64) -> u64 {
        match ordering {
            // Sequential ordering: a buffer for MSN x takes one for every
            // earlier MSN not yet seen. Sequential slots form a run from `expected_abs`.
            BufferOrdering::Sequential => {
                self.slots.last_key().map_or(self.expected_abs, |k| k + 1)
            }
            // Arrival ordering: a new MSN consumes at most one buffer.
            BufferOrdering::Arrival => key,
        }
    }

    /// Strategy 1, nothing of the next message seen yet: its MSN and the
    /// buffer posted for it, whole. An LLP that reads a lone small message
    /// in one system call (MPA, `fpdu/rx_direct/lone.rs`) lets the read put its payload
    /// here before the header is checked; every check still runs before
    /// anything is delivered. `None` under the pooled strategies (a buffer is
    /// taken only when the message arrives).
    pub(super) fn next_posted(&self) -> Option<(u32, &[u8])> {
        if !matches!(self.model, Model::Ordered) || self.in_progress.is_some() {
            return None;
        }
        let slot = self.slots.get(self.expected_abs)?;
        // A receive into a region is taken header first (its target is the
        // region's, as a tagged segment's).
        if slot.ordered_bytes != 0 || slot.end.is_some() || slot.place.is_some() {
            return None;
        }
        Some((self.expected_msn, slot.buf.data.as_slice()))
    }

    /// The buffer already associated with `msn`, if any.
    pub(super) fn slot(&mut self, msn: u32) -> Option<&mut MsgSlot> {
        let d = u64::from(msn.wrapping_sub(self.expected_msn));
        self.slots.get_mut(self.expected_abs + d)
    }

    /// A segment for `msn` would find its buffers (posted, already taken, or
    /// free in the pool): [`Self::slot_for_arrival`] would not count a refused
    /// request against the pool. For a batch (`batch.rs`), which leaves such a
    /// segment to be taken alone, where the pool counts the refusal once.
    pub(super) fn has_buffers_for(&self, msn: u32) -> bool {
        let Model::Pooled { pool, ordering, .. } = &self.model else {
            return true;
        };
        let key = self.expected_abs + u64::from(msn.wrapping_sub(self.expected_msn));
        if self.slots.contains_key(key) {
            return true;
        }
        let first = self.first_to_take(*ordering, key);
        let n = key.saturating_sub(first).saturating_add(1);
        usize::try_from(n).is_ok_and(|n| n <= pool.lock().free_len())
    }

    /// One more message may take a buffer while the ones before it still hold
    /// theirs (a batch, `batch.rs`) without changing what the pool reports: a
    /// soft limit (strategy 2) is crossed only by what a stream holds at once,
    /// and in order each of those earlier messages is delivered first.
    pub(super) fn may_hold_one_more(&self) -> bool {
        match &self.model {
            Model::Pooled {
                soft_limit: Some(l),
                ..
            } => self.slots.len() < *l,
            _ => true,
        }
    }

    /// The buffers of the messages `msns` (distinct, in any order), in that
    /// order; `None` if one has no slot. For a batch of segments begun at once
    /// (`batch.rs`), each read into its own message's buffer.
    pub(super) fn buffers_of(&mut self, msns: impl Iterator<Item = u32>) -> Option<Vec<&mut [u8]>> {
        let keys: Vec<u64> = msns
            .map(|m| self.expected_abs + u64::from(m.wrapping_sub(self.expected_msn)))
            .collect();
        let mut by_key: Vec<usize> = (0..keys.len()).collect();
        by_key.sort_by_key(|&i| keys[i]);
        let (&lo, &hi) = (by_key.first()?, by_key.last()?);
        let mut out: Vec<Option<&mut [u8]>> = (0..keys.len()).map(|_| None).collect();
        let mut next = by_key.iter().peekable();
        for (k, slot) in self.slots.range_mut(keys[lo], keys[hi]) {
            if let Some(&&i) = next.peek()
                && keys[i] == k
            {
                if slot.place.is_some() {
                    // Never in a batch (`Begin::Ahead`).
                    return None;
                }
                out[i] = Some(slot.buf.data.as_mut_slice());
                next.next();
            }
        }
        out.into_iter().collect()
    }

    /// Pop the oldest message if it is complete; returns its MSN and slot.
    pub(super) fn pop_complete(&mut self) -> Option<(u32, MsgSlot)> {
        let was = self.slots.len();
        let (k, first) = self.slots.first()?;
        if k != self.expected_abs || first.end.is_none() {
            return None;
        }
        let (_, slot) = self.slots.pop_first()?;
        let msn = self.expected_msn;
        self.expected_msn = msn.wrapping_add(1);
        self.expected_abs += 1;
        self.window = self.window.saturating_sub(1);
        self.after_release(was);
        Some((msn, slot))
    }

    /// Tell the pool its buffers are no longer held (delivered or flushed), and
    /// what else changed that it tracks.
    fn after_release(&mut self, was: usize) {
        let Model::Pooled {
            pool, soft_limit, ..
        } = &self.model
        else {
            return;
        };
        let now = self.slots.len();
        if soft_limit.is_some_and(|l| now <= l) {
            self.over_soft = false;
        }
        let gap = gap_of(&self.slots, self.expected_abs, self.expected_msn);
        let mut p = pool.lock();
        p.release(was.saturating_sub(now));
        if gap != self.gap || (now == 0) != (was == 0) {
            self.gap = gap;
            p.update(self.key, was, now, gap);
        }
    }

    /// Hand every buffer back (teardown).
    pub(super) fn flush(&mut self) -> Vec<RecvBuffer> {
        let was = self.slots.len();
        let mut out: Vec<RecvBuffer> = self.slots.take_all().into_iter().map(|s| s.buf).collect();
        self.after_release(was);
        if let Model::Pooled {
            pool,
            private: true,
            ..
        } = &self.model
        {
            out.extend(pool.lock().drain_free());
        }
        out
    }

    /// Buffers posted and not yet delivered (for a shared pool: held by this queue).
    pub(super) fn posted(&self) -> usize {
        match &self.model {
            Model::Pooled {
                pool,
                private: true,
                ..
            } => self.slots.len() + pool.lock().free_len(),
            _ => self.slots.len(),
        }
    }

    pub(super) fn expected_msn(&self) -> u32 {
        self.expected_msn
    }

    /// Strategy 3: MSNs still enabled (granted and not yet delivered).
    pub(super) fn credits(&self) -> u64 {
        self.window
    }

    /// Reserve this queue's worst-case completions on `cq`. `limit` is the depth of
    /// an ordered queue or the credit limit of a strategy-3 stream; a strategy-2
    /// queue reserves its whole pool (shared with the pool's other queues) and
    /// ignores it. Refused if the CQ cannot hold them or the queue already passes
    /// `limit`.
    pub(super) fn bind_cq(&mut self, cq: &impl AsRef<CqLedger>, limit: u64) -> Result<(), CqError> {
        let queue = CqSource::Queue {
            stream: self.key.stream,
            qn: self.key.qn,
        };
        let (source, need, now) = match &self.model {
            Model::Ordered => (queue, limit, self.slots.len() as u64),
            Model::Pooled {
                strategy: PoolStrategy::StreamCredits,
                ..
            } => (queue, limit, self.window),
            Model::Pooled { pool, .. } => {
                let max = pool.config().max_buffers as u64;
                (CqSource::Pool(pool.id()), max, 0)
            }
        };
        let need_us = usize::try_from(need).unwrap_or(usize::MAX);
        if now > need {
            return Err(CqError::AboveLimit {
                from: source,
                now,
                limit: need,
            });
        }
        let r = cq.as_ref().reserve(source, need_us)?;
        if matches!(source, CqSource::Queue { .. }) {
            self.limit = Some(need);
        }
        self.cq = Some(r);
        Ok(())
    }
}

fn pool_refused(e: PoolError) -> PostRefused {
    match e {
        PoolError::Full(n) => PostRefused::PoolFull(n),
        PoolError::OutsideRegion => PostRefused::OutsideRegion,
    }
}

/// The missing oldest MSN of a queue that holds buffers only for later ones.
fn gap_of(slots: &SlotMap<MsgSlot>, expected_abs: u64, expected_msn: u32) -> Option<u32> {
    match slots.first() {
        Some((k, _)) if k != expected_abs => Some(expected_msn),
        _ => None,
    }
}

impl Drop for UntaggedQueue {
    fn drop(&mut self) {
        // The pool forgets a queue that goes away with buffers (they go with it).
        if let Model::Pooled { pool, .. } = &self.model
            && (!self.slots.is_empty() || self.gap.is_some())
        {
            let mut p = pool.lock();
            p.release(self.slots.len());
            p.update(self.key, self.slots.len(), 0, None);
        }
    }
}

#[cfg(test)]
mod slot_size {
    use super::MsgSlot;

    /// Every queue of every stream holds slots (an idle `rddp target`
    /// connection dozens: RDMAP's Read Request slots, the posted receives),
    /// so a slot's size is idle memory: a receive's region span is boxed, not
    /// inline (inline, 0.85 KiB more an idle connection).
    #[test]
    fn a_slot_stays_within_a_cache_line() {
        let n = std::mem::size_of::<MsgSlot>();
        assert!(n <= 64, "MsgSlot is {n} octets");
    }
}
