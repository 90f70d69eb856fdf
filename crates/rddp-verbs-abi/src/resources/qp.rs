//! RC queue pairs (docs/verbs-abi.md, "Queue pairs"): `ibv_create_qp`,
//! `ibv_query_qp`, `ibv_modify_qp`, `ibv_destroy_qp`, and the data path
//! through the context's ops (`post_send`, `post_recv`).
//!
//! A verbs QP lives before it is connected: it is created with an
//! `rddp::PreparedQueuePair`, which takes receives before any connection
//! exists (rping posts its receive before `rdma_connect`/`rdma_accept`).
//! With iWARP the connection is made by the CM: the connection-manager stage
//! hands an established MPA connection to [`attach`] (or lets [`connect_mpa`]
//! and [`accept_mpa`] make it), which runs the queue pair over it and moves
//! the QP to RTS, as the kernel's iw_cm does.
//!
//! Work requests name `(lkey, addr, length)` SGEs, resolved here against the
//! context's memory regions. A failed check completes the work request with
//! `IBV_WC_LOC_PROT_ERR` (pushed on the CQ at posting) rather than refusing
//! the post; refusals (`*bad_wr` set) are for malformed requests, a full
//! queue and the wrong state.

use super::srq::Srq;
use super::{Cq, Kind, Live, Pd, live, lock, mr};
use crate::abi::{
    self, ibv_qp, ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr, ibv_recv_wr, ibv_send_wr, ibv_sge,
};
use crate::device;
use crate::exports::set_errno;
use rddp::{
    Access, Error, MemoryRegion, PreparedQueuePair, QueuePair, QueuePairBuilder, ReadFlags,
    RemoteBuf, SendFlags, WcOpcode, WcStatus, WorkCompletion, WriteFlags,
};
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Most SGEs of a send work request (`cap.max_send_sge`, the device's
/// `max_sge`): one is sent straight from its region, several are gathered
/// (copied) at posting.
pub const MAX_SEND_SGE: u32 = 8;
/// Most SGEs of a receive (`cap.max_recv_sge`): one is placed straight
/// into its region, several receive into a buffer scattered at `poll_cq`.
pub const MAX_RECV_SGE: u32 = MAX_SEND_SGE;
/// Most octets of an `IBV_SEND_INLINE` work request (`cap.max_inline_data`).
pub const MAX_INLINE: u32 = 256;
/// Most work requests per queue (`max_qp_wr`).
pub const MAX_QP_WR: u32 = 4096;
/// IRD and ORD of a queue pair until the CM negotiates its own.
const DEFAULT_RD_ATOM: u8 = 16;

/// What the QP runs on.
enum Link {
    /// Not connected (RESET, INIT): receives are kept for the connection.
    Prepared(PreparedQueuePair),
    /// Attached to a connection (RTS).
    Connected(QueuePair),
    /// Nothing (ERR, or RESET after ERR): posts complete as flushed.
    Gone,
}

struct Inner {
    /// `enum ibv_qp_state`, mirrored in `ibv.state`.
    state: c_int,
    link: Link,
    /// wr_ids of the receives posted before attach, flushed if the QP goes
    /// to ERR first.
    early: Vec<u64>,
    /// What `ibv_modify_qp` set and `ibv_query_qp` reports.
    access_flags: u32,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
}

/// What `ibv_create_qp` allocates: the public `struct ibv_qp` first, in an
/// `UnsafeCell` (same layout): this library writes `state` and `qp_num`
/// while `&Qp` references exist, and the application may write its fields.
#[repr(C)]
pub(crate) struct Qp {
    ibv: UnsafeCell<ibv_qp>,
    inner: Mutex<Inner>,
    pd: rddp::ProtectionDomain,
    send_cq: rddp::CompletionQueue,
    recv_cq: rddp::CompletionQueue,
    /// The receive CQ's tokens.
    recv_tokens: Tokens,
    /// What `ibv_create_qp` reported back.
    cap: ibv_qp_cap,
    sq_sig_all: bool,
    /// Cleared (under the context's event queue lock) when the QP is being
    /// destroyed: its connection's hook raises no event after that.
    events_alive: Arc<AtomicBool>,
    /// Events `ibv_get_async_event` returned for this QP: `ibv_destroy_qp`
    /// waits until `ibv.events_completed` (what `ibv_ack_async_event`
    /// counted) reaches it, as rdma-core's does.
    events_reported: AtomicU32,
    /// What runs once the connection has ended ([`on_llp_closed`]).
    ended: Arc<EndHook>,
    /// The shared receive queue its Sends take their receives from
    /// (`ibv_qp_init_attr::srq`: the `Srq` object's address, and its pool),
    /// instead of a receive queue of its own.
    srq: Option<(usize, Arc<rddp::SharedReceiveQueue>)>,
}

/// What to run once a QP's connection has ended: its first asynchronous
/// event (a Terminate, an abortive or graceful close), or the application
/// moving it to RESET or ERR. It runs on the thread that saw the end, which
/// may hold the queue pair's own locks: it must only hand work on.
#[derive(Default)]
struct EndHook(Mutex<End>);

#[derive(Default)]
enum End {
    #[default]
    Open,
    Waiting(Box<dyn FnOnce() + Send>),
    Ended,
}

impl EndHook {
    /// The connection has ended: runs what waits (once).
    fn fire(&self) {
        let was = std::mem::replace(&mut *lock(&self.0), End::Ended);
        if let End::Waiting(f) = was {
            f();
        }
    }

    /// Runs `f` once the connection has ended (at once if it has).
    fn set(&self, f: Box<dyn FnOnce() + Send>) {
        let mut g = lock(&self.0);
        if matches!(*g, End::Ended) {
            drop(g);
            f();
        } else {
            *g = End::Waiting(f);
        }
    }
}

impl Qp {
    fn prepare(&self) -> Result<PreparedQueuePair, Error> {
        let b = QueuePairBuilder::new(&self.pd, &self.send_cq, &self.recv_cq)
            .max_send_wr(self.cap.max_send_wr)
            .max_recv_wr(self.cap.max_recv_wr)
            .ird(u32::from(DEFAULT_RD_ATOM))
            .ord(u32::from(DEFAULT_RD_ATOM));
        match &self.srq {
            Some((_, srq)) => b.srq(srq).build(),
            None => b.build(),
        }
    }

    fn qp_num(&self) -> u32 {
        // SAFETY: written only under `inner`'s lock (RESET to INIT), which
        // the callers hold, and never by C.
        unsafe { (*self.ibv.get()).qp_num }
    }

    /// The QP's PD (set at creation; C does not change it).
    fn pd_ptr(&self) -> *mut abi::ibv_pd {
        // SAFETY: a field of our struct, read through the cell's pointer.
        unsafe { (*self.ibv.get()).pd }
    }

    fn set_state(&self, inner: &mut Inner, state: c_int) {
        inner.state = state;
        // SAFETY: `ibv.state` is ours to keep current (as rdma-core's
        // ibv_modify_qp does), through the cell's pointer; written under
        // `inner`'s lock only.
        unsafe { (&raw mut (*self.ibv.get()).state).write_volatile(state) };
    }

    /// A receive completed at posting (`status`): under a token if its
    /// wr_id is in the tokens' range, so that `poll_cq` can tell them apart.
    fn recv_local(&self, wr_id: u64, status: WcStatus) {
        let id = if wr_id >= TOKEN_BASE {
            self.recv_tokens.issue(wr_id, 0, Vec::new())
        } else {
            wr_id
        };
        self.recv_cq
            .push_local(self.qp_num(), id, WcOpcode::Recv, status);
    }

    /// Flushed completions for the receives posted before a connection.
    fn flush_early(&self, inner: &mut Inner) {
        let qpn = self.qp_num();
        for wr_id in inner.early.drain(..) {
            self.recv_cq
                .push_local(qpn, wr_id, WcOpcode::Recv, WcStatus::Flushed);
        }
    }
}

/// The errno of a refused rddp call.
fn errno_of(e: &Error) -> c_int {
    match e {
        Error::Quota { .. }
        | Error::SendQueueFull { .. }
        | Error::QueueFull(_)
        | Error::Cq(_)
        | Error::DeviceFull { .. } => libc::ENOMEM,
        _ => libc::EINVAL,
    }
}

pub(crate) fn refuse<T>(e: c_int) -> *mut T {
    set_errno(e);
    ptr::null_mut()
}

// ---------------------------------------------------------------------------
// Create, query, modify, destroy.

/// `ibv_create_qp`: an RC queue pair of `pd` in RESET, taking its receives
/// from `srq` when one is given (an SRQ of the same PD; its own receive
/// queue then has no receives: `max_recv_wr` and `max_recv_sge` are
/// written back 0). Other types are refused (`EOPNOTSUPP` for those verbs
/// knows, `EINVAL` otherwise), as are an SRQ of another PD or context, CQs
/// not of the PD's context and caps beyond the device's (`EINVAL`). The caps
/// written back are what the QP takes.
pub(crate) unsafe extern "C" fn create_qp(
    pd: *mut abi::ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    let mut live = live();
    let Some(ctx) = live.context_of(pd as usize, Kind::Pd) else {
        return refuse(libc::EINVAL);
    };
    if init.is_null() {
        return refuse(libc::EINVAL);
    }
    // SAFETY: a non-NULL init_attr is the caller's struct (verbs.h contract).
    let a = unsafe { &mut *init };
    match a.qp_type {
        abi::IBV_QPT_RC => {}
        abi::IBV_QPT_UC
        | abi::IBV_QPT_UD
        | abi::IBV_QPT_RAW_PACKET
        | abi::IBV_QPT_XRC_SEND
        | abi::IBV_QPT_XRC_RECV
        | abi::IBV_QPT_DRIVER => return refuse(libc::EOPNOTSUPP),
        _ => return refuse(libc::EINVAL),
    }
    let cqs_ok = live.is_of(a.send_cq as usize, Kind::Cq, ctx)
        && live.is_of(a.recv_cq as usize, Kind::Cq, ctx);
    let c = a.cap;
    let caps_ok = c.max_send_wr <= MAX_QP_WR
        && c.max_recv_wr <= MAX_QP_WR
        && c.max_send_sge <= MAX_SEND_SGE
        && c.max_recv_sge <= MAX_RECV_SGE
        && c.max_inline_data <= MAX_INLINE;
    // SAFETY: a live SRQ (registry locked) is create_srq's Box<Srq>.
    let srq = (!a.srq.is_null() && live.is_of(a.srq as usize, Kind::Srq, ctx))
        .then(|| unsafe { &*a.srq.cast::<Srq>() })
        .filter(|s| s.pd_ptr() == pd);
    if (!a.srq.is_null() && srq.is_none()) || !cqs_ok || !caps_ok {
        return refuse(libc::EINVAL);
    }
    // SAFETY: the PD and both CQs are live (registry locked): alloc_pd's
    // Box<Pd> and create_cq's Box<Cq>. Only fields C never writes are
    // borrowed (a CQ's public part is written by ibv_ack_cq_events).
    let (owner, (scq, scq_users), (rcq, rcq_users, tokens)) = unsafe {
        let (s, r) = (a.send_cq.cast::<Cq>(), a.recv_cq.cast::<Cq>());
        (
            &*pd.cast::<Pd>(),
            (&(*s).cq, &(*s).users),
            (&(*r).cq, &(*r).users, &(*r).tokens),
        )
    };
    let cap = ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: if srq.is_some() { 0 } else { c.max_recv_wr },
        max_send_sge: MAX_SEND_SGE,
        max_recv_sge: if srq.is_some() { 0 } else { MAX_RECV_SGE },
        max_inline_data: MAX_INLINE,
    };
    let mut qp = Box::new(Qp {
        ibv: UnsafeCell::new(ibv_qp {
            context: ctx as *mut abi::ibv_context,
            qp_context: a.qp_context,
            pd,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            handle: 0,
            qp_num: 0,
            state: abi::IBV_QPS_RESET,
            qp_type: abi::IBV_QPT_RC,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            cond: libc::PTHREAD_COND_INITIALIZER,
            events_completed: 0,
        }),
        inner: Mutex::new(Inner {
            state: abi::IBV_QPS_RESET,
            link: Link::Gone,
            early: Vec::new(),
            access_flags: 0,
            max_rd_atomic: DEFAULT_RD_ATOM,
            max_dest_rd_atomic: DEFAULT_RD_ATOM,
        }),
        pd: owner._pd.clone(),
        send_cq: scq.clone(),
        recv_cq: rcq.clone(),
        recv_tokens: tokens.clone(),
        cap,
        sq_sig_all: a.sq_sig_all != 0,
        events_alive: Arc::new(AtomicBool::new(true)),
        events_reported: AtomicU32::new(0),
        ended: Arc::default(),
        srq: srq.map(|s| (s as *const Srq as usize, s.shared.clone())),
    });
    let prepared = match qp.prepare() {
        Ok(p) => p,
        Err(e) => return refuse(errno_of(&e)),
    };
    qp.ibv.get_mut().qp_num = prepared.qp_num();
    qp.ibv.get_mut().handle = prepared.qp_num();
    qp.inner.get_mut().unwrap_or_else(|p| p.into_inner()).link = Link::Prepared(prepared);
    a.cap = cap;
    owner.users.fetch_add(1, Ordering::AcqRel);
    scq_users.fetch_add(1, Ordering::AcqRel);
    rcq_users.fetch_add(1, Ordering::AcqRel);
    if let Some(s) = srq {
        s.users.fetch_add(1, Ordering::AcqRel);
    }
    let p = Box::into_raw(qp);
    live.objects.insert(p as usize, (Kind::Qp, ctx));
    p.cast()
}

