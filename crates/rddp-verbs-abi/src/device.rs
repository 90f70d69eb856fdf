//! The one device, `rddp0`: its identity and the attributes it reports.
//! Safe code only; src/exports.rs copies these values out to C.

use crate::abi;
use std::ffi::c_char;

/// The device's name (`ibv_get_device_name`, `ibv_devinfo`'s `hca_id`).
pub const DEVICE_NAME: &str = "rddp0";
/// `ibdev_path`: where a kernel device of that name would live in sysfs.
/// Nothing is there; `ibv_read_sysfs_file` answers for this directory from
/// [`sysfs_file`] and never touches the file system for it.
pub const IBDEV_PATH: &str = "/sys/class/infiniband/rddp0";
/// `dev_name`: there is no uverbs character device; this names none.
pub const DEV_NAME: &str = "rddp0";
/// `dev_path`: likewise a path that nothing backs.
pub const DEV_PATH: &str = "/sys/class/infiniband_verbs/rddp0";
/// Node GUID in host order: a locally administered EUI-64 spelling "rddp"
/// (02:72:64:64:70:...), printed by `ibv_devices` as `0272646470000001`.
pub const NODE_GUID: u64 = 0x0272_6464_7000_0001;
/// `vendor_id`: "rdd" in ASCII. Not Mellanox (0x02c9), Amazon (0x1d0f) or
/// Huawei (0x19e5), whose ids make perftest use their provider-specific paths.
pub const VENDOR_ID: u32 = 0x0072_6464;
/// `vendor_part_id`: 0, which perftest maps to no known device.
pub const VENDOR_PART_ID: u32 = 0;
/// IRD/ORD limit, as siw's (MPA's enhanced negotiation caps both at 128 there).
pub const MAX_RD_ATOM: i32 = 128;

/// `fw_ver`: this crate's version.
pub const FW_VER: &str = concat!("rddp ", env!("CARGO_PKG_VERSION"));

/// `dst` filled with `s` and NUL-padded (`s` shorter than `dst`).
pub fn c_chars<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    assert!(s.len() < N, "{s:?} does not fit {N} bytes with its NUL");
    for (o, b) in out.iter_mut().zip(s.bytes()) {
        *o = b as c_char;
    }
    out
}

/// The `struct ibv_device` that `ibv_get_device_list` hands out.
pub fn ibv_device() -> abi::ibv_device {
    abi::ibv_device {
        _ops: abi::_ibv_device_ops {
            _dummy1: None,
            _dummy2: None,
        },
        node_type: abi::IBV_NODE_RNIC,
        transport_type: abi::IBV_TRANSPORT_IWARP,
        name: c_chars(DEVICE_NAME),
        dev_name: c_chars(DEV_NAME),
        dev_path: c_chars(DEV_PATH),
        ibdev_path: c_chars(IBDEV_PATH),
    }
}

fn clamp(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// `ibv_query_device`: the capacity of an `rddp::Device` with its default
/// limits. `ibv_create_qp` enforces the work-queue depth and SGE counts
/// (src/resources/qp.rs), `ibv_create_cq` the CQ depth.
pub fn device_attr() -> abi::ibv_device_attr {
    let cap = rddp::DeviceLimits::default().capacity;
    let guid = NODE_GUID.to_be();
    abi::ibv_device_attr {
        fw_ver: c_chars(FW_VER),
        node_guid: guid,
        sys_image_guid: guid,
        max_mr_size: cap.registered_bytes,
        page_size_cap: 0xffff_f000,
        vendor_id: VENDOR_ID,
        vendor_part_id: VENDOR_PART_ID,
        hw_ver: 0,
        max_qp: clamp(cap.queue_pairs),
        max_qp_wr: crate::resources::qp::MAX_QP_WR as i32,
        device_cap_flags: 0,
        max_sge: crate::resources::qp::MAX_SEND_SGE as i32,
        max_sge_rd: 1,
        max_cq: clamp(cap.queue_pairs),
        max_cqe: crate::resources::MAX_CQE,
        max_mr: clamp(cap.memory_regions),
        max_pd: clamp(cap.queue_pairs),
        max_qp_rd_atom: MAX_RD_ATOM,
        max_ee_rd_atom: 0,
        max_res_rd_atom: clamp(cap.outstanding_reads),
        max_qp_init_rd_atom: MAX_RD_ATOM,
        max_ee_init_rd_atom: 0,
        atomic_cap: abi::IBV_ATOMIC_NONE,
        max_ee: 0,
        max_rdd: 0,
        max_mw: 0,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: 0,
        max_mcast_qp_attach: 0,
        max_total_mcast_qp_attach: 0,
        max_ah: 0,
        max_fmr: 0,
        max_map_per_fmr: 0,
        max_srq: clamp(cap.queue_pairs),
        max_srq_wr: crate::resources::srq::MAX_SRQ_WR as i32,
        max_srq_sge: crate::resources::srq::MAX_SRQ_SGE as i32,
        max_pkeys: 1,
        local_ca_ack_delay: 0,
        phys_port_cnt: 1,
    }
}

/// `ibv_query_port` for port 1, the only one: active, Ethernet link layer
/// (as siw reports), one GID, one P_Key, connection management supported.
pub fn port_attr() -> abi::ibv_port_attr {
    abi::ibv_port_attr {
        state: abi::IBV_PORT_ACTIVE,
        max_mtu: abi::IBV_MTU_4096,
        active_mtu: abi::IBV_MTU_4096,
        gid_tbl_len: 1,
        port_cap_flags: abi::IBV_PORT_CM_SUP,
        max_msg_sz: 0x8000_0000,
        bad_pkey_cntr: 0,
        qkey_viol_cntr: 0,
        pkey_tbl_len: 1,
        lid: 0,
        sm_lid: 0,
        lmc: 0,
        max_vl_num: 1,
        sm_sl: 0,
        subnet_timeout: 0,
        init_type_reply: 0,
        active_width: 1,
        active_speed: 1,
        phys_state: 5,
        link_layer: abi::IBV_LINK_LAYER_ETHERNET,
        flags: 0,
        port_cap_flags2: 0,
    }
}

/// GID 0 of port 1: the link-local prefix fe80::/64 and the node GUID.
pub fn gid0() -> [u8; 16] {
    let mut raw = [0u8; 16];
    raw[0] = 0xfe;
    raw[1] = 0x80;
    raw[8..].copy_from_slice(&NODE_GUID.to_be_bytes());
    raw
}

/// The GUID as sysfs spells it: four groups of four hex digits.
pub fn guid_str(guid: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        (guid >> 48) & 0xffff,
        (guid >> 32) & 0xffff,
        (guid >> 16) & 0xffff,
        guid & 0xffff
    )
}

/// The few files of [`IBDEV_PATH`] that rdma-core tools read through
/// `ibv_read_sysfs_file`, with a kernel device's contents; `None` for the rest.
pub fn sysfs_file(name: &str) -> Option<String> {
    Some(match name {
        "node_type" => "4: RNIC\n".to_string(),
        "node_guid" | "sys_image_guid" => format!("{}\n", guid_str(NODE_GUID)),
        "fw_ver" => format!("{FW_VER}\n"),
        _ => return None,
    })
}
