//! Access rights of a region.

use core::ops::BitOr;

/// Rights granted over a region. Remote read, remote write and remote
/// invalidation are independent (RFC 5042 §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// No right beyond local read (which every region grants its owner).
    pub const NONE: Self = Self(0);
    /// The local side may write (a receive or a Read's sink lands there).
    pub const LOCAL_WRITE: Self = Self(1);
    /// A peer may read it with an RDMA Read (RFC 5040 §5.2).
    pub const REMOTE_READ: Self = Self(2);
    /// A peer may write it with an RDMA Write (RFC 5040 §5.1).
    pub const REMOTE_WRITE: Self = Self(4);
    /// The peer may invalidate the STag with a Send with Invalidate (RFC 5040
    /// §5.3). Off unless asked for: an STag shared by several streams could be
    /// invalidated by any of their peers, a denial of service on the others
    /// (RFC 5042 §5). Without it such a Send ends the stream with
    /// 0/1/0x09, STag cannot be invalidated.
    pub const REMOTE_INVALIDATE: Self = Self(8);

    /// Every right of `other` is granted here.
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
