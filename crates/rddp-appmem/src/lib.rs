//! Copies into and out of memory the application owns: the memory behind a
//! verbs memory region (`ibv_reg_mr`), which a C program allocated, keeps using,
//! and frees after deregistering it.
//!
//! All the `unsafe` that such regions need lives here; the rest of the workspace
//! keeps `forbid(unsafe_code)` and reaches application memory only through
//! [`AppMem`]'s safe, range-checked methods.
//!
//! # Invariants
//!
//! 1. **The registration is valid while an [`AppMem`] lives.** [`AppMem::new`] is
//!    the one `unsafe fn`: its caller promises that `[base, base + len)` stays
//!    mapped, readable and (for a writable registration) writable until the value
//!    is dropped. That is what `ibv_reg_mr` promises until `ibv_dereg_mr`
//!    returns, so the verbs layer drops the value before `ibv_dereg_mr` returns,
//!    after every copy through it has ended.
//! 2. **No Rust reference to application memory ever exists.** The application
//!    reads and writes its memory while the stack places into it or transmits
//!    from it, as it may with an RNIC's DMA; a `&[u8]` or `&mut [u8]` over those
//!    octets would assert that nothing else changes (or reads) them, which C
//!    code breaks at will. Every copy goes through raw pointers derived from the
//!    base address, octet by octet or word by word, and the Rust side of every
//!    copy is a caller's own slice, never application memory.
//! 3. **Copies are atomic accesses, relaxed.** Each octet or aligned word of
//!    application memory is read or written with one relaxed atomic access
//!    (`AtomicU8`/`AtomicUsize::from_ptr`; plain `mov`s on x86-64). Methods take
//!    `&self`, so two threads may copy through one value, or through two values
//!    over the same memory (an application registers one buffer twice), at the
//!    same time: racing atomic accesses are defined behaviour, racing
//!    `ptr::copy_nonoverlapping`s would not be. The octets such a race leaves are
//!    unspecified, as with two DMA engines; the application's own racing
//!    accesses give it unspecified octets too, never undefined behaviour on the
//!    Rust side. Word boundaries are taken from the absolute address, so two
//!    copies over the same octets use the same access sizes except at the
//!    unaligned ends of each.
//! 4. **A placement stores its last octet last.** [`AppMem::write`] stores every
//!    octet but the last, then the last with `Release`: an application that
//!    polls the last octet of its buffer (perftest's latency tests do) sees the
//!    whole message once that octet changes, as with an RNIC's in-order DMA.
//! 5. **Every range is checked here.** `offset + len` must not overflow and must
//!    not pass the registration's length; a read-only registration refuses
//!    every write. No caller's arithmetic can reach outside `[base, base + len)`.
//!    Pointer arithmetic uses `wrapping_add` (application memory is not a Rust
//!    allocation, and may span several mappings); only the accesses themselves
//!    need the octets to be there, which invariant 1 guarantees.
//! 6. **System calls get the raw pointer.** [`AppMem::read_fd`],
//!    [`AppMem::readv_fd`] and [`AppMem::send_fd`] hand the kernel the address
//!    and length of a checked range; the kernel copies as a device would,
//!    outside Rust's memory model. [`AppMem::readv_fd`] (a receive straight
//!    into the registration) keeps invariant 4 all the same: the kernel writes
//!    all of the range but its last octet, which it reads into the method's own
//!    octet, stored afterwards with `Release`.
//! 7. **Octets are looked at in copies.** [`AppMem::scan`] (a CRC over octets
//!    placed by the kernel) loads the range in pieces into a buffer on its
//!    own stack (invariant 3's relaxed loads) and shows the caller that buffer,
//!    never the application memory.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

const WORD: usize = size_of::<usize>();
/// Octets [`AppMem::scan`] loads at a time: a stack buffer half a first-level
/// data cache long (those of x86-64 cores hold 32 KiB or more), so it stays
/// there, and long enough that a folding CRC's set-up and final reduction,
/// paid once a piece, stay small beside the octets. Under Miri, which
/// interprets each of those loads, four words: the chunking is the same at
/// any length, and its tests then cross chunk edges in seconds, not minutes.
pub const SCAN_CHUNK: usize = if cfg!(miri) { 4 * WORD } else { 16 << 10 };

