//! The `#[repr(C)]` structs of `rddp_verbs_abi::abi` against Debian's
//! `<infiniband/verbs.h>`: one list of types and fields, printed once by Rust
//! (`size_of`, `align_of`, `offset_of!`) and once by a C program compiled
//! with `cc` against the real header (`sizeof`, `_Alignof`, `offsetof`); and
//! the access flags, both ways.

use crate::common;
use rddp_verbs_abi::abi::*;
use rddp_verbs_abi::cm::*;
use std::fmt::Write as _;
use std::mem::{align_of, offset_of, size_of};
use std::process::Command;

struct Layout {
    c_type: &'static str,
    size: usize,
    align: usize,
    fields: Vec<(&'static str, usize)>,
}

macro_rules! layouts {
    ($($kind:literal $ty:ident { $($f:ident),* $(,)? })*) => {
        vec![$(Layout {
            c_type: concat!($kind, " ", stringify!($ty)),
            size: size_of::<$ty>(),
            align: align_of::<$ty>(),
            fields: vec![$((stringify!($f), offset_of!($ty, $f))),*],
        }),*]
    };
}

fn layouts() -> Vec<Layout> {
    layouts! {
        "struct" ibv_device { _ops, node_type, transport_type, name, dev_name, dev_path, ibdev_path }
        "struct" ibv_context_ops {
            _compat_query_device, _compat_query_port, _compat_alloc_pd, _compat_dealloc_pd,
            _compat_reg_mr, _compat_rereg_mr, _compat_dereg_mr, alloc_mw, bind_mw, dealloc_mw,
            _compat_create_cq, poll_cq, req_notify_cq, _compat_cq_event, _compat_resize_cq,
            _compat_destroy_cq, _compat_create_srq, _compat_modify_srq, _compat_query_srq,
            _compat_destroy_srq, post_srq_recv, _compat_create_qp, _compat_query_qp,
            _compat_modify_qp, _compat_destroy_qp, post_send, post_recv, _compat_create_ah,
            _compat_destroy_ah, _compat_attach_mcast, _compat_detach_mcast, _compat_async_event,
        }
        "struct" ibv_context { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat }
        "struct" ibv_device_attr {
            fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id,
            vendor_part_id, hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd,
            max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom,
            max_qp_init_rd_atom, max_ee_init_rd_atom, atomic_cap, max_ee, max_rdd, max_mw,
            max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp, max_mcast_qp_attach,
            max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr, max_srq, max_srq_wr,
            max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt,
        }
        "struct" ibv_port_attr {
            state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz, bad_pkey_cntr,
            qkey_viol_cntr, pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl, subnet_timeout,
            init_type_reply, active_width, active_speed, phys_state, link_layer, flags,
            port_cap_flags2,
        }
        "union" ibv_gid { raw, global }
        "struct" ibv_pd { context, handle }
        "struct" ibv_mr { context, pd, addr, length, handle, lkey, rkey }
        "struct" ibv_comp_channel { context, fd, refcnt }
        "struct" ibv_cq {
            context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
            async_events_completed,
        }
        "struct" ibv_wc {
            wr_id, status, opcode, vendor_err, byte_len, imm_data, qp_num, src_qp, wc_flags,
            pkey_index, slid, sl, dlid_path_bits,
        }
        "struct" ibv_qp {
            context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type,
            mutex, cond, events_completed,
        }
        "struct" ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }
        "struct" ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }
        "struct" ibv_srq_attr { max_wr, max_sge, srq_limit }
        "struct" ibv_srq_init_attr { srq_context, attr }
        "struct" ibv_srq { context, srq_context, pd, handle, mutex, cond, events_completed }
        "struct" ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class }
        "struct" ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }
        "struct" ibv_qp_attr {
            qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn, dest_qp_num,
            qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index, alt_pkey_index,
            en_sqd_async_notify, sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer,
            port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout, rate_limit,
        }
        "struct" ibv_sge { addr, length, lkey }
        "struct" ibv_send_wr {
            wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data, wr, qp_type,
        }
        "struct" ibv_recv_wr { wr_id, next, sg_list, num_sge }
        "struct" ibv_async_event { element, event_type }
    }
}

