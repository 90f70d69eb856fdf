//! Shared receive queues (docs/verbs-abi.md): `ibv_create_srq`,
//! `ibv_post_srq_recv` (through the context's ops), `ibv_modify_srq`,
//! `ibv_query_srq` and `ibv_destroy_srq`, over rddp's
//! [`rddp::SharedReceiveQueue`]. A queue pair created with an SRQ
//! (`ibv_qp_init_attr::srq`, same PD) takes its Sends' receives from it, in
//! the order they were posted, and completes them on its own receive CQ.
//!
//! What differs from a QP's own receive queue: one SGE a receive (placed
//! straight into its region), a wr_id below 2^62 (rddp keeps the ids above
//! for itself, and an SRQ's receive may complete on any of its QPs' CQs, so
//! no per-CQ token can stand in for it), and a fixed size (a new `max_wr`
//! is refused). The limit (`srq_limit`) works as in the kernel's drivers:
//! armed by `ibv_modify_srq`, raised once as `IBV_EVENT_SRQ_LIMIT_REACHED`
//! on the context's `async_fd` by the message that leaves fewer receives
//! posted, then disarmed.

use super::qp::{MAX_QP_WR, TOKEN_BASE, refuse, refuse_chain, walk};
use super::{Kind, Pd, live, mr};
use crate::abi::{
    self, IBV_SRQ_LIMIT, IBV_SRQ_MAX_WR, ibv_pd, ibv_recv_wr, ibv_srq, ibv_srq_attr,
    ibv_srq_init_attr,
};
use rddp::{Access, BufferOrdering, Error, SharedReceiveQueue, SrqMode};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Most receives an SRQ holds (`max_srq_wr`): a queue pair on it reserves
/// this many completions on its receive CQ, as one of its own receive
/// queue's (`resources::backing_capacity` counts two queues a QP).
pub const MAX_SRQ_WR: u32 = MAX_QP_WR;
/// SGEs of an SRQ receive (`max_srq_sge`).
pub const MAX_SRQ_SGE: u32 = 1;

/// What `ibv_create_srq` allocates: the public `struct ibv_srq` first (in an
/// `UnsafeCell`: the application may write `srq_context`).
#[repr(C)]
pub(crate) struct Srq {
    ibv: UnsafeCell<ibv_srq>,
    /// The pool its queue pairs draw on.
    pub(crate) shared: Arc<SharedReceiveQueue>,
    max_wr: u32,
    /// Queue pairs using it: `ibv_destroy_srq` is `EBUSY` while any does.
    pub(crate) users: AtomicU32,
    /// Cleared (under the context's event queue lock) when `ibv_destroy_srq`
    /// starts: no limit event is raised for it after that.
    events_alive: Arc<AtomicBool>,
    /// Limit events `ibv_get_async_event` returned for it: destroy waits
    /// until `ibv.events_completed` (what `ibv_ack_async_event` counted)
    /// reaches it, as rdma-core's `ibv_destroy_srq` does.
    events_reported: AtomicU32,
}

impl Srq {
    /// Its PD (set at creation; C does not change it).
    pub(crate) fn pd_ptr(&self) -> *mut ibv_pd {
        // SAFETY: a field of our struct, read through the cell's pointer.
        unsafe { (*self.ibv.get()).pd }
    }
}

/// `ibv_create_srq`: an SRQ of `pd` for `attr.max_wr` receives (1 to
/// [`MAX_SRQ_WR`]) of at most [`MAX_SRQ_SGE`] SGE; what it takes is written
/// back. `srq_limit` is not armed at creation (as verbs has it).
pub(crate) unsafe extern "C" fn create_srq(
    pd: *mut ibv_pd,
    init: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    let mut live = live();
    let Some(ctx) = live.context_of(pd as usize, Kind::Pd) else {
        return refuse(libc::EINVAL);
    };
    if init.is_null() {
        return refuse(libc::EINVAL);
    }
    // SAFETY: a non-NULL init_attr is the caller's struct (verbs.h contract).
    let init = unsafe { &mut *init };
    let a = init.attr;
    if !(1..=MAX_SRQ_WR).contains(&a.max_wr) || a.max_sge > MAX_SRQ_SGE {
        return refuse(libc::EINVAL);
    }
    // SAFETY: a live PD (registry locked) is alloc_pd's Box<Pd>.
    let owner = unsafe { &*pd.cast::<Pd>() };
    // Verbs takes receives in posting order for whichever message comes
    // first; no soft limit of rddp's (it would raise events verbs has no
    // name for).
    let max = a.max_wr as usize;
    let shared = SharedReceiveQueue::new(
        &owner._pd,
        SrqMode::Shared { soft_limit: max },
        BufferOrdering::Arrival,
        max,
    );
    let events_alive = Arc::new(AtomicBool::new(true));
    let srq = Box::new(Srq {
        ibv: UnsafeCell::new(ibv_srq {
            context: ctx as *mut abi::ibv_context,
            srq_context: init.srq_context,
            pd,
            handle: 0,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            cond: libc::PTHREAD_COND_INITIALIZER,
            events_completed: 0,
        }),
        shared: Arc::new(shared),
        max_wr: a.max_wr,
        users: AtomicU32::new(0),
        events_alive: events_alive.clone(),
        events_reported: AtomicU32::new(0),
    });
    init.attr = ibv_srq_attr {
        max_wr: a.max_wr,
        max_sge: MAX_SRQ_SGE,
        srq_limit: 0,
    };
    owner.users.fetch_add(1, Ordering::AcqRel);
    let shared = srq.shared.clone();
    let p = Box::into_raw(srq);
    // The limit's event goes to the context's async_fd. The hook runs under
    // the pool's lock and takes only the event queue's (never the reverse).
    // SAFETY: a live context (`context_of` above, registry locked) is
    // open_device's Box<Context>.
    let events = Arc::downgrade(unsafe { &(*(ctx as *const crate::exports::Context)).events });
    let at = p as usize;
    shared.set_low_water_hook(move || {
        if let Some(ev) = events.upgrade() {
            ev.raise(at, abi::IBV_EVENT_SRQ_LIMIT_REACHED, &events_alive);
        }
    });
    live.objects.insert(p as usize, (Kind::Srq, ctx));
    p.cast()
}

