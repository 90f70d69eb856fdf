//! Registered memory (RFC 5042): each region, memory the stack owns or memory
//! the application owns, and the STag table that names them.
//!
//! The table ([`MemoryTable`]) registers, looks up with the checks of RFC 5041
//! §7.1, and invalidates; every stream of a device shares it without a
//! device-wide lock. It hands out regions as [`RegionRef`]s (`Arc`): a placement, a
//! transmit and the application's own access each lock only the region's octets,
//! never the table, so work on different regions never serializes. Reading
//! (a transmit, the application's reads) shares the lock: queue pairs that send
//! from one region do not wait for each other; writing (a placement, the
//! application's writes) takes it alone.
//!
//! A region over application memory (a verbs `ibv_reg_mr`) holds an [`AppMem`]:
//! no Rust reference to those octets may exist (the application reads and writes
//! them while the stack does), so such a region is reached only by copies:
//! [`Region::write_at`], [`Region::read_at`], [`Region::with_octets`] and
//! [`Region::fill_at`] work for both kinds and are what the data paths use.
//! [`Region::data`] and [`Region::data_mut`] still work for it, through a copy
//! of the whole region (see there). Copies into application memory are not
//! serialized by a lock (they are atomic accesses, see rddp-appmem); the lock
//! of such a region only orders them against the end of the registration:
//! removing the region from the table waits for the copies in progress, then
//! drops the `AppMem`, and every later copy through a handle still held
//! elsewhere (a posted receive, a lease) finds the memory gone and copies
//! nothing.

use super::{Access, PdId, Stag, StagScope, StreamId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rddp_appmem::AppMem;
use std::collections::VecDeque;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Octets of guard pattern kept on each side of every region's memory. Placement
/// indexes the guarded allocation, so a validation bug would land in a guard (where
/// tests see it) rather than go unnoticed.
pub const GUARD_LEN: usize = 64;
const GUARD_BYTE: u8 = 0xA5;

/// A shared handle to a registered region.
pub type RegionRef = Arc<Region>;

/// A region's memory.
#[derive(Debug)]
enum Mem {
    /// GUARD_LEN guard octets, `len` data octets, GUARD_LEN guard octets; the
    /// region's own lock (no table lock is held while it is).
    Owned(RwLock<Vec<u8>>),
    /// The application's memory while registered; `None` once the region has
    /// left the table (the registration is over). Copies hold the lock shared.
    App(RwLock<Option<AppMem>>),
}

/// A memory region: memory, protection domain, scope, rights and TO range. Every
/// field but the octets and the valid flag is fixed at registration.
#[derive(Debug)]
pub struct Region {
    pub(crate) pd: PdId,
    pub(crate) scope: StagScope,
    pub(crate) access: Access,
    pub(crate) base_to: u64,
    pub(crate) len: u64,
    valid: AtomicBool,
    mem: Mem,
    /// Octets copied out of application memory so far (0 for memory the
    /// stack owns): see [`Region::app_octets_read`].
    app_read: AtomicU64,
}

/// The data octets of a region, locked for reading (local access, a transmit);
/// for application memory, a copy taken when it was asked for.
pub struct RegionData<'a> {
    octets: Octets<'a>,
    len: usize,
}

enum Octets<'a> {
    Locked(RwLockReadGuard<'a, Vec<u8>>),
    Copy(Vec<u8>),
}

/// The data octets of a region, locked for writing; for application memory, a
/// copy whose changed octets are stored back when it is dropped.
pub struct RegionDataMut<'a> {
    octets: OctetsMut<'a>,
    len: usize,
}

enum OctetsMut<'a> {
    Locked(RwLockWriteGuard<'a, Vec<u8>>),
    Copy(&'a Region, Bounce),
}

/// A copy of `before.len()` octets of application memory at `offset`, edited in
/// `now` and stored back octet run by octet run where it differs from `before`:
/// octets the editor left alone are not stored, so the application's own writes
/// to them meanwhile survive.
struct Bounce {
    offset: usize,
    before: Vec<u8>,
    now: Vec<u8>,
}

impl Bounce {
    fn store_back(&self, region: &Region) {
        let mut i = 0;
        let n = self.now.len();
        while i < n {
            if self.now[i] == self.before[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i < n && self.now[i] != self.before[i] {
                i += 1;
            }
            // In range by construction; a registration that ended meanwhile
            // takes nothing, as for any other copy.
            let _ = region.write_at(self.offset + start, &self.now[start..i]);
        }
    }
}

impl Drop for RegionDataMut<'_> {
    fn drop(&mut self) {
        if let OctetsMut::Copy(region, bounce) = &self.octets {
            bounce.store_back(region);
        }
    }
}

impl Deref for RegionData<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.octets {
            Octets::Locked(g) => &g[GUARD_LEN..GUARD_LEN + self.len],
            Octets::Copy(v) => v,
        }
    }
}

