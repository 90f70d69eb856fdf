//! Protection domains, completion channels and completion queues (docs/verbs-abi.md):
//! `ibv_alloc_pd`/`ibv_dealloc_pd`, `ibv_create_comp_channel`/
//! `ibv_destroy_comp_channel`, `ibv_create_cq`/`ibv_destroy_cq`,
//! `ibv_req_notify_cq` and `ibv_poll_cq` (through the context's ops),
//! `ibv_get_cq_event` and `ibv_ack_cq_events`, with rdma-core 44's
//! semantics (docs/verbs-abi.md, "Protection domains, CQs and channels");
//! memory regions in [`mr`].
//!
//! Each object is a `Box` whose first field is the public struct, so the
//! pointer handed to C is the pointer to the whole object, and the registry
//! of `live` objects says which pointers are ours: an exported verb looks
//! its argument up there before dereferencing it (invariant 2 of the crate).
//! `ibv_poll_cq` is the exception: it is the data path, reached through
//! `cq->context->ops`, which verbs.h's inline has already read through the
//! application's pointer; it trusts the pointer as rdma-core's providers do.

use crate::abi::{self, ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_wc};
use crate::exports::{Context, set_errno};
use rddp::{WcOpcode, WcStatus, WorkCompletion};
use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// What a registered pointer points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Pd,
    Mr,
    Channel,
    Cq,
    /// A CQ in `ibv_destroy_cq`, waiting for its events to be acknowledged:
    /// `ibv_ack_cq_events` still reaches it, nothing else does.
    CqDestroying,
    Qp,
    Srq,
}

/// The live objects: contexts, and every PD, channel and CQ with its context.
#[derive(Default)]
pub(crate) struct Live {
    pub(crate) contexts: HashSet<usize>,
    objects: HashMap<usize, (Kind, usize)>,
    /// Each live MR by its PD and lkey (the data path's SGE lookup). An lkey
    /// is unique within its PD only: each context runs its own rddp device,
    /// whose STags may repeat another's, so a process that opens the device
    /// twice (a test, or an application beside librdmacm's own context) has
    /// equal lkeys in two PDs.
    lkeys: HashMap<(usize, u32), usize>,
}

impl Live {
    fn is(&self, p: usize, kind: Kind) -> bool {
        matches!(self.objects.get(&p), Some((k, _)) if *k == kind)
    }

    /// Whether `p` is a live object of `kind` belonging to context `ctx`.
    fn is_of(&self, p: usize, kind: Kind, ctx: usize) -> bool {
        self.objects.get(&p) == Some(&(kind, ctx))
    }

    /// The context of `p` if it is a live object of `kind`.
    fn context_of(&self, p: usize, kind: Kind) -> Option<usize> {
        match self.objects.get(&p) {
            Some(&(k, ctx)) if k == kind => Some(ctx),
            _ => None,
        }
    }
}

