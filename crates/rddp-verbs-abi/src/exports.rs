//! The C entry points of libibverbs.so.1.
//!
//! Each is a private `unsafe extern "C" fn` with a mangled name, published
//! under its C name by [`export!`] (an assembler alias that libibverbs.map
//! versions). Stage 1 implements the device list, open/close, the device,
//! port, GID and P_Key queries, `ibv_read_sysfs_file` and the pure helpers
//! (rate and string conversions, fork no-ops); stage 2a PDs, CQs and
//! completion channels (src/resources.rs) and memory regions
//! (src/resources/mr.rs); the QP stage RC queue pairs and the data path
//! (src/resources/qp.rs); every other export refuses:
//! NULL with errno `EOPNOTSUPP` for constructors, `EOPNOTSUPP` (or -1 with
//! errno where rdma-core returns -1) for the rest.

use crate::abi::{
    self, ibv_async_event, ibv_context, ibv_context_ops, ibv_device, ibv_device_attr, ibv_gid,
};
use crate::device;
use crate::resources::{self, live};
use std::collections::VecDeque;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// This thread's errno.
pub(crate) fn errno() -> c_int {
    // SAFETY: as in set_errno.
    unsafe { *libc::__errno_location() }
}

/// Refusal for a verb that returns a pointer: NULL, errno `EOPNOTSUPP`.
fn refuse_ptr<T>() -> *mut T {
    set_errno(libc::EOPNOTSUPP);
    ptr::null_mut()
}

/// Refusal for a verb that returns an errno value.
fn refuse_int() -> c_int {
    set_errno(libc::EOPNOTSUPP);
    libc::EOPNOTSUPP
}

// ---------------------------------------------------------------------------
// The device and its list.

struct DevicePtr(*mut ibv_device);
// SAFETY: the device is written once, before the pointer is published, and
// only read afterwards (by this library and by applications).
unsafe impl Send for DevicePtr {}
// SAFETY: as for Send.
unsafe impl Sync for DevicePtr {}

/// The one `struct ibv_device`, allocated on first use and never freed, so
/// that pointers into it stay valid after `ibv_free_device_list`.
pub(crate) fn the_device() -> *mut ibv_device {
    static DEVICE: OnceLock<DevicePtr> = OnceLock::new();
    DEVICE
        .get_or_init(|| DevicePtr(Box::into_raw(Box::new(device::ibv_device()))))
        .0
}

unsafe extern "C" fn get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    let list: Box<[*mut ibv_device; 2]> = Box::new([the_device(), ptr::null_mut()]);
    if !num_devices.is_null() {
        // SAFETY: a non-NULL `num_devices` points to an int (verbs.h contract).
        unsafe { *num_devices = 1 };
    }
    Box::into_raw(list).cast()
}

unsafe extern "C" fn free_device_list(list: *mut *mut ibv_device) {
    if !list.is_null() {
        // SAFETY: `list` came from get_device_list (caller contract), which
        // allocated it as a Box<[_; 2]>.
        drop(unsafe { Box::from_raw(list.cast::<[*mut ibv_device; 2]>()) });
    }
}

unsafe extern "C" fn get_device_name(dev: *mut ibv_device) -> *const c_char {
    if dev != the_device() {
        set_errno(libc::ENODEV);
        return ptr::null();
    }
    // SAFETY: `dev` is the_device(), valid forever; `name` is NUL-terminated.
    unsafe { (*dev).name.as_ptr() }
}

unsafe extern "C" fn get_device_guid(dev: *mut ibv_device) -> u64 {
    if dev != the_device() {
        set_errno(libc::ENODEV);
        return 0;
    }
    device::NODE_GUID.to_be()
}

unsafe extern "C" fn get_device_index(dev: *mut ibv_device) -> c_int {
    if dev != the_device() { -1 } else { 0 }
}

// ---------------------------------------------------------------------------
// Contexts.

