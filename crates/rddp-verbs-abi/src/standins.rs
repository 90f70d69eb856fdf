//! Stand-ins for the two provider libraries Debian's perftest needs.
//!
//! perftest 4.5 (Debian 12) links `libmlx5.so.1` and `libefa.so.1` for its
//! mlx5 and EFA paths, and those libraries link libibverbs' private ABI
//! (`IBVERBS_PRIVATE_34`), which this library does not provide. So the
//! cdylib is found under those two names as well (`rddp exec` and the
//! tests make the links), and defines the eleven symbols perftest imports
//! from them, at Debian's versions (libibverbs.map). perftest calls them
//! only for a device whose vendor id is Mellanox's or Amazon's, which rddp0
//! is not; should anything call one, it refuses: NULL with errno
//! `EOPNOTSUPP` for a constructor, `EOPNOTSUPP` for the rest.

use crate::exports::set_errno;
use std::ffi::{c_int, c_void};
use std::ptr;

type P = *mut c_void;

fn refuse_ptr() -> P {
    set_errno(libc::EOPNOTSUPP);
    ptr::null_mut()
}

fn refuse_int() -> c_int {
    set_errno(libc::EOPNOTSUPP);
    libc::EOPNOTSUPP
}

/// `mlx5dv_open_device(device, attr)`, `mlx5dv_create_mkey(attr)`,
/// `mlx5dv_qp_ex_from_ibv_qp_ex(qp)`, `mlx5dv_dek_create(ctx, attr)`,
/// `mlx5dv_create_qp(ctx, attr, mlx5_attr)`,
/// `efadv_create_qp_ex(ctx, attr, efa_attr, inlen)`: NULL.
unsafe extern "C" fn null_ptr(_: P, _: P, _: P, _: u32) -> P {
    refuse_ptr()
}

/// `mlx5dv_devx_general_cmd(ctx, in, inlen, out, outlen)`,
/// `mlx5dv_destroy_mkey(mkey)`, `mlx5dv_crypto_login(ctx, attr)`,
/// `mlx5dv_dek_destroy(dek)`, `efadv_query_device(ctx, attr, inlen)`:
/// `EOPNOTSUPP`.
unsafe extern "C" fn not_supported(_: P, _: P, _: usize, _: P, _: usize) -> c_int {
    refuse_int()
}

export! {
    // MLX5_1.3
    mlx5dv_create_qp => null_ptr;
    // MLX5_1.7
    mlx5dv_open_device => null_ptr;
    mlx5dv_devx_general_cmd => not_supported;
    // MLX5_1.10
    mlx5dv_create_mkey => null_ptr;
    mlx5dv_destroy_mkey => not_supported;
    mlx5dv_qp_ex_from_ibv_qp_ex => null_ptr;
    // MLX5_1.21
    mlx5dv_crypto_login => not_supported;
    mlx5dv_dek_create => null_ptr;
    mlx5dv_dek_destroy => not_supported;
    // EFA_1.1
    efadv_create_qp_ex => null_ptr;
    efadv_query_ah => not_supported;
    efadv_query_device => not_supported;
    // EFA_1.2 (libfabric's verbs and EFA providers)
    efadv_create_cq => null_ptr;
    efadv_cq_from_ibv_cq_ex => null_ptr;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stand_ins_refuse() {
        // SAFETY: the stand-ins read none of their arguments.
        unsafe {
            set_errno(0);
            assert!(null_ptr(ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), 0).is_null());
            assert_eq!(*libc::__errno_location(), libc::EOPNOTSUPP);
            let r = not_supported(ptr::null_mut(), ptr::null_mut(), 0, ptr::null_mut(), 0);
            assert_eq!(r, libc::EOPNOTSUPP);
        }
    }
}
