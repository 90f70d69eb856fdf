//! The C entry points of librdmacm.so.1 (rdma_cm over TCP), in the same
//! object as libibverbs.so.1 so that both share the registry of live objects
//! (docs/verbs-abi.md, "librdmacm").
//!
//! `RDMA_PS_TCP` only: an id's port is the TCP port, a listener is an rddp
//! MPA listener (RFC 5044 section 7.1), `rdma_connect` is an MPA Request and
//! `rdma_accept` its Reply (RFC 6581 for IRD/ORD). Address and route
//! resolution are local checks that queue their event at once. Blocking work
//! (the MPA exchange, waiting for a Request) runs on threads of this library
//! and reports through the id's event channel, whose fd is an eventfd in
//! semaphore mode: readable exactly while events are queued, so it can be
//! poll()ed. The other exports refuse (`-1`, errno `EOPNOTSUPP`).
//!
//! An id made without a channel (`rdma_create_id` with NULL, or
//! `rdma_create_ep`) is synchronous, as librdmacm's: it has a channel of its
//! own, and each call that would queue an event waits for it instead,
//! keeping it in `id->event` until the next (`rdma_get_request` hands out
//! the CONNECT_REQUEST's new id that way). `rdma_create_ep` makes what
//! `rdma_create_qp` is not given: the device's default PD, and CQs with
//! completion channels of their own whose context is the id (what
//! `rdma_get_send_comp` and `rdma_get_recv_comp` in rdma_verbs.h wait on).

use crate::abi::{self, ibv_context, ibv_pd, ibv_qp, ibv_qp_attr, ibv_qp_init_attr};
use crate::exports::set_errno;
use crate::resources::{self as res, qp};
use std::collections::{HashMap, VecDeque};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// `enum rdma_port_space`: RDMA_PS_TCP.
const RDMA_PS_TCP: c_int = 0x0106;
const RDMA_PS_IPOIB: c_int = 0x0002;
const RDMA_PS_UDP: c_int = 0x0111;
const RDMA_PS_IB: c_int = 0x013F;
/// `RAI_PASSIVE` of `struct rdma_addrinfo.ai_flags`.
const RAI_PASSIVE: c_int = 1;

/// `enum rdma_cm_event_type`.
const ADDR_RESOLVED: c_int = 0;
const ADDR_ERROR: c_int = 1;
const ROUTE_RESOLVED: c_int = 2;
const CONNECT_REQUEST: c_int = 4;
const CONNECT_ERROR: c_int = 6;
const UNREACHABLE: c_int = 7;
const REJECTED: c_int = 8;
const ESTABLISHED: c_int = 9;
const DISCONNECTED: c_int = 10;

/// `struct rdma_event_channel`.
#[repr(C)]
pub struct rdma_event_channel {
    /// The fd the application polls.
    pub fd: c_int,
}

/// `struct rdma_addr` (296 bytes): source, destination, the IB part.
#[repr(C)]
pub struct rdma_addr {
    /// `src_addr` and its union.
    pub src_addr: libc::sockaddr_storage,
    /// `dst_addr` and its union.
    pub dst_addr: libc::sockaddr_storage,
    /// `addr`: `struct rdma_ib_addr` (unused over TCP).
    pub addr: [u64; 5],
}

/// `struct rdma_route` (312 bytes).
#[repr(C)]
pub struct rdma_route {
    /// The addresses.
    pub addr: rdma_addr,
    /// `struct ibv_sa_path_rec *` (NULL: no IB path over TCP).
    pub path_rec: *mut c_void,
    /// Number of paths (0).
    pub num_paths: c_int,
}

/// `struct rdma_cm_id` (416 bytes).
#[repr(C)]
pub struct rdma_cm_id {
    /// The device context (rddp0's, opened by this library).
    pub verbs: *mut ibv_context,
    /// The id's event channel.
    pub channel: *mut rdma_event_channel,
    /// The application's.
    pub context: *mut c_void,
    /// The QP `rdma_create_qp` made.
    pub qp: *mut ibv_qp,
    /// Addresses.
    pub route: rdma_route,
    /// `enum rdma_port_space`.
    pub ps: c_int,
    /// Port of the device (1).
    pub port_num: u8,
    /// Last event (sync ids; unused).
    pub event: *mut rdma_cm_event,
    /// `send_cq_channel` (set by `rdma_create_ep`; unused).
    pub send_cq_channel: *mut c_void,
    /// The QP's send CQ.
    pub send_cq: *mut abi::ibv_cq,
    /// `recv_cq_channel` (unused).
    pub recv_cq_channel: *mut c_void,
    /// The QP's receive CQ.
    pub recv_cq: *mut abi::ibv_cq,
    /// `srq` (none).
    pub srq: *mut c_void,
    /// The QP's PD.
    pub pd: *mut ibv_pd,
    /// `enum ibv_qp_type`.
    pub qp_type: c_int,
}

/// `struct rdma_conn_param` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_conn_param {
    /// Private data for the peer.
    pub private_data: *const c_void,
    /// Its length.
    pub private_data_len: u8,
    /// IRD.
    pub responder_resources: u8,
    /// ORD.
    pub initiator_depth: u8,
    /// Ignored over iWARP.
    pub flow_control: u8,
    /// Ignored over iWARP.
    pub retry_count: u8,
    /// Ignored over iWARP.
    pub rnr_retry_count: u8,
    /// Ignored (a QP is on the id).
    pub srq: u8,
    /// Ignored (a QP is on the id).
    pub qp_num: u32,
}

/// `struct rdma_cm_event` (80 bytes): `param` is the union of
/// `rdma_conn_param` and the larger `rdma_ud_param` (56 bytes).
#[repr(C)]
pub struct rdma_cm_event {
    /// The id the event is for (for CONNECT_REQUEST: the new one).
    pub id: *mut rdma_cm_id,
    /// The listening id, for CONNECT_REQUEST.
    pub listen_id: *mut rdma_cm_id,
    /// `enum rdma_cm_event_type`.
    pub event: c_int,
    /// 0 or a negative errno.
    pub status: c_int,
    /// `param`.
    pub param: rdma_cm_event_param,
}

/// The union `param` of `struct rdma_cm_event` (56 bytes): `conn`, then
/// what `ud` (`struct rdma_ud_param`) takes beyond it.
#[repr(C)]
pub struct rdma_cm_event_param {
    /// `param.conn`.
    pub conn: rdma_conn_param,
    /// The rest of `param.ud`.
    pub ud_rest: [u64; 4],
}

/// `struct rdma_addrinfo` (96 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addrinfo {
    /// `RAI_*`.
    pub ai_flags: c_int,
    /// `AF_INET` or `AF_INET6`.
    pub ai_family: c_int,
    /// `IBV_QPT_RC`.
    pub ai_qp_type: c_int,
    /// `RDMA_PS_TCP`.
    pub ai_port_space: c_int,
    /// Length of `ai_src_addr`.
    pub ai_src_len: libc::socklen_t,
    /// Length of `ai_dst_addr`.
    pub ai_dst_len: libc::socklen_t,
    /// Source (passive: the address to bind).
    pub ai_src_addr: *mut libc::sockaddr,
    /// Destination.
    pub ai_dst_addr: *mut libc::sockaddr,
    /// Unused.
    pub ai_src_canonname: *mut c_char,
    /// Unused.
    pub ai_dst_canonname: *mut c_char,
    /// Unused.
    pub ai_route_len: usize,
    /// Unused.
    pub ai_route: *mut c_void,
    /// Unused.
    pub ai_connect_len: usize,
    /// Unused.
    pub ai_connect: *mut c_void,
    /// Next result.
    pub ai_next: *mut rdma_addrinfo,
}

// ---------------------------------------------------------------------------
// Registry.

/// An event channel: the queue and the eventfd counting it.
struct Channel {
    fd: OwnedFd,
    queue: Mutex<VecDeque<usize>>,
}

impl Channel {
    /// Queues `ev` (a `Box<EventBox>` pointer) and makes the fd readable.
    fn push(&self, ev: usize) {
        lock(&self.queue).push_back(ev);
        let one = 1u64;
        // SAFETY: writes 8 bytes from `one` to our eventfd.
        unsafe { libc::write(self.fd.as_raw_fd(), (&raw const one).cast(), 8) };
    }
}

/// What the application decided about a connection request.
enum Decision {
    /// `rdma_accept`: attach this QP, reply with this private data and IRD/ORD.
    Accept(usize, rddp_mpa::Accept),
    /// `rdma_reject` with this private data.
    Reject(Vec<u8>),
}

/// Where `rdma_accept`/`rdma_reject` send their decision, and the (IRD,
/// ORD) the request's event reported.
type Pending = (mpsc::Sender<Decision>, (u8, u8));