/// All-zero `ibv_qp_attr`.
fn zeroed_attr() -> ibv_qp_attr {
    // SAFETY: integers, a union of integers and byte arrays: all-zero is a
    // valid value of each.
    unsafe { std::mem::zeroed() }
}

/// `ibv_query_qp`: the state, caps and what `ibv_modify_qp` set; the whole
/// `attr` is written whatever `attr_mask` asks for, as providers do.
pub(crate) unsafe extern "C" fn query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    let live = live();
    if !live.is(qp as usize, Kind::Qp) || attr.is_null() || init.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>.
    let q = unsafe { &*qp.cast::<Qp>() };
    let inner = lock(&q.inner);
    let (ird, ord) = match &inner.link {
        Link::Connected(c) => {
            let (ird, ord) = c.ird_ord();
            (sat_u8(ird), sat_u8(ord))
        }
        _ => (inner.max_dest_rd_atomic, inner.max_rd_atomic),
    };
    let mut a = zeroed_attr();
    a.qp_state = inner.state;
    a.cur_qp_state = inner.state;
    a.path_mtu = 5; // IBV_MTU_4096, as the port
    a.qp_access_flags = inner.access_flags;
    a.cap = q.cap;
    a.port_num = 1;
    a.max_rd_atomic = ord;
    a.max_dest_rd_atomic = ird;
    // SAFETY: the caller's output structs (verbs.h contract), non-NULL.
    unsafe {
        attr.write(a);
        init.write(ibv_qp_init_attr {
            qp_context: (*q.ibv.get()).qp_context,
            send_cq: (*q.ibv.get()).send_cq,
            recv_cq: (*q.ibv.get()).recv_cq,
            srq: q
                .srq
                .as_ref()
                .map_or(ptr::null_mut(), |(p, _)| *p as *mut c_void),
            cap: q.cap,
            qp_type: abi::IBV_QPT_RC,
            sq_sig_all: c_int::from(q.sq_sig_all),
        });
    }
    0
}

