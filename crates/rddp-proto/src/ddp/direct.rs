//! Direct placement (additive; used by MPA over TCP): the LLP reads a tagged
//! segment's payload from the socket straight into the registered region.
//!
//! [`DdpSink::direct_target`] runs every check [`DdpSink::on_segment`] runs for a
//! tagged segment (spec §2.10: order, version, STag, association, rights, wrap,
//! bounds), from the header and the payload length alone, and says where the
//! payload goes. The LLP places it, verifies its own integrity check (MPA CRC), and
//! then calls [`DdpSink::direct_placed`], which does the rest of `on_segment`
//! (statistics, sender-order bookkeeping, delivery). If the LLP's check fails it
//! never calls `direct_placed`: the octets in the region are undefined and nothing
//! is delivered (spec §4.3).

use super::*;
use rddp_wire::ddp::TAGGED_HDR_LEN;

/// Where a tagged payload goes: `mem.region(stag)` data octets
/// `offset..offset + len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectTarget {
    pub stag: Stag,
    pub offset: usize,
    pub len: usize,
}

impl DdpSink {
    /// Validate the tagged segment whose header is `hdr` (14 octets) and whose
    /// payload is `len` octets, at sender position `seq`. `Ok(None)`: a
    /// zero-length segment (nothing to place, nothing checked, seed 000).
    pub fn direct_target(
        &self,
        mem: &MemoryTable,
        seq: SenderSeq,
        hdr: &[u8],
        len: usize,
    ) -> Result<Option<DirectTarget>, DdpError> {
        let seg_len = hdr.len() + len;
        self.order.check(seq).map_err(|e| order_error(e, seg_len))?;
        let h = match parse_header(hdr)? {
            DdpHeader::Tagged(h) if hdr.len() == TAGGED_HDR_LEN => h,
            other => {
                return Err(DdpError::new(
                    TerminateCode::DDP_LOCAL_CATASTROPHIC,
                    Some(other),
                    seg_len,
                    "direct placement is for tagged segments only".into(),
                ));
            }
        };
        if u32::try_from(len).is_err() {
            return Err(DdpError::new(
                TerminateCode::DDP_LOCAL_CATASTROPHIC,
                Some(DdpHeader::Tagged(h)),
                seg_len,
                format!("segment of {seg_len} octets is longer than DDP can describe"),
            ));
        }
        if seq == self.order.next() {
            self.check_continues(&h, seg_len)?;
        }
        if len == 0 {
            return Ok(None);
        }
        let region = self.tagged_region(mem, &h, len, seg_len)?;
        Ok(Some(DirectTarget {
            stag: Stag(h.stag),
            offset: (h.to - region.base_to()) as usize,
            len,
        }))
    }

    /// The LLP placed the `len` payload octets of the segment `hdr` that
    /// [`Self::direct_target`] accepted, and checked them: account for it as
    /// `on_segment` would.
    pub fn direct_placed(
        &mut self,
        seq: SenderSeq,
        hdr: &TaggedHeader,
        len: usize,
    ) -> Result<(), DdpError> {
        let meta = SegMeta::Tagged {
            last: hdr.ctrl.last(),
            rsvd_ulp: hdr.rsvd_ulp,
            stag: hdr.stag,
            to: hdr.to,
            len: len as u32,
        };
        self.account(seq, meta, len as u32)
    }
}
