//! Memory protection: protection domains, STags, regions (RFC 5042).
//!
//! A [`MemoryTable`] owns every registered [`Region`] of one device. Each region is
//! named by an [`Stag`] = 24-bit table index + 8-bit key, bound to a protection domain
//! and optionally to a single stream, and carries remote read / remote write rights
//! over `[base_to, base_to + len)` of tagged-offset space. A region's memory is
//! either the stack's own (a guarded copy) or the application's ([`AppMem`]),
//! reached only through copies.

mod access;
mod region;
mod stag;

pub use access::Access;
pub use rddp_appmem::{AppMem, AppMemError};
pub use region::{
    AccessFault, GUARD_LEN, MemError, MemoryTable, Region, RegionData, RegionDataMut, RegionRef,
    TableLimits,
};
pub use stag::Stag;

/// A protection domain. Streams and STags of different domains never meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PdId(pub u32);

/// A locally identified DDP stream (one MPA connection or one SCTP stream pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u32);

/// Which streams may use an STag (RFC 5041: both association mechanisms are required).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StagScope {
    /// Every stream of the region's protection domain.
    Pd,
    /// Only this one stream (which must also belong to the region's PD).
    Stream(StreamId),
}