/// The registry. Lock order: this lock, then a channel's event queue, then
/// a CQ's `mutex`; `ibv_destroy_cq` waits on the CQ's `cond` without it.
pub(crate) fn live() -> MutexGuard<'static, Live> {
    static LIVE: OnceLock<Mutex<Live>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `ibv_create_cq` refuses a `cqe` above this (`max_cqe` of
/// `ibv_query_device`). As large as siw's (the kernel's software iWARP
/// device, 3,276,800) rounded up, since `cqe` only bounds what the
/// application may leave waiting (the rddp CQ under it is sized by
/// [`backing_capacity`]): libfabric's ofi_rxm asks for one CQ for every
/// peer it may have (768 entries times 256 by default).
pub const MAX_CQE: c_int = 1 << 22;

/// The CQ size rddp gives for a request of `cqe` entries, as siw does (the
/// kernel's iWARP software device): the next power of two. `None` outside
/// `1..=MAX_CQE` (`EINVAL`).
pub fn cq_size(cqe: c_int) -> Option<c_int> {
    if !(1..=MAX_CQE).contains(&cqe) {
        return None;
    }
    c_int::try_from((cqe as u32).next_power_of_two()).ok()
}

/// The capacity of the rddp CQ behind every verbs CQ, whatever its `cqe`:
/// room for the worst case of every queue pair the device holds, each with
/// both queues [`qp::MAX_QP_WR`] deep and completing here.
///
/// rddp refuses to attach a queue pair to a CQ that could overflow: each
/// queue reserves its depth there, and a work request's slot stays taken
/// until its completion is taken (docs/receive-strategies.md), so no
/// completion is ever lost. Verbs leaves that to the application: perftest
/// gives a queue pair's send and receive queues one CQ of the send depth
/// (128 entries for 128 Writes and a receive, or for 512 receives), which
/// the kernel accepts, an overrun being the application's
/// (`IBV_EVENT_CQ_ERR`). So the verbs CQ's `cqe` is what the application
/// sees (`ibv_create_cq` rounds it as siw does), and the rddp CQ under it
/// holds whatever its queue pairs can complete: an application that
/// lets more than `cqe` completions wait finds them all there, none lost.
pub fn backing_capacity() -> usize {
    let qps = usize::try_from(rddp::DeviceLimits::default().capacity.queue_pairs);
    qps.unwrap_or(usize::MAX / 2)
        .saturating_mul(2 * qp::MAX_QP_WR as usize)
}

// ---------------------------------------------------------------------------
// Protection domains.

/// What `ibv_alloc_pd` allocates: the public `struct ibv_pd` first.
#[repr(C)]
struct Pd {
    ibv: ibv_pd,
    _pd: rddp::ProtectionDomain,
    /// Memory regions and queue pairs using
    /// it: `ibv_dealloc_pd` is `EBUSY` while any does, as the kernel's.
    users: AtomicU32,
}

pub(crate) unsafe extern "C" fn alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    let mut live = live();
    if !live.contexts.contains(&(ctx as usize)) {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: `ctx` is live (checked above, registry locked), so it is a
    // Box<Context> that open_device made; only the `consumer` field is
    // borrowed, which C never writes.
    let consumer = unsafe { &(*ctx.cast::<Context>()).consumer };
    let Ok(pd) = consumer.alloc_pd() else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    let p = Box::into_raw(Box::new(Pd {
        ibv: ibv_pd {
            context: ctx,
            handle: pd.id().0,
        },
        _pd: pd,
        users: AtomicU32::new(0),
    }));
    live.objects.insert(p as usize, (Kind::Pd, ctx as usize));
    p.cast()
}

pub(crate) unsafe extern "C" fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
    let mut live = live();
    if !live.is(pd as usize, Kind::Pd) {
        return libc::EINVAL;
    }
    // SAFETY: a live PD is a Box<Pd> from alloc_pd; `users` is atomic.
    if unsafe { (*pd.cast::<Pd>()).users.load(Ordering::Acquire) } != 0 {
        return libc::EBUSY;
    }
    live.objects.remove(&(pd as usize));
    // SAFETY: live until the line above, so alloc_pd's Box, freed once.
    drop(unsafe { Box::from_raw(pd.cast::<Pd>()) });
    0
}

// ---------------------------------------------------------------------------
// Completion channels.

/// A channel's events, shared with the CQs that report to it.
pub(crate) struct ChannelShared {
    /// `ibv_comp_channel.fd`: an eventfd used as a level, readable exactly
    /// while `events` is not empty (written when the queue becomes non-empty,
    /// read back to zero when it becomes empty, both under its lock).
    fd: OwnedFd,
    /// One entry per notification not yet taken by `ibv_get_cq_event`: the
    /// CQ's public pointer and its shared state.
    events: Mutex<VecDeque<(usize, Arc<CqShared>)>>,
}

