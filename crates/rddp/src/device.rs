//! The software RNIC and its resource manager.

use crate::error::Error;
use crate::pd::ProtectionDomain;
use crate::quota::{Quota, Resource, Usage};
use crate::stats::{DeviceStats, Registry};
use rddp_proto::mem::{MemoryTable, PdId, TableLimits};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Capacity of the whole device; consumers' quotas are reserved out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// The most the device holds of each resource, all consumers together.
    pub capacity: Quota,
}

impl Default for DeviceLimits {
    fn default() -> Self {
        Self {
            capacity: Quota {
                queue_pairs: 1 << 14,
                memory_regions: 1 << 16,
                registered_bytes: 1 << 36,
                receive_buffers: 1 << 22,
                outstanding_reads: 1 << 18,
            },
        }
    }
}

pub(crate) struct DeviceInner {
    /// Shared without a device-wide lock (per-region locks inside).
    pub(crate) mem: MemoryTable,
    limits: DeviceLimits,
    /// Sum of the quotas granted to live consumers.
    reserved: Mutex<Usage>,
    next_pd: AtomicU32,
    /// Queue pairs' counters and the resource manager's refusals (docs/features.md).
    pub(crate) stats: Registry,
}

/// The software RNIC: owns every resource (RFC 5041's Privileged Resource Manager).
/// Cloning gives another handle to the same device.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

impl Default for Device {
    fn default() -> Self {
        Self::new()
    }
}

impl Device {
    /// A device with the default capacity ([`DeviceLimits::default`]: 16,384
    /// queue pairs, 65,536 regions, 64 GiB registered, ...); `ibv_open_device`.
    pub fn new() -> Self {
        Self::with_limits(DeviceLimits::default())
    }

    /// A device with the given capacity.
    pub fn with_limits(limits: DeviceLimits) -> Self {
        let mem = MemoryTable::new();
        mem.set_limits(TableLimits {
            max_regions: limits.capacity.memory_regions as usize,
            max_bytes: limits.capacity.registered_bytes,
        });
        Self {
            inner: Arc::new(DeviceInner {
                mem,
                limits,
                reserved: Mutex::new(Usage::default()),
                next_pd: AtomicU32::new(1),
                stats: Registry::default(),
            }),
        }
    }

    /// Admit a consumer with a guaranteed share: its quota is reserved out of the
    /// device's capacity, so no other consumer can use it up. Refused with
    /// [`Error::DeviceFull`] when the quota does not fit in what is left.
    pub fn consumer(&self, name: &str, quota: Quota) -> Result<Consumer, Error> {
        let mut reserved = lock(&self.inner.reserved);
        for r in Quota::ALL {
            let left = self.inner.limits.capacity.get(r) - *reserved.slot(r);
            if quota.get(r) > left {
                self.inner.stats.refused();
                tracing::info!(
                    "device full: consumer {name:?} asks for {} {r}, {left} left",
                    quota.get(r)
                );
                return Err(Error::DeviceFull {
                    what: r,
                    asked: quota.get(r),
                    left,
                });
            }
        }
        for r in Quota::ALL {
            *reserved.slot(r) += quota.get(r);
        }
        Ok(Consumer {
            inner: Arc::new(ConsumerInner {
                name: name.to_owned(),
                quota,
                usage: Default::default(),
                device: self.clone(),
            }),
        })
    }

    /// Counters of every queue pair so far (live and closed) and of the
    /// resource manager's refusals.
    pub fn stats(&self) -> DeviceStats {
        self.inner.stats.snapshot()
    }

    pub(crate) fn mem(&self) -> &MemoryTable {
        &self.inner.mem
    }

    fn next_pd(&self) -> PdId {
        PdId(self.inner.next_pd.fetch_add(1, Ordering::Relaxed))
    }
}

pub(crate) struct ConsumerInner {
    name: String,
    quota: Quota,
    /// What the consumer holds, one counter a resource (indexed by its
    /// discriminant, [`Quota::ALL`]'s order): charged on every posted receive and
    /// refunded on its completion, so a count each (one locked instruction)
    /// rather than a lock over all five (two, and a lock every queue pair of
    /// the consumer shares).
    usage: [AtomicU64; Quota::ALL.len()],
    pub(crate) device: Device,
}

impl ConsumerInner {
    fn used(&self, r: Resource) -> &AtomicU64 {
        &self.usage[r as usize]
    }
}

impl Drop for ConsumerInner {
    fn drop(&mut self) {
        let mut reserved = lock(&self.device.inner.reserved);
        for r in Quota::ALL {
            *reserved.slot(r) -= self.quota.get(r);
        }
    }
}

/// One user of the device, with its own quota (like a process's ibverbs context).
#[derive(Clone)]
pub struct Consumer {
    pub(crate) inner: Arc<ConsumerInner>,
}

impl Consumer {
    /// The name it was admitted with (in logs and quota errors).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The share of the device reserved for it.
    pub fn quota(&self) -> Quota {
        self.inner.quota
    }

    /// What the consumer holds now (each count read on its own).
    pub fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for r in Quota::ALL {
            *u.slot(r) = self.inner.used(r).load(Ordering::Acquire);
        }
        u
    }

    /// A new protection domain, private to this consumer (`ibv_alloc_pd`).
    pub fn alloc_pd(&self) -> Result<ProtectionDomain, Error> {
        let id = self.inner.device.next_pd();
        Ok(ProtectionDomain::new(id, self.clone()))
    }

    /// Take `n` of `r` from the quota, or refuse with a clear error.
    pub(crate) fn charge(&self, r: Resource, n: u64) -> Result<(), Error> {
        let limit = self.inner.quota.get(r);
        let taken = self
            .inner
            .used(r)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|&t| t <= limit)
            });
        if taken.is_err() {
            self.inner.device.inner.stats.refused();
            tracing::info!(
                "quota refused: consumer {:?} asks for {n} more {r}, which would pass its limit of {limit}",
                self.inner.name
            );
            return Err(Error::Quota {
                consumer: self.inner.name.clone(),
                what: r,
                limit,
            });
        }
        Ok(())
    }

    pub(crate) fn refund(&self, r: Resource, n: u64) {
        let _ = self
            .inner
            .used(r)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(n))
            });
    }

    pub(crate) fn device(&self) -> &Device {
        &self.inner.device
    }
}

/// Lock a mutex; a panic in another thread holding it leaves data that is still
/// consistent for our uses (every critical section is a few plain updates).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ConsumerInner::used` indexes the counters by discriminant.
    #[test]
    fn each_resource_has_its_own_counter() {
        for (i, r) in Quota::ALL.into_iter().enumerate() {
            assert_eq!(r as usize, i, "{r}");
        }
        let c = Device::new().consumer("c", Quota::default()).unwrap();
        c.charge(Resource::ReceiveBuffers, 3).unwrap();
        c.charge(Resource::OutstandingReads, 1).unwrap();
        c.refund(Resource::ReceiveBuffers, 1);
        c.refund(Resource::QueuePairs, 5);
        let u = c.usage();
        assert_eq!(
            (u.receive_buffers, u.outstanding_reads, u.queue_pairs),
            (2, 1, 0),
            "a refund never goes below zero"
        );
        let limit = Quota::default().get(Resource::ReceiveBuffers);
        assert!(c.charge(Resource::ReceiveBuffers, limit).is_err());
        assert_eq!(
            c.usage().receive_buffers,
            2,
            "a refused charge takes nothing"
        );
    }
}