/// `ibv_destroy_srq`: `EBUSY` while a queue pair uses it; the receives
/// still posted go with it. A limit event not yet taken is dropped; one
/// taken is waited for until acknowledged, as rdma-core's destroy does.
pub(crate) unsafe extern "C" fn destroy_srq(srq: *mut ibv_srq) -> c_int {
    {
        let live = live();
        if !live.is(srq as usize, Kind::Srq) {
            return libc::EINVAL;
        }
        // SAFETY: a live SRQ (registry locked) is create_srq's Box<Srq>, of
        // a live context (open_device's Box<Context>).
        unsafe {
            let s = &*srq.cast::<Srq>();
            if s.users.load(Ordering::Acquire) > 0 {
                return libc::EBUSY;
            }
            let ctx = (*s.ibv.get()).context.cast::<crate::exports::Context>();
            (*ctx).events.forget(srq as usize, &s.events_alive);
        }
    }
    // The SRQ stays registered while this waits, so ibv_ack_async_event
    // reaches it.
    // SAFETY: only this call frees the SRQ; its mutex and cond were
    // initialised by create_srq.
    unsafe {
        let s = &*srq.cast::<Srq>();
        let ibv = s.ibv.get();
        let m = &raw mut (*ibv).mutex;
        libc::pthread_mutex_lock(m);
        while (&raw const (*ibv).events_completed).read_volatile()
            != s.events_reported.load(Ordering::Acquire)
        {
            libc::pthread_cond_wait(&raw mut (*ibv).cond, m);
        }
        libc::pthread_mutex_unlock(m);
    }
    let mut live = live();
    if !live.is(srq as usize, Kind::Srq) {
        return libc::EINVAL;
    }
    // SAFETY: as above; a queue pair made on it meanwhile keeps it.
    if unsafe { &*srq.cast::<Srq>() }.users.load(Ordering::Acquire) > 0 {
        return libc::EBUSY;
    }
    live.objects.remove(&(srq as usize));
    // SAFETY: out of the registry now, so no other verb reaches it; its
    // PD is live (it refuses to go while `users` counts this SRQ).
    unsafe { free_srq(srq) };
    0
}

/// Frees an SRQ already out of the registry, then its hold on its PD.
///
/// # Safety
/// `srq` is create_srq's Box<Srq>, unreachable by other verbs, whose PD is
/// live.
pub(crate) unsafe fn free_srq(srq: *mut ibv_srq) {
    // SAFETY: per the contract.
    let mut boxed = unsafe { Box::from_raw(srq.cast::<Srq>()) };
    let ibv = boxed.ibv.get_mut();
    let pd = ibv.pd;
    // SAFETY: the pthread objects were initialised by create_srq, not in use.
    unsafe {
        libc::pthread_cond_destroy(&raw mut ibv.cond);
        libc::pthread_mutex_destroy(&raw mut ibv.mutex);
    }
    drop(boxed);
    // SAFETY: live per the contract; `users` is atomic.
    unsafe { (*pd.cast::<Pd>()).users.fetch_sub(1, Ordering::AcqRel) };
}

/// `ibv_modify_srq`: `IBV_SRQ_LIMIT` arms the limit (0 disarms; above
/// `max_wr`, `EINVAL`); a new `max_wr` is refused (`EOPNOTSUPP`: the pool's
/// size is fixed).
pub(crate) unsafe extern "C" fn modify_srq(
    srq: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    let live = live();
    if !live.is(srq as usize, Kind::Srq) || attr.is_null() {
        return libc::EINVAL;
    }
    if mask & !(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) != 0 {
        return libc::EINVAL;
    }
    // SAFETY: a non-NULL attr is the caller's struct.
    let a = unsafe { *attr };
    if mask & IBV_SRQ_MAX_WR != 0 {
        return libc::EOPNOTSUPP;
    }
    if mask & IBV_SRQ_LIMIT != 0 {
        // SAFETY: a live SRQ (registry locked) is create_srq's Box<Srq>.
        let s = unsafe { &*srq.cast::<Srq>() };
        if s.shared.arm_limit(a.srq_limit as usize).is_err() {
            return libc::EINVAL;
        }
    }
    0
}