impl ChannelShared {
    fn new() -> Option<Self> {
        // SAFETY: eventfd takes no pointers. Blocking, as the kernel's
        // channel fd is until the application sets O_NONBLOCK.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        Some(Self {
            // SAFETY: just opened, owned by nothing else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            events: Mutex::new(VecDeque::new()),
        })
    }

    /// A CQ's notification (on the thread that pushed its completion).
    fn raise(&self, cq_addr: usize, cq: &Arc<CqShared>) {
        let mut q = lock(&self.events);
        if cq.dead.load(Ordering::Relaxed) {
            return;
        }
        q.push_back((cq_addr, cq.clone()));
        if q.len() == 1 {
            let one = 1u64;
            // SAFETY: writes 8 bytes from `one`. The counter was 0 (queue
            // empty), so this cannot block or overflow.
            unsafe { libc::write(self.fd.as_raw_fd(), (&raw const one).cast(), 8) };
        }
    }

    /// Resets the eventfd to 0 (the queue just became empty). The counter is
    /// 1 by the invariant above, so the read returns at once, blocking fd or
    /// not; it is read only if poll() says so all the same, so that an
    /// application reading the fd itself cannot make this block under the
    /// queue's lock.
    fn clear(&self) {
        let fd = self.fd.as_raw_fd();
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut n = 0u64;
        // SAFETY: one pollfd of ours; reads 8 bytes into `n`.
        unsafe {
            if libc::poll(&mut pfd, 1, 0) == 1 {
                libc::read(fd, (&raw mut n).cast(), 8);
            }
        }
    }

    /// The oldest event, counted as delivered to its CQ.
    fn take(&self) -> Option<(usize, Arc<CqShared>)> {
        let mut q = lock(&self.events);
        let ev = q.pop_front()?;
        ev.1.delivered.fetch_add(1, Ordering::AcqRel);
        if q.is_empty() {
            self.clear();
        }
        Some(ev)
    }

    /// No more events for `cq`, and those not yet read are dropped (as the
    /// kernel drops them when the CQ is destroyed).
    fn forget(&self, cq: &Arc<CqShared>) {
        let mut q = lock(&self.events);
        cq.dead.store(true, Ordering::Relaxed);
        let before = q.len();
        q.retain(|(_, c)| !Arc::ptr_eq(c, cq));
        if before > 0 && q.is_empty() {
            self.clear();
        }
    }

    /// Whether an event waits (for tests).
    #[cfg(test)]
    fn pending(&self) -> usize {
        lock(&self.events).len()
    }
}

/// What `ibv_create_comp_channel` allocates: the public struct first.
#[repr(C)]
struct Channel {
    ibv: ibv_comp_channel,
    shared: Arc<ChannelShared>,
}

pub(crate) unsafe extern "C" fn create_comp_channel(
    ctx: *mut ibv_context,
) -> *mut ibv_comp_channel {
    let mut live = live();
    if !live.contexts.contains(&(ctx as usize)) {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let Some(shared) = ChannelShared::new() else {
        return ptr::null_mut(); // errno is eventfd's
    };
    let p = Box::into_raw(Box::new(Channel {
        ibv: ibv_comp_channel {
            context: ctx,
            fd: shared.fd.as_raw_fd(),
            refcnt: 0,
        },
        shared: Arc::new(shared),
    }));
    live.objects
        .insert(p as usize, (Kind::Channel, ctx as usize));
    p.cast()
}

/// `EBUSY` while a CQ uses the channel (`refcnt`), as rdma-core.
pub(crate) unsafe extern "C" fn destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    let mut live = live();
    if !live.is(ch as usize, Kind::Channel) {
        return libc::EINVAL;
    }
    // SAFETY: a live channel is a Box<Channel> from create_comp_channel;
    // `refcnt` is only written under the registry's lock, which is held.
    if unsafe { (*ch).refcnt } != 0 {
        return libc::EBUSY;
    }
    live.objects.remove(&(ch as usize));
    // SAFETY: live until the line above: create_comp_channel's Box. The fd
    // closes with the last Arc (a thread blocked in ibv_get_cq_event holds
    // one).
    drop(unsafe { Box::from_raw(ch.cast::<Channel>()) });
    0
}

