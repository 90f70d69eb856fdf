//! Memory regions over the application's memory (docs/verbs-abi.md, "Memory
//! regions"): `ibv_reg_mr`, `ibv_reg_mr_iova`, `ibv_reg_mr_iova2` and
//! `ibv_dereg_mr`.
//!
//! Each is an `rddp::MemoryRegion` over an [`AppMem`] (rddp-appmem, where the
//! copies' `unsafe` lives): the stack reaches the application's octets only
//! through its range-checked copies, never through a Rust reference, and its
//! first octet has tagged offset `iova` (the address, for `ibv_reg_mr`), as
//! verbs applications advertise it. `lkey` and `rkey` are both its STag.
//! `ibv_dereg_mr` returns only once no copy into or out of the memory can
//! happen any more, so the application may free it then.

use super::{Kind, Live, Pd, live};
use crate::abi::{self, ibv_mr, ibv_pd};
use crate::device;
use crate::exports::set_errno;
use rddp::{Access, AppMem, MemError};
use std::ffi::{c_int, c_uint, c_void};
use std::ptr;
use std::sync::atomic::Ordering;

/// What `ibv_reg_mr` allocates: the public `struct ibv_mr` first.
#[repr(C)]
struct Mr {
    ibv: ibv_mr,
    mr: rddp::MemoryRegion,
}

/// The rights `access` asks for, or the errno of its refusal, as the kernel's
/// `ib_check_mr_access` and siw decide: unknown flags and a remote write or
/// atomic right without local write are `EINVAL`; on-demand paging is
/// `EOPNOTSUPP`; zero-based regions are `EINVAL` (TO = address, always).
/// Remote atomics are accepted and grant nothing (iWARP has none: an atomic
/// work request is refused when posted); memory-window binding, huge pages
/// and the optional flags are accepted and change nothing.
pub fn rights(access: c_uint) -> Result<Access, c_int> {
    use abi::*;
    let known = IBV_ACCESS_LOCAL_WRITE
        | IBV_ACCESS_REMOTE_WRITE
        | IBV_ACCESS_REMOTE_READ
        | IBV_ACCESS_REMOTE_ATOMIC
        | IBV_ACCESS_MW_BIND
        | IBV_ACCESS_ZERO_BASED
        | IBV_ACCESS_ON_DEMAND
        | IBV_ACCESS_HUGETLB
        | IBV_ACCESS_OPTIONAL_RANGE;
    if access & !known != 0 || access & IBV_ACCESS_ZERO_BASED != 0 {
        return Err(libc::EINVAL);
    }
    if access & IBV_ACCESS_ON_DEMAND != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let remote_writes = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
    if access & remote_writes != 0 && access & IBV_ACCESS_LOCAL_WRITE == 0 {
        return Err(libc::EINVAL);
    }
    let mut r = Access::NONE;
    for (flag, right) in [
        (IBV_ACCESS_LOCAL_WRITE, Access::LOCAL_WRITE),
        (IBV_ACCESS_REMOTE_WRITE, Access::REMOTE_WRITE),
        (IBV_ACCESS_REMOTE_READ, Access::REMOTE_READ),
    ] {
        if access & flag != 0 {
            r = r | right;
        }
    }
    Ok(r)
}

/// Whether every page of `[addr, addr + len)` is mapped (`mincore(2)`, which
/// only looks at the process's page tables): the kernel's `ibv_reg_mr` pins
/// the pages and fails with `EFAULT` when one is missing. Whether they are
/// writable is not checked (the kernel learns it from the pin); a range
/// registered for writing that is mapped read-only is the application's
/// error, as writing into it would be.
fn mapped(addr: usize, len: usize) -> bool {
    // SAFETY: sysconf takes no pointers.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    let mut at = addr - addr % page;
    // Pages per call: a fixed vector however long the range.
    let mut vec = [0u8; 4096];
    while at < end {
        let n = (end - at).div_ceil(page).min(vec.len());
        // SAFETY: mincore reads the page tables for `n` pages from `at` (page
        // aligned) and writes one octet per page into `vec`, which holds
        // `vec.len() >= n`; it never touches the pages themselves.
        let r =
            unsafe { libc::mincore(ptr::without_provenance_mut(at), n * page, vec.as_mut_ptr()) };
        if r != 0 {
            return false;
        }
        at = at.saturating_add(n * page);
    }
    true
}

/// The errno of a refused registration: limits are `ENOMEM` (as the kernel's
/// locked-memory limit), anything else `EINVAL`.
fn errno_of(e: &rddp::Error) -> c_int {
    match e {
        rddp::Error::Quota { .. }
        | rddp::Error::Mem(MemError::TooManyRegions(_) | MemError::TooManyBytes { .. }) => {
            libc::ENOMEM
        }
        _ => libc::EINVAL,
    }
}