impl Deref for RegionDataMut<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.octets {
            OctetsMut::Locked(g) => &g[GUARD_LEN..GUARD_LEN + self.len],
            OctetsMut::Copy(_, b) => &b.now,
        }
    }
}

impl DerefMut for RegionDataMut<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.octets {
            OctetsMut::Locked(g) => &mut g[GUARD_LEN..GUARD_LEN + self.len],
            OctetsMut::Copy(_, b) => &mut b.now,
        }
    }
}

impl fmt::Debug for RegionDataMut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl fmt::Debug for RegionData<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl PartialEq<[u8]> for RegionData<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl PartialEq<&[u8]> for RegionData<'_> {
    fn eq(&self, other: &&[u8]) -> bool {
        **self == **other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for RegionData<'_> {
    fn eq(&self, other: &&[u8; N]) -> bool {
        **self == other[..]
    }
}

impl Region {
    pub(crate) fn new(
        pd: PdId,
        scope: StagScope,
        access: Access,
        base_to: u64,
        data: Vec<u8>,
    ) -> Self {
        let len = data.len() as u64;
        let mut mem = Vec::with_capacity(data.len() + 2 * GUARD_LEN);
        mem.resize(GUARD_LEN, GUARD_BYTE);
        mem.extend_from_slice(&data);
        mem.resize(data.len() + 2 * GUARD_LEN, GUARD_BYTE);
        Self {
            pd,
            scope,
            access,
            base_to,
            len,
            valid: AtomicBool::new(true),
            mem: Mem::Owned(RwLock::new(mem)),
            app_read: AtomicU64::new(0),
        }
    }

    /// A region over application memory: its first octet has tagged offset
    /// `base_to` (the application's virtual address, for verbs).
    pub(crate) fn new_app(
        pd: PdId,
        scope: StagScope,
        access: Access,
        base_to: u64,
        mem: AppMem,
    ) -> Self {
        Self {
            pd,
            scope,
            access,
            base_to,
            len: mem.len() as u64,
            valid: AtomicBool::new(true),
            mem: Mem::App(RwLock::new(Some(mem))),
            app_read: AtomicU64::new(0),
        }
    }

    // A panic while placing leaves octets, never a broken invariant.
    fn lock(m: &RwLock<Vec<u8>>) -> RwLockReadGuard<'_, Vec<u8>> {
        m.read().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_mut(m: &RwLock<Vec<u8>>) -> RwLockWriteGuard<'_, Vec<u8>> {
        m.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The application memory, held against the end of the registration while
    /// the guard lives; `None` inside once it has ended.
    fn app(m: &RwLock<Option<AppMem>>) -> RwLockReadGuard<'_, Option<AppMem>> {
        m.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The protection domain the region was registered in (RFC 5042 §5).
    pub fn pd(&self) -> PdId {
        self.pd
    }
    /// Which streams may name the region: its PD's, or one stream's.
    pub fn scope(&self) -> StagScope {
        self.scope
    }
    /// The rights granted at registration.
    pub fn access(&self) -> Access {
        self.access
    }
    /// First tagged offset of the region.
    pub fn base_to(&self) -> u64 {
        self.base_to
    }
    /// Octets of the region.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// A region of no octets.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// False once invalidated: every later remote use fails as Invalid STag.
    pub fn is_valid(&self) -> bool {
        self.valid.load(Ordering::Acquire)
    }

    pub(crate) fn set_invalid(&self) {
        self.valid.store(false, Ordering::Release);
    }

    /// Whether the region is over memory the application owns.
    pub fn is_app_memory(&self) -> bool {
        matches!(self.mem, Mem::App(_))
    }

    /// Whether its memory is still there to copy: always for memory the stack
    /// owns; for application memory, until the region leaves the table.
    pub fn is_mapped(&self) -> bool {
        match &self.mem {
            Mem::Owned(_) => true,
            Mem::App(m) => Self::app(m).is_some(),
        }
    }