/// `ibv_get_cq_event`: the oldest event of the channel. Waits as a read of
/// the kernel's channel fd does: for ever on a blocking fd, -1 with `EAGAIN`
/// once the application set `O_NONBLOCK`, -1 with `EINTR` on a signal.
pub(crate) unsafe extern "C" fn get_cq_event(
    ch: *mut ibv_comp_channel,
    cq_out: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    let shared = {
        let live = live();
        if !live.is(ch as usize, Kind::Channel) || cq_out.is_null() || cq_context.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: a live channel (registry locked) is a Box<Channel>.
        unsafe { (*ch.cast::<Channel>()).shared.clone() }
    };
    let fd = shared.fd.as_raw_fd();
    loop {
        if let Some((addr, _)) = shared.take() {
            let cq = addr as *mut ibv_cq;
            // SAFETY: the event was delivered (counted above) and not yet
            // acknowledged, so ibv_destroy_cq cannot have freed the CQ: it
            // waits for that acknowledgement. The out pointers are the
            // caller's (verbs.h contract).
            unsafe {
                *cq_out = cq;
                *cq_context = (*cq).cq_context;
            }
            return 0;
        }
        // SAFETY: fcntl and poll on an fd `shared` keeps open; `pfd` is ours.
        unsafe {
            if libc::fcntl(fd, libc::F_GETFL) & libc::O_NONBLOCK != 0 {
                set_errno(libc::EAGAIN);
                return -1;
            }
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut pfd, 1, -1) < 0 {
                return -1; // errno is poll's (EINTR)
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Completion queues.

/// A CQ's state shared with its notify function and its channel's events.
pub(crate) struct CqShared {
    channel: Option<Arc<ChannelShared>>,
    /// Set (under the channel's event lock) when `ibv_destroy_cq` starts:
    /// no event is queued for it after that.
    dead: AtomicBool,
    /// Events `ibv_get_cq_event` returned for it (the kernel's
    /// `comp_events_reported`): destroy waits until the application has
    /// acknowledged as many (`comp_events_completed`).
    delivered: AtomicU32,
    /// Cleared (under the context's event queue lock) when `ibv_destroy_cq`
    /// starts: no `IBV_EVENT_CQ_ERR` is raised for it after that.
    events_alive: Arc<AtomicBool>,
    /// Asynchronous events `ibv_get_async_event` returned for it: destroy
    /// waits until as many were acknowledged (`async_events_completed`).
    async_reported: AtomicU32,
}

/// What `ibv_create_cq` allocates: the public `struct ibv_cq` first.
#[repr(C)]
struct Cq {
    ibv: ibv_cq,
    cq: rddp::CompletionQueue,
    shared: Arc<CqShared>,
    /// Queue pairs completing here (once per queue they use it for):
    /// `ibv_destroy_cq` is `EBUSY` while any does.
    users: AtomicU32,
    /// Receives posted under a token wr_id (several SGEs, or a wr_id
    /// rddp keeps for itself): what `poll_cq` gives back ([`qp::Tokens`]).
    tokens: qp::Tokens,
}

/// `ibv_create_cq`: `cqe` in 1..=[`MAX_CQE`], rounded up to a power of two
/// (reported in `cq->cqe`); `comp_vector` 0 (there is one); `channel` NULL
/// or one of this context's.
pub(crate) unsafe extern "C" fn create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    static HANDLES: AtomicU32 = AtomicU32::new(1);
    let mut live = live();
    let c = ctx as usize;
    let bad_channel = !channel.is_null() && !live.is_of(channel as usize, Kind::Channel, c);
    let size = cq_size(cqe);
    if !live.contexts.contains(&c) || bad_channel || comp_vector != 0 || size.is_none() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let size = size.unwrap_or(1);
    let chan = (!channel.is_null()).then(|| {
        // SAFETY: a live channel (registry locked) is a Box<Channel>.
        unsafe { (*channel.cast::<Channel>()).shared.clone() }
    });
    let shared = Arc::new(CqShared {
        channel: chan,
        dead: AtomicBool::new(false),
        delivered: AtomicU32::new(0),
        events_alive: Arc::new(AtomicBool::new(true)),
        async_reported: AtomicU32::new(0),
    });
    // Room beyond `cqe` for every queue pair that may attach (see
    // backing_capacity).
    let rcq = rddp::CompletionQueue::new(backing_capacity());
    let p = Box::into_raw(Box::new(Cq {
        ibv: ibv_cq {
            context: ctx,
            channel,
            cq_context,
            handle: HANDLES.fetch_add(1, Ordering::Relaxed),
            cqe: size,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            cond: libc::PTHREAD_COND_INITIALIZER,
            comp_events_completed: 0,
            async_events_completed: 0,
        },
        cq: rcq.clone(),
        shared: shared.clone(),
        users: AtomicU32::new(0),
        tokens: qp::Tokens::default(),
    }));
    if !channel.is_null() {
        let weak = Arc::downgrade(&shared);
        let addr = p as usize;
        rcq.set_notify(move || {
            if let Some(s) = weak.upgrade()
                && let Some(ch) = &s.channel
            {
                ch.raise(addr, &s);
            }
        });
        // SAFETY: the channel is live and `refcnt` is written only under the
        // registry's lock, held here.
        unsafe { (*channel).refcnt += 1 };
    }
    // More completions waiting than the application's cqe is an overrun,
    // reported as the kernel does (IBV_EVENT_CQ_ERR on the context's
    // async_fd); unlike the kernel's CQ this one keeps them all (see
    // backing_capacity).
    // SAFETY: a live context (checked above, registry locked) is
    // open_device's Box<Context>.
    let events = Arc::downgrade(unsafe { &(*ctx.cast::<crate::exports::Context>()).events });
    let alive = shared.events_alive.clone();
    let at = p as usize;
    rcq.set_overrun(size as usize, move || {
        if let Some(ev) = events.upgrade() {
            ev.raise(at, abi::IBV_EVENT_CQ_ERR, &alive);
        }
    });
    live.objects.insert(p as usize, (Kind::Cq, c));
    p.cast()
}

/// `ibv_get_async_event` returned an event of `cq` (if it is registered).
pub(crate) fn cq_event_reported(live: &Live, cq: *mut ibv_cq) {
    if live.is(cq as usize, Kind::Cq) || live.is(cq as usize, Kind::CqDestroying) {
        // SAFETY: a registered CQ (registry locked) is a Box<Cq>.
        unsafe { &(*cq.cast::<Cq>()).shared }
            .async_reported
            .fetch_add(1, Ordering::AcqRel);
    }
}

/// `ibv_ack_async_event` for an event of `cq`: counted in
/// `async_events_completed` under its mutex, waking `ibv_destroy_cq`.
pub(crate) fn cq_event_acked(live: &Live, cq: *mut ibv_cq) {
    if !(live.is(cq as usize, Kind::Cq) || live.is(cq as usize, Kind::CqDestroying)) {
        return;
    }
    // SAFETY: a registered CQ (registry locked); its mutex and cond were
    // initialised by create_cq.
    unsafe {
        let m = &raw mut (*cq).mutex;
        libc::pthread_mutex_lock(m);
        (*cq).async_events_completed = (*cq).async_events_completed.wrapping_add(1);
        libc::pthread_cond_signal(&raw mut (*cq).cond);
        libc::pthread_mutex_unlock(m);
    }
}

/// Frees a CQ that is out of the registry (`destroy_cq`, `free_context`).
///
/// # Safety
/// `cq` is a Box<Cq> from create_cq, no longer reachable by other threads.
unsafe fn free_cq(cq: *mut ibv_cq) {
    // SAFETY: per the contract; the pthread objects are not in use.
    unsafe {
        libc::pthread_cond_destroy(&raw mut (*cq).cond);
        libc::pthread_mutex_destroy(&raw mut (*cq).mutex);
        drop(Box::from_raw(cq.cast::<Cq>()));
    }
}

/// `ibv_destroy_cq`: drops the CQ's unread events, then waits until every
/// event `ibv_get_cq_event` returned for it has been acknowledged, as
/// rdma-core's `ibv_cmd_destroy_cq` does (it blocks; it does not fail).
pub(crate) unsafe extern "C" fn destroy_cq(cq: *mut ibv_cq) -> c_int {
    let shared = {
        let mut live = live();
        let Some(entry) = live.objects.get_mut(&(cq as usize)) else {
            return libc::EINVAL;
        };
        if entry.0 != Kind::Cq {
            return libc::EINVAL;
        }
        // SAFETY: a live CQ (registry locked) is a Box<Cq>; `users` is atomic.
        if unsafe { (*cq.cast::<Cq>()).users.load(Ordering::Acquire) } != 0 {
            return libc::EBUSY;
        }
        entry.0 = Kind::CqDestroying;
        // SAFETY: a live CQ (registry locked) is a Box<Cq>, of a live
        // context (open_device's Box<Context>).
        unsafe {
            let shared = (*cq.cast::<Cq>()).shared.clone();
            let ctx = (*cq).context.cast::<crate::exports::Context>();
            (*ctx).events.forget(cq as usize, &shared.events_alive);
            shared
        }
    };
    match &shared.channel {
        Some(ch) => ch.forget(&shared),
        None => shared.dead.store(true, Ordering::Relaxed),
    }
    // SAFETY: the CQ stays allocated while CqDestroying (only this call
    // frees it); its mutex and cond were initialised by create_cq.
    unsafe {
        let m = &raw mut (*cq).mutex;
        libc::pthread_mutex_lock(m);
        while (&raw const (*cq).comp_events_completed).read_volatile()
            != shared.delivered.load(Ordering::Acquire)
            || (&raw const (*cq).async_events_completed).read_volatile()
                != shared.async_reported.load(Ordering::Acquire)
        {
            libc::pthread_cond_wait(&raw mut (*cq).cond, m);
        }
        libc::pthread_mutex_unlock(m);
    }
    let mut live = live();
    live.objects.remove(&(cq as usize));
    // SAFETY: out of the registry, so no other verb reaches it. Its channel
    // is live: destroy_comp_channel refuses while `refcnt` counts this CQ,
    // and `refcnt` is written under the registry's lock, held here.
    unsafe {
        let ch = (*cq).channel;
        if !ch.is_null() && live.is(ch as usize, Kind::Channel) {
            (*ch).refcnt -= 1;
        }
        free_cq(cq);
    }
    0
}

/// `ibv_resize_cq`: `cqe` rounded up as at creation and written to
/// `cq->cqe`; the overrun event (`IBV_EVENT_CQ_ERR`) then counts from the
/// new size. Nothing moves: the rddp CQ under it already holds whatever
/// its queue pairs can complete ([`backing_capacity`]). `EINVAL` for a CQ
/// that is not live, `cqe` outside 1..=[`MAX_CQE`], or fewer entries than
/// completions wait on it now (as the kernel's drivers refuse it).
pub(crate) unsafe extern "C" fn resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    let live = live();
    let Some(size) = cq_size(cqe).filter(|_| live.is(cq as usize, Kind::Cq)) else {
        return libc::EINVAL;
    };
    // SAFETY: a live CQ (registry locked) is create_cq's Box<Cq>; `cqe` is
    // written only here and at creation, under the registry's lock.
    unsafe {
        let c = &*cq.cast::<Cq>();
        if (size as usize) < c.cq.len() {
            return libc::EINVAL;
        }
        c.cq.set_overrun_depth(size as usize);
        (*cq).cqe = size;
    }
    0
}

/// `ibv_ack_cq_events`: as rdma-core, adds to `comp_events_completed` under
/// the CQ's mutex and wakes a waiting `ibv_destroy_cq`.
pub(crate) unsafe extern "C" fn ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    let live = live();
    if !(live.is(cq as usize, Kind::Cq) || live.is(cq as usize, Kind::CqDestroying)) {
        return;
    }
    // SAFETY: the CQ is registered (lock held, so not freed meanwhile); its
    // mutex and cond were initialised by create_cq.
    unsafe {
        let m = &raw mut (*cq).mutex;
        libc::pthread_mutex_lock(m);
        (*cq).comp_events_completed = (*cq).comp_events_completed.wrapping_add(nevents);
        libc::pthread_cond_signal(&raw mut (*cq).cond);
        libc::pthread_mutex_unlock(m);
    }
}