/// Register `[addr, addr + length)` of PD `pd` with its first octet at tagged
/// offset `iova`. NULL and errno on a refusal, in this order: a PD that is not
/// live, `access` ([`rights`]), a zero or wrapping length, an `iova` whose
/// offset in its page differs from `addr`'s (as the kernel), a length over
/// `max_mr_size` (`ENOMEM`), a range not mapped (`EFAULT`), rddp's limits.
unsafe fn register(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    let refuse = |e| {
        set_errno(e);
        ptr::null_mut()
    };
    let mut live = live();
    let ctx = match live.objects.get(&(pd as usize)) {
        Some(&(Kind::Pd, ctx)) => ctx,
        _ => return refuse(libc::EINVAL),
    };
    let rights = match rights(access) {
        Ok(r) => r,
        Err(e) => return refuse(e),
    };
    let start = addr.addr();
    if length == 0 || start.checked_add(length).is_none() {
        return refuse(libc::EINVAL);
    }
    if iova.checked_add(length as u64).is_none() {
        return refuse(libc::EINVAL);
    }
    // SAFETY: sysconf takes no pointers.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    if iova % page != start as u64 % page {
        return refuse(libc::EINVAL);
    }
    if length as u64 > device::device_attr().max_mr_size {
        return refuse(libc::ENOMEM);
    }
    if !mapped(start, length) {
        return refuse(libc::EFAULT);
    }
    let writable = access & abi::IBV_ACCESS_LOCAL_WRITE != 0;
    // SAFETY: `ibv_reg_mr`'s contract: the application's memory at
    // `[addr, addr + length)` stays mapped, readable and (registered with
    // local write) writable until `ibv_dereg_mr` on this MR returns, and
    // `ibv_dereg_mr` (or `ibv_close_device`) drops the region, which ends
    // every copy through this `AppMem` before it returns. This library makes
    // no Rust reference into that memory.
    let Some(app) = (unsafe { AppMem::new(addr.cast(), length, writable) }) else {
        return refuse(libc::EFAULT);
    };
    // SAFETY: `pd` is live (registry locked), so it is alloc_pd's Box<Pd>;
    // `_pd` and `users` are fields C never writes.
    let owner = unsafe { &*pd.cast::<Pd>() };
    let mr = match owner._pd.register_app(app, rights, iova) {
        Ok(mr) => mr,
        Err(e) => return refuse(errno_of(&e)),
    };
    owner.users.fetch_add(1, Ordering::AcqRel);
    let stag = mr.stag();
    let p = Box::into_raw(Box::new(Mr {
        ibv: ibv_mr {
            context: ctx as *mut abi::ibv_context,
            pd,
            addr,
            length,
            handle: stag >> 8,
            lkey: stag,
            rkey: stag,
        },
        mr,
    }));
    live.objects.insert(p as usize, (Kind::Mr, ctx));
    live.lkeys.insert((pd as usize, stag), p as usize);
    p.cast()
}

/// The live MR of `lkey` in `pd`: its region (borrowed while the registry is
/// locked). An lkey of another PD is none of `pd`'s, as verbs has it.
pub(super) fn by_lkey(live: &Live, pd: *mut ibv_pd, lkey: u32) -> Option<&rddp::MemoryRegion> {
    let p = *live.lkeys.get(&(pd as usize, lkey))?;
    if !live.is(p, Kind::Mr) {
        return None;
    }
    // SAFETY: a live MR (the registry is locked for the borrow's lifetime)
    // is reg_mr's Box<Mr>; `mr` is a field C never writes.
    let m = unsafe { &*(p as *const Mr) };
    Some(&m.mr)
}

/// `ibv_reg_mr@IBVERBS_1.1`: the tagged offset of the first octet is `addr`.
pub(crate) unsafe extern "C" fn reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller's arguments, passed on (verbs.h contract).
    unsafe { register(pd, addr, length, addr.addr() as u64, access as c_uint) }
}

/// `ibv_reg_mr_iova@IBVERBS_1.7`.
pub(crate) unsafe extern "C" fn reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: as for reg_mr.
    unsafe { register(pd, addr, length, iova, access as c_uint) }
}

/// `ibv_reg_mr_iova2@IBVERBS_1.8` (what verbs.h's `ibv_reg_mr` macro calls
/// when `access` is not a constant free of optional flags).
pub(crate) unsafe extern "C" fn reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    // SAFETY: as for reg_mr.
    unsafe { register(pd, addr, length, iova, access) }
}

/// `ibv_dereg_mr`: `EINVAL` for an MR that is not live. Returns once no copy
/// into or out of the memory can happen any more.
pub(crate) unsafe extern "C" fn dereg_mr(mr: *mut ibv_mr) -> c_int {
    let boxed = {
        let mut live = live();
        if !live.is(mr as usize, Kind::Mr) {
            return libc::EINVAL;
        }
        live.objects.remove(&(mr as usize));
        // SAFETY: live until the line above, so reg_mr's Box, taken once.
        let boxed = unsafe { Box::from_raw(mr.cast::<Mr>()) };
        live.lkeys.remove(&(boxed.ibv.pd as usize, boxed.ibv.lkey));
        release_pd(boxed.ibv.pd);
        boxed
    };
    // Outside the registry's lock: ending the registration waits for the
    // copies in progress.
    drop(boxed);
    0
}

/// One user fewer for the MR's PD, which is live: `ibv_dealloc_pd` refuses a
/// PD with users, and `ibv_close_device` frees MRs before PDs.
fn release_pd(pd: *mut ibv_pd) {
    // SAFETY: the PD is live (above), a Box<Pd>; `users` is atomic.
    unsafe { (*pd.cast::<Pd>()).users.fetch_sub(1, Ordering::AcqRel) };
}

/// `ibv_close_device`'s part: free an MR already out of the registry.
///
/// # Safety
///
/// `p` was a live MR, removed from the registry by the caller, whose PD is
/// still live.
pub(crate) unsafe fn free_mr(p: usize) {
    // SAFETY: the caller's promise: reg_mr's Box, freed once, here.
    let boxed = unsafe { Box::from_raw(p as *mut Mr) };
    release_pd(boxed.ibv.pd);
    drop(boxed);
}

export! {
    // IBVERBS_1.1
    ibv_dereg_mr => dereg_mr;
    ibv_reg_mr => reg_mr;
    // IBVERBS_1.7, 1.8
    ibv_reg_mr_iova => reg_mr_iova;
    ibv_reg_mr_iova2 => reg_mr_iova2;
}