/// What `ibv_open_device` allocates: the public `struct ibv_context` first
/// (so a context pointer is a `Context` pointer), then what rddp owns.
#[repr(C)]
pub(crate) struct Context {
    ibv: ibv_context,
    /// The context's share of its own `rddp::Device`: the whole device
    /// (`DeviceLimits::default`, what `ibv_query_device` reports). Every PD
    /// of the context is one of its protection domains.
    pub(crate) consumer: rddp::Consumer,
    /// The asynchronous events and `ibv_context.async_fd`.
    pub(crate) events: Arc<AsyncEvents>,
}

/// A context's asynchronous events (`ibv_get_async_event`): a queue, and an
/// eventfd in semaphore mode that counts it (`ibv_context.async_fd`:
/// blocking as the kernel's is until the application sets O_NONBLOCK,
/// readable exactly while events wait). A QP's events come from its rddp
/// queue pair's event hook, on whichever thread found them.
pub(crate) struct AsyncEvents {
    fd: OwnedFd,
    /// `(element, event_type)`, oldest first.
    queue: Mutex<VecDeque<(usize, c_int)>>,
}

impl AsyncEvents {
    /// Queues `event` for `element` if `alive` still holds, under the queue's
    /// lock (so [`Self::forget`] after clearing it leaves none behind).
    pub(crate) fn raise(&self, element: usize, event_type: c_int, alive: &AtomicBool) {
        let mut q = lock_queue(&self.queue);
        if !alive.load(Ordering::Acquire) {
            return;
        }
        q.push_back((element, event_type));
        let one = 1u64;
        // SAFETY: writes 8 bytes from `one` to our eventfd.
        unsafe { libc::write(self.fd.as_raw_fd(), (&raw const one).cast(), 8) };
    }

    /// Clears `alive` and drops the events of `element` not yet taken (its
    /// object is being destroyed). Their counts stay on the eventfd:
    /// `ibv_get_async_event` reads again when it finds the queue empty.
    pub(crate) fn forget(&self, element: usize, alive: &AtomicBool) {
        let mut q = lock_queue(&self.queue);
        alive.store(false, Ordering::Release);
        q.retain(|&(e, _)| e != element);
    }
}

fn lock_queue<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `ctx` is a live context (`resources::live`): one that is not is
/// refused with `EINVAL` instead of being dereferenced.
fn is_live(ctx: *mut ibv_context) -> bool {
    live().contexts.contains(&(ctx as usize))
}

unsafe extern "C" fn op_alloc_mw(_pd: *mut c_void, _type: c_int) -> *mut c_void {
    refuse_ptr()
}
unsafe extern "C" fn op_bind_mw(_qp: *mut c_void, _mw: *mut c_void, _b: *mut c_void) -> c_int {
    refuse_int()
}
unsafe extern "C" fn op_dealloc_mw(_mw: *mut c_void) -> c_int {
    refuse_int()
}

fn ops() -> ibv_context_ops {
    ibv_context_ops {
        _compat_query_device: None,
        _compat_query_port: None,
        _compat_alloc_pd: None,
        _compat_dealloc_pd: None,
        _compat_reg_mr: None,
        _compat_rereg_mr: None,
        _compat_dereg_mr: None,
        alloc_mw: Some(op_alloc_mw),
        bind_mw: Some(op_bind_mw),
        dealloc_mw: Some(op_dealloc_mw),
        _compat_create_cq: None,
        poll_cq: Some(resources::poll_cq),
        req_notify_cq: Some(resources::req_notify_cq),
        _compat_cq_event: None,
        _compat_resize_cq: None,
        _compat_destroy_cq: None,
        _compat_create_srq: None,
        _compat_modify_srq: None,
        _compat_query_srq: None,
        _compat_destroy_srq: None,
        post_srq_recv: Some(resources::srq::post_srq_recv),
        _compat_create_qp: None,
        _compat_query_qp: None,
        _compat_modify_qp: None,
        _compat_destroy_qp: None,
        post_send: Some(resources::qp::post_send),
        post_recv: Some(resources::qp::post_recv),
        _compat_create_ah: None,
        _compat_destroy_ah: None,
        _compat_attach_mcast: None,
        _compat_detach_mcast: None,
        _compat_async_event: None,
    }
}

