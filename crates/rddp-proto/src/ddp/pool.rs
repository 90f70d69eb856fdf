//! A buffer pool that many streams' untagged queues draw from (docs/receive-strategies.md, strategies
//! 2 and 3).
//!
//! * [`PoolStrategy::SharedCredits`] (strategy 2, the shared receive queue): credits
//!   are implicit and shared; a new MSN is presumed valid and takes a buffer when its
//!   first segment arrives. Each stream's held buffers are checked against a soft
//!   limit whose crossing raises [`PoolEvent::SoftLimit`]; any response is the ULP's.
//! * [`PoolStrategy::StreamCredits`] (strategy 3): the ULP grants credits to each
//!   stream ([`crate::ddp::DdpStream::grant_credits`]); an MSN is valid iff it is in
//!   the stream's granted range; buffers are still taken from the shared pool.
//!
//! The pool is a cheap handle (`Arc<Mutex<..>>`): clone it into every stream that
//! shares it; it is `Send + Sync` so streams may live on different threads. The
//! pool never reads a clock or does IO; its events wait in a bounded queue until the
//! ULP polls them.

use super::recv_queue::{RecvBuffer, RegionSpan};
use crate::mem::StreamId;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Which strategy of docs/receive-strategies.md a pool serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolStrategy {
    /// Strategy 2: shared buffers, implicit shared credits, soft per-stream limit.
    SharedCredits,
    /// Strategy 3: shared buffers, explicit per-stream credits.
    StreamCredits,
}

/// When a new MSN takes buffers (docs/receive-strategies.md: sequential versus
/// arrival ordering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BufferOrdering {
    /// Taking a buffer for MSN x also takes one for every earlier MSN not yet seen.
    Sequential,
    /// Each new MSN takes at most one buffer, whatever MSNs are still missing.
    #[default]
    Arrival,
}

/// How a pool is set up; fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Strategy 2 or 3: how an MSN is judged valid.
    pub strategy: PoolStrategy,
    /// When a new MSN takes buffers.
    pub ordering: BufferOrdering,
    /// Most buffers the pool ever holds, free or held by a message not yet
    /// delivered (posting beyond is refused). Bounds the completions the pool's
    /// messages can generate (see [`crate::cq`]; a verbs layer also counts the
    /// completions not yet polled, see [`crate::wq`]).
    pub max_buffers: usize,
    /// Strategy 2: a stream holding more buffers than this raises
    /// [`PoolEvent::SoftLimit`]. `None`: no check (usual under strategy 3).
    pub soft_limit: Option<usize>,
    /// Most events kept until the ULP polls; later ones are counted as lost.
    pub max_events: usize,
}

impl PoolConfig {
    /// A shared receive queue (strategy 2).
    pub fn shared(ordering: BufferOrdering, max_buffers: usize, soft_limit: usize) -> Self {
        Self {
            strategy: PoolStrategy::SharedCredits,
            ordering,
            max_buffers,
            soft_limit: Some(soft_limit),
            max_events: 4096,
        }
    }

    /// A buffer pool for streams with explicit credits (strategy 3).
    pub fn credits(ordering: BufferOrdering, max_buffers: usize) -> Self {
        Self {
            strategy: PoolStrategy::StreamCredits,
            ordering,
            max_buffers,
            soft_limit: None,
            max_events: 4096,
        }
    }
}

