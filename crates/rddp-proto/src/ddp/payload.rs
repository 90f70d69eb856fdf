//! What a DDP message carries: owned octets, or a lease on a registered region's
//! octets that the LLP reads when it writes the segment (docs/data-path.md: no
//! copy at posting). A lease holds the region alive (its handle), not locked: the
//! region is locked only while the LLP reads the octets.

use crate::mem::RegionRef;
use bytes::Bytes;
use std::ops::Range;

/// The payload of a DDP message or segment.
#[derive(Debug, Clone)]
pub enum Payload {
    /// Octets owned by the message (inline data, RDMAP's own messages).
    Bytes(Bytes),
    /// `len` octets of `region`'s data from `offset`, read when written. The
    /// range lies inside the region (checked when the lease was made).
    Region {
        /// The region leased (its handle keeps it alive).
        region: RegionRef,
        /// Offset of the first octet in the region's data.
        offset: usize,
        /// Octets leased.
        len: usize,
    },
}

impl Default for Payload {
    fn default() -> Self {
        Self::Bytes(Bytes::new())
    }
}

impl From<Bytes> for Payload {
    fn from(b: Bytes) -> Self {
        Self::Bytes(b)
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Self {
        Self::Bytes(Bytes::from(v))
    }
}

impl Payload {
    /// A lease on `len` octets of `region`'s data at `offset`, or `None` if the
    /// range does not lie inside the region.
    pub fn region(region: RegionRef, offset: usize, len: usize) -> Option<Self> {
        let end = offset.checked_add(len)?;
        (end as u64 <= region.len()).then_some(Self::Region {
            region,
            offset,
            len,
        })
    }

    /// Octets in the payload.
    pub fn len(&self) -> usize {
        match self {
            Self::Bytes(b) => b.len(),
            Self::Region { len, .. } => *len,
        }
    }

    /// Whether the payload has no octets.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The part `r` of this payload (same kind, no copy). `r` must lie inside.
    pub fn slice(&self, r: Range<usize>) -> Self {
        match self {
            Self::Bytes(b) => Self::Bytes(b.slice(r)),
            Self::Region { region, offset, .. } => Self::Region {
                region: region.clone(),
                offset: offset + r.start,
                len: r.len(),
            },
        }
    }

    /// Run `f` over the octets; a lease locks its region meanwhile (keep `f`
    /// short and never block in it).
    pub fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Self::Bytes(b) => f(b),
            Self::Region {
                region,
                offset,
                len,
            } => region.with_octets(*offset, *len, f),
        }
    }

    /// The octets as `Bytes`: free for owned octets, a copy for a lease (LLPs
    /// that cannot write from the region: SCTP, the in-memory LLP). A data path
    /// that copies a lease counts it in its stream's statistics
    /// ([`crate::stats::StreamStats::tx_copied_octets`]).
    pub fn to_bytes(&self) -> Bytes {
        match self {
            Self::Bytes(b) => b.clone(),
            Self::Region { .. } => self.with(Bytes::copy_from_slice),
        }
    }

    /// Octets of a lease this payload holds (what [`Self::to_bytes`] copies).
    pub fn leased_len(&self) -> usize {
        match self {
            Self::Bytes(_) => 0,
            Self::Region { len, .. } => *len,
        }
    }
}

impl Payload {
    /// The octets, copied (tests and diagnostics).
    pub fn to_vec(&self) -> Vec<u8> {
        self.to_bytes().to_vec()
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        // One lock at a time: both may lease the same region.
        self.len() == other.len() && {
            let a = self.with(<[u8]>::to_vec);
            other.with(|b| a == b)
        }
    }
}

impl Eq for Payload {}
