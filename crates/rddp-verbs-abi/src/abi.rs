//! `#[repr(C)]` copies of the structs of Debian 12's `<infiniband/verbs.h>`
//! (libibverbs-dev 44.0) that cross this library's entry points.
//!
//! Written by hand from that header, field for field, under the C names so
//! that tests/api/layout.rs can compile one list of `(type, fields)` both ways: as
//! `size_of`/`offset_of!` here and as `sizeof`/`offsetof` in a C program built
//! against the real header. Pointers to objects rddp does not create yet
//! (CQ, QP, SRQ, MW, work requests) are `*mut c_void`.

#![allow(non_camel_case_types)]
// The struct fields mirror verbs.h field for field under their C names; their
// meaning is verbs.h's and rdma-core's man pages' (ibv_query_device(3),
// ibv_reg_mr(3), ...), not restated here. Types and constants are documented.
#![allow(missing_docs)]

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `IBV_SYSFS_NAME_MAX`.
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `IBV_NODE_RNIC` (`enum ibv_node_type`).
pub const IBV_NODE_RNIC: c_int = 4;
/// `IBV_TRANSPORT_IWARP` (`enum ibv_transport_type`).
pub const IBV_TRANSPORT_IWARP: c_int = 1;
/// `IBV_PORT_ACTIVE` (`enum ibv_port_state`).
pub const IBV_PORT_ACTIVE: c_int = 4;
/// `IBV_MTU_4096` (`enum ibv_mtu`).
pub const IBV_MTU_4096: c_int = 5;
/// `IBV_LINK_LAYER_ETHERNET`.
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
/// `IBV_ATOMIC_NONE` (`enum ibv_atomic_cap`).
pub const IBV_ATOMIC_NONE: c_int = 0;
/// `IBV_PORT_CM_SUP` (`enum ibv_port_cap_flags`).
pub const IBV_PORT_CM_SUP: u32 = 1 << 16;
/// `IBV_FORK_UNNEEDED` (`enum ibv_fork_status`).
pub const IBV_FORK_UNNEEDED: c_int = 2;

/// `struct _ibv_device_ops`: obsolete, never called, kept for the layout.
#[repr(C)]
pub struct _ibv_device_ops {
    pub _dummy1: Option<unsafe extern "C" fn(*mut ibv_device, c_int) -> *mut ibv_context>,
    pub _dummy2: Option<unsafe extern "C" fn(*mut ibv_context)>,
}

/// `struct ibv_device` (664 bytes).
#[repr(C)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// A slot of `struct ibv_context_ops` that applications never call
/// (`_compat_*`, declared `void *(*)(void)` in the header).
pub type CompatOp = Option<unsafe extern "C" fn() -> *mut c_void>;

/// `struct ibv_context_ops` (256 bytes). Applications call the named slots
/// directly from verbs.h's `static inline` functions, so their offsets are
/// ABI: `poll_cq` @88, `req_notify_cq` @96, `post_srq_recv` @160,
/// `post_send` @200, `post_recv` @208.
#[repr(C)]
pub struct ibv_context_ops {
    pub _compat_query_device: CompatOp,
    pub _compat_query_port: CompatOp,
    pub _compat_alloc_pd: CompatOp,
    pub _compat_dealloc_pd: CompatOp,
    pub _compat_reg_mr: CompatOp,
    pub _compat_rereg_mr: CompatOp,
    pub _compat_dereg_mr: CompatOp,
    pub alloc_mw: Option<unsafe extern "C" fn(*mut c_void, c_int) -> *mut c_void>,
    pub bind_mw: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> c_int>,
    pub dealloc_mw: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    pub _compat_create_cq: CompatOp,
    pub poll_cq: Option<unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> c_int>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut c_void, c_int) -> c_int>,
    pub _compat_cq_event: CompatOp,
    pub _compat_resize_cq: CompatOp,
    pub _compat_destroy_cq: CompatOp,
    pub _compat_create_srq: CompatOp,
    pub _compat_modify_srq: CompatOp,
    pub _compat_query_srq: CompatOp,
    pub _compat_destroy_srq: CompatOp,
    pub post_srq_recv:
        Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void) -> c_int>,
    pub _compat_create_qp: CompatOp,
    pub _compat_query_qp: CompatOp,
    pub _compat_modify_qp: CompatOp,
    pub _compat_destroy_qp: CompatOp,
    pub post_send:
        Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void) -> c_int>,
    pub post_recv:
        Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void) -> c_int>,
    pub _compat_create_ah: CompatOp,
    pub _compat_destroy_ah: CompatOp,
    pub _compat_attach_mcast: CompatOp,
    pub _compat_detach_mcast: CompatOp,
    pub _compat_async_event: CompatOp,
}