/// Why a copy was refused. Nothing was copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AppMemError {
    /// The range is not inside the registration (or `offset + len` overflows).
    #[error("{len} octets at offset {offset} are outside the {size} octets of the registration")]
    OutOfRange {
        /// Offset of the range asked for, from the registration's start.
        offset: usize,
        /// Octets asked for.
        len: usize,
        /// Octets of the registration.
        size: usize,
    },
    /// A write into a registration made read-only.
    #[error("the registration is read-only")]
    ReadOnly,
}

impl From<AppMemError> for io::Error {
    fn from(e: AppMemError) -> Self {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

/// A range of memory the application owns, registered with the stack. See the
/// crate's invariants: no Rust reference into it is ever made, every copy is
/// range-checked, and the range stays valid while this value lives.
pub struct AppMem {
    base: *mut u8,
    len: usize,
    writable: bool,
}

// SAFETY: `AppMem` holds an address and a length, no reference. Every access
// through it is an atomic access or a system call (invariants 3 and 6), which
// any thread may make at any time, concurrently with any other; the memory
// stays valid for as long as the value exists, whichever thread holds it
// (invariant 1).
unsafe impl Send for AppMem {}
// SAFETY: as for `Send`: every method takes `&self` and makes only atomic
// accesses or system calls, so sharing the value between threads adds no race
// that is not defined behaviour.
unsafe impl Sync for AppMem {}

impl fmt::Debug for AppMem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppMem")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .field("writable", &self.writable)
            .finish()
    }
}

impl AppMem {
    /// Register `[base, base + len)`. `None` if the range cannot be memory: `base`
    /// null with `len > 0`, `base + len` past the end of the address space, or
    /// `len` over `isize::MAX`. With `len == 0` nothing is ever copied and `base`
    /// may be any value.
    ///
    /// # Safety
    ///
    /// Until the returned value is dropped, every octet of `[base, base + len)`
    /// stays mapped and readable, and writable if `writable`; no Rust reference
    /// to any of those octets exists meanwhile. Other parties (the application,
    /// the kernel, other `AppMem`s) may read and write them concurrently.
    pub unsafe fn new(base: *mut u8, len: usize, writable: bool) -> Option<Self> {
        if len == 0 {
            return Some(Self {
                base,
                len,
                writable,
            });
        }
        if base.is_null() || len > isize::MAX as usize {
            return None;
        }
        base.addr().checked_add(len)?;
        Some(Self {
            base,
            len,
            writable,
        })
    }

    /// The address of the first octet, as the application gave it (what verbs
    /// applications advertise as the tagged offset).
    pub fn addr(&self) -> usize {
        self.base.addr()
    }