pub(crate) unsafe extern "C" fn open_device(dev: *mut ibv_device) -> *mut ibv_context {
    if dev != the_device() {
        set_errno(libc::ENODEV);
        return ptr::null_mut();
    }
    // SAFETY: eventfd takes no pointers.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
    if fd < 0 {
        return ptr::null_mut();
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let async_fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let consumer =
        rddp::Device::new().consumer("ibv_context", rddp::DeviceLimits::default().capacity);
    let Ok(consumer) = consumer else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    let ctx = Box::new(Context {
        ibv: ibv_context {
            device: dev,
            ops: ops(),
            cmd_fd: -1,
            async_fd: async_fd.as_raw_fd(),
            num_comp_vectors: 1,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            abi_compat: ptr::null_mut(),
        },
        consumer,
        events: Arc::new(AsyncEvents {
            fd: async_fd,
            queue: Mutex::new(VecDeque::new()),
        }),
    });
    let p = Box::into_raw(ctx).cast::<ibv_context>();
    live().contexts.insert(p as usize);
    p
}

/// Also destroys the PDs, CQs and channels the application left, as the
/// kernel does when a context's fd closes.
pub(crate) unsafe extern "C" fn close_device(ctx: *mut ibv_context) -> c_int {
    {
        let mut live = live();
        if !live.contexts.remove(&(ctx as usize)) {
            set_errno(libc::EINVAL);
            return libc::EINVAL;
        }
        resources::free_context_objects(&mut live, ctx as usize);
    }
    // SAFETY: `ctx` was live, so open_device made it from a Box<Context>
    // (ibv_context is Context's first field) and nothing freed it since.
    // The eventfd closes with the last holder of the events (a QP's hook
    // may be raising one right now).
    drop(unsafe { Box::from_raw(ctx.cast::<Context>()) });
    0
}

// ---------------------------------------------------------------------------
// Queries.

unsafe extern "C" fn query_device(ctx: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int {
    if !is_live(ctx) || attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: `attr` points to a caller-owned struct ibv_device_attr.
    unsafe { attr.write(device::device_attr()) };
    0
}

unsafe extern "C" fn query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut abi::ibv_port_attr,
) -> c_int {
    if !is_live(ctx) || attr.is_null() || port != 1 {
        return libc::EINVAL;
    }
    let a = device::port_attr();
    // SAFETY: `attr` points to at least a `struct _compat_ibv_port_attr`,
    // the fields up to `link_layer` (see abi::ibv_port_attr); only those are
    // written, one place each, without forming a reference.
    unsafe {
        (*attr).state = a.state;
        (*attr).max_mtu = a.max_mtu;
        (*attr).active_mtu = a.active_mtu;
        (*attr).gid_tbl_len = a.gid_tbl_len;
        (*attr).port_cap_flags = a.port_cap_flags;
        (*attr).max_msg_sz = a.max_msg_sz;
        (*attr).bad_pkey_cntr = a.bad_pkey_cntr;
        (*attr).qkey_viol_cntr = a.qkey_viol_cntr;
        (*attr).pkey_tbl_len = a.pkey_tbl_len;
        (*attr).lid = a.lid;
        (*attr).sm_lid = a.sm_lid;
        (*attr).lmc = a.lmc;
        (*attr).max_vl_num = a.max_vl_num;
        (*attr).sm_sl = a.sm_sl;
        (*attr).subnet_timeout = a.subnet_timeout;
        (*attr).init_type_reply = a.init_type_reply;
        (*attr).active_width = a.active_width;
        (*attr).active_speed = a.active_speed;
        (*attr).phys_state = a.phys_state;
        (*attr).link_layer = a.link_layer;
    }
    0
}

unsafe extern "C" fn query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    if !is_live(ctx) || gid.is_null() || port != 1 || index != 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: `gid` points to a caller-owned union ibv_gid.
    unsafe {
        gid.write(ibv_gid {
            raw: device::gid0(),
        })
    };
    0
}

