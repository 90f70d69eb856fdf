//! `libibverbs.so.1` for unmodified rdma-core applications, backed by rddp:
//! one iWARP device, `rddp0`, with no kernel module, no `/dev/infiniband`
//! and no root (docs/verbs-abi.md).
//!
//! The cdylib this crate builds is installed under the soname
//! `libibverbs.so.1` in a directory of its own, which goes first on the
//! library path (`LD_LIBRARY_PATH`), replacing Debian's libibverbs for that
//! process. Its exports carry the symbol versions of Debian 12's
//! libibverbs (rdma-core 44.0): see libibverbs.map and build.rs.
//!
//! Today it makes `ibv_devices` and `ibv_devinfo` work: the device list,
//! `ibv_open_device`/`ibv_close_device`, the device, port, GID and P_Key
//! queries and `ibv_read_sysfs_file`. Stage 2a ([`resources`]) adds
//! protection domains, completion queues and completion channels backed by
//! rddp's objects (`ibv_req_notify_cq` arms an `rddp::CompletionQueue`,
//! whose notify hook raises the channel's event). `ibv_reg_mr` and its
//! `_iova` forms register the application's own memory
//! ([`resources::mr`], over rddp-appmem). RC queue pairs and the data path
//! ([`resources::qp`]) run rddp queue pairs, attached to a connection by
//! the connection manager ([`resources::qp::attach`]). Every other public
//! verb is exported (so binaries that import it load) and refuses with
//! `EOPNOTSUPP`.
//!
//! The same file is also `librdmacm.so.1` ([`cm`]: rdma_cm over TCP, with
//! librdmacm's `RDMACM_*` versions): linked under both names in one
//! directory, ld.so maps it once, so the CM and the verbs share one
//! registry of objects.
//!
//! The rlib exists for this crate's tests (the layouts of [`abi`], the
//! device's values in [`device`]); it carries the same `ibv_*` symbols, so a
//! program that links it must not also link a libibverbs.
//!
//! # Invariants
//!
//! One of the workspace's small crates made for `unsafe` (with usrsctp-ffi,
//! rddp-sockopt, rddp-crc32c and rddp-appmem); each `unsafe` block says
//! which of these it relies on.
//!
//! 1. **Caller contract.** Pointers passed in are what verbs.h promises:
//!    NULL or valid for the pointed-to C type (output structs writable,
//!    strings NUL-terminated, `buf` holding `size` bytes).
//! 2. **Our objects are checked before use.** A device pointer must be the
//!    one device (compared by address); a context, PD, MR, channel, CQ or QP
//!    pointer must be registered as live, with its kind (`resources::live`).
//!    Anything else is refused (`ENODEV`/`EINVAL`) without being
//!    dereferenced, so a stale or foreign pointer is an error, not a use
//!    after free. One exception, the data path: `ibv_poll_cq` is reached
//!    through `cq->context->ops`, so verbs.h's inline has already read
//!    through the application's CQ pointer; it is trusted, as rdma-core's
//!    providers trust it. `post_send` and `post_recv` (also reached
//!    through the ops) do look their QP up, as they look the SGEs' lkeys
//!    up under the registry's lock anyway.
//! 3. **Layouts.** Every struct that crosses the ABI is a `#[repr(C)]` copy
//!    in [`abi`], and tests/api/layout.rs compares its size, alignment and field
//!    offsets against the C compiler's for Debian's header.
//! 4. **Lifetimes.** The device is allocated once and never freed, so names
//!    and paths read from it stay valid after `ibv_free_device_list`. A
//!    context is a `Box` whose first field is the public `ibv_context`,
//!    freed by `ibv_close_device` only; likewise a PD, channel or CQ is a
//!    `Box` whose first field is the public struct, freed by its destroy
//!    verb or by `ibv_close_device` (which destroys what is left, as the
//!    kernel does when a context's fd closes). The `pthread` mutex and
//!    condition variable of an `ibv_cq` stay in place inside its `Box`.
//!    An MR's memory is the application's: no Rust reference to it is ever
//!    made (copies go through rddp-appmem), and `ibv_dereg_mr` returns only
//!    once nothing can copy into or out of it any more.
//! 5. **No unwinding into C.** Entry points do not panic on any input
//!    (errors are errno values); a panic would abort the process, as Rust
//!    does at an `extern "C"` boundary.
#![warn(missing_docs)]

pub mod abi;

/// Publishes `$imp` under the C symbol `$name`. The alias is not a Rust
/// item, so rustc's own version script does not list it and libibverbs.map
/// gives it its rdma-core version (see build.rs).
/// (An alias must be in the same object file as its target: each module
/// exports its own functions.)
macro_rules! export {
    ($($name:ident => $imp:path;)*) => {$(
        std::arch::global_asm!(
            concat!(".globl ", stringify!($name)),
            concat!(".type ", stringify!($name), ",@function"),
            concat!(".set ", stringify!($name), ", {f}"),
            f = sym $imp,
        );
    )*};
}

pub mod cm;
pub mod device;
mod exports;
pub mod resources;
mod standins;