/// Constants of verbs.h that cross the ABI, with their Rust values.
fn constants() -> Vec<(&'static str, u64)> {
    vec![
        ("IBV_ACCESS_LOCAL_WRITE", IBV_ACCESS_LOCAL_WRITE.into()),
        ("IBV_ACCESS_REMOTE_WRITE", IBV_ACCESS_REMOTE_WRITE.into()),
        ("IBV_ACCESS_REMOTE_READ", IBV_ACCESS_REMOTE_READ.into()),
        ("IBV_ACCESS_REMOTE_ATOMIC", IBV_ACCESS_REMOTE_ATOMIC.into()),
        ("IBV_ACCESS_MW_BIND", IBV_ACCESS_MW_BIND.into()),
        ("IBV_ACCESS_ZERO_BASED", IBV_ACCESS_ZERO_BASED.into()),
        ("IBV_ACCESS_ON_DEMAND", IBV_ACCESS_ON_DEMAND.into()),
        ("IBV_ACCESS_HUGETLB", IBV_ACCESS_HUGETLB.into()),
        (
            "IBV_ACCESS_RELAXED_ORDERING",
            IBV_ACCESS_RELAXED_ORDERING.into(),
        ),
        (
            "IBV_ACCESS_OPTIONAL_RANGE",
            IBV_ACCESS_OPTIONAL_RANGE.into(),
        ),
        ("IBV_QPT_RC", IBV_QPT_RC as u64),
        ("IBV_QPT_UC", IBV_QPT_UC as u64),
        ("IBV_QPT_UD", IBV_QPT_UD as u64),
        ("IBV_QPT_RAW_PACKET", IBV_QPT_RAW_PACKET as u64),
        ("IBV_QPT_XRC_SEND", IBV_QPT_XRC_SEND as u64),
        ("IBV_QPT_XRC_RECV", IBV_QPT_XRC_RECV as u64),
        ("IBV_QPT_DRIVER", IBV_QPT_DRIVER as u64),
        ("IBV_QPS_RESET", IBV_QPS_RESET as u64),
        ("IBV_QPS_INIT", IBV_QPS_INIT as u64),
        ("IBV_QPS_RTR", IBV_QPS_RTR as u64),
        ("IBV_QPS_RTS", IBV_QPS_RTS as u64),
        ("IBV_QPS_SQD", IBV_QPS_SQD as u64),
        ("IBV_QPS_SQE", IBV_QPS_SQE as u64),
        ("IBV_QPS_ERR", IBV_QPS_ERR as u64),
        ("IBV_SRQ_MAX_WR", IBV_SRQ_MAX_WR as u64),
        ("IBV_SRQ_LIMIT", IBV_SRQ_LIMIT as u64),
        ("IBV_QP_STATE", IBV_QP_STATE as u64),
        ("IBV_QP_CUR_STATE", IBV_QP_CUR_STATE as u64),
        (
            "IBV_QP_EN_SQD_ASYNC_NOTIFY",
            IBV_QP_EN_SQD_ASYNC_NOTIFY as u64,
        ),
        ("IBV_QP_ACCESS_FLAGS", IBV_QP_ACCESS_FLAGS as u64),
        ("IBV_QP_PKEY_INDEX", IBV_QP_PKEY_INDEX as u64),
        ("IBV_QP_PORT", IBV_QP_PORT as u64),
        ("IBV_QP_QKEY", IBV_QP_QKEY as u64),
        ("IBV_QP_AV", IBV_QP_AV as u64),
        ("IBV_QP_PATH_MTU", IBV_QP_PATH_MTU as u64),
        ("IBV_QP_TIMEOUT", IBV_QP_TIMEOUT as u64),
        ("IBV_QP_RETRY_CNT", IBV_QP_RETRY_CNT as u64),
        ("IBV_QP_RNR_RETRY", IBV_QP_RNR_RETRY as u64),
        ("IBV_QP_RQ_PSN", IBV_QP_RQ_PSN as u64),
        ("IBV_QP_MAX_QP_RD_ATOMIC", IBV_QP_MAX_QP_RD_ATOMIC as u64),
        ("IBV_QP_ALT_PATH", IBV_QP_ALT_PATH as u64),
        ("IBV_QP_MIN_RNR_TIMER", IBV_QP_MIN_RNR_TIMER as u64),
        ("IBV_QP_SQ_PSN", IBV_QP_SQ_PSN as u64),
        (
            "IBV_QP_MAX_DEST_RD_ATOMIC",
            IBV_QP_MAX_DEST_RD_ATOMIC as u64,
        ),
        ("IBV_QP_PATH_MIG_STATE", IBV_QP_PATH_MIG_STATE as u64),
        ("IBV_QP_CAP", IBV_QP_CAP as u64),
        ("IBV_QP_DEST_QPN", IBV_QP_DEST_QPN as u64),
        ("IBV_QP_RATE_LIMIT", IBV_QP_RATE_LIMIT as u64),
        ("IBV_WR_RDMA_WRITE", IBV_WR_RDMA_WRITE as u64),
        (
            "IBV_WR_RDMA_WRITE_WITH_IMM",
            IBV_WR_RDMA_WRITE_WITH_IMM as u64,
        ),
        ("IBV_WR_SEND", IBV_WR_SEND as u64),
        ("IBV_WR_SEND_WITH_IMM", IBV_WR_SEND_WITH_IMM as u64),
        ("IBV_WR_RDMA_READ", IBV_WR_RDMA_READ as u64),
        (
            "IBV_WR_ATOMIC_CMP_AND_SWP",
            IBV_WR_ATOMIC_CMP_AND_SWP as u64,
        ),
        (
            "IBV_WR_ATOMIC_FETCH_AND_ADD",
            IBV_WR_ATOMIC_FETCH_AND_ADD as u64,
        ),
        ("IBV_WR_LOCAL_INV", IBV_WR_LOCAL_INV as u64),
        ("IBV_WR_BIND_MW", IBV_WR_BIND_MW as u64),
        ("IBV_WR_SEND_WITH_INV", IBV_WR_SEND_WITH_INV as u64),
        ("IBV_WR_TSO", IBV_WR_TSO as u64),
        ("IBV_WR_DRIVER1", IBV_WR_DRIVER1 as u64),
        ("IBV_WR_ATOMIC_WRITE", IBV_WR_ATOMIC_WRITE as u64),
        ("IBV_SEND_FENCE", IBV_SEND_FENCE as u64),
        ("IBV_SEND_SIGNALED", IBV_SEND_SIGNALED as u64),
        ("IBV_SEND_SOLICITED", IBV_SEND_SOLICITED as u64),
        ("IBV_SEND_INLINE", IBV_SEND_INLINE as u64),
        ("IBV_SEND_IP_CSUM", IBV_SEND_IP_CSUM as u64),
        ("IBV_EVENT_CQ_ERR", IBV_EVENT_CQ_ERR as u64),
        ("IBV_EVENT_QP_FATAL", IBV_EVENT_QP_FATAL as u64),
        ("IBV_EVENT_QP_REQ_ERR", IBV_EVENT_QP_REQ_ERR as u64),
        ("IBV_EVENT_QP_ACCESS_ERR", IBV_EVENT_QP_ACCESS_ERR as u64),
        (
            "IBV_EVENT_SRQ_LIMIT_REACHED",
            IBV_EVENT_SRQ_LIMIT_REACHED as u64,
        ),
        ("IBV_WC_SUCCESS", IBV_WC_SUCCESS as u64),
        ("IBV_WC_LOC_LEN_ERR", IBV_WC_LOC_LEN_ERR as u64),
        ("IBV_WC_LOC_QP_OP_ERR", IBV_WC_LOC_QP_OP_ERR as u64),
        ("IBV_WC_LOC_PROT_ERR", IBV_WC_LOC_PROT_ERR as u64),
        ("IBV_WC_WR_FLUSH_ERR", IBV_WC_WR_FLUSH_ERR as u64),
        ("IBV_WC_REM_ACCESS_ERR", IBV_WC_REM_ACCESS_ERR as u64),
        ("IBV_WC_REM_OP_ERR", IBV_WC_REM_OP_ERR as u64),
        ("IBV_WC_FATAL_ERR", IBV_WC_FATAL_ERR as u64),
        ("IBV_WC_SEND", IBV_WC_SEND as u64),
        ("IBV_WC_RDMA_WRITE", IBV_WC_RDMA_WRITE as u64),
        ("IBV_WC_RDMA_READ", IBV_WC_RDMA_READ as u64),
        ("IBV_WC_RECV", IBV_WC_RECV as u64),
        ("IBV_WC_WITH_INV", IBV_WC_WITH_INV as u64),
    ]
}