/// `ibv_query_gid_type@IBVERBS_PRIVATE_34` (rdma-core 44's driver.h):
/// `enum ibv_gid_type_sysfs`, 0 = "IB/RoCE v1", which is what the kernel
/// reports for an iWARP device's GIDs.
unsafe extern "C" fn query_gid_type(
    ctx: *mut ibv_context,
    port: u8,
    index: c_uint,
    ty: *mut c_int,
) -> c_int {
    if !is_live(ctx) || ty.is_null() || port != 1 || index != 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: `ty` points to the caller's enum.
    unsafe { *ty = 0 };
    0
}

unsafe extern "C" fn query_pkey(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    if !is_live(ctx) || pkey.is_null() || port != 1 || index != 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: `pkey` points to the caller's __be16.
    unsafe { *pkey = 0xffff };
    0
}

unsafe extern "C" fn get_pkey_index(ctx: *mut ibv_context, port: u8, pkey: u16) -> c_int {
    if is_live(ctx) && port == 1 && pkey == 0xffff {
        0
    } else {
        -1
    }
}

// ---------------------------------------------------------------------------
// sysfs.

/// `ibv_read_sysfs_file(dir, file, buf, size)`: `device::IBDEV_PATH` is
/// answered from `device::sysfs_file`; any other directory is read from the
/// file system. As rdma-core: a trailing newline becomes the terminating
/// NUL, content that fills `buf` without one is an error, returns the length.
unsafe extern "C" fn read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    if dir.is_null() || file.is_null() || buf.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: `dir` and `file` are NUL-terminated strings (caller contract).
    let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
    let (Ok(dir), Ok(file)) = (dir.to_str(), file.to_str()) else {
        set_errno(libc::ENOENT);
        return -1;
    };
    let mut data = Vec::new();
    if dir.trim_end_matches('/') == device::IBDEV_PATH {
        match device::sysfs_file(file) {
            Some(s) => data.extend_from_slice(s.as_bytes()),
            None => {
                set_errno(libc::ENOENT);
                return -1;
            }
        }
    } else {
        let read = std::fs::File::open(format!("{dir}/{file}"))
            .and_then(|f| f.take(size as u64).read_to_end(&mut data));
        if let Err(e) = read {
            set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            return -1;
        }
    }
    data.truncate(size);
    let mut len = data.len();
    if len > 0 {
        if data[len - 1] == b'\n' {
            len -= 1;
            data[len] = 0;
        } else if len < size {
            data.push(0);
        } else {
            set_errno(libc::EOVERFLOW);
            return -1;
        }
    }
    // SAFETY: `buf` holds `size` bytes (caller contract) and `data` is at most
    // `size` long (truncated above; the NUL is pushed only when len < size).
    unsafe { ptr::copy_nonoverlapping(data.as_ptr().cast::<c_char>(), buf, data.len()) };
    c_int::try_from(len).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn get_sysfs_path() -> *const c_char {
    c"/sys".as_ptr()
}

// ---------------------------------------------------------------------------
// Pure helpers.

/// `enum ibv_rate` value, multiple of 2.5 Gb/s (0: rdma-core gives none, and
/// `ibv_rate_to_mult` returns -1), Mb/s. tests/api/helpers.rs compares the four
/// conversions with Debian's libibverbs.
const RATES: [(c_int, c_int, c_int); 23] = [
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, 0, 14062),
    (12, 0, 56250),
    (13, 0, 112500),
    (14, 0, 168750),
    (15, 0, 25781),
    (16, 0, 103125),
    (17, 0, 206250),
    (18, 0, 309375),
    (19, 11, 28125),
    (20, 20, 53125),
    (21, 160, 425000),
    (22, 240, 637500),
    (23, 320, 850000),
    (24, 480, 1275000),
];

unsafe extern "C" fn rate_to_mult(rate: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.0 == rate && r.1 != 0)
        .map_or(-1, |r| r.1)
}
unsafe extern "C" fn mult_to_rate(mult: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.1 == mult && mult != 0)
        .map_or(0, |r| r.0)
}
unsafe extern "C" fn rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}
unsafe extern "C" fn mbps_to_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.2 == mbps).map_or(0, |r| r.0)
}