    /// Whether `stream` of protection domain `pd` may use this region (RFC 5042 §5).
    pub fn associated_with(&self, pd: PdId, stream: StreamId) -> bool {
        self.pd == pd
            && match self.scope {
                StagScope::Pd => true,
                StagScope::Stream(s) => s == stream,
            }
    }

    /// Whether `[offset, offset + len)` lies inside the region's octets.
    fn inside(&self, offset: usize, len: usize) -> bool {
        offset
            .checked_add(len)
            .is_some_and(|end| end as u64 <= self.len)
    }

    /// Store `src` at `offset` octets into the region (a placement, local
    /// access). `false`, with nothing stored, if the range is not inside or the
    /// application memory's registration has ended.
    #[must_use]
    pub fn write_at(&self, offset: usize, src: &[u8]) -> bool {
        if !self.inside(offset, src.len()) {
            return false;
        }
        match &self.mem {
            Mem::Owned(m) => {
                let at = GUARD_LEN + offset;
                Self::lock_mut(m)[at..at + src.len()].copy_from_slice(src);
                true
            }
            Mem::App(m) => Self::app(m)
                .as_ref()
                .is_some_and(|a| a.write(offset, src).is_ok()),
        }
    }

    /// Load `dst.len()` octets at `offset` into `dst` (a transmit, local
    /// access). `false`, with `dst` untouched, if the range is not inside or
    /// the registration has ended.
    #[must_use]
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) -> bool {
        if !self.inside(offset, dst.len()) {
            return false;
        }
        match &self.mem {
            Mem::Owned(m) => {
                let at = GUARD_LEN + offset;
                dst.copy_from_slice(&Self::lock(m)[at..at + dst.len()]);
                true
            }
            Mem::App(m) => {
                let read = Self::app(m)
                    .as_ref()
                    .is_some_and(|a| a.read(offset, dst).is_ok());
                if read {
                    self.app_read.fetch_add(dst.len() as u64, Ordering::Relaxed);
                }
                read
            }
        }
    }

    /// Run `f` over the application memory, held against the end of the
    /// registration for the call (a receive straight from a socket into it,
    /// `AppMem::readv_fd`). `None`, with `f` not called: memory the stack
    /// owns, or a registration that has ended. Copies made through `f` are
    /// not counted in [`Self::app_octets_read`].
    pub fn with_app_memory<R>(&self, f: impl FnOnce(&AppMem) -> R) -> Option<R> {
        match &self.mem {
            Mem::Owned(_) => None,
            Mem::App(m) => Self::app(m).as_ref().map(f),
        }
    }

    /// Octets copied out of application memory through this region so far
    /// (transmits, local reads, the bounce copies of [`Self::data`],
    /// [`Self::data_mut`] and [`Self::fill_at`]); 0 for memory the stack
    /// owns. What a transmit costs: the octets it sends, not the region.
    pub fn app_octets_read(&self) -> u64 {
        self.app_read.load(Ordering::Relaxed)
    }

    /// Run `f` over `len` octets at `offset`: borrowed under the region's read
    /// lock for memory the stack owns (keep `f` short), a copy for application
    /// memory. A range past the end is cut at the end (callers check ranges
    /// first); an ended registration gives `f` no octets.
    pub fn with_octets<R>(&self, offset: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let (offset, len) = self.clamp(offset, len);
        match &self.mem {
            Mem::Owned(m) => {
                let at = GUARD_LEN + offset;
                f(&Self::lock(m)[at..at + len])
            }
            Mem::App(_) => {
                let mut copy = vec![0; len];
                if self.read_at(offset, &mut copy) {
                    f(&copy)
                } else {
                    f(&[])
                }
            }
        }
    }

    /// Let `f` fill `len` octets at `offset` (a receive straight from an LLP):
    /// borrowed under the region's write lock for memory the stack owns; for
    /// application memory, a copy whose octets `f` changed are stored back
    /// afterwards (octets it left alone are not stored, so an `f` that stops
    /// early overwrites nothing else). A range past the end is cut at the end.
    pub fn fill_at<R>(&self, offset: usize, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let (offset, len) = self.clamp(offset, len);
        match &self.mem {
            Mem::Owned(m) => {
                let at = GUARD_LEN + offset;
                f(&mut Self::lock_mut(m)[at..at + len])
            }
            Mem::App(_) => {
                let mut b = self.bounce(offset, len);
                let r = f(&mut b.now);
                b.store_back(self);
                r
            }
        }
    }

    /// `(offset, len)` cut to the region's octets.
    fn clamp(&self, offset: usize, len: usize) -> (usize, usize) {
        let size = usize::try_from(self.len).unwrap_or(usize::MAX);
        let offset = offset.min(size);
        (offset, len.min(size - offset))
    }

    /// A copy of application memory to edit and store back (zeros if the
    /// registration has ended: nothing will be stored then either).
    fn bounce(&self, offset: usize, len: usize) -> Bounce {
        let mut before = vec![0; len];
        let _ = self.read_at(offset, &mut before);
        Bounce {
            offset,
            now: before.clone(),
            before,
        }
    }

    /// The region's data, locked for reading (local access, a transmit). Other
    /// readers go on meanwhile; placements into this region wait: hold it
    /// briefly. For application memory, a copy of the whole region (the data
    /// paths use [`Self::with_octets`], which copies only the range it needs).
    pub fn data(&self) -> RegionData<'_> {
        let len = self.len as usize;
        RegionData {
            octets: match &self.mem {
                Mem::Owned(m) => Octets::Locked(Self::lock(m)),
                Mem::App(_) => Octets::Copy(self.bounce(0, len).now),
            },
            len,
        }
    }

    /// The region's data, locked for writing (a placement, local access). For
    /// application memory, a copy of the whole region whose changed octets are
    /// stored back when the value is dropped; placements by others meanwhile
    /// are not held off (the data paths use [`Self::write_at`] and
    /// [`Self::fill_at`], which copy only the range they need).
    pub fn data_mut(&self) -> RegionDataMut<'_> {
        let len = self.len as usize;
        RegionDataMut {
            octets: match &self.mem {
                Mem::Owned(m) => OctetsMut::Locked(Self::lock_mut(m)),
                Mem::App(_) => OctetsMut::Copy(self, self.bounce(0, len)),
            },
            len,
        }
    }

    /// Write `src` at tagged offset `to`. The caller has validated the range
    /// (`base_to <= to`, `to + src.len() <= base_to + len`, no wrap).
    pub(crate) fn place(&self, to: u64, src: &[u8]) {
        let _ = self.write_at(to.wrapping_sub(self.base_to) as usize, src);
    }

    /// Copy out `n` octets at tagged offset `to` (range validated by the caller).
    pub(crate) fn read(&self, to: u64, n: usize) -> Vec<u8> {
        self.with_octets(to.wrapping_sub(self.base_to) as usize, n, <[u8]>::to_vec)
    }

    /// True if no octet outside the data range was ever written. Application
    /// memory has no guards (the octets around it are the application's): true.
    pub fn guards_intact(&self) -> bool {
        let Mem::Owned(m) = &self.mem else {
            return true;
        };
        let end = GUARD_LEN + self.len as usize;
        let mem = Self::lock(m);
        mem[..GUARD_LEN].iter().all(|&b| b == GUARD_BYTE)
            && mem[end..].iter().all(|&b| b == GUARD_BYTE)
    }

    /// End the registration of application memory: wait for the copies in
    /// progress, then drop the [`AppMem`] (every later copy finds nothing).
    /// When this returns, nothing copies into or out of that memory any more.
    /// Nothing to do for memory the stack owns.
    pub(crate) fn unmap(&self) {
        if let Mem::App(m) = &self.mem {
            self.set_invalid();
            // The write lock waits for the copies that hold it shared.
            *m.write().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }

    /// Give the memory back (on deregistration): the octets themselves if no one
    /// else holds the region, else a copy (a lease still finishing with them).
    /// Application memory was the application's all along: an empty vector.
    pub(crate) fn into_data(this: RegionRef) -> Vec<u8> {
        let end = GUARD_LEN + this.len as usize;
        match Arc::try_unwrap(this) {
            Ok(Region {
                mem: Mem::Owned(m), ..
            }) => {
                let mut mem = m.into_inner().unwrap_or_else(|p| p.into_inner());
                mem.truncate(end);
                mem.drain(..GUARD_LEN);
                mem
            }
            Ok(_) => Vec::new(),
            Err(shared) => match &shared.mem {
                Mem::Owned(m) => Self::lock(m)[GUARD_LEN..end].to_vec(),
                Mem::App(_) => Vec::new(),
            },
        }
    }
}

