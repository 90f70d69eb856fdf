//! The software RNIC and its resource manager.

use crate::error::Error;
use crate::pd::ProtectionDomain;
use crate::quota::{Quota, Resource, Usage};
use crate::stats::{DeviceStats, Registry};
use rddp_proto::mem::{MemoryTable, PdId, TableLimits};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Capacity of the whole device; consumers' quotas are reserved out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
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
    /// Queue pairs' counters and the resource manager's refusals (issue 13).
    pub(crate) stats: Registry,
}

/// The software RNIC: owns every resource (seed 000's Privileged Resource Manager).
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
    pub fn new() -> Self {
        Self::with_limits(DeviceLimits::default())
    }

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
    /// device's capacity, so no other consumer can use it up.
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
                usage: Mutex::new(Usage::default()),
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
    usage: Mutex<Usage>,
    pub(crate) device: Device,
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
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn quota(&self) -> Quota {
        self.inner.quota
    }

    /// What the consumer holds now.
    pub fn usage(&self) -> Usage {
        *lock(&self.inner.usage)
    }

    /// A new protection domain, private to this consumer.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain, Error> {
        let id = self.inner.device.next_pd();
        Ok(ProtectionDomain::new(id, self.clone()))
    }

    /// Take `n` of `r` from the quota, or refuse with a clear error.
    pub(crate) fn charge(&self, r: Resource, n: u64) -> Result<(), Error> {
        let mut u = lock(&self.inner.usage);
        let limit = self.inner.quota.get(r);
        let slot = u.slot(r);
        if *slot + n > limit {
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
        *slot += n;
        Ok(())
    }

    pub(crate) fn refund(&self, r: Resource, n: u64) {
        let mut u = lock(&self.inner.usage);
        let slot = u.slot(r);
        *slot = slot.saturating_sub(n);
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