fn pick(table: &[&'static CStr], i: c_int) -> *const c_char {
    usize::try_from(i)
        .ok()
        .and_then(|i| table.get(i))
        .map_or(c"unknown", |s| s)
        .as_ptr()
}

unsafe extern "C" fn node_type_str(t: c_int) -> *const c_char {
    pick(
        &[
            c"unknown",
            c"InfiniBand channel adapter",
            c"InfiniBand switch",
            c"InfiniBand router",
            c"iWARP NIC",
            c"usNIC",
            c"usNIC UDP",
            c"unspecified",
        ],
        t,
    )
}
unsafe extern "C" fn port_state_str(s: c_int) -> *const c_char {
    pick(
        &[
            c"no state change (NOP)",
            c"down",
            c"init",
            c"armed",
            c"active",
            c"active defer",
        ],
        s,
    )
}
unsafe extern "C" fn event_type_str(e: c_int) -> *const c_char {
    pick(
        &[
            c"CQ error",
            c"local work queue catastrophic error",
            c"invalid request local work queue error",
            c"local access violation work queue error",
            c"communication established",
            c"send queue drained",
            c"path migrated",
            c"path migration request error",
            c"local catastrophic error",
            c"port active",
            c"port error",
            c"LID change",
            c"P_Key change",
            c"SM change",
            c"SRQ catastrophic error",
            c"SRQ limit reached",
            c"last WQE reached",
            c"client reregistration",
            c"GID table change",
            c"WQ fatal",
        ],
        e,
    )
}
unsafe extern "C" fn wc_status_str(s: c_int) -> *const c_char {
    pick(
        &[
            c"success",
            c"local length error",
            c"local QP operation error",
            c"local EE context operation error",
            c"local protection error",
            c"Work Request Flushed Error",
            c"memory management operation error",
            c"bad response error",
            c"local access error",
            c"remote invalid request error",
            c"remote access error",
            c"remote operation error",
            c"transport retry counter exceeded",
            c"RNR retry counter exceeded",
            c"local RDD violation error",
            c"remote invalid RD request",
            c"aborted error",
            c"invalid EE context number",
            c"invalid EE context state",
            c"fatal error",
            c"response timeout error",
            c"general error",
            c"TM error",
            c"TM software rendezvous",
        ],
        s,
    )
}

/// rddp moves data by copying in software, never by DMA, so there are no
/// pages to protect across fork(): the fork calls succeed doing nothing.
unsafe extern "C" fn fork_init() -> c_int {
    0
}
unsafe extern "C" fn fork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}
unsafe extern "C" fn is_fork_initialized() -> c_int {
    abi::IBV_FORK_UNNEEDED
}

// ---------------------------------------------------------------------------
// Refused until later stages (no SRQ or AH yet).

type P = *mut c_void;