/// `struct ibv_context` (328 bytes). rddp's contexts are plain ones:
/// `abi_compat` is NULL, never `__VERBS_ABI_IS_EXTENDED`, so verbs.h's
/// `verbs_get_ctx_op` finds no `verbs_context` and its `_ex` inlines fall
/// back to the exported verbs (`ibv_query_device_ex` to `ibv_query_device`,
/// the `ibv_query_port` macro to the exported `ibv_query_port`).
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `struct ibv_device_attr` (232 bytes).
#[repr(C)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    /// Big-endian (`__be64`).
    pub node_guid: u64,
    /// Big-endian (`__be64`).
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr` (52 bytes). The exported `ibv_query_port@1.1`
/// receives it as `struct _compat_ibv_port_attr *` and writes the fields up
/// to `link_layer` only: binaries built before `flags` and
/// `port_cap_flags2` existed pass a shorter struct (verbs.h's inline
/// `___ibv_query_port` zeroes the whole struct before the call).
#[repr(C)]
pub struct ibv_port_attr {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// The `global` member of `union ibv_gid`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_global {
    /// Big-endian (`__be64`).
    pub subnet_prefix: u64,
    /// Big-endian (`__be64`).
    pub interface_id: u64,
}

/// `union ibv_gid` (16 bytes, aligned to 8).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

/// `struct ibv_pd` (16 bytes). `handle` is the rddp PD number.
#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_mr` (48 bytes). `lkey` and `rkey` are both the rddp STag;
/// `handle` is its table index.
#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `enum ibv_access_flags` values `ibv_reg_mr` knows.
pub const IBV_ACCESS_LOCAL_WRITE: c_uint = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_uint = 1 << 1;
pub const IBV_ACCESS_REMOTE_READ: c_uint = 1 << 2;
pub const IBV_ACCESS_REMOTE_ATOMIC: c_uint = 1 << 3;
pub const IBV_ACCESS_MW_BIND: c_uint = 1 << 4;
pub const IBV_ACCESS_ZERO_BASED: c_uint = 1 << 5;
pub const IBV_ACCESS_ON_DEMAND: c_uint = 1 << 6;
pub const IBV_ACCESS_HUGETLB: c_uint = 1 << 7;
pub const IBV_ACCESS_RELAXED_ORDERING: c_uint = 1 << 20;
/// `IBV_ACCESS_OPTIONAL_RANGE`: flags a device may ignore (relaxed ordering
/// and the like), bits 20 to 29.
pub const IBV_ACCESS_OPTIONAL_RANGE: c_uint = ((1 << 30) - 1) & !((1 << 20) - 1);