fn sat_u8(v: u32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

/// `ibv_modify_qp`'s mask bits it knows; the IB path and timer attributes
/// among them are accepted and mean nothing over iWARP.
const KNOWN_MASK: c_int = ((1 << 21) - 1) | abi::IBV_QP_RATE_LIMIT;

/// `ibv_modify_qp`: the state machine as iWARP uses it. RESET -> INIT (->
/// RTR) -> (connection attached by the CM: RTS); RTR means nothing more than
/// INIT over iWARP (Linux siw maps both to its idle state), RTS needs the
/// connection; once connected, a move to INIT or RTR is ignored (as siw
/// ignores it: a QP the application made itself is moved through INIT, RTR
/// and RTS with `rdma_init_qp_attr` after the CM connected it); any state
/// -> ERR flushes; any -> RESET
/// drops the connection (a later INIT prepares a new rddp queue pair, with a
/// new `qp_num`). SQD is `EOPNOTSUPP`; other transitions, a port other than
/// 1, a P_Key index other than 0, IRD/ORD above 128, `IBV_QP_CAP` and
/// unknown mask bits are `EINVAL`.
pub(crate) unsafe extern "C" fn modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    let dropped;
    {
        let live = live();
        if !live.is(qp as usize, Kind::Qp) || attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>; `attr`
        // is the caller's (verbs.h contract), non-NULL.
        let (q, a) = unsafe { (&*qp.cast::<Qp>(), &*attr) };
        let mut inner = lock(&q.inner);
        match modify(q, &mut inner, a, mask) {
            Ok(d) => dropped = d,
            Err(e) => return e,
        }
        if matches!(dropped, Link::Connected(_)) {
            q.ended.fire();
        }
    }
    // Outside the locks: dropping an rddp queue pair flushes its work into
    // the CQs (and may wake their channels).
    drop(dropped);
    0
}

fn modify(q: &Qp, inner: &mut Inner, a: &ibv_qp_attr, mask: c_int) -> Result<Link, c_int> {
    use abi::*;
    if mask & !KNOWN_MASK != 0 || mask & IBV_QP_CAP != 0 {
        return Err(libc::EINVAL);
    }
    let cur = inner.state;
    if mask & IBV_QP_CUR_STATE != 0 && a.cur_qp_state != cur {
        return Err(libc::EINVAL);
    }
    if mask & IBV_QP_PORT != 0 && a.port_num != 1 {
        return Err(libc::EINVAL);
    }
    if mask & IBV_QP_PKEY_INDEX != 0 && a.pkey_index != 0 {
        return Err(libc::EINVAL);
    }
    let max = device::MAX_RD_ATOM;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC != 0 && c_int::from(a.max_rd_atomic) > max)
        || (mask & IBV_QP_MAX_DEST_RD_ATOMIC != 0 && c_int::from(a.max_dest_rd_atomic) > max)
    {
        return Err(libc::EINVAL);
    }
    let mut new = if mask & IBV_QP_STATE != 0 {
        a.qp_state
    } else {
        cur
    };
    let connected = matches!(inner.link, Link::Connected(_));
    let mut dropped = Link::Gone;
    match (cur, new) {
        // Attributes only: no transition.
        _ if mask & IBV_QP_STATE == 0 => {}
        (_, IBV_QPS_SQD) => return Err(libc::EOPNOTSUPP),
        // A prepared queue pair with no receive kept is as good as new: it
        // stays (and so does its qp_num).
        (_, IBV_QPS_RESET) if matches!(inner.link, Link::Prepared(_)) && inner.early.is_empty() => {
        }
        (_, IBV_QPS_RESET) => {
            dropped = std::mem::replace(&mut inner.link, Link::Gone);
            // Dropped without completions: their tokens are not needed.
            for id in inner.early.drain(..) {
                if id >= TOKEN_BASE {
                    q.recv_tokens.cancel(id);
                }
            }
        }
        (IBV_QPS_RESET | IBV_QPS_INIT, IBV_QPS_INIT) => {
            if matches!(inner.link, Link::Gone) {
                let p = q.prepare().map_err(|e| errno_of(&e))?;
                let n = p.qp_num();
                // SAFETY: `ibv.qp_num` is ours, written through the cell's
                // pointer under `inner`'s lock.
                unsafe { (&raw mut (*q.ibv.get()).qp_num).write_volatile(n) };
                inner.link = Link::Prepared(p);
            }
        }
        (IBV_QPS_INIT | IBV_QPS_RTR, IBV_QPS_RTR) if matches!(inner.link, Link::Prepared(_)) => {}
        (IBV_QPS_RTR | IBV_QPS_RTS, IBV_QPS_RTS) if connected => {}
        (IBV_QPS_RTS, IBV_QPS_INIT | IBV_QPS_RTR) if connected => new = cur,
        (_, IBV_QPS_ERR) => {
            dropped = std::mem::replace(&mut inner.link, Link::Gone);
            q.flush_early(inner);
        }
        _ => return Err(libc::EINVAL),
    }
    if mask & IBV_QP_ACCESS_FLAGS != 0 {
        inner.access_flags = a.qp_access_flags;
    }
    if mask & IBV_QP_MAX_QP_RD_ATOMIC != 0 {
        inner.max_rd_atomic = a.max_rd_atomic;
    }
    if mask & IBV_QP_MAX_DEST_RD_ATOMIC != 0 {
        inner.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    q.set_state(inner, new);
    Ok(dropped)
}