/// `ops.req_notify_cq`: arms the CQ for the next completion, or with
/// `solicited_only` for the next solicited or unsuccessful one; the channel
/// then gets one event. 0, or `EINVAL` for a CQ that is not live.
pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut c_void, solicited_only: c_int) -> c_int {
    let live = live();
    if !live.is(cq as usize, Kind::Cq) {
        return libc::EINVAL;
    }
    // SAFETY: a live CQ (registry locked) is a Box<Cq>; `cq` is a field C
    // never writes.
    let rcq = unsafe { &(*cq.cast::<Cq>()).cq };
    // The application is about to wait for an event, not poll: the sockets a
    // busy poll read go back to the I/O threads now, not after their lease.
    rcq.end_busy();
    if solicited_only != 0 {
        rcq.arm_solicited();
    } else {
        rcq.arm();
    }
    0
}

/// `ibv_wc_status` of an rddp status.
pub fn wc_status(s: &WcStatus) -> c_int {
    match s {
        WcStatus::Success => abi::IBV_WC_SUCCESS,
        WcStatus::LocalLength => abi::IBV_WC_LOC_LEN_ERR,
        WcStatus::LocalProtection => abi::IBV_WC_LOC_PROT_ERR,
        WcStatus::RemoteAccess => abi::IBV_WC_REM_ACCESS_ERR,
        WcStatus::RemoteOperation => abi::IBV_WC_REM_OP_ERR,
        WcStatus::LocalQpOperation => abi::IBV_WC_LOC_QP_OP_ERR,
        WcStatus::Flushed => abi::IBV_WC_WR_FLUSH_ERR,
        WcStatus::Fatal => abi::IBV_WC_FATAL_ERR,
    }
}