/// `struct ibv_comp_channel` (16 bytes). `fd` is an eventfd, readable while
/// a CQ event waits; `refcnt` counts the CQs using the channel (under the
/// context's `mutex`, as rdma-core keeps it).
#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq` (128 bytes). `mutex` and `cond` guard
/// `comp_events_completed`, which `ibv_ack_cq_events` raises and
/// `ibv_destroy_cq` waits on.
#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_wc` (48 bytes). `imm_data` is the header's anonymous union
/// of `imm_data` and `invalidated_rkey`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: c_int,
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_async_event` (16 bytes): the object (`element`, a union of
/// pointers and `port_num`, here as the pointer) and the event type.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_async_event {
    pub element: *mut c_void,
    pub event_type: c_int,
}

/// `enum ibv_event_type` values rddp reports.
pub const IBV_EVENT_CQ_ERR: c_int = 0;
pub const IBV_EVENT_QP_FATAL: c_int = 1;
pub const IBV_EVENT_QP_REQ_ERR: c_int = 2;
pub const IBV_EVENT_QP_ACCESS_ERR: c_int = 3;
pub const IBV_EVENT_SRQ_LIMIT_REACHED: c_int = 15;

/// `enum ibv_wc_status` values rddp reports.
pub const IBV_WC_SUCCESS: c_int = 0;
pub const IBV_WC_LOC_LEN_ERR: c_int = 1;
pub const IBV_WC_LOC_QP_OP_ERR: c_int = 2;
pub const IBV_WC_LOC_PROT_ERR: c_int = 4;
pub const IBV_WC_WR_FLUSH_ERR: c_int = 5;
pub const IBV_WC_REM_ACCESS_ERR: c_int = 10;
pub const IBV_WC_REM_OP_ERR: c_int = 11;
pub const IBV_WC_FATAL_ERR: c_int = 19;
/// `enum ibv_wc_opcode` values rddp reports.
pub const IBV_WC_SEND: c_int = 0;
pub const IBV_WC_RDMA_WRITE: c_int = 1;
pub const IBV_WC_RDMA_READ: c_int = 2;
pub const IBV_WC_RECV: c_int = 1 << 7;
/// `IBV_WC_WITH_INV` (`enum ibv_wc_flags`).
pub const IBV_WC_WITH_INV: c_uint = 1 << 3;

/// `struct ibv_qp` (160 bytes). `state` is kept current by `ibv_modify_qp`
/// (as rdma-core's does); `mutex`, `cond` and `events_completed` serve the
/// asynchronous events of the QP (`ibv_ack_async_event`).
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_int,
    pub qp_type: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp_cap` (20 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr` (64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

/// `struct ibv_srq_attr` (12 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

/// `struct ibv_srq` (128 bytes): `mutex`, `cond` and `events_completed`
/// serve its asynchronous events, of which rddp raises none.
#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// `enum ibv_srq_attr_mask`.
pub const IBV_SRQ_MAX_WR: c_int = 1 << 0;
pub const IBV_SRQ_LIMIT: c_int = 1 << 1;

/// `struct ibv_global_route` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_attr` (144 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_attr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_sge` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// The `rdma` member of `ibv_send_wr`'s `wr` union (RDMA Write and Read).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `ibv_send_wr`'s `wr` union (32 bytes: its largest member, `atomic`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub _atomic: [u64; 4],
}

/// `struct ibv_send_wr` (128 bytes). `imm_data` is the anonymous union of
/// `imm_data` and `invalidate_rkey`; `wr` holds `rdma` for Writes and Reads;
/// `qp_type` (XRC) and the last union (memory-window binding, TSO) are not
/// read.
#[repr(C)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub send_flags: c_uint,
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    pub qp_type: u32,
    pub _tail: [u64; 6],
}

/// `struct ibv_recv_wr` (32 bytes).
#[repr(C)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

/// `enum ibv_qp_type` values.
pub const IBV_QPT_RC: c_int = 2;
pub const IBV_QPT_UC: c_int = 3;
pub const IBV_QPT_UD: c_int = 4;
pub const IBV_QPT_RAW_PACKET: c_int = 8;
pub const IBV_QPT_XRC_SEND: c_int = 9;
pub const IBV_QPT_XRC_RECV: c_int = 10;
pub const IBV_QPT_DRIVER: c_int = 0xff;

/// `enum ibv_qp_state` values.
pub const IBV_QPS_RESET: c_int = 0;
pub const IBV_QPS_INIT: c_int = 1;
pub const IBV_QPS_RTR: c_int = 2;
pub const IBV_QPS_RTS: c_int = 3;
pub const IBV_QPS_SQD: c_int = 4;
pub const IBV_QPS_SQE: c_int = 5;
pub const IBV_QPS_ERR: c_int = 6;

/// `enum ibv_qp_attr_mask` values.
pub const IBV_QP_STATE: c_int = 1;
pub const IBV_QP_CUR_STATE: c_int = 1 << 1;
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: c_int = 1 << 2;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_QKEY: c_int = 1 << 6;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub const IBV_QP_ALT_PATH: c_int = 1 << 14;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub const IBV_QP_PATH_MIG_STATE: c_int = 1 << 18;
pub const IBV_QP_CAP: c_int = 1 << 19;
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;
pub const IBV_QP_RATE_LIMIT: c_int = 1 << 25;

/// `enum ibv_wr_opcode` values.
pub const IBV_WR_RDMA_WRITE: c_int = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: c_int = 1;
pub const IBV_WR_SEND: c_int = 2;
pub const IBV_WR_SEND_WITH_IMM: c_int = 3;
pub const IBV_WR_RDMA_READ: c_int = 4;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: c_int = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: c_int = 6;
pub const IBV_WR_LOCAL_INV: c_int = 7;
pub const IBV_WR_BIND_MW: c_int = 8;
pub const IBV_WR_SEND_WITH_INV: c_int = 9;
pub const IBV_WR_TSO: c_int = 10;
pub const IBV_WR_DRIVER1: c_int = 11;
pub const IBV_WR_ATOMIC_WRITE: c_int = 15;

/// `enum ibv_send_flags` values.
pub const IBV_SEND_FENCE: c_uint = 1;
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
pub const IBV_SEND_SOLICITED: c_uint = 1 << 2;
pub const IBV_SEND_INLINE: c_uint = 1 << 3;
pub const IBV_SEND_IP_CSUM: c_uint = 1 << 4;