fn rust_report(layouts: &[Layout], constants: &[(&str, u64)]) -> String {
    let mut s = String::new();
    for (name, v) in constants {
        writeln!(s, "const {name} {v}").unwrap();
    }
    for l in layouts {
        writeln!(s, "{} size {} align {}", l.c_type, l.size, l.align).unwrap();
        for (f, off) in &l.fields {
            writeln!(s, "{} .{} {}", l.c_type, f, off).unwrap();
        }
    }
    s
}

/// librdmacm's structs (src/cm.rs) against Debian's `<rdma/rdma_cma.h>`.
fn cm_layouts() -> Vec<Layout> {
    layouts! {
        "struct" rdma_event_channel { fd }
        "struct" rdma_addr { src_addr, dst_addr, addr }
        "struct" rdma_route { addr, path_rec, num_paths }
        "struct" rdma_cm_id {
            verbs, channel, context, qp, route, ps, port_num, event, send_cq_channel, send_cq,
            recv_cq_channel, recv_cq, srq, pd, qp_type,
        }
        "struct" rdma_conn_param {
            private_data, private_data_len, responder_resources, initiator_depth, flow_control,
            retry_count, rnr_retry_count, srq, qp_num,
        }
        "struct" rdma_cm_event { id, listen_id, event, status, param }
        "struct" rdma_addrinfo {
            ai_flags, ai_family, ai_qp_type, ai_port_space, ai_src_len, ai_dst_len, ai_src_addr,
            ai_dst_addr, ai_src_canonname, ai_dst_canonname, ai_route_len, ai_route,
            ai_connect_len, ai_connect, ai_next,
        }
    }
}