/// `ibv_destroy_qp`: `EINVAL` for a QP that is not live. Work still posted
/// completes as flushed on its CQs; then the PD and CQs are free of it.
pub(crate) unsafe extern "C" fn destroy_qp(qp: *mut ibv_qp) -> c_int {
    {
        let live = live();
        if !live.is(qp as usize, Kind::Qp) {
            return libc::EINVAL;
        }
        // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>, of a
        // live context (open_device's Box<Context>).
        unsafe {
            let q = &*qp.cast::<Qp>();
            let ctx = (*q.ibv.get()).context.cast::<crate::exports::Context>();
            (*ctx).events.forget(qp as usize, &q.events_alive);
        }
    }
    // As rdma-core's ibv_destroy_qp: wait until every event returned for
    // the QP was acknowledged (it blocks; it does not fail). The QP stays
    // registered meanwhile, so ibv_ack_async_event reaches it.
    // SAFETY: only this call frees the QP; its mutex and cond were
    // initialised by create_qp.
    unsafe {
        let q = &*qp.cast::<Qp>();
        let ibv = q.ibv.get();
        let m = &raw mut (*ibv).mutex;
        libc::pthread_mutex_lock(m);
        while (&raw const (*ibv).events_completed).read_volatile()
            != q.events_reported.load(Ordering::Acquire)
        {
            libc::pthread_cond_wait(&raw mut (*ibv).cond, m);
        }
        libc::pthread_mutex_unlock(m);
    }
    {
        let mut live = live();
        if live.objects.remove(&(qp as usize)).is_none() {
            return libc::EINVAL;
        }
    }
    // SAFETY: live until just now: create_qp's Box, out of the registry so
    // no other verb reaches it. Its PD, CQs and SRQ are live: they refuse to go
    // while `users` counts this QP.
    unsafe { free_qp(qp) };
    0
}

/// Frees a QP already out of the registry: its rddp queue pair (flushing
/// what is posted into the CQs), then its hold on the PD, CQs and SRQ.
///
/// # Safety
/// `qp` is create_qp's Box<Qp>, unreachable by other verbs, whose PD, SRQ and
/// CQs are live.
pub(crate) unsafe fn free_qp(qp: *mut ibv_qp) {
    // SAFETY: per the contract.
    let mut boxed = unsafe { Box::from_raw(qp.cast::<Qp>()) };
    let ibv = boxed.ibv.get_mut();
    let (pd, scq, rcq) = (ibv.pd, ibv.send_cq, ibv.recv_cq);
    let srq = boxed.srq.as_ref().map_or(0, |(p, _)| *p);
    // SAFETY: the pthread objects were initialised by create_qp, not in use.
    unsafe {
        libc::pthread_cond_destroy(&raw mut ibv.cond);
        libc::pthread_mutex_destroy(&raw mut ibv.mutex);
    }
    drop(boxed);
    // SAFETY: live per the contract; `users` is atomic.
    unsafe {
        (*pd.cast::<Pd>()).users.fetch_sub(1, Ordering::AcqRel);
        (*scq.cast::<Cq>()).users.fetch_sub(1, Ordering::AcqRel);
        (*rcq.cast::<Cq>()).users.fetch_sub(1, Ordering::AcqRel);
        if srq != 0 {
            (*(srq as *const Srq)).users.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

// ---------------------------------------------------------------------------
// The data path.

/// `sge` resolved against the context's regions: the region and the offset
/// in it, or `None` (`IBV_WC_LOC_PROT_ERR`): an lkey that is not a live MR,
/// an MR of another PD, a range outside the region (no wrap), or, for a
/// receive or Read sink (`write`), a region without `IBV_ACCESS_LOCAL_WRITE`.
fn resolve<'a>(
    live: &'a Live,
    q: &Qp,
    sge: &ibv_sge,
    write: bool,
) -> Option<(&'a MemoryRegion, u64)> {
    let region = mr::by_lkey(live, q.pd_ptr(), sge.lkey)?;
    let offset = sge.addr.checked_sub(region.base_to())?;
    let end = offset.checked_add(u64::from(sge.length))?;
    if end > region.len() || (write && !region.access().contains(Access::LOCAL_WRITE)) {
        return None;
    }
    Some((region, offset))
}

/// The SGEs of a work request: `EINVAL` for a negative count, more than
/// `max`, or a NULL list.
///
/// # Safety
/// `list` holds `n` SGEs when non-NULL (verbs.h contract).
unsafe fn sges<'a>(list: *mut ibv_sge, n: c_int, max: u32) -> Result<&'a [ibv_sge], c_int> {
    let Ok(len) = u32::try_from(n) else {
        return Err(libc::EINVAL);
    };
    if len > max || (len > 0 && list.is_null()) {
        return Err(libc::EINVAL);
    }
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: per the contract; the application does not change its work
    // request during the call.
    Ok(unsafe { std::slice::from_raw_parts(list, len as usize) })
}

/// The send operations posted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SendOp {
    Send,
    SendInv,
    Write,
    Read,
}

/// `ops.post_send`: each work request of the chain in turn; at the first
/// refused one, `*bad_wr` is set to it and its errno returned (those before
/// it stay posted).
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut c_void,
    wr: *mut c_void,
    bad: *mut *mut c_void,
) -> c_int {
    let live = live();
    if !live.is(qp as usize, Kind::Qp) {
        // SAFETY: `bad` is NULL or the caller's slot (verbs.h contract).
        return unsafe { refuse_chain(wr, bad) };
    }
    // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>.
    let q = unsafe { &*qp.cast::<Qp>() };
    let inner = lock(&q.inner);
    // SAFETY: the chain is the caller's (verbs.h contract), unchanged during
    // the call; so is each request's SGE list, which post_one_send reads.
    unsafe {
        walk(wr.cast::<ibv_send_wr>(), bad, |w| {
            post_one_send(&live, q, &inner, w)
        })
    }
}

