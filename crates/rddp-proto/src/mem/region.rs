//! A registered memory region: memory the stack owns, or memory the application
//! owns.
//!
//! The table hands out regions as [`RegionRef`]s (`Arc`): a placement, a
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

use super::{Access, PdId, StagScope, StreamId};
use rddp_appmem::AppMem;
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