/// rddp's part of an id.
struct Id {
    /// The channel (its `rdma_event_channel` pointer and state); changed
    /// by `rdma_migrate_id`.
    channel: Mutex<(usize, Arc<Channel>)>,
    /// A connection request waiting for `rdma_accept`/`rdma_reject`.
    /// With it, the IRD and ORD the request's event reported (what
    /// `rdma_accept` takes when its conn_param leaves them to the CM).
    pending: Mutex<Option<Pending>>,
    /// Set when the id is destroyed or disconnected: no more events for it.
    done: AtomicBool,
    /// Set by the first `rdma_connect`: a second one is `EINVAL`.
    connecting: AtomicBool,
    /// The listener's stop flag and address (to wake its thread), if listening.
    listening: Mutex<Option<(Arc<AtomicBool>, SocketAddr)>>,
    /// The QP the id's connection runs on, once `rdma_connect` or
    /// `rdma_accept` named it (`id->qp`, or the QP `conn_param.qp_num`
    /// names); 0 before.
    qp: AtomicUsize,
    /// A synchronous id (made, or migrated, without a channel: its channel
    /// is its own); `rdma_migrate_id` changes it.
    sync: AtomicBool,
    /// The IP type of service `rdma_set_option` gave (RDMA_OPTION_ID_TOS),
    /// for the connections `rdma_connect` and `rdma_listen` open after it.
    tos: Mutex<Option<u8>>,
    /// What `rdma_create_ep` and `rdma_create_qp` made for the id.
    ep: Mutex<Endpoint>,
}

/// What the library made for an id, and frees with it.
#[derive(Default)]
struct Endpoint {
    /// A passive endpoint's QP attributes (`rdma_create_ep` with
    /// `RAI_PASSIVE`): `rdma_get_request` makes each new id's QP with them.
    qp_init: Option<QpInit>,
    /// CQs and completion channels `rdma_create_qp` made because the
    /// attributes named none (send CQ, receive CQ, their channels);
    /// destroyed with the QP.
    cqs: Option<[usize; 4]>,
}

/// A saved `ibv_qp_init_attr`.
struct QpInit(ibv_qp_init_attr);

// SAFETY: the attributes are plain data; their pointers (CQs the application
// named, its qp_context) are only handed back to this library's own calls,
// which check them, never dereferenced here.
unsafe impl Send for QpInit {}

#[derive(Default)]
struct Registry {
    channels: HashMap<usize, Arc<Channel>>,
    ids: HashMap<usize, Arc<Id>>,
    /// Events handed out and not yet acked.
    events: HashMap<usize, ()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn reg() -> MutexGuard<'static, Registry> {
    static REG: OnceLock<Mutex<Registry>> = OnceLock::new();
    lock(REG.get_or_init(Mutex::default))
}

/// An event and the private data its `conn.private_data` points into.
#[repr(C)]
struct EventBox {
    ev: rdma_cm_event,
    private: Vec<u8>,
    /// The peer's address, written into the id's route when the application
    /// takes the event (on its thread, as librdmacm updates an id's route
    /// while it hands out the event).
    peer: Option<SocketAddr>,
}

/// Queues `event` for `id` on its channel, unless the id is done (destroyed
/// or disconnected, for events after that).
fn deliver(id: usize, listen_id: usize, event: c_int, status: c_int, private: Vec<u8>) {
    deliver_with_peer(id, listen_id, event, status, private, None);
}

/// As [`deliver`], the id's destination becoming `peer` when it is taken.
fn deliver_with_peer(
    id: usize,
    listen_id: usize,
    event: c_int,
    status: c_int,
    private: Vec<u8>,
    peer: Option<SocketAddr>,
) {
    let state = reg().ids.get(&id).cloned();
    let Some(state) = state else { return };
    if state.done.load(Ordering::SeqCst) && event != DISCONNECTED {
        return;
    }
    let ch = lock(&state.channel).1.clone();
    let mut b = event_box(id, listen_id, event, status, private, (0, 0));
    b.peer = peer;
    ch.push(Box::into_raw(b) as usize);
}

fn deliver_to(
    ch: &Channel,
    id: usize,
    listen_id: usize,
    event: c_int,
    status: c_int,
    private: Vec<u8>,
    ird_ord: (u8, u8),
) {
    let b = event_box(id, listen_id, event, status, private, ird_ord);
    ch.push(Box::into_raw(b) as usize);
}

/// The event, its `param.conn` carrying `private` and `(ird, ord)` as
/// `responder_resources` and `initiator_depth`.
fn event_box(
    id: usize,
    listen_id: usize,
    event: c_int,
    status: c_int,
    private: Vec<u8>,
    (ird, ord): (u8, u8),
) -> Box<EventBox> {
    let mut b = Box::new(EventBox {
        ev: rdma_cm_event {
            id: id as *mut rdma_cm_id,
            listen_id: listen_id as *mut rdma_cm_id,
            event,
            status,
            param: rdma_cm_event_param {
                conn: rdma_conn_param {
                    private_data: ptr::null(),
                    private_data_len: 0,
                    responder_resources: ird,
                    initiator_depth: ord,
                    flow_control: 0,
                    retry_count: 0,
                    rnr_retry_count: 0,
                    srq: 0,
                    qp_num: 0,
                },
                ud_rest: [0; 4],
            },
        },
        private,
        peer: None,
    });
    if !b.private.is_empty() {
        b.ev.param.conn.private_data = b.private.as_ptr().cast();
        b.ev.param.conn.private_data_len = u8::try_from(b.private.len()).unwrap_or(u8::MAX);
    }
    b
}

fn fail(e: c_int) -> c_int {
    set_errno(e);
    -1
}

/// The one context of rddp0 every id uses, opened through this library's
/// own `ibv_open_device` so that what is made on it is ours.
fn verbs() -> *mut ibv_context {
    static CTX: OnceLock<usize> = OnceLock::new();
    // SAFETY: the_device() is the device open_device expects.
    *CTX.get_or_init(
        || unsafe { crate::exports::open_device(crate::exports::the_device()) } as usize,
    ) as *mut ibv_context
}

/// The id's state, if `id` is a live id.
fn id_state(id: *mut rdma_cm_id) -> Option<Arc<Id>> {
    reg().ids.get(&(id as usize)).cloned()
}

// ---------------------------------------------------------------------------
// Addresses.