fn c_program(layouts: &[Layout], header: &str, constants: &[(&str, u64)]) -> String {
    let mut c = format!(
        "#include <stddef.h>\n#include <stdio.h>\n#include <{header}>\nint main(void) {{\n"
    );
    for (name, _) in constants {
        writeln!(
            c,
            "  printf(\"const {name} %llu\\n\", (unsigned long long)({name}));"
        )
        .unwrap();
    }
    for l in layouts {
        let t = l.c_type;
        writeln!(
            c,
            "  printf(\"{t} size %zu align %zu\\n\", sizeof({t}), _Alignof({t}));"
        )
        .unwrap();
        for (f, _) in &l.fields {
            writeln!(c, "  printf(\"{t} .{f} %zu\\n\", offsetof({t}, {f}));").unwrap();
        }
    }
    c.push_str("  return 0;\n}\n");
    c
}

/// Compiles a C program printing `layouts` and `constants` as `header`
/// gives them, and compares its output with Rust's.
fn compare(name: &str, header: &str, layouts: &[Layout], constants: &[(&str, u64)]) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&src, c_program(layouts, header, constants)).unwrap();
    common::output(
        Command::new("cc")
            .arg("-std=gnu11")
            .arg("-o")
            .arg(&exe)
            .arg(&src),
    );
    let c = common::output(&mut Command::new(&exe));
    let rust = rust_report(layouts, constants);
    for (r, c) in rust.lines().zip(c.lines()) {
        assert_eq!(r, c, "Rust layout (left) differs from {header} (right)");
    }
    assert_eq!(rust.lines().count(), c.lines().count());
}

#[test]
fn layouts_match_debian_verbs_h() {
    if !common::have("/usr/include/infiniband/verbs.h", "libibverbs-dev") {
        return;
    }
    compare(
        "verbs_layout",
        "infiniband/verbs.h",
        &layouts(),
        &constants(),
    );
}

#[test]
fn layouts_match_debian_rdma_cma_h() {
    if !common::have("/usr/include/rdma/rdma_cma.h", "librdmacm-dev") {
        return;
    }
    compare("cm_layout", "rdma/rdma_cma.h", &cm_layouts(), &[]);
    assert_eq!(size_of::<rdma_cm_id>(), 416);
    assert_eq!(size_of::<rdma_cm_event>(), 80);
}

/// The sizes and offsets docs/verbs-abi.md quotes (and that applications
/// compiled against any rdma-core since IBVERBS_1.1 rely on), checked without
/// a C compiler.
#[test]
fn abi_constants() {
    assert_eq!(size_of::<ibv_device>(), 664);
    assert_eq!(size_of::<ibv_context>(), 328);
    assert_eq!(size_of::<ibv_context_ops>(), 256);
    assert_eq!(size_of::<ibv_device_attr>(), 232);
    assert_eq!(size_of::<ibv_port_attr>(), 52);
    assert_eq!(size_of::<ibv_gid>(), 16);
    assert_eq!(size_of::<ibv_pd>(), 16);
    assert_eq!(size_of::<ibv_comp_channel>(), 16);
    assert_eq!(size_of::<ibv_mr>(), 48);
    assert_eq!(size_of::<ibv_cq>(), 128);
    assert_eq!(size_of::<ibv_wc>(), 48);
    assert_eq!(size_of::<ibv_qp>(), 160);
    assert_eq!(size_of::<ibv_qp_init_attr>(), 64);
    assert_eq!(size_of::<ibv_qp_attr>(), 144);
    assert_eq!(size_of::<ibv_send_wr>(), 128);
    assert_eq!(size_of::<ibv_recv_wr>(), 32);
    assert_eq!(size_of::<ibv_sge>(), 16);
    assert_eq!(offset_of!(ibv_send_wr, wr), 40);
    let ops = offset_of!(ibv_context, ops);
    assert_eq!(ops, 8);
    assert_eq!(ops + offset_of!(ibv_context_ops, poll_cq), 8 + 88);
    assert_eq!(offset_of!(ibv_context_ops, req_notify_cq), 96);
    assert_eq!(offset_of!(ibv_context_ops, post_srq_recv), 160);
    assert_eq!(offset_of!(ibv_context_ops, post_send), 200);
    assert_eq!(offset_of!(ibv_context_ops, post_recv), 208);
    assert_eq!(offset_of!(ibv_context, abi_compat), 320);
}
