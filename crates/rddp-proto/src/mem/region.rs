//! A registered memory region that owns its memory.
//!
//! The table hands out regions as [`RegionRef`]s (`Arc`): a placement, a
//! transmit and the application's own access each lock only the region's octets,
//! never the table, so work on different regions never serializes. Reading
//! (a transmit, the application's reads) shares the lock: queue pairs that send
//! from one region do not wait for each other; writing (a placement, the
//! application's writes) takes it alone.

use super::{Access, PdId, StagScope, StreamId};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Octets of guard pattern kept on each side of every region's memory. Placement
/// indexes the guarded allocation, so a validation bug would land in a guard (where
/// tests see it) rather than go unnoticed.
pub const GUARD_LEN: usize = 64;
const GUARD_BYTE: u8 = 0xA5;

/// A shared handle to a registered region.
pub type RegionRef = Arc<Region>;

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
    /// GUARD_LEN guard octets, `len` data octets, GUARD_LEN guard octets; the
    /// region's own lock (no table lock is held while it is).
    mem: RwLock<Vec<u8>>,
}

/// The data octets of a region, locked for reading (local access, a transmit).
pub struct RegionData<'a> {
    guard: RwLockReadGuard<'a, Vec<u8>>,
    len: usize,
}

/// The data octets of a region, locked for writing.
pub struct RegionDataMut<'a> {
    guard: RwLockWriteGuard<'a, Vec<u8>>,
    len: usize,
}

impl Deref for RegionData<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.guard[GUARD_LEN..GUARD_LEN + self.len]
    }
}

impl Deref for RegionDataMut<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.guard[GUARD_LEN..GUARD_LEN + self.len]
    }
}

impl DerefMut for RegionDataMut<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.guard[GUARD_LEN..GUARD_LEN + self.len]
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
            mem: RwLock::new(mem),
        }
    }

    fn lock(&self) -> RwLockReadGuard<'_, Vec<u8>> {
        // A panic while placing leaves octets, never a broken invariant.
        self.mem.read().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_mut(&self) -> RwLockWriteGuard<'_, Vec<u8>> {
        self.mem.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn pd(&self) -> PdId {
        self.pd
    }
    pub fn scope(&self) -> StagScope {
        self.scope
    }
    pub fn access(&self) -> Access {
        self.access
    }
    /// First tagged offset of the region.
    pub fn base_to(&self) -> u64 {
        self.base_to
    }
    pub fn len(&self) -> u64 {
        self.len
    }
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

    /// Whether `stream` of protection domain `pd` may use this region (RFC 5042 §5).
    pub fn associated_with(&self, pd: PdId, stream: StreamId) -> bool {
        self.pd == pd
            && match self.scope {
                StagScope::Pd => true,
                StagScope::Stream(s) => s == stream,
            }
    }

    /// The region's data, locked for reading (local access, a transmit). Other
    /// readers go on meanwhile; placements into this region wait: hold it briefly.
    pub fn data(&self) -> RegionData<'_> {
        RegionData {
            guard: self.lock(),
            len: self.len as usize,
        }
    }

    /// The region's data, locked for writing (a placement, local access).
    pub fn data_mut(&self) -> RegionDataMut<'_> {
        RegionDataMut {
            guard: self.lock_mut(),
            len: self.len as usize,
        }
    }

    /// Write `src` at tagged offset `to`. The caller has validated the range
    /// (`base_to <= to`, `to + src.len() <= base_to + len`, no wrap).
    pub(crate) fn place(&self, to: u64, src: &[u8]) {
        let at = GUARD_LEN + (to.wrapping_sub(self.base_to)) as usize;
        self.lock_mut()[at..at + src.len()].copy_from_slice(src);
    }

    /// Copy out `n` octets at tagged offset `to` (range validated by the caller).
    pub(crate) fn read(&self, to: u64, n: usize) -> Vec<u8> {
        let at = GUARD_LEN + (to.wrapping_sub(self.base_to)) as usize;
        self.lock()[at..at + n].to_vec()
    }

    /// True if no octet outside the data range was ever written.
    pub fn guards_intact(&self) -> bool {
        let end = GUARD_LEN + self.len as usize;
        let mem = self.lock();
        mem[..GUARD_LEN].iter().all(|&b| b == GUARD_BYTE)
            && mem[end..].iter().all(|&b| b == GUARD_BYTE)
    }

    /// Give the memory back (on deregistration): the octets themselves if no one
    /// else holds the region, else a copy (a lease still finishing with them).
    pub(crate) fn into_data(this: RegionRef) -> Vec<u8> {
        let end = GUARD_LEN + this.len as usize;
        match Arc::try_unwrap(this) {
            Ok(r) => {
                let mut mem = r.mem.into_inner().unwrap_or_else(|p| p.into_inner());
                mem.truncate(end);
                mem.drain(..GUARD_LEN);
                mem
            }
            Err(shared) => shared.lock()[GUARD_LEN..end].to_vec(),
        }
    }
}