/// A `struct sockaddr` of AF_INET or AF_INET6 as a Rust address.
///
/// # Safety
/// `sa` is NULL or points to a sockaddr of its family's size.
unsafe fn from_sockaddr(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: a non-NULL sockaddr has at least its family (caller contract).
    match c_int::from(unsafe { (*sa).sa_family }) {
        libc::AF_INET => {
            // SAFETY: AF_INET: a sockaddr_in (caller contract).
            let s = unsafe { &*sa.cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(s.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: AF_INET6: a sockaddr_in6 (caller contract).
            let s = unsafe { &*sa.cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(s.sin6_port),
                s.sin6_flowinfo,
                s.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// `a` as a sockaddr_storage, and its length.
fn to_storage(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            let s = unsafe { &mut *(&raw mut st).cast::<libc::sockaddr_in>() };
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = v4.port().to_be();
            s.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            let s = unsafe { &mut *(&raw mut st).cast::<libc::sockaddr_in6>() };
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = v6.port().to_be();
            s.sin6_addr.s6_addr = v6.ip().octets();
            s.sin6_flowinfo = v6.flowinfo();
            s.sin6_scope_id = v6.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (st, len as libc::socklen_t)
}

/// The id's source or destination address, as stored in its route.
///
/// # Safety
/// `id` is a live id.
unsafe fn route_addr(id: *mut rdma_cm_id, dst: bool) -> Option<SocketAddr> {
    // SAFETY: a live id is our Box<rdma_cm_id>; the storage holds a sockaddr.
    unsafe {
        let a = &raw const (*id).route.addr;
        let p = if dst {
            &raw const (*a).dst_addr
        } else {
            &raw const (*a).src_addr
        };
        from_sockaddr(p.cast())
    }
}

/// # Safety
/// `id` is a live id.
unsafe fn set_route_addr(id: *mut rdma_cm_id, dst: bool, a: SocketAddr) {
    let (st, _) = to_storage(a);
    // SAFETY: a live id is our Box<rdma_cm_id>.
    unsafe {
        if dst {
            (*id).route.addr.dst_addr = st;
        } else {
            (*id).route.addr.src_addr = st;
        }
    }
}

// ---------------------------------------------------------------------------
// Channels and ids.

unsafe extern "C" fn create_event_channel() -> *mut rdma_event_channel {
    // SAFETY: eventfd takes no pointers.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
    if fd < 0 {
        return ptr::null_mut();
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = fd.as_raw_fd();
    let p = Box::into_raw(Box::new(rdma_event_channel { fd: raw }));
    let ch = Arc::new(Channel {
        fd,
        queue: Mutex::new(VecDeque::new()),
    });
    reg().channels.insert(p as usize, ch);
    p
}

/// A channel of a synchronous id's own (registered, so that
/// `rdma_get_cm_event` takes its events).
fn private_channel() -> Option<(*mut rdma_event_channel, Arc<Channel>)> {
    // SAFETY: takes no arguments.
    let chp = unsafe { create_event_channel() };
    let ch = reg().channels.get(&(chp as usize)).cloned()?;
    Some((chp, ch))
}

unsafe extern "C" fn destroy_event_channel(ch: *mut rdma_event_channel) {
    let removed = reg().channels.remove(&(ch as usize));
    if removed.is_some() {
        // SAFETY: a registered channel is create_event_channel's Box; the
        // fd closes when the last Arc<Channel> goes.
        drop(unsafe { Box::from_raw(ch) });
    }
}

/// A new id on `ch` (an `Arc` of a registered channel).
fn new_id(
    chp: *mut rdma_event_channel,
    ch: Arc<Channel>,
    context: *mut c_void,
    ps: c_int,
    sync: bool,
) -> *mut rdma_cm_id {
    // SAFETY: all-zero is a valid rdma_cm_id (NULL pointers, zero addresses).
    let mut id: Box<rdma_cm_id> = Box::new(unsafe { std::mem::zeroed() });
    id.channel = chp;
    id.context = context;
    id.ps = ps;
    id.port_num = 1;
    id.qp_type = abi::IBV_QPT_RC;
    let p = Box::into_raw(id);
    reg().ids.insert(
        p as usize,
        Arc::new(Id {
            channel: Mutex::new((chp as usize, ch)),
            pending: Mutex::new(None),
            done: AtomicBool::new(false),
            connecting: AtomicBool::new(false),
            listening: Mutex::new(None),
            qp: AtomicUsize::new(0),
            sync: AtomicBool::new(sync),
            tos: Mutex::new(None),
            ep: Mutex::new(Endpoint::default()),
        }),
    );
    p
}

unsafe extern "C" fn create_id(
    chp: *mut rdma_event_channel,
    out: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    if out.is_null() {
        return fail(libc::EINVAL);
    }
    match ps {
        RDMA_PS_TCP => {}
        RDMA_PS_UDP | RDMA_PS_IB | RDMA_PS_IPOIB => return fail(libc::EOPNOTSUPP),
        _ => return fail(libc::EINVAL),
    }
    let sync = chp.is_null();
    let Some((chp, ch)) = (if sync {
        private_channel()
    } else {
        reg()
            .channels
            .get(&(chp as usize))
            .cloned()
            .map(|c| (chp, c))
    }) else {
        return fail(if sync { libc::EMFILE } else { libc::EINVAL });
    };
    let id = new_id(chp, ch, context, ps, sync);
    // SAFETY: `out` is the caller's pointer slot.
    unsafe { *out = id };
    0
}

unsafe extern "C" fn destroy_id(id: *mut rdma_cm_id) -> c_int {
    let Some(state) = reg().ids.remove(&(id as usize)) else {
        return fail(libc::EINVAL);
    };
    state.done.store(true, Ordering::SeqCst);
    // A request still waiting is refused (the sender dropped).
    lock(&state.pending).take();
    if let Some((stop, addr)) = lock(&state.listening).take() {
        stop.store(true, Ordering::SeqCst);
        // Wake the listener's thread: a connection that sends no Request
        // makes its accept return (with an error) so it sees `stop`.
        let _ = std::net::TcpStream::connect(wake_addr(addr));
    }
    // Events queued for it and not yet taken are dropped, so that none
    // hands the application a freed id. (An event already taken and not
    // acknowledged still names it: librdmacm waits for those; this does not.)
    let dropped: VecDeque<usize> = {
        let ch = lock(&state.channel).1.clone();
        let mut q = lock(&ch.queue);
        let (gone, kept) = q.drain(..).partition(|&ev| {
            // SAFETY: a queued event is deliver_to's live Box<EventBox>.
            let e = unsafe { &*(ev as *const EventBox) };
            e.ev.id == id || e.ev.listen_id == id
        });
        *q = kept;
        gone
    };
    let mut orphans = Vec::new();
    for ev in dropped {
        // SAFETY: taken out of the queue above, so owned here alone. Their
        // counts stay on the eventfd: get_cm_event reads again when it finds
        // the queue empty.
        let e = unsafe { Box::from_raw(ev as *mut EventBox) };
        if e.ev.event == CONNECT_REQUEST && e.ev.listen_id == id {
            orphans.push(e.ev.id);
        }
    }
    // A request the application never saw dies with its listener (refused:
    // its id's decision channel closes).
    for child in orphans {
        // SAFETY: the child is an id of ours (destroy_id checks it is live).
        unsafe { destroy_id(child) };
    }
    // SAFETY: a registered id is new_id's Box; removed, nothing else frees it.
    let id = unsafe { Box::from_raw(id) };
    if !id.event.is_null() {
        // SAFETY: a synchronous call kept this event of ours there.
        unsafe { ack_cm_event(id.event) };
    }
    if state.sync.load(Ordering::SeqCst) {
        // SAFETY: a synchronous id's channel is its own (private_channel).
        unsafe { destroy_event_channel(id.channel) };
    }
    0
}

/// For a synchronous id, waits for the event the call just started and keeps
/// it in `id->event` (acknowledging the one kept before); its status becomes
/// the call's (REJECTED: `ECONNREFUSED`), as librdmacm's `ucma_complete`.
/// For any other id, 0 at once: the event is the application's to take.
///
/// # Safety
/// `id` is a live id, used by this thread alone meanwhile (as librdmacm
/// requires of a synchronous id).
unsafe fn complete(id: *mut rdma_cm_id, state: &Id) -> c_int {
    if !state.sync.load(Ordering::SeqCst) {
        return 0;
    }
    // SAFETY: caller contract.
    unsafe {
        if !(*id).event.is_null() {
            ack_cm_event((*id).event);
            (*id).event = ptr::null_mut();
        }
        if get_cm_event((*id).channel, &raw mut (*id).event) != 0 {
            return -1;
        }
        let ev = &*(*id).event;
        match (ev.event, ev.status) {
            (_, 0) => 0,
            (REJECTED, _) => fail(libc::ECONNREFUSED),
            (_, s) => fail(s.saturating_abs()),
        }
    }
}

/// Where to connect to reach a listener bound to `a` (a wildcard address
/// is reached on loopback).
fn wake_addr(a: SocketAddr) -> SocketAddr {
    let ip = match a.ip() {
        IpAddr::V4(v) if v.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v) if v.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, a.port())
}

/// `rdma_migrate_id`: the id's later events, and those queued for it and
/// not yet taken, go to `chp`. As librdmacm's, a NULL `chp` makes the id
/// synchronous (a channel of its own), any other makes it asynchronous: its
/// calls no longer wait for their events, which the application now takes
/// from `chp` (libfabric's verbs provider makes its ids with
/// `rdma_create_ep`, synchronous, then moves them to its event queue's
/// channel). A synchronous id's own channel, and the event it kept, go.
unsafe extern "C" fn migrate_id(id: *mut rdma_cm_id, chp: *mut rdma_event_channel) -> c_int {
    let Some(state) = reg().ids.get(&(id as usize)).cloned() else {
        return fail(libc::EINVAL);
    };
    let sync = chp.is_null();
    let found = if sync {
        private_channel()
    } else {
        let c = reg().channels.get(&(chp as usize)).cloned();
        c.map(|c| (chp, c))
    };
    let Some((chp, new)) = found else {
        return fail(if sync { libc::EMFILE } else { libc::EINVAL });
    };
    let (old_chp, old) = std::mem::replace(&mut *lock(&state.channel), (chp as usize, new.clone()));
    if !Arc::ptr_eq(&old, &new) {
        let moved: VecDeque<usize> = {
            let mut q = lock(&old.queue);
            let (moved, kept) = q.drain(..).partition(|&ev| {
                // SAFETY: a queued event is deliver_to's live Box<EventBox>.
                let e = unsafe { &*(ev as *const EventBox) };
                e.ev.id == id
            });
            *q = kept;
            moved
        };
        // (Their counts stay on the old eventfd: a reader there finds the
        // queue empty and reads again.)
        for ev in moved {
            new.push(ev);
        }
    }
    let was_sync = state.sync.swap(sync, Ordering::SeqCst);
    // SAFETY: `id` is live; the application does not use a synchronous id
    // from two threads at once (librdmacm's rule), so its kept event is ours.
    unsafe {
        if was_sync && old_chp != chp as usize {
            if !(*id).event.is_null() {
                ack_cm_event((*id).event);
                (*id).event = ptr::null_mut();
            }
            // The old channel was the id's own (private_channel).
            destroy_event_channel(old_chp as *mut rdma_event_channel);
        }
        (*id).channel = chp;
    }
    0
}

unsafe extern "C" fn get_cm_event(
    chp: *mut rdma_event_channel,
    out: *mut *mut rdma_cm_event,
) -> c_int {
    if out.is_null() {
        return fail(libc::EINVAL);
    }
    let Some(ch) = reg().channels.get(&(chp as usize)).cloned() else {
        return fail(libc::EINVAL);
    };
    loop {
        let mut n = 0u64;
        // SAFETY: reads 8 bytes into `n`; blocks unless the application
        // made the fd non-blocking (then -1 with EAGAIN, as librdmacm).
        let r = unsafe { libc::read(ch.fd.as_raw_fd(), (&raw mut n).cast(), 8) };
        if r < 0 {
            return -1;
        }
        if let Some(ev) = lock(&ch.queue).pop_front() {
            let mut r = reg();
            // SAFETY: a queued event is deliver_to's live Box<EventBox>, now
            // this call's alone.
            let e = unsafe { &*(ev as *const EventBox) };
            if let Some(peer) = e.peer
                && r.ids.contains_key(&(e.ev.id as usize))
            {
                // SAFETY: the id is live (registry locked); this is the
                // application's thread, taking the id's event.
                unsafe { set_route_addr(e.ev.id, true, peer) };
            }
            r.events.insert(ev, ());
            // SAFETY: `out` is the caller's pointer slot; `ev` is an EventBox
            // whose first field is the rdma_cm_event.
            unsafe { *out = ev as *mut rdma_cm_event };
            return 0;
        }
    }
}

unsafe extern "C" fn ack_cm_event(ev: *mut rdma_cm_event) -> c_int {
    if reg().events.remove(&(ev as usize)).is_none() {
        return fail(libc::EINVAL);
    }
    // SAFETY: a handed-out event is deliver_to's Box<EventBox> (repr(C),
    // the event first).
    drop(unsafe { Box::from_raw(ev.cast::<EventBox>()) });
    0
}

unsafe extern "C" fn event_str(e: c_int) -> *const c_char {
    const NAMES: [&CStr; 16] = [
        c"RDMA_CM_EVENT_ADDR_RESOLVED",
        c"RDMA_CM_EVENT_ADDR_ERROR",
        c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        c"RDMA_CM_EVENT_ROUTE_ERROR",
        c"RDMA_CM_EVENT_CONNECT_REQUEST",
        c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        c"RDMA_CM_EVENT_CONNECT_ERROR",
        c"RDMA_CM_EVENT_UNREACHABLE",
        c"RDMA_CM_EVENT_REJECTED",
        c"RDMA_CM_EVENT_ESTABLISHED",
        c"RDMA_CM_EVENT_DISCONNECTED",
        c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        c"RDMA_CM_EVENT_MULTICAST_JOIN",
        c"RDMA_CM_EVENT_MULTICAST_ERROR",
        c"RDMA_CM_EVENT_ADDR_CHANGE",
        c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
    ];
    usize::try_from(e)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or(c"UNKNOWN EVENT", |s| s)
        .as_ptr()
}

// ---------------------------------------------------------------------------
// Addresses, listening.

unsafe extern "C" fn bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int {
    if id_state(id).is_none() {
        return fail(libc::EINVAL);
    }
    // SAFETY: a non-NULL addr is a sockaddr of its family (caller contract).
    let Some(a) = (unsafe { from_sockaddr(addr) }) else {
        return fail(libc::EAFNOSUPPORT);
    };
    // SAFETY: `id` is live.
    unsafe {
        set_route_addr(id, false, a);
        // An id bound to a loopback address names no device: the kernel's
        // rdma_cm finds none on lo (RDMA devices sit on real interfaces).
        // libfabric's verbs provider binds "localhost" to find a passive
        // endpoint's source and, given a device there, names the endpoint
        // 127.0.0.1 to its peers; given none, it takes the device's
        // interface address, which a peer on another host can reach.
        // Loopback connections still work: a listener's connection
        // requests and an active id's resolved route name this device.
        if !a.ip().is_loopback() {
            (*id).verbs = verbs();
        }
    }
    0
}

/// The MPA options of the CM's connections, as rdma_cm sets them up on
/// siw, the kernel's software iWARP device (its defaults): Rev 2 with the
/// enhanced block, CRC only if the peer requires it (RFC 5044 section
/// 7.1.2: either side's C=1 turns it on), no Markers; with `private_data`.
/// Unlike siw's default this side offers (as initiator) and accepts (as
/// responder) a peer-to-peer RTR (RFC 6581), which tools whose server sends
/// first need, and sends its RTR after FIRST_FPDU_DELAY. The id's type of
/// service (`rdma_set_option`), if it has one.
fn cm_mpa_options(state: &Id, private_data: Vec<u8>) -> rddp_mpa::MpaOptions {
    rddp_mpa::MpaOptions {
        crc: false,
        private_data,
        tos: *lock(&state.tos),
        rtr_delay: FIRST_FPDU_DELAY,
        ..rddp_mpa::MpaOptions::default()
    }
}

unsafe extern "C" fn listen(id: *mut rdma_cm_id, _backlog: c_int) -> c_int {
    let Some(state) = id_state(id) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: `id` is live.
    let Some(src) = (unsafe { route_addr(id, false) }) else {
        return fail(libc::EINVAL);
    };
    if lock(&state.listening).is_some() {
        return fail(libc::EINVAL);
    }
    let opts = cm_mpa_options(&state, Vec::new());
    let listener = match rddp::transport::mpa::Listener::bind(src, opts) {
        Ok(l) => l,
        Err(rddp_mpa::MpaError::Io(e)) => return fail(e.raw_os_error().unwrap_or(libc::EIO)),
        Err(_) => return fail(libc::EINVAL),
    };
    let Ok(local) = listener.local_addr() else {
        return fail(libc::EIO);
    };
    // SAFETY: `id` is live.
    unsafe {
        set_route_addr(id, false, local);
        if (*id).verbs.is_null() {
            (*id).verbs = verbs();
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    *lock(&state.listening) = Some((stop.clone(), local));
    // SAFETY: `id` is live; its fields are read once here, on this thread.
    let (ctx, ps) = unsafe { ((*id).context, (*id).ps) };
    let listen_id = id as usize;
    let ctx = ctx as usize;
    let spawned = std::thread::Builder::new()
        .name("rdma_cm listen".into())
        .spawn(move || serve(listener, stop, state, listen_id, ctx, ps));
    if spawned.is_err() {
        return fail(libc::EAGAIN);
    }
    0
}

/// The listener's thread: each MPA Request becomes a CONNECT_REQUEST on a
/// new id, answered when the application calls `rdma_accept` or
/// `rdma_reject` (RFC 5044 section 7.1.2: the Reply follows the ULP's
/// decision), with the IRD/ORD `rdma_accept` gives (RFC 6581 section 5.1).
fn serve(
    listener: rddp::transport::mpa::Listener,
    stop: Arc<AtomicBool>,
    state: Arc<Id>,
    listen_id: usize,
    ctx: usize,
    ps: c_int,
) {
    // The listener's own IRD/ORD, which `rdma_accept` may override.
    let defaults = cm_mpa_options(&state, Vec::new());
    while !stop.load(Ordering::SeqCst) {
        let mut child = 0usize;
        let mut accepted_qp = 0usize;
        let res = listener.accept_with_ird_ord(defaults.ird, defaults.ord, |req, (here, peer)| {
            if stop.load(Ordering::SeqCst) {
                return Err(Vec::new());
            }
            let (tx, rx) = mpsc::channel();
            let (chp, ch) = lock(&state.channel).clone();
            // The request goes to the listener's channel; a synchronous
            // listener's new id is synchronous too, with a channel of its own
            // (as librdmacm migrates it), where rdma_accept waits.
            let sync = state.sync.load(Ordering::SeqCst);
            let (child_chp, child_ch) = if sync {
                match private_channel() {
                    Some((p, c)) => (p as usize, c),
                    None => return Err(Vec::new()),
                }
            } else {
                (chp, ch.clone())
            };
            let c = new_id(
                child_chp as *mut rdma_event_channel,
                child_ch,
                ctx as *mut c_void,
                ps,
                sync,
            );
            // The new id carries the connection's own addresses when its
            // CONNECT_REQUEST is taken, as the kernel's rdma_cm fills a
            // request's id from the iWARP CM's event (its local and remote
            // addresses): the local one is not the listener's wildcard, and
            // the peer's is where the request came from (libfabric's verbs
            // provider reads both at the request; ofi_rxm finds its peer by
            // the second).
            // SAFETY: `c` was just made and is not yet known to the application.
            unsafe {
                (*c).verbs = verbs();
                set_route_addr(c, false, here);
                set_route_addr(c, true, peer);
            }
            child = c as usize;
            // As the kernel's iw_cm reports a request: the resources this
            // side must answer with are the peer's ORD (its outstanding
            // Reads), the depth it may use the peer's IRD (RFC 6581
            // section 5.1).
            let (ird, ord) = req.enhanced.as_ref().map_or((0, 0), |e| (e.ord, e.ird));
            let clamp = |v: u16| u8::try_from(v).unwrap_or(u8::MAX);
            if let Some(s) = reg().ids.get(&child) {
                *lock(&s.pending) = Some((tx, (clamp(ird), clamp(ord))));
            }
            deliver_to(
                &ch,
                child,
                listen_id,
                CONNECT_REQUEST,
                0,
                req.private_data.clone(),
                (clamp(ird), clamp(ord)),
            );
            match rx.recv() {
                Ok(Decision::Accept(qp, pd)) => {
                    accepted_qp = qp;
                    Ok(pd)
                }
                Ok(Decision::Reject(pd)) => Err(pd),
                Err(_) => Err(Vec::new()),
            }
        });
        match res {
            Ok(mut conn) => {
                let qpp = accepted_qp as *mut ibv_qp;
                let peer = conn.info.peer;
                // As siw's (and so the kernel's) responder: the application
                // may send first even when the initiator agreed no RTR; its
                // first FPDU waits for ESTABLISHED, below.
                conn.send_before_first_fpdu();
                match qp::attach(qpp, conn) {
                    // The passive side holds ESTABLISHED as long as the
                    // active side does (FIRST_FPDU_DELAY), on a thread of
                    // its own so that the next request is not held too.
                    Ok(()) => {
                        let qpu = accepted_qp;
                        let established = move || {
                            deliver_with_peer(child, 0, ESTABLISHED, 0, Vec::new(), peer);
                            watch(child, qpu);
                        };
                        let spawned = std::thread::Builder::new()
                            .name("rdma_cm accept".into())
                            .spawn(move || {
                                std::thread::sleep(FIRST_FPDU_DELAY);
                                established();
                            });
                        // No thread to wait on: ESTABLISHED at once (the
                        // closure is Copy: it holds two ids and an address).
                        if spawned.is_err() {
                            established();
                        }
                    }
                    Err(e) => deliver(child, 0, CONNECT_ERROR, -e, Vec::new()),
                }
            }
            Err(_) if child != 0 && accepted_qp != 0 => {
                deliver(child, 0, CONNECT_ERROR, -libc::ECONNRESET, Vec::new());
            }
            Err(_) => {}
        }
    }
}

/// Watches the connected QP of `id` and queues DISCONNECTED once its
/// connection ends, unless the id is done first.
fn watch(id: usize, qpp: usize) {
    let Some(state) = reg().ids.get(&id).cloned() else {
        return;
    };
    let state = Arc::downgrade(&state);
    let _ = qp::on_llp_closed(qpp as *mut ibv_qp, move || {
        defer(Box::new(move || {
            // Still this id (not destroyed, nor a new one at its address),
            // and not disconnected already.
            let Some(state) = state.upgrade() else {
                return;
            };
            let same = reg().ids.get(&id).is_some_and(|s| Arc::ptr_eq(s, &state));
            if same && !state.done.swap(true, Ordering::SeqCst) {
                deliver(id, 0, DISCONNECTED, 0, Vec::new());
            }
        }));
    });
}

/// Work handed on by contexts that may hold a queue pair's locks (its end
/// hook, [`watch`]), run in order on one thread of the CM's, started at
/// first use. (Should that thread fail to start, the work is dropped: no
/// DISCONNECTED, as a lost connection the application still sees through
/// its QP.)
fn defer(job: Box<dyn FnOnce() + Send>) {
    type Job = Box<dyn FnOnce() + Send>;
    static TX: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    let tx = TX.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let _ = std::thread::Builder::new()
            .name("rdma_cm events".into())
            .spawn(move || rx.into_iter().for_each(|job| job()));
        tx
    });
    let _ = tx.send(job);
}

/// The source address the host's routing picks to reach `d`: what the
/// kernel's rdma_cm writes into `route.addr.src_addr` when
/// `rdma_resolve_addr` is given no source, or a wildcard one (its IP
/// resolution takes the route's preferred source, and a loopback
/// destination is reached from loopback). Applications read it back as
/// their own address (`rdma_get_local_addr`): libfabric's verbs provider
/// names its endpoints with it, and a wildcard there is no address a peer
/// can reach. Found by connecting a UDP socket, which sends nothing; the
/// port plays no part in the route, so port 0 (which `connect` may refuse)
/// is replaced.
fn routed_source(d: SocketAddr) -> std::io::Result<IpAddr> {
    let any = match d {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    };
    let probe = std::net::UdpSocket::bind(any)?;
    let mut to = d;
    if to.port() == 0 {
        to.set_port(9);
    }
    probe.connect(to)?;
    Ok(probe.local_addr()?.ip())
}

unsafe extern "C" fn resolve_addr(
    id: *mut rdma_cm_id,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
    _timeout_ms: c_int,
) -> c_int {
    let Some(state) = id_state(id) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: non-NULL addresses are sockaddrs of their family (caller contract).
    let Some(d) = (unsafe { from_sockaddr(dst) }) else {
        return fail(libc::EAFNOSUPPORT);
    };
    // SAFETY: as above.
    let given = unsafe { from_sockaddr(src) };
    // A source given with its address is kept; none, or a wildcard one,
    // becomes the address the host's routing picks toward `d` (port kept).
    let s = match given {
        Some(s) if !s.ip().is_unspecified() => Ok(s),
        _ => routed_source(d).map(|ip| SocketAddr::new(ip, given.map_or(0, |s| s.port()))),
    };
    let s = match s {
        Ok(s) => s,
        Err(e) => {
            // No route: as the kernel's rdma_cm reports it, an ADDR_ERROR
            // event with the negative errno, the call itself succeeding.
            let e = e.raw_os_error().unwrap_or(libc::EHOSTUNREACH);
            deliver(id as usize, 0, ADDR_ERROR, -e, Vec::new());
            // SAFETY: `id` is live, on the caller's thread.
            return unsafe { complete(id, &state) };
        }
    };
    // SAFETY: `id` is live.
    unsafe {
        set_route_addr(id, false, s);
        set_route_addr(id, true, d);
        (*id).verbs = verbs();
    }
    deliver(id as usize, 0, ADDR_RESOLVED, 0, Vec::new());
    // SAFETY: `id` is live, on the caller's thread.
    unsafe { complete(id, &state) }
}

unsafe extern "C" fn resolve_route(id: *mut rdma_cm_id, _timeout_ms: c_int) -> c_int {
    let Some(state) = id_state(id) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: `id` is live.
    if unsafe { route_addr(id, true) }.is_none() {
        return fail(libc::EINVAL);
    }
    deliver(id as usize, 0, ROUTE_RESOLVED, 0, Vec::new());
    // SAFETY: `id` is live, on the caller's thread.
    unsafe { complete(id, &state) }
}

// ---------------------------------------------------------------------------
// QPs and connections.

/// The device's default PD, allocated at first use: what `rdma_create_qp`
/// and `rdma_create_ep` use when given none, as librdmacm's per-device PD.
fn default_pd() -> *mut ibv_pd {
    static PD: OnceLock<usize> = OnceLock::new();
    if let Some(&p) = PD.get() {
        return p as *mut ibv_pd;
    }
    // SAFETY: verbs() is this library's own context.
    let p = unsafe { res::alloc_pd(verbs()) };
    if p.is_null() {
        return p;
    }
    match PD.set(p as usize) {
        Ok(()) => p,
        Err(_) => {
            // Another thread's came first: this one is not needed.
            // SAFETY: `p` was just allocated and is used by nothing.
            unsafe { res::dealloc_pd(p) };
            PD.get().map_or(ptr::null_mut(), |&q| q as *mut ibv_pd)
        }
    }
}

/// A CQ of `cqe` entries whose context is `id`, with a completion channel of
/// its own, as librdmacm makes for a QP given none: `(cq, channel)`.
fn own_cq(id: *mut rdma_cm_id, cqe: u32) -> Option<(usize, usize)> {
    let ctx = verbs();
    // SAFETY: `ctx` is this library's own context.
    let ch = unsafe { res::create_comp_channel(ctx) };
    if ch.is_null() {
        return None;
    }
    let cqe = c_int::try_from(cqe.max(1)).unwrap_or(c_int::MAX);
    // SAFETY: as above; `ch` was just made on it.
    let cq = unsafe { res::create_cq(ctx, cqe, id.cast(), ch, 0) };
    if cq.is_null() {
        // SAFETY: `ch` is ours and unused.
        unsafe { res::destroy_comp_channel(ch) };
        return None;
    }
    Some((cq as usize, ch as usize))
}

/// Destroys what [`own_cq`] made (`[send cq, recv cq, send channel, recv
/// channel]`, 0 where none).
fn free_own_cqs([scq, rcq, sch, rch]: [usize; 4]) {
    // SAFETY: each non-zero entry is a live CQ or channel of ours, used by no
    // QP any more (its QP was destroyed first); the channels go after their CQs.
    unsafe {
        for cq in [scq, rcq] {
            if cq != 0 {
                res::destroy_cq(cq as *mut abi::ibv_cq);
            }
        }
        for ch in [sch, rch] {
            if ch != 0 {
                res::destroy_comp_channel(ch as *mut abi::ibv_comp_channel);
            }
        }
    }
}

unsafe extern "C" fn create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    let Some(state) = id_state(id) else {
        return fail(libc::EINVAL);
    };
    if attr.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: `id` is live.
    if !unsafe { (*id).qp }.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: `id` is live.
    let pd = match (pd.is_null(), unsafe { (*id).pd }.is_null()) {
        (false, _) => pd,
        // SAFETY: as above.
        (true, false) => unsafe { (*id).pd },
        (true, true) => default_pd(),
    };
    if pd.is_null() {
        return -1;
    }
    // CQs the attributes do not name are made here, one per queue with a
    // channel of its own (librdmacm's ucma_create_cqs), and written back.
    let mut own = [0usize; 4];
    // SAFETY: `attr` is the caller's (verbs.h contract).
    let a = unsafe { &mut *attr };
    if a.send_cq.is_null() && a.cap.max_send_wr > 0 {
        let Some((cq, ch)) = own_cq(id, a.cap.max_send_wr) else {
            return -1;
        };
        (own[0], own[2]) = (cq, ch);
        a.send_cq = cq as *mut abi::ibv_cq;
    }
    if a.recv_cq.is_null() && a.cap.max_recv_wr > 0 {
        let Some((cq, ch)) = own_cq(id, a.cap.max_recv_wr) else {
            free_own_cqs(own);
            return -1;
        };
        (own[1], own[3]) = (cq, ch);
        a.recv_cq = cq as *mut abi::ibv_cq;
    }
    let undo = |attr: &mut ibv_qp_init_attr| {
        if own[0] != 0 {
            attr.send_cq = ptr::null_mut();
        }
        if own[1] != 0 {
            attr.recv_cq = ptr::null_mut();
        }
        free_own_cqs(own);
    };
    // SAFETY: pd and attr are the caller's (verbs.h contract); create_qp
    // checks the PD.
    let q = unsafe { qp::create_qp(pd, attr) };
    if q.is_null() {
        undo(a);
        return -1;
    }
    // As librdmacm over iWARP: the QP goes to INIT, ready for the connection.
    // SAFETY: all-zero is a valid ibv_qp_attr.
    let mut m: ibv_qp_attr = unsafe { std::mem::zeroed() };
    m.qp_state = abi::IBV_QPS_INIT;
    m.port_num = 1;
    m.qp_access_flags =
        abi::IBV_ACCESS_LOCAL_WRITE | abi::IBV_ACCESS_REMOTE_READ | abi::IBV_ACCESS_REMOTE_WRITE;
    let mask =
        abi::IBV_QP_STATE | abi::IBV_QP_PKEY_INDEX | abi::IBV_QP_PORT | abi::IBV_QP_ACCESS_FLAGS;
    // SAFETY: `q` is the QP just created; `m` is ours.
    let r = unsafe { qp::modify_qp(q, &raw mut m, mask) };
    if r != 0 {
        // SAFETY: `q` is live and ours.
        unsafe { qp::destroy_qp(q) };
        undo(a);
        return fail(r);
    }
    if own != [0; 4] {
        lock(&state.ep).cqs = Some(own);
    }
    // SAFETY: `id` is live; `attr` the caller's.
    unsafe {
        (*id).qp = q;
        (*id).pd = pd;
        (*id).send_cq = a.send_cq;
        (*id).recv_cq = a.recv_cq;
        (*id).send_cq_channel = own[2] as *mut c_void;
        (*id).recv_cq_channel = own[3] as *mut c_void;
    }
    0
}

unsafe extern "C" fn destroy_qp(id: *mut rdma_cm_id) {
    let Some(state) = id_state(id) else {
        return;
    };
    // SAFETY: `id` is live.
    unsafe {
        let q = (*id).qp;
        if !q.is_null() {
            qp::destroy_qp(q);
            (*id).qp = ptr::null_mut();
        }
    }
    if let Some(own) = lock(&state.ep).cqs.take() {
        free_own_cqs(own);
        // SAFETY: `id` is live.
        unsafe {
            (*id).send_cq = ptr::null_mut();
            (*id).recv_cq = ptr::null_mut();
            (*id).send_cq_channel = ptr::null_mut();
            (*id).recv_cq_channel = ptr::null_mut();
        }
    }
}

// ---------------------------------------------------------------------------
// Endpoints: the synchronous API of rdma_cma.h.

/// `rdma_create_ep`: a synchronous id for `res`. Passive (`RAI_PASSIVE`):
/// bound to the source address, `attr` kept for the QPs of
/// `rdma_get_request`. Active: address and route resolved, and a QP made
/// when `attr` is given.
unsafe extern "C" fn create_ep(
    out: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    if out.is_null() || res.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: `res` is the caller's rdma_addrinfo (from rdma_getaddrinfo).
    let r = unsafe { &*res };
    let mut id = ptr::null_mut();
    // SAFETY: `id` is our slot.
    if unsafe {
        create_id(
            ptr::null_mut(),
            &raw mut id,
            ptr::null_mut(),
            r.ai_port_space,
        )
    } != 0
    {
        return -1;
    }
    // SAFETY: `id` was just made; `res`'s addresses are the caller's.
    let ok = unsafe {
        if r.ai_flags & RAI_PASSIVE != 0 {
            let bound = bind_addr(id, r.ai_src_addr) == 0;
            if bound && !pd.is_null() {
                (*id).pd = pd;
            }
            if bound
                && !attr.is_null()
                && let Some(s) = id_state(id)
            {
                let mut a = *attr;
                a.qp_type = r.ai_qp_type;
                lock(&s.ep).qp_init = Some(QpInit(a));
            }
            bound
        } else {
            resolve_addr(id, r.ai_src_addr, r.ai_dst_addr, 2000) == 0
                && resolve_route(id, 2000) == 0
                && (attr.is_null() || {
                    (*attr).qp_type = r.ai_qp_type;
                    create_qp(id, pd, attr) == 0
                })
        }
    };
    if !ok {
        let e = crate::exports::errno();
        // SAFETY: `id` is ours, known to nobody else.
        unsafe { destroy_ep(id) };
        return fail(e);
    }
    // SAFETY: `out` is the caller's slot.
    unsafe { *out = id };
    0
}

/// `rdma_destroy_ep`: the id's QP (and the CQs made for it), then the id.
unsafe extern "C" fn destroy_ep(id: *mut rdma_cm_id) {
    // SAFETY: a live id (each call checks), or nothing happens.
    unsafe {
        destroy_qp(id);
        destroy_id(id);
    }
}

/// `rdma_get_request`: on a synchronous listening id, waits for the next
/// connection request and hands out its new id (keeping the event in
/// `id->event`), with a QP made from the listener's `rdma_create_ep`
/// attributes if it had some.
unsafe extern "C" fn get_request(listen: *mut rdma_cm_id, out: *mut *mut rdma_cm_id) -> c_int {
    let Some(state) = id_state(listen) else {
        return fail(libc::EINVAL);
    };
    if !state.sync.load(Ordering::SeqCst) || out.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: `listen` is live and synchronous: this thread's alone.
    let r = unsafe { complete(listen, &state) };
    // SAFETY: as above.
    let ev = unsafe { (*listen).event };
    if r != 0 || ev.is_null() {
        return -1;
    }
    // SAFETY: a kept event is ours until acknowledged.
    let (event, child) = unsafe { ((*ev).event, (*ev).id) };
    if event != CONNECT_REQUEST {
        return fail(libc::EINVAL);
    }
    let init = lock(&state.ep).qp_init.as_ref().map(|q| q.0);
    if let Some(mut a) = init {
        // SAFETY: the child is live (its request is unanswered); `a` is ours.
        if unsafe { create_qp(child, (*listen).pd, &raw mut a) } != 0 {
            return -1;
        }
    }
    // The event moves to the new id, acknowledged with it (librdmacm).
    // SAFETY: both ids are live.
    unsafe {
        (*listen).event = ptr::null_mut();
        (*child).event = ev;
        *out = child;
    }
    0
}

/// The private data of `param`, if any.
///
/// # Safety
/// `param` is NULL or a valid `rdma_conn_param`.
unsafe fn private_of(param: *const rdma_conn_param) -> Vec<u8> {
    if param.is_null() {
        return Vec::new();
    }
    // SAFETY: caller contract.
    let p = unsafe { *param };
    if p.private_data.is_null() || p.private_data_len == 0 {
        return Vec::new();
    }
    // SAFETY: `private_data` holds `private_data_len` bytes (caller contract).
    unsafe {
        std::slice::from_raw_parts(p.private_data.cast::<u8>(), usize::from(p.private_data_len))
    }
    .to_vec()
}

/// The QP a connection of `id` runs on: `id->qp` (made by `rdma_create_qp`),
/// or, for a QP the application created itself (`id->qp` NULL), the QP of
/// the id's context that `param->qp_num` names, as the kernel's iw_cm finds
/// it (librdmacm passes `qp_num` down for such QPs).
///
/// # Safety
/// `id` is a live id; `param` is NULL or the caller's `rdma_conn_param`.
unsafe fn conn_qp(id: *mut rdma_cm_id, param: *const rdma_conn_param) -> Option<*mut ibv_qp> {
    // SAFETY: caller contract.
    let (q, ctx) = unsafe { ((*id).qp, (*id).verbs as usize) };
    if !q.is_null() {
        return Some(q);
    }
    if param.is_null() {
        return None;
    }
    // SAFETY: caller contract.
    qp::by_num(ctx, unsafe { (*param).qp_num })
}

/// How long the active side holds its Write RTR (RFC 6581), when one was
/// negotiated, after the MPA Reply, and then ESTABLISHED after the RTR (or
/// the Reply), so that neither reaches a siw responder before it has
/// installed the socket callback that reads it; the passive side holds
/// ESTABLISHED as long after its Reply, for a siw initiator, which reads the
/// Reply in its connection manager and installs the queue pair's socket
/// callback only then (a responder may send first here, see
/// `Connection::send_before_first_fpdu`).
/// RFC 5044 section 7.1.2 and RFC 6581 let the initiator send as soon as it
/// has the Reply, but siw (Linux 6.1) sends its Reply before it installs
/// the queue pair's (or, waiting for an RTR, the RTR's) socket callback, and
/// octets that land in between stay unread until more data arrives
/// (docs/interop.md, difference 5). An RTR left there keeps iw_cm from
/// seeing the connection established; with a server that sends first
/// (ucmatose) nothing more arrives, and siw's close of the connection in
/// that state stops the kernel at an iw_cm BUG. A delay, not a handshake:
/// nothing on the wire says when siw's callback is in place.
/// `rddp rping --first-send-delay` waits as long.
const FIRST_FPDU_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

unsafe extern "C" fn connect(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    let Some(state) = id_state(id) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: `id` is live; `param` is NULL or the caller's.
    let (q, dst) = unsafe { (conn_qp(id, param), route_addr(id, true)) };
    let (Some(dst), Some(q)) = (dst, q) else {
        return fail(libc::EINVAL);
    };
    if let Err(e) = qp::ird_ord(q) {
        return fail(e);
    }
    if state.connecting.swap(true, Ordering::SeqCst) {
        return fail(libc::EINVAL);
    }
    state.qp.store(q as usize, Ordering::SeqCst);
    if !param.is_null() {
        // IRD and ORD to ask for: the conn_param's (RDMA_MAX_RESP_RES and
        // RDMA_MAX_INIT_DEPTH, 255, mean the device's most), set on the QP
        // for connect_mpa to take.
        // SAFETY: a non-NULL `param` is the caller's.
        let p = unsafe { *param };
        let max = u8::try_from(crate::device::MAX_RD_ATOM).unwrap_or(u8::MAX);
        if let Err(e) = set_ird_ord(
            q,
            p.responder_resources.min(max),
            p.initiator_depth.min(max),
        ) {
            return fail(e);
        }
    }
    // SAFETY: `param` is NULL or the caller's.
    let opts = cm_mpa_options(&state, unsafe { private_of(param) });
    let (idu, qu) = (id as usize, q as usize);
    let spawned = std::thread::Builder::new()
        .name("rdma_cm connect".into())
        .spawn(
            move || match qp::connect_mpa(qu as *mut ibv_qp, dst, opts) {
                // As the kernel's iw_cm reports a connect reply: the
                // Reply's private data comes with ESTABLISHED (ofi_rxm
                // learns its peer's connection index from it), after
                // FIRST_FPDU_DELAY.
                Ok(reply) => {
                    std::thread::sleep(FIRST_FPDU_DELAY);
                    deliver(idu, 0, ESTABLISHED, 0, reply);
                    watch(idu, qu);
                }
                // As the kernel's iw_cm: a refusal or reset is REJECTED, a
                // timeout UNREACHABLE, anything else CONNECT_ERROR.
                Err(e @ (libc::ECONNREFUSED | libc::ECONNRESET)) => {
                    deliver(idu, 0, REJECTED, -e, Vec::new());
                }
                Err(e @ libc::ETIMEDOUT) => deliver(idu, 0, UNREACHABLE, -e, Vec::new()),
                Err(e) => deliver(idu, 0, CONNECT_ERROR, -e, Vec::new()),
            },
        );
    if spawned.is_err() {
        return fail(libc::EAGAIN);
    }
    // SAFETY: `id` is live, on the caller's thread.
    unsafe { complete(id, &state) }
}

/// Sets the IRD (`max_dest_rd_atomic`) and ORD (`max_rd_atomic`) the QP `q`
/// offers at connection setup (attributes only, no state change).
fn set_ird_ord(q: *mut ibv_qp, ird: u8, ord: u8) -> Result<(), c_int> {
    // SAFETY: all-zero is a valid ibv_qp_attr.
    let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
    a.max_dest_rd_atomic = ird;
    a.max_rd_atomic = ord;
    let mask = abi::IBV_QP_MAX_QP_RD_ATOMIC | abi::IBV_QP_MAX_DEST_RD_ATOMIC;
    // SAFETY: modify_qp checks `q` is a live QP of ours; `a` is ours.
    match unsafe { qp::modify_qp(q, &raw mut a, mask) } {
        0 => Ok(()),
        r => Err(r),
    }
}

unsafe extern "C" fn accept(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    let Some(state) = id_state(id) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: `id` is live; `param` is NULL or the caller's.
    let Some(q) = (unsafe { conn_qp(id, param) }) else {
        return fail(libc::EINVAL);
    };
    if let Err(e) = qp::ird_ord(q) {
        return fail(e);
    }
    let Some((tx, requested)) = lock(&state.pending).take() else {
        return fail(libc::EINVAL);
    };
    state.qp.store(q as usize, Ordering::SeqCst);
    // The Reply offers the conn_param's IRD (`responder_resources`) and ORD
    // (`initiator_depth`); NULL, or RDMA_MAX_RESP_RES/RDMA_MAX_INIT_DEPTH
    // (255), take what the request reported, capped by the device, as
    // librdmacm's rdma_accept.
    // SAFETY: `param` is NULL or the caller's.
    let given = (!param.is_null()).then(|| unsafe { *param });
    let max = u8::try_from(crate::device::MAX_RD_ATOM).unwrap_or(u8::MAX);
    let pick = |v: Option<u8>, req: u8| match v {
        Some(v) if v != u8::MAX => v.min(max),
        _ => req.min(max),
    };
    let ird = pick(given.map(|p| p.responder_resources), requested.0);
    let ord = pick(given.map(|p| p.initiator_depth), requested.1);
    if let Err(e) = set_ird_ord(q, ird, ord) {
        return fail(e);
    }
    let reply = rddp_mpa::Accept {
        // SAFETY: `param` is NULL or the caller's.
        private_data: unsafe { private_of(param) },
        ird_ord: Some((u16::from(ird), u16::from(ord))),
    };
    if tx.send(Decision::Accept(q as usize, reply)).is_err() {
        return fail(libc::ECONNABORTED);
    }
    // SAFETY: `id` is live, on the caller's thread.
    unsafe { complete(id, &state) }
}

unsafe extern "C" fn reject(id: *mut rdma_cm_id, data: *const c_void, len: u8) -> c_int {
    let Some(state) = id_state(id) else {
        return fail(libc::EINVAL);
    };
    let Some((tx, _)) = lock(&state.pending).take() else {
        return fail(libc::EINVAL);
    };
    let pd = if data.is_null() {
        Vec::new()
    } else {
        // SAFETY: `data` holds `len` bytes (caller contract).
        unsafe { std::slice::from_raw_parts(data.cast::<u8>(), usize::from(len)) }.to_vec()
    };
    let _ = tx.send(Decision::Reject(pd));
    0
}

unsafe extern "C" fn disconnect(id: *mut rdma_cm_id) -> c_int {
    let Some(state) = id_state(id) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: `id` is live.
    let own = unsafe { (*id).qp };
    let q = if own.is_null() {
        state.qp.load(Ordering::SeqCst) as *mut ibv_qp
    } else {
        own
    };
    match qp::disconnect(q) {
        Ok(()) => {}
        // A QP the application made itself and moved to ERR first (as
        // rping -q does): its connection is already gone.
        Err(_) if own.is_null() && !q.is_null() => {}
        Err(e) => return fail(e),
    }
    if !state.done.swap(true, Ordering::SeqCst) {
        deliver(id as usize, 0, DISCONNECTED, 0, Vec::new());
    }
    0
}

/// `rdma_init_qp_attr`: what iWARP's CM gives for a QP it does not manage,
/// as the kernel's iw_cm: INIT takes the port and the access flags, RTR only
/// the state, RTS nothing (mask 0: the CM moves the QP to RTS itself when
/// the connection is established).
unsafe extern "C" fn init_qp_attr(
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_attr,
    mask: *mut c_int,
) -> c_int {
    if id_state(id).is_none() || attr.is_null() || mask.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: `attr` and `mask` are the caller's.
    unsafe {
        match (*attr).qp_state {
            abi::IBV_QPS_INIT => {
                (*attr).port_num = 1;
                (*attr).pkey_index = 0;
                (*attr).qp_access_flags = abi::IBV_ACCESS_LOCAL_WRITE
                    | abi::IBV_ACCESS_REMOTE_READ
                    | abi::IBV_ACCESS_REMOTE_WRITE;
                *mask = abi::IBV_QP_STATE
                    | abi::IBV_QP_PKEY_INDEX
                    | abi::IBV_QP_PORT
                    | abi::IBV_QP_ACCESS_FLAGS;
            }
            abi::IBV_QPS_RTR => *mask = abi::IBV_QP_STATE,
            abi::IBV_QPS_RTS => *mask = 0,
            _ => return fail(libc::EINVAL),
        }
    }
    0
}

/// `rdma_establish`: for a QP the application made itself, the active side
/// says it has moved it to RTS. Over iWARP the CM attached the connection
/// and moved the QP already (ESTABLISHED came first, as from the kernel's
/// iw_cm), so there is nothing left to do; `EINVAL` for an id with no
/// connection under way.
unsafe extern "C" fn establish(id: *mut rdma_cm_id) -> c_int {
    match id_state(id) {
        Some(s) if s.qp.load(Ordering::SeqCst) != 0 => 0,
        _ => fail(libc::EINVAL),
    }
}

unsafe extern "C" fn get_src_port(id: *mut rdma_cm_id) -> u16 {
    if id_state(id).is_none() {
        return 0;
    }
    // SAFETY: `id` is live.
    unsafe { route_addr(id, false) }.map_or(0, |a| a.port().to_be())
}

unsafe extern "C" fn get_dst_port(id: *mut rdma_cm_id) -> u16 {
    if id_state(id).is_none() {
        return 0;
    }
    // SAFETY: `id` is live.
    unsafe { route_addr(id, true) }.map_or(0, |a| a.port().to_be())
}

// ---------------------------------------------------------------------------
// Address information.

unsafe extern "C" fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    if res.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: non-NULL hints is the caller's struct.
    let h = (!hints.is_null()).then(|| unsafe { *hints });
    let (flags, family) = h.map_or((0, libc::AF_UNSPEC), |h| (h.ai_flags, h.ai_family));
    if h.is_some_and(|h| h.ai_port_space != 0 && h.ai_port_space != RDMA_PS_TCP) {
        return fail(libc::EOPNOTSUPP);
    }
    // An address the hints carry (librdmacm takes them when neither node
    // nor service is given, and a source address from them in any case).
    let hint_addr = |a: *mut libc::sockaddr, len: libc::socklen_t| {
        // SAFETY: a hint address of `len` > 0 octets is a sockaddr of its
        // family (caller contract).
        (len > 0 && !a.is_null())
            .then(|| unsafe { from_sockaddr(a) })
            .flatten()
    };
    let (mut src, mut dst) = (None, None);
    if node.is_null() && service.is_null() {
        dst = h.and_then(|h| hint_addr(h.ai_dst_addr, h.ai_dst_len));
        if dst.is_none() && h.is_none_or(|h| h.ai_src_len == 0) {
            return fail(libc::EINVAL);
        }
    } else {
        // SAFETY: non-NULL strings are NUL-terminated (caller contract).
        let text = |s: *const c_char| (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) });
        let port = match text(service).map(CStr::to_str) {
            None => 0,
            Some(Ok(s)) => match s.parse::<u16>() {
                Ok(p) => p,
                Err(_) => return fail(libc::EINVAL),
            },
            Some(Err(_)) => return fail(libc::EINVAL),
        };
        let ip = match text(node).map(CStr::to_str) {
            None if family == libc::AF_INET6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            None if flags & RAI_PASSIVE != 0 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            None => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Some(Ok(s)) => {
                use std::net::ToSocketAddrs;
                let found = (s, 0u16).to_socket_addrs().ok().and_then(|mut it| {
                    it.find(|a| match family {
                        libc::AF_INET => a.is_ipv4(),
                        libc::AF_INET6 => a.is_ipv6(),
                        _ => true,
                    })
                });
                match found {
                    Some(a) => a.ip(),
                    None => return fail(libc::ENOENT),
                }
            }
            Some(Err(_)) => return fail(libc::EINVAL),
        };
        let a = SocketAddr::new(ip, port);
        if flags & RAI_PASSIVE != 0 {
            src = Some(a);
        } else {
            dst = Some(a);
        }
    }
    if src.is_none() {
        src = h.and_then(|h| hint_addr(h.ai_src_addr, h.ai_src_len));
    }
    let Some(first) = dst.or(src) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: calloc returns zeroed memory or NULL; freed by freeaddrinfo.
    let ai =
        unsafe { libc::calloc(1, std::mem::size_of::<rdma_addrinfo>()) }.cast::<rdma_addrinfo>();
    if ai.is_null() {
        return fail(libc::ENOMEM);
    }
    // SAFETY: `ai` was just allocated, zeroed.
    unsafe {
        (*ai).ai_flags = flags;
        (*ai).ai_family = if first.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        (*ai).ai_qp_type = abi::IBV_QPT_RC;
        (*ai).ai_port_space = RDMA_PS_TCP;
    }
    for (a, is_src) in [(src, true), (dst, false)] {
        let Some(a) = a else { continue };
        let (st, len) = to_storage(a);
        // SAFETY: as above; freed by freeaddrinfo.
        let sa = unsafe { libc::calloc(1, std::mem::size_of::<libc::sockaddr_storage>()) }
            .cast::<libc::sockaddr_storage>();
        if sa.is_null() {
            // SAFETY: `ai` is ours, its addresses calloc'd or NULL.
            unsafe { freeaddrinfo(ai) };
            return fail(libc::ENOMEM);
        }
        // SAFETY: `sa` and `ai` were allocated above with their types' sizes.
        unsafe {
            sa.write(st);
            if is_src {
                (*ai).ai_src_addr = sa.cast();
                (*ai).ai_src_len = len;
            } else {
                (*ai).ai_dst_addr = sa.cast();
                (*ai).ai_dst_len = len;
            }
        }
    }
    // SAFETY: `res` is the caller's slot.
    unsafe { *res = ai };
    0
}

unsafe extern "C" fn freeaddrinfo(mut ai: *mut rdma_addrinfo) {
    while !ai.is_null() {
        // SAFETY: `ai` came from getaddrinfo (caller contract): calloc'd,
        // with calloc'd addresses.
        unsafe {
            let next = (*ai).ai_next;
            libc::free((*ai).ai_src_addr.cast());
            libc::free((*ai).ai_dst_addr.cast());
            libc::free(ai.cast());
            ai = next;
        }
    }
}

/// `rdma_set_option` levels and names (rdma_cma.h).
const RDMA_OPTION_ID: c_int = 0;
const RDMA_OPTION_ID_TOS: c_int = 0;
const RDMA_OPTION_ID_REUSEADDR: c_int = 1;
const RDMA_OPTION_ID_AFONLY: c_int = 2;
const RDMA_OPTION_ID_ACK_TIMEOUT: c_int = 3;

/// `rdma_set_option`, as the kernel's rdma_cm takes it for an iWARP id:
/// - RDMA_OPTION_ID_TOS (one octet): the IP type of service of the
///   connections the id opens after it (`rdma_connect`, `rdma_listen` and the
///   connections it accepts), IP_TOS or IPV6_TCLASS on their sockets;
/// - RDMA_OPTION_ID_REUSEADDR (an int) other than 0: taken, a listener's
///   socket reuses its address anyway (SO_REUSEADDR); 0: `EOPNOTSUPP`;
/// - RDMA_OPTION_ID_ACK_TIMEOUT (one octet): taken, with no effect, as the
///   kernel's for an iWARP id (TCP retransmits, RFC 5044);
/// - RDMA_OPTION_ID_AFONLY: `EOPNOTSUPP`; RDMA_OPTION_IB (IB paths) and
///   anything else: `EINVAL`, as a wrong length is.
unsafe extern "C" fn set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    let Some(state) = id_state(id) else {
        return fail(libc::EINVAL);
    };
    if level != RDMA_OPTION_ID || optval.is_null() {
        return fail(libc::EINVAL);
    }
    let int = std::mem::size_of::<c_int>();
    match (optname, optlen) {
        (RDMA_OPTION_ID_TOS, 1) => {
            // SAFETY: one octet at the caller's non-NULL `optval`.
            let tos = unsafe { optval.cast::<u8>().read() };
            *lock(&state.tos) = Some(tos);
            0
        }
        (RDMA_OPTION_ID_ACK_TIMEOUT, 1) => 0,
        (RDMA_OPTION_ID_REUSEADDR, n) if n == int => {
            // SAFETY: an int at the caller's non-NULL `optval` (its length
            // checked), read unaligned as the caller may pack it.
            match unsafe { optval.cast::<c_int>().read_unaligned() } {
                0 => fail(libc::EOPNOTSUPP),
                _ => 0,
            }
        }
        (RDMA_OPTION_ID_AFONLY, n) if n == int => fail(libc::EOPNOTSUPP),
        _ => fail(libc::EINVAL),
    }
}

// ---------------------------------------------------------------------------
// Devices, rpoll, refusals.

unsafe extern "C" fn get_devices(num: *mut c_int) -> *mut *mut ibv_context {
    let v = verbs();
    if v.is_null() {
        set_errno(libc::ENODEV);
        return ptr::null_mut();
    }
    if !num.is_null() {
        // SAFETY: the caller's int.
        unsafe { *num = 1 };
    }
    Box::into_raw(Box::new([v, ptr::null_mut()])).cast()
}

unsafe extern "C" fn free_devices(list: *mut *mut ibv_context) {
    if !list.is_null() {
        // SAFETY: from get_devices, a Box<[_; 2]>.
        drop(unsafe { Box::from_raw(list.cast::<[*mut ibv_context; 2]>()) });
    }
}

/// `rpoll`: without rsockets every fd is an ordinary one, so it is poll().
unsafe extern "C" fn rpoll(fds: *mut libc::pollfd, nfds: libc::nfds_t, timeout: c_int) -> c_int {
    // SAFETY: the caller's array of `nfds` pollfds.
    unsafe { libc::poll(fds, nfds, timeout) }
}

type P = *mut c_void;

unsafe extern "C" fn r_int2(_: P, _: P) -> c_int {
    fail(libc::EOPNOTSUPP)
}

export! {
    // RDMACM_1.0
    rdma_accept => accept;
    rdma_ack_cm_event => ack_cm_event;
    rdma_bind_addr => bind_addr;
    rdma_connect => connect;
    rdma_create_ep => create_ep;
    rdma_create_event_channel => create_event_channel;
    rdma_create_id => create_id;
    rdma_create_qp => create_qp;
    rdma_create_qp_ex => r_int2;
    rdma_destroy_ep => destroy_ep;
    rdma_destroy_event_channel => destroy_event_channel;
    rdma_destroy_id => destroy_id;
    rdma_destroy_qp => destroy_qp;
    rdma_disconnect => disconnect;
    rdma_event_str => event_str;
    rdma_free_devices => free_devices;
    rdma_freeaddrinfo => freeaddrinfo;
    rdma_get_cm_event => get_cm_event;
    rdma_get_devices => get_devices;
    rdma_get_dst_port => get_dst_port;
    rdma_get_request => get_request;
    rdma_get_src_port => get_src_port;
    rdma_getaddrinfo => getaddrinfo;
    rdma_listen => listen;
    rdma_migrate_id => migrate_id;
    rdma_notify => r_int2;
    rdma_reject => reject;
    rdma_resolve_addr => resolve_addr;
    rdma_resolve_route => resolve_route;
    rdma_set_option => set_option;
    rpoll => rpoll;
    // RDMACM_1.2
    rdma_establish => establish;
    rdma_init_qp_attr => init_qp_attr;
}

#[cfg(test)]
mod tests;