/// A work request of a chain C links by `next`.
pub(crate) trait Chained {
    /// The next request, or NULL.
    fn next(&self) -> *mut Self;
}

impl Chained for ibv_send_wr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

impl Chained for ibv_recv_wr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

/// Posts each request of the chain from `first` with `post`, in turn; at the
/// first refused one, `*bad` is set to it and its errno returned (those
/// before it stay posted), as verbs' post calls do.
///
/// # Safety
/// `first` is NULL or the caller's chain of valid requests, unchanged during
/// the call, and `post` may rely on each request as verbs.h promises it
/// (SGE lists of `num_sge` entries, inline SGEs readable); `bad` is NULL or
/// the caller's `bad_wr` slot.
pub(crate) unsafe fn walk<W: Chained>(
    first: *mut W,
    bad: *mut *mut c_void,
    mut post: impl FnMut(&W) -> Result<(), c_int>,
) -> c_int {
    let mut cur = first;
    while !cur.is_null() {
        // SAFETY: a request of the caller's chain (the contract above).
        let w = unsafe { &*cur };
        if let Err(e) = post(w) {
            // SAFETY: `bad` per the contract.
            unsafe { set_bad(bad, cur.cast()) };
            return e;
        }
        cur = w.next();
    }
    0
}

/// A post call on an object that is not live: `EINVAL`, `*bad` its first
/// request.
///
/// # Safety
/// `bad` is NULL or the caller's `bad_wr` slot.
pub(crate) unsafe fn refuse_chain(first: *mut c_void, bad: *mut *mut c_void) -> c_int {
    // SAFETY: per the contract.
    unsafe { set_bad(bad, first) };
    libc::EINVAL
}

/// # Safety
/// `bad` is NULL or the caller's `bad_wr` slot.
unsafe fn set_bad(bad: *mut *mut c_void, w: *mut c_void) {
    if !bad.is_null() {
        // SAFETY: a non-NULL `bad` is the caller's slot (the contract).
        unsafe { *bad = w };
    }
}

/// # Safety
/// `w` is a valid work request whose SGE list holds `num_sge` entries, and
/// inline SGEs point to readable memory of their length (verbs.h contract).
unsafe fn post_one_send(live: &Live, q: &Qp, inner: &Inner, w: &ibv_send_wr) -> Result<(), c_int> {
    use abi::*;
    let op = match w.opcode {
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_INV => SendOp::SendInv,
        IBV_WR_RDMA_WRITE => SendOp::Write,
        IBV_WR_RDMA_READ => SendOp::Read,
        IBV_WR_RDMA_WRITE_WITH_IMM
        | IBV_WR_SEND_WITH_IMM
        | IBV_WR_ATOMIC_CMP_AND_SWP
        | IBV_WR_ATOMIC_FETCH_AND_ADD
        | IBV_WR_ATOMIC_WRITE
        | IBV_WR_LOCAL_INV
        | IBV_WR_BIND_MW
        | IBV_WR_TSO => return Err(libc::EOPNOTSUPP),
        _ => return Err(libc::EINVAL),
    };
    let wc_op = match op {
        SendOp::Send | SendOp::SendInv => WcOpcode::Send,
        SendOp::Write => WcOpcode::RdmaWrite,
        SendOp::Read => WcOpcode::RdmaRead,
    };
    let max = if op == SendOp::Read {
        1
    } else {
        q.cap.max_send_sge
    };
    // SAFETY: the caller's promise.
    let list = unsafe { sges(w.sg_list, w.num_sge, max) }?;
    let inline = w.send_flags & IBV_SEND_INLINE != 0;
    if op == SendOp::Read && (inline || list.is_empty()) {
        return Err(libc::EINVAL);
    }
    let total: u64 = list.iter().map(|s| u64::from(s.length)).sum();
    if inline && total > u64::from(q.cap.max_inline_data) {
        return Err(libc::EINVAL);
    }
    let qpn = q.qp_num();
    let conn = match (&inner.link, inner.state) {
        (_, IBV_QPS_ERR) => {
            q.send_cq.push_local(qpn, w.wr_id, wc_op, WcStatus::Flushed);
            return Ok(());
        }
        (Link::Connected(c), IBV_QPS_RTS) => c,
        _ => return Err(libc::EINVAL),
    };
    let unsignaled = !(q.sq_sig_all || w.send_flags & IBV_SEND_SIGNALED != 0);
    let fence = w.send_flags & IBV_SEND_FENCE != 0;
    let sflags = SendFlags {
        solicited: w.send_flags & IBV_SEND_SOLICITED != 0,
        invalidate: (op == SendOp::SendInv).then_some(w.imm_data),
        fence,
        unsignaled,
    };
    let wflags = WriteFlags { fence, unsignaled };
    // SAFETY: `rdma` is the member of `wr` for Writes and Reads; for Sends
    // it is read and not used (every member is plain integers).
    let rdma = unsafe { w.wr.rdma };
    let remote = RemoteBuf {
        stag: rdma.rkey,
        to: rdma.remote_addr,
        len: total,
    };
    let prot_err = || {
        q.send_cq
            .push_local(qpn, w.wr_id, wc_op, WcStatus::LocalProtection);
        Ok(())
    };
    // The payload copied at posting: inline, gathered from several SGEs, or
    // empty.
    let copied: Option<Vec<u8>> = if inline {
        let mut data = Vec::<u8>::with_capacity(total as usize);
        for s in list.iter().filter(|s| s.length > 0) {
            // NULL (or an address that wraps) is refused as a bad SGE
            // rather than read; any other address is the caller's promise.
            let at = match usize::try_from(s.addr) {
                Ok(at) if at != 0 && at.checked_add(s.length as usize).is_some() => at,
                _ => return prot_err(),
            };
            // SAFETY: IBV_SEND_INLINE's contract: `addr` points to `length`
            // readable octets of the application's until the post returns;
            // copied into our own vector, no reference to them is kept.
            unsafe {
                let src = ptr::with_exposed_provenance::<u8>(at);
                let n = s.length as usize;
                let old = data.len();
                data.reserve(n);
                ptr::copy_nonoverlapping(src, data.as_mut_ptr().add(old), n);
                data.set_len(old + n);
            }
        }
        Some(data)
    } else if list.len() != 1 {
        let mut data = Vec::<u8>::with_capacity(total as usize);
        for s in list {
            let Some((region, off)) = resolve(live, q, s, false) else {
                return prot_err();
            };
            match region.read(off, u64::from(s.length)) {
                Ok(v) => data.extend_from_slice(&v),
                Err(_) => return prot_err(),
            }
        }
        Some(data)
    } else {
        None
    };
    let posted = match copied {
        Some(data) => match op {
            SendOp::Send | SendOp::SendInv => conn.post_send_inline(w.wr_id, &data, sflags),
            SendOp::Write => conn.post_write_inline(w.wr_id, &data, remote, 0, wflags),
            SendOp::Read => unreachable!("a Read has one SGE, not inline"),
        },
        None => {
            let s = &list[0];
            let Some((region, off)) = resolve(live, q, s, op == SendOp::Read) else {
                return prot_err();
            };
            let len = u64::from(s.length);
            match op {
                SendOp::Send | SendOp::SendInv => conn.post_send(w.wr_id, region, off, len, sflags),
                SendOp::Write => conn.post_write_with(w.wr_id, region, off, len, remote, 0, wflags),
                SendOp::Read => {
                    let rflags = ReadFlags { fence, unsignaled };
                    conn.post_read_with(w.wr_id, region, off, s.length, remote, 0, rflags)
                }
            }
        }
    };
    match posted {
        Ok(()) => Ok(()),
        Err(Error::OutOfRange { .. } | Error::RegionGone | Error::Mem(_) | Error::WrongPd) => {
            prot_err()
        }
        Err(Error::Disconnecting) => {
            q.send_cq.push_local(qpn, w.wr_id, wc_op, WcStatus::Flushed);
            Ok(())
        }
        Err(e) => Err(errno_of(&e)),
    }
}