/// The `struct ibv_wc` of an rddp completion. A receive posted under a
/// token is finished by `qp::Tokens::finish` (its wr_id, its scatter).
pub fn to_ibv_wc(wc: &WorkCompletion) -> ibv_wc {
    ibv_wc {
        wr_id: wc.wr_id,
        status: wc_status(&wc.status),
        opcode: match wc.opcode {
            WcOpcode::Send => abi::IBV_WC_SEND,
            WcOpcode::RdmaWrite => abi::IBV_WC_RDMA_WRITE,
            WcOpcode::RdmaRead => abi::IBV_WC_RDMA_READ,
            WcOpcode::Recv => abi::IBV_WC_RECV,
        },
        byte_len: wc.byte_len,
        imm_data: wc.invalidated_stag.unwrap_or(0),
        qp_num: wc.qp_num,
        wc_flags: if wc.invalidated_stag.is_some() {
            abi::IBV_WC_WITH_INV
        } else {
            0
        },
        ..ibv_wc::default()
    }
}

/// Writes completions into the caller's `struct ibv_wc` array.
struct WcSink {
    at: *mut ibv_wc,
    /// The receives completed under a token, with their index in `at`:
    /// finished after the poll, outside rddp's queue lock.
    tokens: Vec<(usize, WorkCompletion)>,
    n: usize,
    cap: usize,
}

