//! The STag table: registration, lookup with the checks of RFC 5041 §7.1, invalidation.
//! Shared by every stream of a device without a device-wide lock.

use super::{Access, PdId, Region, RegionRef, Stag, StagScope, StreamId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rddp_appmem::AppMem;
use std::collections::VecDeque;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

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