/// `ops.post_recv`: each receive of the chain in turn, as `post_send`.
/// Before a connection (INIT) they are kept by the prepared queue pair and
/// used from the connection's first message on.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut c_void,
    wr: *mut c_void,
    bad: *mut *mut c_void,
) -> c_int {
    let live = live();
    if !live.is(qp as usize, Kind::Qp) {
        // SAFETY: `bad` is NULL or the caller's slot (verbs.h contract).
        return unsafe { refuse_chain(wr, bad) };
    }
    // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>.
    let q = unsafe { &*qp.cast::<Qp>() };
    let mut inner = lock(&q.inner);
    // SAFETY: the chain is the caller's (verbs.h contract), unchanged during
    // the call; so is each receive's SGE list, which post_one_recv reads.
    unsafe {
        walk(wr.cast::<ibv_recv_wr>(), bad, |w| {
            post_one_recv(&live, q, &mut inner, w)
        })
    }
}

/// # Safety
/// `w` is a valid receive whose SGE list holds `num_sge` entries.
unsafe fn post_one_recv(
    live: &Live,
    q: &Qp,
    inner: &mut Inner,
    w: &ibv_recv_wr,
) -> Result<(), c_int> {
    // A QP on an SRQ has no receive queue of its own (verbs: EINVAL).
    if q.srq.is_some() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's promise.
    let list = unsafe { sges(w.sg_list, w.num_sge, q.cap.max_recv_sge) }?;
    match inner.state {
        abi::IBV_QPS_ERR => {
            q.recv_local(w.wr_id, WcStatus::Flushed);
            return Ok(());
        }
        abi::IBV_QPS_RESET => return Err(libc::EINVAL),
        _ => {}
    }
    if matches!(inner.link, Link::Gone) {
        return Err(libc::EINVAL);
    }
    if matches!(inner.link, Link::Prepared(_)) && inner.early.len() >= q.cap.max_recv_wr as usize {
        return Err(libc::ENOMEM);
    }
    // Each SGE checked now; one is placed straight into its region, several
    // receive into a buffer that poll_cq scatters.
    let mut places = Vec::with_capacity(list.len());
    for s in list {
        match resolve(live, q, s, true) {
            Some((region, off)) => places.push((region, off, u64::from(s.length))),
            None => {
                q.recv_local(w.wr_id, WcStatus::LocalProtection);
                return Ok(());
            }
        }
    }
    let scatter = list.len() > 1;
    let id = if scatter || w.wr_id >= TOKEN_BASE {
        let sges = if scatter { list.to_vec() } else { Vec::new() };
        q.recv_tokens.issue(w.wr_id, q.pd_ptr() as usize, sges)
    } else {
        w.wr_id
    };
    let total: u64 = places.iter().map(|p| p.2).sum();
    let total = usize::try_from(total).unwrap_or(usize::MAX);
    let posted = match &mut inner.link {
        Link::Prepared(p) => match places.as_slice() {
            [(region, off, len)] => p.post_recv_mr(id, region, *off, *len),
            _ => p.post_recv(id, total),
        },
        Link::Connected(c) => match places.as_slice() {
            [(region, off, len)] => c.post_recv_mr(id, region, *off, *len),
            _ => c.post_recv(id, total),
        },
        Link::Gone => return Err(libc::EINVAL),
    };
    if posted.is_ok() && matches!(inner.link, Link::Prepared(_)) {
        inner.early.push(id);
    }
    if posted.is_err() && id != w.wr_id {
        q.recv_tokens.cancel(id);
    }
    match posted {
        Ok(()) => Ok(()),
        Err(Error::OutOfRange { .. } | Error::RegionGone | Error::Mem(_) | Error::WrongPd) => {
            q.recv_local(w.wr_id, WcStatus::LocalProtection);
            Ok(())
        }
        Err(e) => Err(errno_of(&e)),
    }
}

// ---------------------------------------------------------------------------
// Receive tokens.

/// Receive wr_ids from here up are tokens. rddp keeps receive ids from
/// 2^63 up for itself (its Read Request and Terminate queues), so a
/// receive whose wr_id is 2^62 or more, and every receive of several SGEs,
/// is posted under a token in [2^62, 2^63) instead; `poll_cq` gives the
/// application's wr_id back (and scatters). No wr_id the application chose
/// reaches rddp in that range, so a completion there is always a token.
pub const TOKEN_BASE: u64 = 1 << 62;
const TOKEN_END: u64 = 1 << 63;
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(TOKEN_BASE);

/// A receive posted under a token.
struct Token {
    /// The application's wr_id.
    wr_id: u64,
    /// The PD of the QP it was posted to (its address), for the scatter's MRs.
    pd: usize,
    /// Where the message goes, for a receive of several SGEs (posted as one
    /// buffer of their total length); empty otherwise.
    scatter: Vec<ibv_sge>,
}

