//! Access rights of a region.

use core::ops::BitOr;

/// Rights granted over a region. Remote read and remote write are independent
/// (RFC 5042 §5.3; spec §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    pub const NONE: Self = Self(0);
    pub const LOCAL_WRITE: Self = Self(1);
    pub const REMOTE_READ: Self = Self(2);
    pub const REMOTE_WRITE: Self = Self(4);

    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Access {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}