/// Asynchronous events of a pool, each naming the stream (and queue) concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolEvent {
    /// The stream now holds more buffers than the soft limit (docs/receive-strategies.md: detection
    /// of "out-of-control" streams; no action is taken). Raised once per crossing:
    /// the stream must drop back to the limit before it can raise it again.
    SoftLimit {
        /// The stream concerned.
        stream: StreamId,
        /// Its queue drawing on the pool.
        qn: u32,
        /// Buffers the queue holds now.
        held: usize,
        /// The soft limit it passed.
        limit: usize,
    },
    /// The pool is empty while the stream holds buffers only for MSNs after
    /// `missing_msn`, which has none (docs/receive-strategies.md, the arrival-ordering hazard): that
    /// MSN cannot be received until a buffer is posted, so the later messages cannot
    /// be delivered either. `deadlock`: every buffer taken from the pool is held
    /// this way, so none will come back without the ULP. Raised once per stream per
    /// empty spell.
    Stranded {
        /// The stream concerned.
        stream: StreamId,
        /// Its queue drawing on the pool.
        qn: u32,
        /// The oldest undelivered MSN, which has no buffer.
        missing_msn: u32,
        /// Buffers the queue holds for later MSNs.
        held: usize,
        /// Whether every queue holding buffers of the pool is stranded the same way.
        deadlock: bool,
    },
    /// The pool's free buffers dropped below the limit armed with
    /// [`BufferPool::arm_limit`] (verbs' `srq_limit`,
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`): the ULP should post more. Raised once
    /// per arming: the limit is disarmed as it is raised.
    LowWater {
        /// Free buffers left after the take that crossed the limit.
        free: usize,
        /// The limit that was armed.
        limit: usize,
    },
    /// This many events were dropped because the queue was full.
    Lost(u64),
}

/// What [`BufferPool::set_low_water_hook`] runs when the armed limit is
/// crossed, besides queueing [`PoolEvent::LowWater`].
#[derive(Clone)]
struct LowWaterHook(Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for LowWaterHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LowWaterHook")
    }
}

/// A local request the pool refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// The pool holds [`PoolConfig::max_buffers`] already (the value), free or held.
    #[error("the pool already holds its maximum of {0} buffers, free or held by a message")]
    Full(usize),
    /// A receive posted into a region names octets past the region's end.
    #[error("a receive names octets past the end of its region")]
    OutsideRegion,
}

/// A receive as posted to a pool: octets of its own (`buf.data`), or, posted
/// into a registered region, a span of it (`buf.data` empty), as an ordered
/// queue's slot holds one.
#[derive(Debug)]
pub(crate) struct Posted {
    pub buf: RecvBuffer,
    pub place: Option<Box<RegionSpan>>,
}

/// Identity of a pool (for completion-queue reservations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolId(pub u64);

/// Counters for tests, the tool and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers handed to queues.
    pub taken: u64,
    /// Requests refused because the pool had too few buffers.
    pub empty: u64,
    /// [`PoolEvent::SoftLimit`] events raised.
    pub soft_limit_events: u64,
    /// [`PoolEvent::Stranded`] events raised.
    pub stranded_events: u64,
}

/// A shared buffer pool. Clones are handles to the same pool.
#[derive(Debug, Clone)]
pub struct BufferPool {
    inner: Arc<Mutex<PoolInner>>,
    id: PoolId,
    cfg: PoolConfig,
}

/// One queue's hold on the pool, as the pool sees it.
#[derive(Debug)]
struct Gap {
    missing_msn: u32,
    held: usize,
    /// The empty spell in which it was reported (0: not yet).
    reported_in: u64,
}

#[derive(Debug)]
pub(crate) struct PoolInner {
    cfg: PoolConfig,
    free: VecDeque<Posted>,
    /// Buffers taken by queues for messages not yet delivered (or flushed).
    held: usize,
    /// Queues holding at least one buffer.
    holders: usize,
    /// Queues whose oldest undelivered MSN has no buffer while later MSNs hold some.
    gapped: BTreeMap<QueueKey, Gap>,
    /// Number of the current (or next) empty spell, from 1.
    spell: u64,
    /// Whether every gapped queue was checked in this empty spell; afterwards only
    /// the queue that changed needs a look.
    scanned: bool,
    events: VecDeque<PoolEvent>,
    lost: u64,
    stats: PoolStats,
    /// The armed low-water limit (0: none): a take that leaves fewer free
    /// buffers raises [`PoolEvent::LowWater`] and disarms it.
    limit: usize,
    low_water_hook: Option<LowWaterHook>,
}

static NEXT_POOL: AtomicU64 = AtomicU64::new(1);
static NEXT_QUEUE: AtomicU64 = AtomicU64::new(1);

/// A queue as its pool knows it: unique even when two streams on the pool share a
/// local StreamId (stream ids are the ULP's, not the pool's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct QueueKey {
    id: u64,
    pub stream: StreamId,
    pub qn: u32,
}

impl QueueKey {
    pub(crate) fn new(stream: StreamId, qn: u32) -> Self {
        Self {
            id: NEXT_QUEUE.fetch_add(1, AtomicOrdering::Relaxed),
            stream,
            qn,
        }
    }
}

impl BufferPool {
    /// An empty pool with a fresh [`PoolId`].
    pub fn new(cfg: PoolConfig) -> Self {
        Self {
            inner: Arc::new(Mutex::new(PoolInner {
                cfg,
                free: VecDeque::new(),
                held: 0,
                holders: 0,
                gapped: BTreeMap::new(),
                spell: 1,
                scanned: false,
                events: VecDeque::new(),
                lost: 0,
                stats: PoolStats::default(),
                limit: 0,
                low_water_hook: None,
            })),
            id: PoolId(NEXT_POOL.fetch_add(1, AtomicOrdering::Relaxed)),
            cfg,
        }
    }

    /// The pool's identity, unique in the process (completion-queue reservations).
    pub fn id(&self) -> PoolId {
        self.id
    }

    /// The configuration the pool was made with.
    pub fn config(&self) -> PoolConfig {
        self.cfg
    }

    /// Whether both handles name the same pool.
    pub fn same(&self, other: &BufferPool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, PoolInner> {
        // A panic elsewhere while holding the lock leaves counters, never memory,
        // inconsistent: keep serving.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Post a buffer to the pool (not to any stream).
    pub fn post(&self, buf: RecvBuffer) -> Result<(), PoolError> {
        self.lock().post(Posted { buf, place: None })
    }

    /// Post a receive whose message goes into `place` (a span of a registered
    /// region, see [`RegionSpan`]) to the pool; the message that takes it is
    /// placed there, header first, as into an ordered queue's receive.
    pub fn post_in_region(&self, id: u64, place: RegionSpan) -> Result<(), PoolError> {
        if !place.within_region() {
            return Err(PoolError::OutsideRegion);
        }
        let buf = RecvBuffer {
            id,
            data: Vec::new(),
        };
        self.lock().post(Posted {
            buf,
            place: Some(Box::new(place)),
        })
    }

    /// Buffers in the pool not yet associated with a message.
    pub fn free(&self) -> usize {
        self.lock().free.len()
    }

    /// Buffers associated with messages not yet delivered. Free plus held never
    /// exceed [`PoolConfig::max_buffers`], what a CQ reserves for the pool.
    pub fn held(&self) -> usize {
        self.lock().held
    }

    /// A copy of the pool's counters.
    pub fn stats(&self) -> PoolStats {
        self.lock().stats
    }

    /// The next asynchronous event, if any.
    pub fn poll_event(&self) -> Option<PoolEvent> {
        let mut p = self.lock();
        if p.lost > 0 {
            let n = std::mem::take(&mut p.lost);
            return Some(PoolEvent::Lost(n));
        }
        p.events.pop_front()
    }

    /// Arm (or with 0 disarm) the low-water limit: the first take that leaves
    /// fewer than `limit` free buffers raises [`PoolEvent::LowWater`] and
    /// disarms it, as verbs' `srq_limit` (InfiniBand Architecture
    /// Specification, "SRQ Limit"). Arming below the current free count does
    /// not raise it at once: only a take crosses it. `limit` above
    /// [`PoolConfig::max_buffers`] is the caller's to refuse.
    pub fn arm_limit(&self, limit: usize) {
        self.lock().limit = limit;
    }

    /// The armed low-water limit, 0 when none is (never armed, disarmed, or
    /// raised since it was armed).
    pub fn armed_limit(&self) -> usize {
        self.lock().limit
    }

    /// Run `hook` whenever [`PoolEvent::LowWater`] is raised, on the thread
    /// whose take crossed the limit and under the pool's lock: it must not
    /// call back into the pool, and should be short (a verbs layer queues an
    /// asynchronous event). Replaces any hook set before.
    pub fn set_low_water_hook(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.lock().low_water_hook = Some(LowWaterHook(Arc::new(hook)));
    }

    /// Take every free buffer back (teardown of the pool).
    pub fn drain(&self) -> Vec<RecvBuffer> {
        self.lock().free.drain(..).map(|p| p.buf).collect()
    }
}

impl PoolInner {
    fn post(&mut self, buf: Posted) -> Result<(), PoolError> {
        // The RDDP working group's note on sharing buffers and credits: the CQ
        // "may be sized to allow for every buffer in the pool to be completed to
        // it", so every buffer, free or held, counts.
        if self.free.len() + self.held >= self.cfg.max_buffers {
            return Err(PoolError::Full(self.cfg.max_buffers));
        }
        if self.free.is_empty() {
            // The empty spell ends; the next one reports stranded queues afresh.
            self.spell += 1;
            self.scanned = false;
        }
        self.free.push_back(buf);
        Ok(())
    }

    pub(crate) fn free_len(&self) -> usize {
        self.free.len()
    }

    /// Take `n` buffers, all or none.
    pub(crate) fn take(&mut self, n: usize, mut put: impl FnMut(Posted)) -> bool {
        if n > self.free.len() {
            self.stats.empty += 1;
            return false;
        }
        self.stats.taken += n as u64;
        self.held += n;
        for b in self.free.drain(..n) {
            put(b);
        }
        if self.limit > 0 && self.free.len() < self.limit {
            let limit = std::mem::take(&mut self.limit);
            self.push_event(PoolEvent::LowWater {
                free: self.free.len(),
                limit,
            });
            if let Some(LowWaterHook(hook)) = &self.low_water_hook {
                hook();
            }
        }
        true
    }

    /// `n` held buffers were delivered or flushed: no longer the pool's.
    pub(crate) fn release(&mut self, n: usize) {
        self.held = self.held.saturating_sub(n);
    }

    /// Every free buffer, for the teardown of a queue that owns its pool alone.
    pub(crate) fn drain_free(&mut self) -> impl Iterator<Item = RecvBuffer> + '_ {
        self.free.drain(..).map(|p| p.buf)
    }

    fn push_event(&mut self, e: PoolEvent) {
        if self.events.len() >= self.cfg.max_events {
            self.lost += 1;
        } else {
            self.events.push_back(e);
        }
    }

    pub(crate) fn soft_limit(&mut self, key: QueueKey, held: usize, limit: usize) {
        self.stats.soft_limit_events += 1;
        self.push_event(PoolEvent::SoftLimit {
            stream: key.stream,
            qn: key.qn,
            held,
            limit,
        });
    }

    /// A queue's holding changed: `was`/`now` held counts, `gap` its missing oldest
    /// MSN when it holds only later ones.
    pub(crate) fn update(&mut self, key: QueueKey, was: usize, now: usize, gap: Option<u32>) {
        match (was > 0, now > 0) {
            (false, true) => self.holders += 1,
            (true, false) => self.holders = self.holders.saturating_sub(1),
            _ => {}
        }
        match gap {
            Some(missing_msn) => {
                let g = self.gapped.entry(key).or_insert(Gap {
                    missing_msn,
                    held: now,
                    reported_in: 0,
                });
                if g.missing_msn != missing_msn {
                    g.reported_in = 0;
                }
                g.missing_msn = missing_msn;
                g.held = now;
            }
            None => {
                self.gapped.remove(&key);
            }
        }
        self.check_stranded(key);
    }

    /// With arrival ordering, later MSNs can hold every buffer so that
    /// intermediate MSNs cannot be received. Tell the ULP instead of hanging: once
    /// per queue per empty spell. `changed` is the queue just updated.
    fn check_stranded(&mut self, changed: QueueKey) {
        if !self.free.is_empty() || self.gapped.is_empty() {
            return;
        }
        let deadlock = self.gapped.len() >= self.holders;
        let spell = self.spell;
        let mut out = Vec::new();
        let mut report = |k: &QueueKey, g: &mut Gap| {
            if g.reported_in != spell {
                g.reported_in = spell;
                out.push(PoolEvent::Stranded {
                    stream: k.stream,
                    qn: k.qn,
                    missing_msn: g.missing_msn,
                    held: g.held,
                    deadlock,
                });
            }
        };
        if self.scanned {
            if let Some(g) = self.gapped.get_mut(&changed) {
                report(&changed, g);
            }
        } else {
            self.scanned = true;
            for (k, g) in self.gapped.iter_mut() {
                report(k, g);
            }
        }
        for e in out {
            self.stats.stranded_events += 1;
            self.push_event(e);
        }
    }
}