unsafe extern "C" fn r_ptr1(_: P) -> P {
    refuse_ptr()
}
unsafe extern "C" fn r_ptr2(_: P, _: P) -> P {
    refuse_ptr()
}
unsafe extern "C" fn r_ptr4(_: P, _: P, _: P, _: u8) -> P {
    refuse_ptr()
}
unsafe extern "C" fn r_reg_dmabuf_mr(_: P, _: u64, _: usize, _: u64, _: c_int, _: c_int) -> P {
    refuse_ptr()
}
unsafe extern "C" fn r_int1(_: P) -> c_int {
    refuse_int()
}
unsafe extern "C" fn r_int2(_: P, _: P) -> c_int {
    refuse_int()
}
unsafe extern "C" fn r_mcast(_: P, _: P, _: u16) -> c_int {
    refuse_int()
}
unsafe extern "C" fn r_rereg_mr(_: P, _: c_int, _: P, _: P, _: usize, _: c_int) -> c_int {
    refuse_int()
}
unsafe extern "C" fn r_init_ah_from_wc(_: P, _: u8, _: P, _: P, _: P) -> c_int {
    refuse_int()
}
/// `ibv_get_async_event`: the next event of the context, waiting on
/// `async_fd` as rdma-core's does (a read, blocking unless the application
/// made the fd non-blocking: then -1 with `EAGAIN`). A QP's event counts
/// towards what its `ibv_destroy_qp` waits to see acknowledged.
pub(crate) unsafe extern "C" fn get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    let events = {
        let live = live();
        if !live.contexts.contains(&(ctx as usize)) || event.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: a live context (registry locked) is open_device's Box<Context>.
        unsafe { (*ctx.cast::<Context>()).events.clone() }
    };
    loop {
        let mut count = 0u64;
        // SAFETY: reads at most 8 bytes into `count`.
        let n = unsafe { libc::read(events.fd.as_raw_fd(), (&raw mut count).cast(), 8) };
        if n < 0 {
            // errno is read's: EAGAIN when non-blocking.
            return -1;
        }
        let live = live();
        let Some((element, event_type)) = lock_queue(&events.queue).pop_front() else {
            // Counted for an event dropped since: wait for the next.
            continue;
        };
        if is_qp_event(event_type) {
            resources::qp::event_reported(&live, element as *mut abi::ibv_qp);
        } else if event_type == abi::IBV_EVENT_CQ_ERR {
            resources::cq_event_reported(&live, element as *mut abi::ibv_cq);
        } else if event_type == abi::IBV_EVENT_SRQ_LIMIT_REACHED {
            resources::srq::event_reported(&live, element as *mut abi::ibv_srq);
        }
        // SAFETY: `event` is the caller's slot (checked non-NULL).
        unsafe {
            *event = ibv_async_event {
                element: element as *mut c_void,
                event_type,
            };
        }
        return 0;
    }
}

/// `ibv_ack_async_event`: a QP's event acknowledged wakes an
/// `ibv_destroy_qp` waiting for it.
pub(crate) unsafe extern "C" fn ack_async_event(event: *mut ibv_async_event) {
    if event.is_null() {
        return;
    }
    // SAFETY: the caller's event, as get_async_event filled it.
    let e = unsafe { *event };
    if is_qp_event(e.event_type) {
        resources::qp::event_acked(&live(), e.element.cast());
    } else if e.event_type == abi::IBV_EVENT_CQ_ERR {
        resources::cq_event_acked(&live(), e.element.cast());
    } else if e.event_type == abi::IBV_EVENT_SRQ_LIMIT_REACHED {
        resources::srq::event_acked(&live(), e.element.cast());
    }
}

/// Whether events of `event_type` name a QP.
fn is_qp_event(event_type: c_int) -> bool {
    matches!(
        event_type,
        abi::IBV_EVENT_QP_FATAL | abi::IBV_EVENT_QP_REQ_ERR | abi::IBV_EVENT_QP_ACCESS_ERR
    )
}
unsafe extern "C" fn r_query_gid_ex(_: P, _: u32, _: u32, _: P, _: u32, _: usize) -> c_int {
    refuse_int()
}
unsafe extern "C" fn r_query_gid_table(_: P, _: P, _: usize, _: u32, _: usize) -> isize {
    set_errno(libc::EOPNOTSUPP);
    -(libc::EOPNOTSUPP as isize)
}
unsafe extern "C" fn r_data_in_order(_: P, _: c_int, _: u32) -> c_int {
    0
}

