//! Memory regions: own their memory; the peer reaches them by STag.

use crate::device::Device;
use crate::error::Error;
use crate::pd::ProtectionDomain;
use crate::quota::Resource;
use rddp_proto::ddp::{Payload, RegionSpan};
use rddp_proto::mem::{
    Access, AppMem, MemError, MemoryTable, PdId, RegionRef, Stag, StagScope, StreamId,
};

/// What the peer needs to reach a region: advertise it (e.g. in a Send).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteBuf {
    /// The region's STag (the rkey of ibverbs).
    pub stag: u32,
    /// The Tagged Offset of its first octet (the address of ibverbs).
    pub to: u64,
    /// Its length in octets.
    pub len: u64,
}

impl RemoteBuf {
    /// The 16-octet advertisement used by the tool and examples:
    /// STag (u32 BE) || TO (u64 BE) || length (u32 BE).
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..4].copy_from_slice(&self.stag.to_be_bytes());
        b[4..12].copy_from_slice(&self.to.to_be_bytes());
        b[12..].copy_from_slice(&(self.len as u32).to_be_bytes());
        b
    }

    /// Reads an advertisement written by [`Self::to_bytes`]; `None` when `b` is
    /// shorter than 16 octets.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let b: &[u8; 16] = b.get(..16)?.try_into().ok()?;
        Some(Self {
            stag: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            to: u64::from_be_bytes([b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11]]),
            len: u64::from(u32::from_be_bytes([b[12], b[13], b[14], b[15]])),
        })
    }
}

/// A registered memory region. It owns its memory (inside the device's table),
/// or it is over memory the application owns ([`ProtectionDomain::register_app`]);
/// dropping it deregisters the memory and returns the quota (for application
/// memory, once no copy into or out of it can happen any more). Its own reads
/// and writes lock only this region (no device-wide lock).
pub struct MemoryRegion {
    stag: Stag,
    region: RegionRef,
    len: u64,
    base_to: u64,
    access: Access,
    pd: ProtectionDomain,
}

impl MemoryRegion {
    pub(crate) fn register(
        pd: &ProtectionDomain,
        buf: Vec<u8>,
        access: Access,
        stream: Option<StreamId>,
    ) -> Result<Self, Error> {
        let len = buf.len() as u64;
        Self::register_with(pd, len, 0, stream, |mem, pd, scope| {
            mem.register(pd, scope, access, 0, buf)
        })
    }

    /// A region over application memory whose first octet has tagged offset
    /// `base_to`.
    pub(crate) fn register_app(
        pd: &ProtectionDomain,
        app: AppMem,
        access: Access,
        base_to: u64,
    ) -> Result<Self, Error> {
        let len = app.len() as u64;
        Self::register_with(pd, len, base_to, None, |mem, pd, scope| {
            mem.register_app(pd, scope, access, base_to, app)
        })
    }

    fn register_with(
        pd: &ProtectionDomain,
        len: u64,
        base_to: u64,
        stream: Option<StreamId>,
        register: impl FnOnce(&MemoryTable, PdId, StagScope) -> Result<Stag, MemError>,
    ) -> Result<Self, Error> {
        let consumer = &pd.inner.consumer;
        consumer.charge(Resource::MemoryRegions, 1)?;
        if let Err(e) = consumer.charge(Resource::RegisteredBytes, len) {
            consumer.refund(Resource::MemoryRegions, 1);
            return Err(e);
        }
        let scope = stream.map_or(StagScope::Pd, StagScope::Stream);
        let mem = consumer.device().mem();
        let res = register(mem, pd.id(), scope);
        match res.map(|stag| (stag, mem.region(stag))) {
            Ok((stag, Some(region))) => Ok(Self {
                stag,
                access: region.access(),
                region,
                len,
                base_to,
                pd: pd.clone(),
            }),
            res => {
                consumer.refund(Resource::MemoryRegions, 1);
                consumer.refund(Resource::RegisteredBytes, len);
                Err(match res {
                    Err(e) => e.into(),
                    Ok(_) => Error::RegionGone,
                })
            }
        }
    }