impl Extend<WorkCompletion> for WcSink {
    fn extend<I: IntoIterator<Item = WorkCompletion>>(&mut self, iter: I) {
        for wc in iter {
            if self.n == self.cap {
                break; // never: rddp takes at most `cap`
            }
            // SAFETY: `at` holds `cap` entries (ibv_poll_cq's contract) and
            // `n < cap`.
            unsafe { self.at.add(self.n).write(to_ibv_wc(&wc)) };
            if qp::is_token(&wc) {
                self.tokens.push((self.n, wc));
            }
            self.n += 1;
        }
    }
}

/// `ops.poll_cq`: up to `n` completions into `wc`, oldest first; how many.
/// Receives posted under a token get their wr_id back (and their scatter)
/// after rddp's queue lock is released.
pub(crate) unsafe extern "C" fn poll_cq(cq: *mut c_void, n: c_int, wc: *mut c_void) -> c_int {
    let Ok(cap) = usize::try_from(n) else {
        return -libc::EINVAL;
    };
    if cap == 0 || wc.is_null() {
        return 0;
    }
    // SAFETY: the CQ pointer the application passed to verbs.h's inline
    // ibv_poll_cq, which already read `cq->context->ops` through it: a CQ
    // from create_cq (see the module's doc). `cq` and `tokens` are fields C
    // never writes.
    let (rcq, tokens) = unsafe {
        let this = cq.cast::<Cq>();
        (&(*this).cq, &(*this).tokens)
    };
    let mut sink = WcSink {
        at: wc.cast(),
        tokens: Vec::new(),
        n: 0,
        cap,
    };
    // An RNIC makes progress on its own; here an I/O thread does, and an
    // application that polls in a loop (perftest does) would keep the CPU
    // from the very thread that makes the completion it waits for. So the
    // polling thread reads its queue pairs' sockets itself (rddp's busy
    // polling: at most a few MPA queue pairs a CQ; `req_notify_cq` gives
    // them back before the application sleeps), and an empty poll gives way
    // to other threads: one system call, returning at once when nothing
    // else is ready to run.
    if rcq.poll_busy_into(cap, &mut sink) == 0 {
        std::thread::yield_now();
    }
    for (i, done) in sink.tokens {
        // SAFETY: entry `i < n` of the caller's array, written above.
        let out = unsafe { &mut *sink.at.add(i) };
        tokens.finish(done, out);
    }
    c_int::try_from(sink.n).unwrap_or(c_int::MAX)
}

