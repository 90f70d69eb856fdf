//! Steering tags.

use core::fmt;

/// A Steering Tag: 24-bit table index (high bits) + 8-bit key (low octet), as in
/// verbs and siw (RFC 5042 §5). The key makes a stale STag miss a reused index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stag(pub u32);

impl Stag {
    /// The STag of table index `index` (its low 24 bits) with `key`.
    pub fn new(index: u32, key: u8) -> Self {
        Self((index << 8) | u32::from(key))
    }
    /// The table index (the high 24 bits).
    pub fn index(self) -> u32 {
        self.0 >> 8
    }
    /// The key (the low octet).
    pub fn key(self) -> u8 {
        self.0 as u8
    }
}

impl fmt::Display for Stag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}