    fn device(&self) -> &Device {
        self.pd.inner.consumer.device()
    }

    /// The region's STag.
    pub fn stag(&self) -> u32 {
        self.stag.0
    }

    /// Its length in octets.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it has no octet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The remote rights it was registered with.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The protection domain it belongs to.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }

    /// (STag, TO, length) for the peer. The TO of the first octet is 0 for
    /// memory the region owns, the address given at registration for
    /// application memory.
    pub fn remote(&self) -> RemoteBuf {
        RemoteBuf {
            stag: self.stag.0,
            to: self.base_to,
            len: self.len,
        }
    }

    /// The tagged offset of its first octet.
    pub fn base_to(&self) -> u64 {
        self.base_to
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), Error> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::OutOfRange {
                offset,
                len,
                size: self.len,
            }),
        }
    }

    /// A lease on `len` octets at `offset` for the transmit path: the region's
    /// handle and the range, no copy.
    pub(crate) fn lease(&self, offset: u64, len: u64) -> Result<Payload, Error> {
        self.check(offset, len)?;
        Payload::region(self.region.clone(), offset as usize, len as usize).ok_or(
            Error::OutOfRange {
                offset,
                len,
                size: self.len,
            },
        )
    }

    /// `len` octets at `offset` as the place of a receive posted in `pd` (no
    /// copy): a region of another PD is refused ([`Error::WrongPd`]), as is a
    /// range outside the region.
    pub(crate) fn span(
        &self,
        pd: &ProtectionDomain,
        offset: u64,
        len: u64,
    ) -> Result<RegionSpan, Error> {
        if !self.pd.same(pd) {
            return Err(Error::WrongPd);
        }
        self.check(offset, len)?;
        Ok(RegionSpan {
            region: self.region.clone(),
            offset: offset as usize,
            len: len as usize,
        })
    }

    /// Copy `len` octets out of the region at `offset` (local access).
    pub fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        self.check(offset, len)?;
        let mut out = vec![0; len as usize];
        if self.region.read_at(offset as usize, &mut out) {
            Ok(out)
        } else {
            Err(Error::RegionGone)
        }
    }

    /// Copy `data` into the region at `offset` (local access).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), Error> {
        self.check(offset, data.len() as u64)?;
        if self.region.write_at(offset as usize, data) {
            Ok(())
        } else {
            Err(Error::RegionGone)
        }
    }

    /// True if no octet outside the region's data was ever written: its memory
    /// sits between guard octets (rddp-proto), which placement never touches
    /// unless a validation rule failed to refuse a segment (RFC 5042 §5).
    pub fn guards_intact(&self) -> bool {
        self.region.guards_intact()
    }

    /// Octets copied out of application memory through this region so far
    /// (0 for memory the stack owns): what transmits from it and local reads
    /// cost, the octets they carry.
    pub fn app_octets_read(&self) -> u64 {
        self.region.app_octets_read()
    }

    /// Whether remote access by STag still works (false after invalidation).
    pub fn is_valid(&self) -> bool {
        self.region.is_valid()
    }

    /// Invalidate the STag (as a local invalidate work request,
    /// `IBV_WR_LOCAL_INV`, but at once): every later remote use fails as
    /// Invalid STag (a Terminate to the peer). Local access keeps working
    /// until the region is dropped.
    pub fn invalidate(&self) -> Result<(), Error> {
        Ok(self.device().mem().invalidate(self.stag)?)
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // The memory goes with the last handle (ours, or a lease still sending).
        let _ = self.device().mem().remove(self.stag);
        let consumer = &self.pd.inner.consumer;
        consumer.refund(Resource::MemoryRegions, 1);
        consumer.refund(Resource::RegisteredBytes, self.len);
    }
}
