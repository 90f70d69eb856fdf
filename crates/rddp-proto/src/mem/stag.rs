//! Steering tags.

use core::fmt;

/// A Steering Tag: 24-bit table index (high bits) + 8-bit key (low octet), as in
/// verbs and siw (RFC 5042 §5). The key makes a stale STag miss a reused index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stag(pub u32);

impl Stag {
    pub fn new(index: u32, key: u8) -> Self {
        Self((index << 8) | u32::from(key))
    }
    pub fn index(self) -> u32 {
        self.0 >> 8
    }
    pub fn key(self) -> u8 {
        self.0 as u8
    }
}

impl fmt::Display for Stag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}
