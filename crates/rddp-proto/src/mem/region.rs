//! A registered memory region that owns its memory.

use super::{Access, PdId, StagScope, StreamId};

/// Octets of guard pattern kept on each side of every region's memory. Placement
/// indexes the guarded allocation, so a validation bug would land in a guard (where
/// tests see it) rather than go unnoticed.
pub const GUARD_LEN: usize = 64;
const GUARD_BYTE: u8 = 0xA5;

/// A memory region: memory, protection domain, scope, rights and TO range.
#[derive(Debug)]
pub struct Region {
    pub(crate) pd: PdId,
    pub(crate) scope: StagScope,
    pub(crate) access: Access,
    pub(crate) base_to: u64,
    pub(crate) len: u64,
    pub(crate) valid: bool,
    /// GUARD_LEN guard octets, `len` data octets, GUARD_LEN guard octets.
    mem: Vec<u8>,
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
            valid: true,
            mem,
        }
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
        self.valid
    }

    /// Whether `stream` of protection domain `pd` may use this region (spec §2.13).
    pub fn associated_with(&self, pd: PdId, stream: StreamId) -> bool {
        self.pd == pd
            && match self.scope {
                StagScope::Pd => true,
                StagScope::Stream(s) => s == stream,
            }
    }

    /// The region's data (local access).
    pub fn data(&self) -> &[u8] {
        &self.mem[GUARD_LEN..GUARD_LEN + self.len as usize]
    }
    /// The region's data, writable (local access).
    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = GUARD_LEN + self.len as usize;
        &mut self.mem[GUARD_LEN..end]
    }

    /// Write `src` at tagged offset `to`. The caller has validated the range
    /// (`base_to <= to`, `to + src.len() <= base_to + len`, no wrap).
    pub(crate) fn place(&mut self, to: u64, src: &[u8]) {
        let at = GUARD_LEN + (to.wrapping_sub(self.base_to)) as usize;
        self.mem[at..at + src.len()].copy_from_slice(src);
    }

    /// Read `n` octets at tagged offset `to` (range validated by the caller).
    pub(crate) fn read(&self, to: u64, n: usize) -> &[u8] {
        let at = GUARD_LEN + (to.wrapping_sub(self.base_to)) as usize;
        &self.mem[at..at + n]
    }

    /// True if no octet outside the data range was ever written.
    pub fn guards_intact(&self) -> bool {
        let end = GUARD_LEN + self.len as usize;
        self.mem[..GUARD_LEN].iter().all(|&b| b == GUARD_BYTE)
            && self.mem[end..].iter().all(|&b| b == GUARD_BYTE)
    }

    /// Give the memory back (on deregistration).
    pub(crate) fn into_data(mut self) -> Vec<u8> {
        let end = GUARD_LEN + self.len as usize;
        self.mem.truncate(end);
        self.mem.drain(..GUARD_LEN);
        self.mem
    }
}