export! {
    // IBVERBS_1.0 (and src/resources.rs's exports: PDs, CQs, channels;
    // src/resources/mr.rs's: memory regions)
    ibv_get_sysfs_path => get_sysfs_path;
    ibv_rate_to_mult => rate_to_mult;
    ibv_read_sysfs_file => read_sysfs_file;
    mult_to_ibv_rate => mult_to_rate;
    // IBVERBS_1.1
    ibv_ack_async_event => ack_async_event;
    ibv_attach_mcast => r_mcast;
    ibv_close_device => close_device;
    ibv_create_ah => r_ptr2;
    ibv_create_ah_from_wc => r_ptr4;
    ibv_destroy_ah => r_int1;
    ibv_detach_mcast => r_mcast;
    ibv_dofork_range => fork_range;
    ibv_dontfork_range => fork_range;
    ibv_event_type_str => event_type_str;
    ibv_fork_init => fork_init;
    ibv_free_device_list => free_device_list;
    ibv_get_async_event => get_async_event;
    ibv_get_device_guid => get_device_guid;
    ibv_get_device_list => get_device_list;
    ibv_get_device_name => get_device_name;
    ibv_init_ah_from_wc => r_init_ah_from_wc;
    ibv_node_type_str => node_type_str;
    ibv_open_device => open_device;
    ibv_port_state_str => port_state_str;
    ibv_query_device => query_device;
    ibv_query_gid => query_gid;
    ibv_query_pkey => query_pkey;
    ibv_query_port => query_port;
    ibv_rate_to_mbps => rate_to_mbps;
    ibv_rereg_mr => r_rereg_mr;
    ibv_wc_status_str => wc_status_str;
    mbps_to_ibv_rate => mbps_to_rate;
    // IBVERBS_1.5 to 1.14
    ibv_get_pkey_index => get_pkey_index;
    ibv_qp_to_qp_ex => r_ptr1;
    ibv_get_device_index => get_device_index;
    ibv_query_ece => r_int2;
    ibv_set_ece => r_int2;
    _ibv_query_gid_ex => r_query_gid_ex;
    _ibv_query_gid_table => r_query_gid_table;
    ibv_reg_dmabuf_mr => r_reg_dmabuf_mr;
    ibv_is_fork_initialized => is_fork_initialized;
    ibv_query_qp_data_in_order => r_data_in_order;
    // IBVERBS_PRIVATE_34
    ibv_query_gid_type => query_gid_type;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `read_sysfs_file` on `dir/file` into a buffer of `size`: (return, errno, text).
    fn read(dir: &str, file: &str, size: usize) -> (c_int, c_int, String) {
        let dir = std::ffi::CString::new(dir).unwrap();
        let file = std::ffi::CString::new(file).unwrap();
        let mut buf = vec![b'#' as c_char; size + 1];
        set_errno(0);
        // SAFETY: NUL-terminated strings and a buffer of `size` (+1) bytes.
        let n = unsafe { read_sysfs_file(dir.as_ptr(), file.as_ptr(), buf.as_mut_ptr(), size) };
        // SAFETY: __errno_location is always valid.
        let errno = unsafe { *libc::__errno_location() };
        let text: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        (n, errno, String::from_utf8_lossy(&text).into_owned())
    }

    #[test]
    fn sysfs_files_read_as_rdma_core_reads_them() {
        let dir = std::env::temp_dir().join(format!("rddp-sysfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("nl"), "abc\n").unwrap();
        std::fs::write(dir.join("bare"), "abc").unwrap();
        let d = dir.to_str().unwrap();
        // A trailing newline becomes the NUL.
        assert_eq!(read(d, "nl", 64), (3, 0, "abc".into()));
        // Without one, a NUL is added when there is room...
        assert_eq!(read(d, "bare", 64), (3, 0, "abc".into()));
        // ... and content that fills the buffer without one is an error.
        assert_eq!(read(d, "bare", 3).0, -1);
        // The newline is the last byte read: the text before it fits exactly.
        assert_eq!(read(d, "nl", 4), (3, 0, "abc".into()));
        assert_eq!(read(d, "missing", 64).1, libc::ENOENT);
        std::fs::remove_dir_all(&dir).unwrap();

        // rddp0's directory is answered without the file system.
        assert_eq!(
            read(device::IBDEV_PATH, "node_type", 64),
            (7, 0, "4: RNIC".into())
        );
        let guid = read(device::IBDEV_PATH, "node_guid", 64);
        assert_eq!(guid, (19, 0, "0272:6464:7000:0001".into()));
        assert_eq!(read(device::IBDEV_PATH, "board_id", 64).0, -1);
    }

    #[test]
    fn rates_round_trip() {
        for (rate, mult, mbps) in RATES {
            // SAFETY: pure functions of integers.
            unsafe {
                assert_eq!(rate_to_mbps(rate), mbps);
                assert_eq!(mbps_to_rate(mbps), rate);
                if mult != 0 {
                    assert_eq!(rate_to_mult(rate), mult);
                    assert_eq!(mult_to_rate(mult), rate);
                }
            }
        }
    }
}