/// The tokens of the receives completing on one CQ.
#[derive(Clone, Default)]
pub(crate) struct Tokens(Arc<Mutex<HashMap<u64, Token>>>);

impl Tokens {
    fn issue(&self, wr_id: u64, pd: usize, scatter: Vec<ibv_sge>) -> u64 {
        let t = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        lock(&self.0).insert(t, Token { wr_id, pd, scatter });
        t
    }

    fn cancel(&self, t: u64) {
        lock(&self.0).remove(&t);
    }

    /// `out` is the `ibv_wc` of `done`, a receive posted under a token: its
    /// wr_id becomes the application's, and a successful receive of several
    /// SGEs is scattered into them now. An SGE whose MR is gone (or no
    /// longer covers it) makes it `IBV_WC_LOC_PROT_ERR`.
    pub(crate) fn finish(&self, done: WorkCompletion, out: &mut abi::ibv_wc) {
        let Some(tok) = lock(&self.0).remove(&done.wr_id) else {
            return;
        };
        out.wr_id = tok.wr_id;
        if tok.scatter.is_empty() || out.status != abi::IBV_WC_SUCCESS {
            return;
        }
        let data = done.c.buffer.as_deref().unwrap_or(&[]);
        let mut rest = &data[..data.len().min(out.byte_len as usize)];
        let live = live();
        for s in &tok.scatter {
            if rest.is_empty() {
                break;
            }
            let n = rest.len().min(s.length as usize);
            let placed =
                mr::by_lkey(&live, tok.pd as *mut abi::ibv_pd, s.lkey).and_then(|region| {
                    let off = s.addr.checked_sub(region.base_to())?;
                    region.write(off, &rest[..n]).ok()
                });
            if placed.is_none() {
                out.status = abi::IBV_WC_LOC_PROT_ERR;
                out.byte_len = 0;
                return;
            }
            rest = &rest[n..];
        }
    }
}

/// Whether `wc` is a receive posted under a token.
pub(crate) fn is_token(wc: &WorkCompletion) -> bool {
    wc.opcode == WcOpcode::Recv && (TOKEN_BASE..TOKEN_END).contains(&wc.wr_id)
}

// ---------------------------------------------------------------------------
// The connection manager's hook (Rust only, not exported to C).

/// Runs the created QP `qp` over the established connection `conn` (what
/// the connection-manager stage calls once its MPA exchange is done), and
/// moves it to RTS, as the kernel's iw_cm does when a connection is
/// established. The QP must be live, in INIT or RTR and not yet attached;
/// else `EINVAL`. The receives posted meanwhile are used from the first
/// message on. If rddp refuses the attach (the CQs cannot hold the queue
/// depths: `ENOMEM`), the QP goes to ERR and those receives complete as
/// flushed.
pub fn attach(qp: *mut ibv_qp, conn: rddp::transport::Connection) -> Result<(), c_int> {
    let live = live();
    if !live.is(qp as usize, Kind::Qp) {
        return Err(libc::EINVAL);
    }
    // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>.
    let q = unsafe { &*(qp as usize as *const Qp) };
    let mut inner = lock(&q.inner);
    if !matches!(inner.state, abi::IBV_QPS_INIT | abi::IBV_QPS_RTR)
        || !matches!(inner.link, Link::Prepared(_))
    {
        return Err(libc::EINVAL);
    }
    let Link::Prepared(p) = std::mem::replace(&mut inner.link, Link::Gone) else {
        return Err(libc::EINVAL);
    };
    match p.attach(conn) {
        Ok(c) => {
            hook_events(qp, q, &c);
            inner.link = Link::Connected(c);
            inner.early.clear();
            q.set_state(&mut inner, abi::IBV_QPS_RTS);
            Ok(())
        }
        Err(e) => {
            q.flush_early(&mut inner);
            q.set_state(&mut inner, abi::IBV_QPS_ERR);
            Err(errno_of(&e))
        }
    }
}

/// `ibv_get_async_event` returned an event of `qp` (if it is live).
pub(crate) fn event_reported(live: &Live, qp: *mut ibv_qp) {
    if live.is(qp as usize, Kind::Qp) {
        // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>.
        unsafe { &*qp.cast::<Qp>() }
            .events_reported
            .fetch_add(1, Ordering::AcqRel);
    }
}

/// `ibv_ack_async_event` for an event of `qp`: counted in
/// `events_completed` under the QP's mutex, waking `ibv_destroy_qp`.
pub(crate) fn event_acked(live: &Live, qp: *mut ibv_qp) {
    if !live.is(qp as usize, Kind::Qp) {
        return;
    }
    // SAFETY: a live QP (registry locked); its mutex and cond were
    // initialised by create_qp.
    unsafe {
        let ibv = (*qp.cast::<Qp>()).ibv.get();
        let m = &raw mut (*ibv).mutex;
        libc::pthread_mutex_lock(m);
        (*ibv).events_completed = (*ibv).events_completed.wrapping_add(1);
        libc::pthread_cond_signal(&raw mut (*ibv).cond);
        libc::pthread_mutex_unlock(m);
    }
}

/// The `ibv_event_type` of a connection's event, if it has one: a Terminate
/// we sent by what it says (Error Type 1, a protection error of DDP's
/// tagged model or RDMAP's, is an access error; Error Type 2, an untagged
/// buffer or remote operation error, a request error; a catastrophic or LLP
/// error, fatal), one we received fatal, as is a stream that ended
/// abortively without a Terminate (RFC 5040 section 4.8 and 6). A graceful
/// close is the connection manager's to report (DISCONNECTED), not an error.
fn event_type(e: &rddp::AsyncEvent, terminated: &AtomicBool) -> Option<c_int> {
    match e {
        rddp::AsyncEvent::TerminateSent { code, .. } => {
            terminated.store(true, Ordering::Relaxed);
            // Layer 2 is the LLP's (MPA's).
            Some(match (code.layer, code.etype) {
                (2, _) | (_, 0) => abi::IBV_EVENT_QP_FATAL,
                (_, 1) => abi::IBV_EVENT_QP_ACCESS_ERR,
                _ => abi::IBV_EVENT_QP_REQ_ERR,
            })
        }
        rddp::AsyncEvent::TerminateReceived { .. } => {
            terminated.store(true, Ordering::Relaxed);
            Some(abi::IBV_EVENT_QP_FATAL)
        }
        rddp::AsyncEvent::Closed { graceful: false } if !terminated.load(Ordering::Relaxed) => {
            Some(abi::IBV_EVENT_QP_FATAL)
        }
        _ => None,
    }
}