    /// Length in octets.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the registration has no octet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether writes are allowed.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The address of `len` octets at `offset`, once checked to lie inside.
    fn range(&self, offset: usize, len: usize) -> Result<*mut u8, AppMemError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.base.wrapping_add(offset)),
            _ => Err(AppMemError::OutOfRange {
                offset,
                len,
                size: self.len,
            }),
        }
    }

    fn writable_range(&self, offset: usize, len: usize) -> Result<*mut u8, AppMemError> {
        let at = self.range(offset, len)?;
        if self.writable || len == 0 {
            Ok(at)
        } else {
            Err(AppMemError::ReadOnly)
        }
    }

    /// Store `src` at `offset`: every octet but the last with relaxed atomic
    /// stores, then the last with `Release` (invariant 4). Refused, with nothing
    /// stored, if the range is not inside or the registration is read-only.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), AppMemError> {
        let dst = self.writable_range(offset, src.len())?;
        let Some((last, body)) = src.split_last() else {
            return Ok(());
        };
        // SAFETY: `[dst, dst + src.len())` is inside the registration (checked
        // above), which is writable and valid while `self` lives (invariant 1);
        // `body` is the caller's slice, not application memory (invariant 2).
        unsafe { store_relaxed(dst, body) };
        // SAFETY: the last octet of the checked range: valid, writable, and an
        // `AtomicU8` has no alignment requirement. Accessed atomically only.
        let last_octet = unsafe { AtomicU8::from_ptr(dst.wrapping_add(body.len())) };
        last_octet.store(*last, Ordering::Release);
        Ok(())
    }

    /// Load `dst.len()` octets at `offset` into `dst` with relaxed atomic loads.
    /// Refused, with `dst` untouched, if the range is not inside.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), AppMemError> {
        let src = self.range(offset, dst.len())?;
        // SAFETY: `[src, src + dst.len())` is inside the registration, readable
        // while `self` lives (invariant 1); `dst` is the caller's own slice.
        unsafe { load_relaxed(src, dst) };
        Ok(())
    }

    /// Copy the octets at `offset` into a new vector.
    pub fn to_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>, AppMemError> {
        self.range(offset, len)?;
        let mut v = vec![0; len];
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// `read(2)` from `fd` straight into up to `len` octets at `offset`: the
    /// number of octets read, as `read(2)` returns it. The kernel stores in its
    /// own order (invariant 4 does not hold for it). A range outside or a
    /// read-only registration is `InvalidInput`, with nothing read.
    pub fn read_fd(&self, fd: BorrowedFd<'_>, offset: usize, len: usize) -> io::Result<usize> {
        let dst = self.writable_range(offset, len)?;
        // SAFETY: the kernel writes at most `len` octets at `dst`, a checked,
        // writable range of the registration, valid while `self` lives; a bad
        // `fd` is an error return, not a write.
        let n = unsafe { libc::read(fd.as_raw_fd(), dst.cast(), len) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// `readv(2)` from `fd` into `len` octets at `offset` then into `tail`
    /// (the caller's own octets, e.g. what follows a payload on the wire): the
    /// number of octets read, as `readv(2)` returns it; the first
    /// `min(n, len)` of them are in the range, the rest at the start of `tail`.
    /// The kernel writes the range but its last octet (invariant 6); that octet
    /// is read into this method's own octet and, if the read reached it,
    /// stored last with `Release` (invariant 4: an application that polls the
    /// last octet of the range sees the octets before it once it changes). A
    /// range outside or a read-only registration (with `len > 0`) is
    /// `InvalidInput`, with nothing read.
    pub fn readv_fd(
        &self,
        fd: BorrowedFd<'_>,
        offset: usize,
        len: usize,
        tail: &mut [u8],
    ) -> io::Result<usize> {
        let dst = self.writable_range(offset, len)?;
        let body = len.saturating_sub(1);
        let mut last = 0u8;
        let iov = [
            libc::iovec {
                iov_base: dst.cast(),
                iov_len: body,
            },
            libc::iovec {
                iov_base: (&raw mut last).cast(),
                iov_len: len - body,
            },
            libc::iovec {
                iov_base: tail.as_mut_ptr().cast(),
                iov_len: tail.len(),
            },
        ];
        // SAFETY: the kernel writes at most `body` octets at `dst` (a checked,
        // writable range of the registration, valid while `self` lives), at
        // most one into `last` and at most `tail.len()` into `tail` (both
        // ours, live for the call); a bad `fd` is an error return, not a
        // write.
        let n = unsafe { libc::readv(fd.as_raw_fd(), iov.as_ptr(), 3) };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        if len > 0 && n >= len {
            // SAFETY: the last octet of the checked, writable range; an
            // `AtomicU8` has no alignment requirement. Accessed atomically.
            let at = unsafe { AtomicU8::from_ptr(dst.wrapping_add(body)) };
            at.store(last, Ordering::Release);
        }
        Ok(n)
    }

    /// Show `f` the `len` octets at `offset`, in order, in pieces of at most
    /// [`SCAN_CHUNK`] octets loaded with relaxed atomic loads into a buffer of
    /// this call's (invariant 7): e.g. a CRC over octets the kernel placed. What
    /// `f` sees is what the loads found; an application changing those octets
    /// meanwhile makes them unspecified, not undefined. Refused, with `f`
    /// never called, if the range is not inside.
    pub fn scan(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(&[u8]),
    ) -> Result<(), AppMemError> {
        let src = self.range(offset, len)?;
        let mut buf = [0u8; SCAN_CHUNK];
        let mut done = 0;
        while done < len {
            let k = (len - done).min(SCAN_CHUNK);
            let chunk = &mut buf[..k];
            // SAFETY: `[src + done, src + done + k)` is inside the checked
            // range, readable while `self` lives (invariant 1); `chunk` is this
            // call's own buffer (invariant 2).
            unsafe { load_relaxed(src.wrapping_add(done), chunk) };
            f(chunk);
            done += k;
        }
        Ok(())
    }

    /// `send(2)` up to `len` octets at `offset` to the socket `fd`, with
    /// `MSG_NOSIGNAL` (a peer that has closed is `EPIPE`, never a SIGPIPE in
    /// the application's process): the number of octets sent. A range outside
    /// is `InvalidInput`, with nothing sent.
    pub fn send_fd(&self, fd: BorrowedFd<'_>, offset: usize, len: usize) -> io::Result<usize> {
        let src = self.range(offset, len)?;
        // SAFETY: the kernel reads at most `len` octets at `src`, a checked
        // range of the registration, readable while `self` lives.
        let n = unsafe { libc::send(fd.as_raw_fd(), src.cast(), len, libc::MSG_NOSIGNAL) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }
}

/// Zeroed memory that stays allocated for ever and that no Rust reference
/// reaches: what stands for an application's buffer in the tests of crates that
/// forbid `unsafe`. Each value leaks its allocation; [`Self::mem`] gives any
/// number of registrations over it, as an application may make.
#[derive(Debug, Clone, Copy)]
pub struct Leaked {
    base: *mut u8,
    len: usize,
}

// SAFETY: an address and a length; the memory is reached only through the
// `AppMem`s it makes, which any thread may use (see `AppMem`).
unsafe impl Send for Leaked {}
// SAFETY: as for `Send`.
unsafe impl Sync for Leaked {}

impl Leaked {
    /// `len` zeroed octets, never freed.
    pub fn new(len: usize) -> Self {
        Self {
            base: Box::into_raw(vec![0u8; len].into_boxed_slice()).cast(),
            len,
        }
    }

    /// A registration over all of it. Sound without `unsafe` at the call: the
    /// memory is never freed, and no reference to it was ever made
    /// (`Box::into_raw` gave a pointer), so `AppMem::new`'s contract holds for
    /// ever.
    pub fn mem(&self, writable: bool) -> AppMem {
        AppMem {
            base: self.base,
            len: self.len,
            writable,
        }
    }

    /// The address of its first octet.
    pub fn addr(&self) -> usize {
        self.base.addr()
    }
}

/// How many octets from `p` to the next `usize`-aligned address, at most `n`.
fn head_len(p: *const u8, n: usize) -> usize {
    ((WORD - p.addr() % WORD) % WORD).min(n)
}

/// Store `src` at `dst` with relaxed atomic stores: single octets up to the first
/// aligned word, whole aligned words, then single octets.
///
/// # Safety
///
/// `[dst, dst + src.len())` is valid for writes for the duration of the call and
/// accessed by Rust only atomically (no reference to it exists); `src` does not
/// overlap it.
unsafe fn store_relaxed(dst: *mut u8, src: &[u8]) {
    let (head, rest) = src.split_at(head_len(dst, src.len()));
    let mut at = dst;
    for &b in head {
        // SAFETY: `at` is inside the range (the caller's promise), octets need
        // no alignment.
        unsafe { AtomicU8::from_ptr(at) }.store(b, Ordering::Relaxed);
        at = at.wrapping_add(1);
    }
    let mut words = rest.chunks_exact(WORD);
    for w in words.by_ref() {
        let mut b = [0; WORD];
        b.copy_from_slice(w);
        // SAFETY: `at` is now `usize`-aligned (the head brought it there) and
        // `WORD` octets from it lie inside the range.
        unsafe { AtomicUsize::from_ptr(at.cast()) }
            .store(usize::from_ne_bytes(b), Ordering::Relaxed);
        at = at.wrapping_add(WORD);
    }
    for &b in words.remainder() {
        // SAFETY: inside the range, as above.
        unsafe { AtomicU8::from_ptr(at) }.store(b, Ordering::Relaxed);
        at = at.wrapping_add(1);
    }
}

/// Load `dst.len()` octets at `src` into `dst` with relaxed atomic loads, in the
/// same pieces as [`store_relaxed`].
///
/// # Safety
///
/// `[src, src + dst.len())` is valid for reads for the duration of the call and
/// accessed by Rust only atomically; `dst` does not overlap it.
unsafe fn load_relaxed(src: *mut u8, dst: &mut [u8]) {
    let n = dst.len();
    let (head, rest) = dst.split_at_mut(head_len(src, n));
    let mut at = src;
    for b in head {
        // SAFETY: `at` is inside the range (the caller's promise).
        *b = unsafe { AtomicU8::from_ptr(at) }.load(Ordering::Relaxed);
        at = at.wrapping_add(1);
    }
    let mut words = rest.chunks_exact_mut(WORD);
    for w in words.by_ref() {
        // SAFETY: `at` is `usize`-aligned and `WORD` octets from it lie inside
        // the range.
        let v = unsafe { AtomicUsize::from_ptr(at.cast()) }.load(Ordering::Relaxed);
        w.copy_from_slice(&v.to_ne_bytes());
        at = at.wrapping_add(WORD);
    }
    for b in words.into_remainder() {
        // SAFETY: inside the range, as above.
        *b = unsafe { AtomicU8::from_ptr(at) }.load(Ordering::Relaxed);
        at = at.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests;