// ---- The STag table ----

/// Largest table index: STag index is 24 bits; index 0 is never used.
const MAX_INDEX: u32 = (1 << 24) - 1;

/// Why a remote access to tagged memory is refused, in the check order of RFC 5041 §7.1.
/// Each layer maps it to its own Terminate code (DDP for placement, RDMAP for
/// a Read Request's source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessFault {
    /// No region under that STag, wrong key, or invalidated.
    InvalidStag,
    /// The region belongs to another PD, or is bound to another stream.
    NotAssociated,
    /// The region lacks the right (remote read, write or invalidate) the access
    /// needs.
    AccessRights,
    /// TO + length wraps 2^64 (checked before bounds: a wrapped sum can look in bounds).
    ToWrap,
    /// Outside `[base_to, base_to + len)`.
    BaseBounds,
}

/// Errors of local table operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemError {
    /// The STag names no region (never registered, or deregistered).
    #[error("STag {0} does not name a registered region")]
    UnknownStag(Stag),
    /// The table holds as many regions as its limit allows.
    #[error("the region limit of {0} is reached; deregister a region first")]
    TooManyRegions(usize),
    /// The new region would take the registered octets over the limit.
    #[error("registering {asked} octets would exceed the limit of {limit} registered octets")]
    TooManyBytes {
        /// Octets of the region refused.
        asked: u64,
        /// The table's limit of registered octets.
        limit: u64,
    },
    /// The region's last tagged offset would pass 2^64 - 1 (a TO range never
    /// wraps, RFC 5041 §4.2).
    #[error("region [{base_to:#x}, +{len}) wraps the 64-bit tagged offset space")]
    RangeWraps {
        /// The region's first tagged offset.
        base_to: u64,
        /// The region's length.
        len: u64,
    },
    /// Write rights (local or remote) were asked for over read-only memory.
    #[error("a region with a write right needs writable memory")]
    ReadOnlyMemory,
}