/// `ibv_get_async_event` returned a limit event of `srq` (if it is live).
pub(crate) fn event_reported(live: &super::Live, srq: *mut ibv_srq) {
    if live.is(srq as usize, Kind::Srq) {
        // SAFETY: a live SRQ (registry locked) is create_srq's Box<Srq>.
        unsafe { &*srq.cast::<Srq>() }
            .events_reported
            .fetch_add(1, Ordering::AcqRel);
    }
}

/// `ibv_ack_async_event` for an event of `srq`: counted in
/// `events_completed` under the SRQ's mutex, waking `ibv_destroy_srq`.
pub(crate) fn event_acked(live: &super::Live, srq: *mut ibv_srq) {
    if !live.is(srq as usize, Kind::Srq) {
        return;
    }
    // SAFETY: a live SRQ (registry locked); its mutex and cond were
    // initialised by create_srq.
    unsafe {
        let ibv = (*srq.cast::<Srq>()).ibv.get();
        let m = &raw mut (*ibv).mutex;
        libc::pthread_mutex_lock(m);
        (*ibv).events_completed = (*ibv).events_completed.wrapping_add(1);
        libc::pthread_cond_signal(&raw mut (*ibv).cond);
        libc::pthread_mutex_unlock(m);
    }
}

/// `ibv_query_srq`: its size, one SGE, the armed limit (0 once raised).
pub(crate) unsafe extern "C" fn query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    let live = live();
    if !live.is(srq as usize, Kind::Srq) || attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a live SRQ (registry locked); a non-NULL attr is the caller's.
    unsafe {
        let s = &*srq.cast::<Srq>();
        *attr = ibv_srq_attr {
            max_wr: s.max_wr,
            max_sge: MAX_SRQ_SGE,
            srq_limit: u32::try_from(s.shared.armed_limit()).unwrap_or(u32::MAX),
        };
    }
    0
}

/// `ops.post_srq_recv`: each receive of the chain in turn. `EINVAL` (and
/// `bad_wr` the receive) for more than one SGE, a wr_id of 2^62 or more,
/// an SGE that is not within a writable MR of the SRQ's PD; `ENOMEM` when
/// `max_wr` receives are posted and not yet completed and polled.
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut c_void,
    wr: *mut c_void,
    bad: *mut *mut c_void,
) -> c_int {
    let live = live();
    if !live.is(srq as usize, Kind::Srq) {
        // SAFETY: `bad` is NULL or the caller's slot (verbs.h contract).
        return unsafe { refuse_chain(wr, bad) };
    }
    // SAFETY: a live SRQ (registry locked) is create_srq's Box<Srq>.
    let s = unsafe { &*srq.cast::<Srq>() };
    // SAFETY: the chain is the caller's (verbs.h contract), unchanged during
    // the call; so is each receive's SGE list, which post_one reads.
    unsafe { walk(wr.cast::<ibv_recv_wr>(), bad, |w| post_one(&live, s, w)) }
}

/// # Safety
/// `w`'s SGE list holds `num_sge` entries when non-NULL.
unsafe fn post_one(live: &super::Live, s: &Srq, w: &ibv_recv_wr) -> Result<(), c_int> {
    if w.wr_id >= TOKEN_BASE {
        return Err(libc::EINVAL);
    }
    let posted = match w.num_sge {
        0 => s.shared.post_recv(w.wr_id, 0),
        1 if !w.sg_list.is_null() => {
            // SAFETY: one SGE at a non-NULL list (the caller's promise).
            let sge = unsafe { &*w.sg_list };
            let region = mr::by_lkey(live, s.pd_ptr(), sge.lkey).ok_or(libc::EINVAL)?;
            let offset = sge.addr.checked_sub(region.base_to());
            let ok = region.access().contains(Access::LOCAL_WRITE);
            let Some(offset) = offset.filter(|_| ok) else {
                return Err(libc::EINVAL);
            };
            s.shared
                .post_recv_mr(w.wr_id, region, offset, u64::from(sge.length))
        }
        _ => return Err(libc::EINVAL),
    };
    posted.map_err(|e| match e {
        Error::Quota { .. } | Error::QueueFull(_) | Error::Srq(_) => libc::ENOMEM,
        _ => libc::EINVAL,
    })
}

export! {
    // IBVERBS_1.1
    ibv_create_srq => create_srq;
    ibv_destroy_srq => destroy_srq;
    ibv_modify_srq => modify_srq;
    ibv_query_srq => query_srq;
}
