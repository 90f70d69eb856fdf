//! Protection domains.

use crate::device::Consumer;
use crate::error::Error;
use crate::mr::MemoryRegion;
use rddp_proto::mem::{Access, AppMem, PdId};
use std::sync::Arc;

pub(crate) struct PdInner {
    pub(crate) id: PdId,
    pub(crate) consumer: Consumer,
}

/// A protection domain: streams and memory regions of one PD only ever meet each
/// other (RFC 5042). Cloning gives another handle to the same PD; regions and queue
/// pairs keep their PD alive.
#[derive(Clone)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<PdInner>,
}

impl ProtectionDomain {
    pub(crate) fn new(id: PdId, consumer: Consumer) -> Self {
        Self {
            inner: Arc::new(PdInner { id, consumer }),
        }
    }

    /// Its number within its device (another device's PDs count from 1 too).
    pub fn id(&self) -> PdId {
        self.inner.id
    }

    /// Whether both handles name the same PD. Not by [`Self::id`]: PD numbers
    /// are per device, so a region of another device's PD may carry ours.
    pub fn same(&self, other: &ProtectionDomain) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Register `buf` (the region takes ownership of it, which is the proof that the
    /// caller may expose it) with `access` rights, usable by every queue pair of this
    /// PD. Tagged offsets start at 0 (`ibv_reg_mr`; the STag is the rkey).
    /// Refused with [`Error::Quota`] (the consumer's regions or registered
    /// octets) or [`Error::Mem`] (the memory table's limits, no STag left).
    pub fn register(&self, buf: Vec<u8>, access: Access) -> Result<MemoryRegion, Error> {
        MemoryRegion::register(self, buf, access, None)
    }

    /// Register memory the application owns (verbs' `ibv_reg_mr`): its first
    /// octet has tagged offset `base_to` (the address, as verbs applications
    /// advertise it). The region reaches the memory only through `app`'s
    /// copies; dropping it ends the registration, once no copy into or out of
    /// the memory can happen any more. A write right (local or remote) needs
    /// writable `app`.
    pub fn register_app(
        &self,
        app: AppMem,
        access: Access,
        base_to: u64,
    ) -> Result<MemoryRegion, Error> {
        MemoryRegion::register_app(self, app, access, base_to)
    }
}