/// Raises the connection's events of `q` (at `qp`) on its context's
/// `async_fd` from now on.
fn hook_events(qp: *mut ibv_qp, q: &Qp, c: &QueuePair) {
    // SAFETY: attach holds the registry's lock: the QP and its context are live.
    let ctx = unsafe { (*q.ibv.get()).context.cast::<crate::exports::Context>() };
    // SAFETY: as above.
    let events = Arc::downgrade(unsafe { &(*ctx).events });
    let alive = q.events_alive.clone();
    let ended = q.ended.clone();
    let terminated = AtomicBool::new(false);
    let at = qp as usize;
    c.set_event_notify(move |e| {
        // Any event means the stream has ended ([`on_llp_closed`]); none
        // counts once the QP is being destroyed.
        if alive.load(Ordering::Acquire) {
            ended.fire();
        }
        if let Some(t) = event_type(e, &terminated)
            && let Some(ev) = events.upgrade()
        {
            ev.raise(at, t, &alive);
        }
    });
}

/// The live QP of context `ctx` numbered `qp_num` (what the connection
/// manager connects when the application created the QP itself and names it
/// in `rdma_conn_param.qp_num`, as the kernel's iw_cm finds a QP by number).
pub fn by_num(ctx: usize, qp_num: u32) -> Option<*mut ibv_qp> {
    let live = live();
    live.objects
        .iter()
        .filter(|(_, (k, c))| *k == Kind::Qp && *c == ctx)
        // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>.
        .find(|(p, _)| unsafe { &*(**p as *const Qp) }.qp_num() == qp_num)
        .map(|(p, _)| *p as *mut ibv_qp)
}

/// IRD and ORD the QP asks for at connection setup (`max_dest_rd_atomic`,
/// `max_rd_atomic` as `ibv_modify_qp` set them; 16 each until then), if it
/// can take a connection now (live, INIT or RTR, not attached); else `EINVAL`.
pub fn ird_ord(qp: *mut ibv_qp) -> Result<(u16, u16), c_int> {
    let live = live();
    if !live.is(qp as usize, Kind::Qp) {
        return Err(libc::EINVAL);
    }
    // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>.
    let q = unsafe { &*(qp as usize as *const Qp) };
    let inner = lock(&q.inner);
    if !matches!(inner.state, abi::IBV_QPS_INIT | abi::IBV_QPS_RTR)
        || !matches!(inner.link, Link::Prepared(_))
    {
        return Err(libc::EINVAL);
    }
    Ok((
        u16::from(inner.max_dest_rd_atomic),
        u16::from(inner.max_rd_atomic),
    ))
}

/// Graceful disconnect (`rdma_disconnect`): what is posted finishes, then
/// the LLP closes (`rddp::QueuePair::disconnect`); the QP goes to ERR at
/// once, so work posted afterwards completes as flushed, while the work
/// posted before completes as the connection lets it. A QP not connected
/// (or already disconnected) is `EINVAL`.
pub fn disconnect(qp: *mut ibv_qp) -> Result<(), c_int> {
    let live = live();
    if !live.is(qp as usize, Kind::Qp) {
        return Err(libc::EINVAL);
    }
    // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>.
    let q = unsafe { &*(qp as usize as *const Qp) };
    let mut inner = lock(&q.inner);
    let Link::Connected(c) = &inner.link else {
        return Err(libc::EINVAL);
    };
    if inner.state == abi::IBV_QPS_ERR {
        return Err(libc::EINVAL);
    }
    c.disconnect();
    q.set_state(&mut inner, abi::IBV_QPS_ERR);
    Ok(())
}

/// Runs `f` once the connection of `qp` has ended (at once if it has): the
/// stream closed (the peer's FIN or reset, or our own close), a Terminate
/// went either way (RFC 5040 section 7: the stream is dead after one), or
/// the application moved the QP to RESET or ERR. `f` runs on the thread
/// that sees the end, which may hold the queue pair's locks, so it must only
/// hand work on; never, if the QP is destroyed first. `EINVAL` for a QP
/// that is not live or not yet connected.
pub fn on_llp_closed(qp: *mut ibv_qp, f: impl FnOnce() + Send + 'static) -> Result<(), c_int> {
    let hook = {
        let live = live();
        if !live.is(qp as usize, Kind::Qp) {
            return Err(libc::EINVAL);
        }
        // SAFETY: a live QP (registry locked) is create_qp's Box<Qp>.
        let q = unsafe { &*(qp as usize as *const Qp) };
        let inner = lock(&q.inner);
        match &inner.link {
            Link::Connected(_) => q.ended.clone(),
            // Already ended: `f` runs at once.
            Link::Gone => Arc::new(EndHook(Mutex::new(End::Ended))),
            Link::Prepared(_) => return Err(libc::EINVAL),
        }
    };
    hook.set(Box::new(f));
    Ok(())
}

/// Active side: an MPA connection to `addr` with `opts` (its IRD/ORD
/// replaced by the QP's, [`ird_ord`]), then [`attach`]. Blocks for the MPA
/// exchange without holding any lock. `ECONNREFUSED` (or the socket's
/// errno) when the connection fails. Returns the private data of the
/// peer's Reply (RFC 5044 section 7.1.2), which the CM hands the
/// application with ESTABLISHED.
pub fn connect_mpa(
    qp: *mut ibv_qp,
    addr: std::net::SocketAddr,
    mut opts: rddp_mpa::MpaOptions,
) -> Result<Vec<u8>, c_int> {
    let (ird, ord) = ird_ord(qp)?;
    (opts.ird, opts.ord) = (ird, ord);
    let mut conn = rddp::transport::mpa::connect(addr, &opts).map_err(|e| mpa_errno(&e))?;
    let reply = std::mem::take(&mut conn.peer_private_data);
    attach(qp, conn)?;
    Ok(reply)
}

/// Passive side: the next MPA connection on `listener`, negotiated with the
/// QP's IRD/ORD, then [`attach`].
pub fn accept_mpa(qp: *mut ibv_qp, listener: &rddp::transport::mpa::Listener) -> Result<(), c_int> {
    let (ird, ord) = ird_ord(qp)?;
    let conn = listener
        .accept_with_ird_ord(ird, ord, |_, _| Ok(Vec::new()))
        .map_err(|e| mpa_errno(&e))?;
    attach(qp, conn)
}

fn mpa_errno(e: &rddp_mpa::MpaError) -> c_int {
    match e {
        rddp_mpa::MpaError::Io(io) => io.raw_os_error().unwrap_or(libc::ECONNREFUSED),
        _ => libc::ECONNREFUSED,
    }
}

export! {
    // IBVERBS_1.1
    ibv_create_qp => create_qp;
    ibv_destroy_qp => destroy_qp;
    ibv_modify_qp => modify_qp;
    ibv_query_qp => query_qp;
}

#[cfg(test)]
mod tests;
