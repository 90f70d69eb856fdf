//! Per-consumer quotas of the resource manager (RFC 5041: the Privileged Resource
//! Manager "SHOULD prevent any Local Peer from consuming more than its fair share").

use std::fmt;

/// What a quota counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    QueuePairs,
    MemoryRegions,
    RegisteredBytes,
    ReceiveBuffers,
    OutstandingReads,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::QueuePairs => "queue pairs",
            Self::MemoryRegions => "memory regions",
            Self::RegisteredBytes => "registered octets",
            Self::ReceiveBuffers => "posted receive buffers",
            Self::OutstandingReads => "outstanding RDMA Reads",
        })
    }
}

/// The share of the device one consumer may hold at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Queue pairs built and not dropped, at most.
    pub queue_pairs: u64,
    /// Memory regions registered, at most.
    pub memory_regions: u64,
    /// Octets registered in those regions, at most.
    pub registered_bytes: u64,
    /// Receive buffers posted and not yet completed, at most.
    pub receive_buffers: u64,
    /// RDMA Reads posted whose responses have not all arrived, at most.
    pub outstanding_reads: u64,
}

impl Default for Quota {
    fn default() -> Self {
        Self {
            queue_pairs: 64,
            memory_regions: 1024,
            registered_bytes: 1 << 30,
            receive_buffers: 16 * 1024,
            outstanding_reads: 1024,
        }
    }
}

impl Quota {
    pub(crate) fn get(&self, r: Resource) -> u64 {
        match r {
            Resource::QueuePairs => self.queue_pairs,
            Resource::MemoryRegions => self.memory_regions,
            Resource::RegisteredBytes => self.registered_bytes,
            Resource::ReceiveBuffers => self.receive_buffers,
            Resource::OutstandingReads => self.outstanding_reads,
        }
    }

    pub(crate) const ALL: [Resource; 5] = [
        Resource::QueuePairs,
        Resource::MemoryRegions,
        Resource::RegisteredBytes,
        Resource::ReceiveBuffers,
        Resource::OutstandingReads,
    ];
}

/// What one consumer holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Queue pairs built and not dropped, now.
    pub queue_pairs: u64,
    /// Memory regions registered, now.
    pub memory_regions: u64,
    /// Octets registered in those regions, now.
    pub registered_bytes: u64,
    /// Receive buffers posted and not yet completed, now.
    pub receive_buffers: u64,
    /// RDMA Reads posted whose responses have not all arrived, now.
    pub outstanding_reads: u64,
}

impl Usage {
    pub(crate) fn slot(&mut self, r: Resource) -> &mut u64 {
        match r {
            Resource::QueuePairs => &mut self.queue_pairs,
            Resource::MemoryRegions => &mut self.memory_regions,
            Resource::RegisteredBytes => &mut self.registered_bytes,
            Resource::ReceiveBuffers => &mut self.receive_buffers,
            Resource::OutstandingReads => &mut self.outstanding_reads,
        }
    }
}