/// Limits the table enforces (the resource manager sets them per consumer).
#[derive(Debug, Clone, Copy)]
pub struct TableLimits {
    /// Regions registered at once, at most.
    pub max_regions: usize,
    /// Octets of all registered regions together, at most.
    pub max_bytes: u64,
}

impl Default for TableLimits {
    fn default() -> Self {
        Self {
            max_regions: 1 << 16,
            max_bytes: 1 << 36,
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    /// Keys this index has ever carried; never handed out twice, so a stale STag
    /// can never match a later region at the same index.
    used_keys: [u64; 4],
    current: Option<(u8, RegionRef)>,
}

impl Slot {
    fn key_used(&self, k: u8) -> bool {
        self.used_keys[usize::from(k >> 6)] & (1 << (k & 63)) != 0
    }
    fn mark_used(&mut self, k: u8) {
        self.used_keys[usize::from(k >> 6)] |= 1 << (k & 63);
    }
    fn exhausted(&self) -> bool {
        self.used_keys.iter().all(|w| *w == u64::MAX)
    }
}

#[derive(Debug)]
struct Inner {
    /// Slot `i` holds index `i + 1`.
    slots: Vec<Slot>,
    /// Free indices, reused oldest first so a freed index rests as long as possible.
    free: VecDeque<u32>,
    rng: StdRng,
    limits: TableLimits,
    regions: usize,
    bytes: u64,
}

impl Inner {
    fn take_index(&mut self) -> Result<u32, MemError> {
        if let Some(i) = self.free.pop_front() {
            return Ok(i);
        }
        let next = self.slots.len() as u32 + 1;
        if next > MAX_INDEX {
            return Err(MemError::TooManyRegions(MAX_INDEX as usize));
        }
        self.slots.push(Slot::default());
        Ok(next)
    }

    fn slot(&self, stag: Stag) -> Option<&RegionRef> {
        let i = stag.index().checked_sub(1)? as usize;
        match &self.slots.get(i)?.current {
            Some((k, r)) if *k == stag.key() => Some(r),
            _ => None,
        }
    }
}

/// Every region of one device, by STag. Shared: every method takes `&self`. The
/// slot table is read-mostly (an `RwLock` written only to register and
/// deregister); a lookup clones the region's handle and lets go of the table, so
/// placements into different regions never wait for each other.
#[derive(Debug)]
pub struct MemoryTable {
    inner: RwLock<Inner>,
}

impl Default for MemoryTable {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryTable {
    /// A table whose STag keys come from the operating system's entropy.
    pub fn new() -> Self {
        Self::with_rng(rand::make_rng())
    }

    /// A table with reproducible keys, for tests and the simulator.
    pub fn with_seed(seed: u64) -> Self {
        Self::with_rng(StdRng::seed_from_u64(seed))
    }

    fn with_rng(rng: StdRng) -> Self {
        Self {
            inner: RwLock::new(Inner {
                slots: Vec::new(),
                free: VecDeque::new(),
                rng,
                limits: TableLimits::default(),
                regions: 0,
                bytes: 0,
            }),
        }
    }

    // A panic elsewhere cannot leave the table inconsistent: each write is a few
    // plain updates done after every check.
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// New limits for later registrations (regions already registered stay).
    pub fn set_limits(&self, limits: TableLimits) {
        self.write().limits = limits;
    }

    /// Register `data` as a region and return its new STag.
    pub fn register(
        &self,
        pd: PdId,
        scope: StagScope,
        access: Access,
        base_to: u64,
        data: Vec<u8>,
    ) -> Result<Stag, MemError> {
        let len = data.len() as u64;
        if base_to.checked_add(len).is_none() {
            return Err(MemError::RangeWraps { base_to, len });
        }
        // Build the region (its copy into guarded memory) outside the table lock.
        self.insert(Arc::new(Region::new(pd, scope, access, base_to, data)))
    }

    /// Register memory the application owns as a region whose first octet has
    /// tagged offset `base_to` (verbs applications advertise the virtual
    /// address, `mem.addr()`). The region reaches the memory only through
    /// `mem`'s copies; [`Self::remove`] and [`Self::deregister`] end the
    /// registration (they return once no copy into or out of it can happen any
    /// more). A write right (local or remote) needs writable memory. On a
    /// refusal `mem` is dropped: nothing ever copied through it.
    pub fn register_app(
        &self,
        pd: PdId,
        scope: StagScope,
        access: Access,
        base_to: u64,
        mem: AppMem,
    ) -> Result<Stag, MemError> {
        let len = mem.len() as u64;
        if base_to.checked_add(len).is_none() {
            return Err(MemError::RangeWraps { base_to, len });
        }
        let writes = access.contains(Access::LOCAL_WRITE) || access.contains(Access::REMOTE_WRITE);
        if writes && !mem.is_writable() {
            return Err(MemError::ReadOnlyMemory);
        }
        self.insert(Arc::new(Region::new_app(pd, scope, access, base_to, mem)))
    }

    fn insert(&self, region: RegionRef) -> Result<Stag, MemError> {
        let len = region.len;
        let mut t = self.write();
        if t.regions >= t.limits.max_regions {
            return Err(MemError::TooManyRegions(t.limits.max_regions));
        }
        if t.bytes + len > t.limits.max_bytes {
            return Err(MemError::TooManyBytes {
                asked: len,
                limit: t.limits.max_bytes,
            });
        }
        let index = t.take_index()?;
        let Inner { slots, rng, .. } = &mut *t;
        let slot = &mut slots[(index - 1) as usize];
        // Draw an unused key; a slot is only taken while it has one left.
        let key = loop {
            let k = rng.next_u32() as u8;
            if !slot.key_used(k) {
                break k;
            }
        };
        slot.mark_used(key);
        slot.current = Some((key, region));
        t.regions += 1;
        t.bytes += len;
        Ok(Stag::new(index, key))
    }

    /// Local access to a region (valid or invalidated) by its STag: a handle that
    /// stays usable without the table.
    pub fn region(&self, stag: Stag) -> Option<RegionRef> {
        self.read().slot(stag).cloned()
    }

    /// Invalidate an STag: every later remote use fails as Invalid STag. The region
    /// stays registered for local access until deregistered.
    pub fn invalidate(&self, stag: Stag) -> Result<(), MemError> {
        let t = self.read();
        let r = t.slot(stag).ok_or(MemError::UnknownStag(stag))?;
        r.set_invalid();
        Ok(())
    }

    /// Invalidate on behalf of a remote peer (Send with Invalidate, RFC 5040 §5.5):
    /// only a valid STag the stream is associated with, registered with
    /// [`Access::REMOTE_INVALIDATE`] (RFC 5042 §5), may be invalidated.
    pub fn remote_invalidate(
        &self,
        stag: Stag,
        pd: PdId,
        stream: StreamId,
    ) -> Result<(), AccessFault> {
        let t = self.read();
        let r = t
            .slot(stag)
            .filter(|r| r.is_valid())
            .ok_or(AccessFault::InvalidStag)?;
        if !r.associated_with(pd, stream) {
            return Err(AccessFault::NotAssociated);
        }
        if !r.access.contains(Access::REMOTE_INVALIDATE) {
            return Err(AccessFault::AccessRights);
        }
        r.set_invalid();
        Ok(())
    }

    /// Remove a region and hand its memory back (a copy if a handle to it is
    /// still held elsewhere; nothing for application memory, which the
    /// application has).
    pub fn deregister(&self, stag: Stag) -> Result<Vec<u8>, MemError> {
        self.remove(stag).map(Region::into_data)
    }

    /// Remove a region. Memory the stack owns stays alive for whoever holds a
    /// handle; application memory does not: the registration ends here, once
    /// the copies in progress are done (the table's lock is not held while
    /// waiting), and later copies through a handle copy nothing.
    pub fn remove(&self, stag: Stag) -> Result<RegionRef, MemError> {
        let region = {
            let mut t = self.write();
            t.slot(stag).ok_or(MemError::UnknownStag(stag))?;
            let index = stag.index();
            let slot = &mut t.slots[(index - 1) as usize];
            let (_, region) = slot.current.take().ok_or(MemError::UnknownStag(stag))?;
            if !slot.exhausted() {
                t.free.push_back(index);
            }
            t.regions -= 1;
            t.bytes -= region.len;
            region
        };
        region.unmap();
        Ok(region)
    }

    /// Number of registered regions.
    pub fn len(&self) -> usize {
        self.read().regions
    }

    /// No region is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Registered octets in all regions.
    pub fn registered_bytes(&self) -> u64 {
        self.read().bytes
    }

    /// The region a remote access may use, after every check of RFC 5041 §7.1,
    /// in that order: STag valid, associated, access right, TO wrap, base and bounds.
    pub fn remote_region(
        &self,
        stag: Stag,
        pd: PdId,
        stream: StreamId,
        need: Access,
        to: u64,
        len: u64,
    ) -> Result<RegionRef, AccessFault> {
        let r = self
            .region(stag)
            .filter(|r| r.is_valid())
            .ok_or(AccessFault::InvalidStag)?;
        check_access(&r, pd, stream, need, to, len)?;
        Ok(r)
    }

    /// Place `src` at (`stag`, `to`) after the checks of [`Self::remote_region`]
    /// with the remote-write right.
    pub fn place(
        &self,
        stag: Stag,
        pd: PdId,
        stream: StreamId,
        to: u64,
        src: &[u8],
    ) -> Result<(), AccessFault> {
        let r = self.remote_region(stag, pd, stream, Access::REMOTE_WRITE, to, src.len() as u64)?;
        r.place(to, src);
        Ok(())
    }

    /// Copy out `n` octets at (`stag`, `to`) after the checks with the remote-read right.
    pub fn read_remote(
        &self,
        stag: Stag,
        pd: PdId,
        stream: StreamId,
        to: u64,
        n: usize,
    ) -> Result<Vec<u8>, AccessFault> {
        let r = self.remote_region(stag, pd, stream, Access::REMOTE_READ, to, n as u64)?;
        Ok(r.read(to, n))
    }

    /// True if every region's guard octets are untouched (test support).
    pub fn all_guards_intact(&self) -> bool {
        self.read()
            .slots
            .iter()
            .filter_map(|s| s.current.as_ref())
            .all(|(_, r)| r.guards_intact())
    }
}

fn check_access(
    r: &Region,
    pd: PdId,
    stream: StreamId,
    need: Access,
    to: u64,
    len: u64,
) -> Result<(), AccessFault> {
    if !r.associated_with(pd, stream) {
        return Err(AccessFault::NotAssociated);
    }
    if !r.access.contains(need) {
        return Err(AccessFault::AccessRights);
    }
    let end = to.checked_add(len).ok_or(AccessFault::ToWrap)?;
    if to < r.base_to || end > r.base_to + r.len {
        return Err(AccessFault::BaseBounds);
    }
    Ok(())
}