/// `ibv_close_device`: what the kernel does when a context's fd closes,
/// destroying the objects the application left: CQs (unread events and
/// unacknowledged ones alike) and MRs, then channels, then PDs. A CQ in
/// `ibv_destroy_cq` on another thread is left to that call.
pub(crate) fn free_context_objects(live: &mut Live, ctx: usize) {
    let mut mine: Vec<(usize, Kind)> = live
        .objects
        .iter()
        .filter(|(_, (k, c))| *c == ctx && *k != Kind::CqDestroying)
        .map(|(&p, &(k, _))| (p, k))
        .collect();
    mine.sort_by_key(|&(_, k)| match k {
        Kind::Qp => 0,
        Kind::Srq => 1,
        Kind::Cq | Kind::CqDestroying | Kind::Mr => 2,
        Kind::Channel => 3,
        Kind::Pd => 4,
    });
    for (p, kind) in mine {
        live.objects.remove(&p);
        // SAFETY: each was registered, so it is the Box its constructor made,
        // and it is out of the registry now: no verb reaches it again.
        unsafe {
            match kind {
                Kind::Cq => {
                    let cq = p as *mut ibv_cq;
                    let shared = (*cq.cast::<Cq>()).shared.clone();
                    if let Some(ch) = &shared.channel {
                        ch.forget(&shared);
                    }
                    free_cq(cq);
                }
                Kind::Mr => {
                    let m = &*(p as *mut abi::ibv_mr);
                    live.lkeys.remove(&(m.pd as usize, m.lkey));
                    mr::free_mr(p);
                }
                Kind::Qp => qp::free_qp(p as *mut abi::ibv_qp),
                Kind::Srq => srq::free_srq(p as *mut abi::ibv_srq),
                Kind::Channel => drop(Box::from_raw(p as *mut Channel)),
                Kind::Pd => drop(Box::from_raw(p as *mut Pd)),
                Kind::CqDestroying => {}
            }
        }
    }
}

export! {
    // IBVERBS_1.0
    ibv_create_comp_channel => create_comp_channel;
    ibv_destroy_comp_channel => destroy_comp_channel;
    // IBVERBS_1.1
    ibv_ack_cq_events => ack_cq_events;
    ibv_alloc_pd => alloc_pd;
    ibv_create_cq => create_cq;
    ibv_dealloc_pd => dealloc_pd;
    ibv_destroy_cq => destroy_cq;
    ibv_get_cq_event => get_cq_event;
    ibv_resize_cq => resize_cq;
}

pub mod mr;
pub mod qp;
pub mod srq;
#[cfg(test)]
mod tests;
