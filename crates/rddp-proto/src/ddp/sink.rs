//! The DDP Data Sink: validate, place, deliver (RFC 5041 §5-§7).
//!
//! Every segment is validated completely before a single octet is placed. Placement
//! happens on arrival, whatever the order; delivery happens in the sender's order:
//! a message is delivered iff its L=1 segment and all its other segments are placed,
//! all earlier messages are placed, and each earlier message was delivered
//! (`SenderOrder`, a bounded reorder window).
//!
//! Header-first receive (docs/data-path.md): the LLP hands up a segment's DDP
//! header and its payload length before the payload itself, the sink runs every
//! check of RFC 5041 §7.1 (order, version, tagged: STag, association, rights, TO wrap,
//! bounds, message continuity; untagged: QN, MSN, buffer, MO, length, tiling) and
//! says where the payload goes ([`Target`]). The LLP reads the payload straight
//! into that place, verifies its own integrity check (MPA CRC) over the octets
//! where they lie, and only then calls [`DdpSink::finish_segment`]`(true)`, which
//! does the rest (statistics, sender-order bookkeeping, delivery). If the check
//! fails the LLP calls `finish_segment(false)`: the placed octets are undefined
//! and nothing is delivered (RFC 5044 §4.4). [`DdpSink::on_segment`] is these
//! three steps over a segment held whole (one set of rules).

use super::error::{DdpError, SourceError};
use super::pool::BufferPool;
use super::recv_queue::{PostRefused, RecvBuffer, RecvModel, RegionSpan, UntaggedQueue};
use super::{DdpConfig, SenderSeq, place_whole};
use crate::cq::{CqError, CqLedger};
use crate::mem::{Access, AccessFault, MemoryTable, PdId, RegionRef, Stag, StreamId};
use rddp_wire::ddp::{DDP_VERSION, TAGGED_HDR_LEN, UNTAGGED_HDR_LEN};
use rddp_wire::{DdpControl, DdpHeader, TaggedHeader, TerminateCode, UntaggedHeader};
use std::collections::VecDeque;

mod batch;
pub use batch::{Begin, Fits};

/// A message handed to the ULP, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// A tagged message is complete: an internal event for RDMAP (Read Response
    /// completion, ordering of later Sends); its data is already in place.
    Tagged {
        /// The RsvdULP octet of the tagged header (RDMAP: its control octet).
        rsvd_ulp: u8,
        /// The STag the message was placed under.
        stag: u32,
        /// TO of the message's first octet.
        to: u64,
        /// Payload octets of the message.
        len: u64,
    },
    /// An untagged message filled `buffer.data[..len]`.
    Untagged {
        /// RsvdULP of the message's last (L=1) segment (RDMAP: control octet, then the
        /// Invalidate STag).
        rsvd_ulp: [u8; 5],
        /// The untagged queue (RFC 5041 §4.3).
        qn: u32,
        /// The message's sequence number on that queue (RFC 5041 §4.3).
        msn: u32,
        /// Octets of `buffer.data` the message filled.
        len: u32,
        /// The receive buffer, handed back to the ULP.
        buffer: RecvBuffer,
    },
}

/// Counters for tests, the tool and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// Received segments placed (those refused are counted by the stream).
    pub segments_placed: u64,
    /// Payload octets placed.
    pub bytes_placed: u64,
    /// Segments placed while an earlier segment (in sender order) was still missing.
    pub placed_out_of_order: u64,
    /// Messages delivered to the ULP in order.
    pub messages_delivered: u64,
    /// Received payload octets copied in user space on their way to their
    /// final place (0 where the LLP reads payloads straight into place).
    pub octets_copied: u64,
}

/// The receiving half of a DDP stream.
#[derive(Debug)]
pub struct DdpSink {
    stream: StreamId,
    pd: PdId,
    queues: Vec<UntaggedQueue>,
    order: SenderOrder,
    tagged: Option<TaggedAcc>,
    deliveries: VecDeque<Delivery>,
    stats: SinkStats,
    /// The segments begun header-first and not yet finished, oldest first:
    /// one, or a batch's several (`sink/batch.rs`).
    begun: VecDeque<Begun>,
}

/// The tagged message being assembled in sender order.
#[derive(Debug, Clone, Copy)]
struct TaggedAcc {
    rsvd_ulp: u8,
    stag: u32,
    to: u64,
    len: u64,
}

/// The tagged message in progress in sender order (its L=1 segment not yet
/// processed): what its next segment must continue. RDMAP matches a Read
/// Response's next segment against it before placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaggedProgress {
    /// RsvdULP of its first segment (RDMAP: the control octet).
    pub rsvd_ulp: u8,
    /// The STag its first segment named; every later one must name it too.
    pub stag: u32,
    /// TO where the next segment must start.
    pub next_to: u64,
    /// Payload octets so far.
    pub len: u64,
}

/// One tagged message is one range of one buffer (RFC 5041 §5.2), sent in
/// increasing TO order (§5.3), under one RDMAP header repeated in each segment
/// (RFC 5040 §4). So in sender order each segment after the first must keep the
/// first's RsvdULP and STag and start where the previous one ended; else it
/// belongs to no message in progress. Codes as siw (`siw_get_hdr`,
/// `siw_write_check_ntoh`, `siw_rresp_check_ntoh`): another opcode is 0/2/0x06
/// (unexpected in the current state, RFC 5041 §7.1), another STag 1/1/0x00,
/// another TO 1/1/0x01. This is what lets a Read Response be checked to cover
/// its sink exactly, each octet once, in bounded state.
fn tagged_continues(
    acc: Option<&TaggedAcc>,
    rsvd_ulp: u8,
    stag: u32,
    to: u64,
) -> Result<(), (TerminateCode, String)> {
    let Some(acc) = acc else { return Ok(()) };
    if rsvd_ulp != acc.rsvd_ulp {
        return Err((
            TerminateCode::RDMAP_UNEXPECTED_OPCODE,
            format!(
                "tagged segment with RDMAP control {rsvd_ulp:#04x} inside a message begun with {:#04x}",
                acc.rsvd_ulp
            ),
        ));
    }
    if stag != acc.stag {
        return Err((
            TerminateCode::DDP_INVALID_STAG,
            format!(
                "tagged segment for STag {stag:#010x} inside a message to STag {:#010x}",
                acc.stag
            ),
        ));
    }
    let next = acc.to.wrapping_add(acc.len);
    if to != next {
        return Err((
            TerminateCode::DDP_BASE_BOUNDS,
            format!("tagged segment at TO {to:#x}; the message in progress continues at {next:#x}"),
        ));
    }
    Ok(())
}

impl DdpSink {
    /// A sink for `stream` whose tagged segments may use STags of `pd`, with
    /// `cfg.num_qns` ordered receive queues and no buffers.
    pub fn new(stream: StreamId, pd: PdId, cfg: &DdpConfig) -> Self {
        Self {
            stream,
            pd,
            queues: (0..cfg.num_qns)
                .map(|qn| UntaggedQueue::new(stream, qn, RecvModel::default()))
                .collect(),
            order: SenderOrder::new(cfg.max_reorder),
            tagged: None,
            deliveries: VecDeque::new(),
            stats: SinkStats::default(),
            begun: VecDeque::new(),
        }
    }

    /// The stream this sink receives for.
    pub fn stream(&self) -> StreamId {
        self.stream
    }

    /// The protection domain whose STags the stream may use (RFC 5042).
    pub fn pd(&self) -> PdId {
        self.pd
    }

    /// Choose how `qn` validates MSNs (docs/receive-strategies.md). Only before any traffic on it.
    pub fn set_recv_model(&mut self, qn: u32, model: RecvModel) -> Result<(), SourceError> {
        let count = self.queues.len() as u32;
        let q = self
            .queues
            .get_mut(qn as usize)
            .ok_or(SourceError::InvalidQn { qn, count })?;
        *q = UntaggedQueue::new(self.stream, qn, model);
        Ok(())
    }

    /// Draw `qn`'s buffers from a shared pool, following the pool's strategy and
    /// ordering (docs/receive-strategies.md, strategies 2 and 3). Only before any traffic on it.
    pub fn set_recv_pool(&mut self, qn: u32, pool: &BufferPool) -> Result<(), SourceError> {
        let count = self.queues.len() as u32;
        let q = self
            .queues
            .get_mut(qn as usize)
            .ok_or(SourceError::InvalidQn { qn, count })?;
        *q = UntaggedQueue::pooled(self.stream, qn, pool);
        Ok(())
    }

    /// Reserve `qn`'s worst-case completions on `cq` (see [`crate::cq`]): `limit`
    /// is the depth of an ordered queue or the credit limit of a strategy-3 queue,
    /// and is enforced from now on; a strategy-2 queue reserves its pool's size.
    pub fn bind_cq(
        &mut self,
        qn: u32,
        cq: &impl AsRef<CqLedger>,
        limit: u64,
    ) -> Result<(), CqError> {
        match self.queues.get_mut(qn as usize) {
            Some(q) => q.bind_cq(cq, limit),
            None => Err(CqError::InvalidQn(qn)),
        }
    }

    /// Strategy 3: MSNs of `qn` still enabled.
    pub fn credits(&self, qn: u32) -> u64 {
        self.queues.get(qn as usize).map_or(0, |q| q.credits())
    }

    /// Credits model: enable the next `n` MSNs of `qn`. False if `qn` is not credited.
    pub fn grant_credits(&mut self, qn: u32, n: u32) -> bool {
        self.queues.get_mut(qn as usize).is_some_and(|q| q.grant(n))
    }

    /// Post a receive buffer on `qn`; it is assigned to the next MSN without one
    /// (ordered queue) or goes to the queue's pool (credits, shared pool).
    pub fn post_recv(&mut self, qn: u32, buf: RecvBuffer) -> Result<(), SourceError> {
        let count = self.queues.len() as u32;
        self.queues
            .get_mut(qn as usize)
            .ok_or(SourceError::InvalidQn { qn, count })?
            .post(buf)
            .map_err(|r| refused(qn, r))
    }

    /// Post a receive on `qn` whose message goes into `place` (see
    /// [`super::recv_queue::RegionSpan`]): the next MSN's (ordered queue) or
    /// into the queue's pool (credits, shared pool).
    pub fn post_recv_in_region(
        &mut self,
        qn: u32,
        id: u64,
        place: RegionSpan,
    ) -> Result<(), SourceError> {
        let count = self.queues.len() as u32;
        self.queues
            .get_mut(qn as usize)
            .ok_or(SourceError::InvalidQn { qn, count })?
            .post_in_region(id, place)
            .map_err(|r| refused(qn, r))
    }

    /// Buffers posted on `qn` and not yet delivered. For a queue on a shared pool:
    /// the buffers it holds (associated with its undelivered messages).
    pub fn posted(&self, qn: u32) -> usize {
        self.queues.get(qn as usize).map_or(0, |q| q.posted())
    }

    /// MSN of the next message to be delivered on `qn`.
    pub fn expected_msn(&self, qn: u32) -> Option<u32> {
        self.queues.get(qn as usize).map(|q| q.expected_msn())
    }

    /// Segments placed but waiting for an earlier one before their delivery effects.
    pub fn reorder_waiting(&self) -> usize {
        self.order.waiting()
    }

    /// Sender position of the oldest segment not yet seen: a segment handed up
    /// at this position is in sender order, and every earlier one was processed.
    pub fn next_seq(&self) -> SenderSeq {
        self.order.next()
    }

    /// The tagged message in progress in sender order, if any.
    pub fn tagged_in_progress(&self) -> Option<TaggedProgress> {
        self.tagged.map(|a| TaggedProgress {
            rsvd_ulp: a.rsvd_ulp,
            stag: a.stag,
            next_to: a.to.wrapping_add(a.len),
            len: a.len,
        })
    }

    /// A copy of the sink's counters.
    pub fn stats(&self) -> SinkStats {
        self.stats
    }

    /// `n` received payload octets were copied into place in user space.
    pub fn count_copied(&mut self, n: usize) {
        self.stats.octets_copied += n as u64;
    }

    /// Whether a message is partly received in order: a tagged one or an
    /// untagged one has segments in and its last (L=1) not yet.
    pub fn mid_message(&self) -> bool {
        self.tagged.is_some() || self.queues.iter().any(|q| q.in_progress.is_some())
    }

    /// The next message delivered in order, if any.
    pub fn poll_delivery(&mut self) -> Option<Delivery> {
        self.deliveries.pop_front()
    }

    /// Take every posted buffer back (teardown); undelivered data is discarded.
    pub fn flush(&mut self) -> Vec<RecvBuffer> {
        self.queues.iter_mut().flat_map(|q| q.flush()).collect()
    }

    /// Tagged checks of RFC 5041 §7.1; the region range the payload goes to.
    fn check_tagged(
        &self,
        mem: &MemoryTable,
        h: &TaggedHeader,
        len: usize,
        seg_len: usize,
        in_order: bool,
    ) -> Result<(SegMeta, Target), DdpError> {
        let meta = SegMeta::Tagged {
            last: h.ctrl.last(),
            rsvd_ulp: h.rsvd_ulp,
            stag: h.stag,
            to: h.to,
            len: len as u32,
        };
        if in_order {
            self.check_continues(h, seg_len)?;
        }
        // A zero-length tagged segment's STag and TO are not checked against
        // memory (RFC 5041).
        if len == 0 {
            return Ok((meta, Target::Nothing));
        }
        let region = self.tagged_region(mem, h, len, seg_len)?;
        // Inside the region: `remote_region` checked base, bounds and wrap.
        let offset = (h.to - region.base_to()) as usize;
        Ok((
            meta,
            Target::Region {
                region,
                offset,
                len,
            },
        ))
    }

    /// [`tagged_continues`] for a segment in sender order, before placement.
    pub(super) fn check_continues(&self, h: &TaggedHeader, seg_len: usize) -> Result<(), DdpError> {
        tagged_continues(self.tagged.as_ref(), h.rsvd_ulp, h.stag, h.to)
            .map_err(|(code, d)| DdpError::new(code, Some(DdpHeader::Tagged(*h)), seg_len, d))
    }

    /// The region a tagged segment of `len` payload octets may be placed into,
    /// after the checks of RFC 5041 §7.1, each failure mapped to its code.
    pub(super) fn tagged_region(
        &self,
        mem: &MemoryTable,
        h: &TaggedHeader,
        len: usize,
        seg_len: usize,
    ) -> Result<RegionRef, DdpError> {
        mem.remote_region(
            Stag(h.stag),
            self.pd,
            self.stream,
            Access::REMOTE_WRITE,
            h.to,
            len as u64,
        )
        .map_err(|f| {
            let (code, what) = match f {
                AccessFault::InvalidStag => (
                    TerminateCode::DDP_INVALID_STAG,
                    "does not name a valid region",
                ),
                AccessFault::NotAssociated => (
                    TerminateCode::DDP_STAG_NOT_ASSOCIATED,
                    "belongs to another protection domain or stream",
                ),
                // DDP has no code for rights; RFC 5041 §7.1 recommends RDMAP's.
                AccessFault::AccessRights => (
                    TerminateCode::RDMAP_ACCESS_VIOLATION,
                    "does not allow remote write",
                ),
                AccessFault::ToWrap => (
                    TerminateCode::DDP_TO_WRAP,
                    "with this TO and length wraps 2^64",
                ),
                AccessFault::BaseBounds => (
                    TerminateCode::DDP_BASE_BOUNDS,
                    "does not cover this TO range",
                ),
            };
            DdpError::new(
                code,
                Some(DdpHeader::Tagged(*h)),
                seg_len,
                format!(
                    "peer wrote {len} octets at STag {:#010x} TO {:#x}: the STag {what}",
                    h.stag, h.to
                ),
            )
        })
    }

    /// Count a placed segment and run what is now in sender order (shared by
    /// [`Self::on_segment`] and direct placement).
    pub(super) fn account(
        &mut self,
        seq: SenderSeq,
        meta: SegMeta,
        len: u32,
    ) -> Result<(), DdpError> {
        self.stats.segments_placed += 1;
        self.stats.bytes_placed += u64::from(len);
        if seq != self.order.next() {
            self.stats.placed_out_of_order += 1;
        }
        let Self {
            order,
            queues,
            tagged,
            deliveries,
            stats,
            ..
        } = self;
        order.arrive(seq, meta, |m| {
            in_order(queues, tagged, deliveries, stats, m)
        })
    }

    /// Untagged checks of RFC 5041 §7.1 (QN, MSN, MO, length); the buffer is
    /// associated with the MSN (from a pool on its first segment). Also where
    /// the payload goes, from the slot found for it: the receive buffer, or for
    /// a receive posted into a region that region's octets, as a tagged
    /// segment's.
    pub(super) fn check_untagged(
        &mut self,
        h: &UntaggedHeader,
        payload_len: usize,
        seg_len: usize,
        in_order: bool,
    ) -> Result<(SegMeta, Target), DdpError> {
        let err = |code, detail: String| {
            DdpError::new(code, Some(DdpHeader::Untagged(*h)), seg_len, detail)
        };
        let count = self.queues.len();
        let q = self.queues.get_mut(h.qn as usize).ok_or_else(|| {
            err(
                TerminateCode::DDP_INVALID_QN,
                format!("QN {} is not one of the {count} queues", h.qn),
            )
        })?;
        let expected = q.expected_msn();
        if in_order && let Some(m) = q.in_progress.filter(|&m| m != h.msn) {
            return Err(err(
                TerminateCode::DDP_INVALID_MSN_RANGE,
                interleaved(h.qn, h.msn, m),
            ));
        }
        let slot = q.slot_for_arrival(h.msn).map_err(|code| {
            let why = if code == TerminateCode::DDP_INVALID_MSN_RANGE {
                "is outside the granted range"
            } else {
                "has no receive buffer"
            };
            err(
                code,
                format!("QN {} MSN {} {why} (next expected {expected})", h.qn, h.msn),
            )
        })?;
        if slot.end.is_some() {
            return Err(err(
                TerminateCode::DDP_INVALID_MO,
                format!(
                    "segment for QN {} MSN {} after that message's last segment",
                    h.qn, h.msn
                ),
            ));
        }
        if in_order && let Some(c) = slot.ctrl.filter(|&c| c != h.rsvd_ulp[0]) {
            return Err(err(
                TerminateCode::RDMAP_UNEXPECTED_OPCODE,
                other_opcode(h.qn, h.msn, h.rsvd_ulp[0], c),
            ));
        }
        let cap = slot.capacity() as u64;
        let mo = u64::from(h.mo);
        if mo > cap {
            return Err(err(
                TerminateCode::DDP_INVALID_MO,
                format!("MO {} is past the end of the {cap}-octet buffer", h.mo),
            ));
        }
        if mo + payload_len as u64 > cap {
            return Err(err(
                TerminateCode::DDP_MSG_TOO_LONG,
                format!(
                    "{payload_len} octets at MO {} overflow the {cap}-octet buffer",
                    h.mo
                ),
            ));
        }
        // Checked after the buffer's own bounds (RFC 5041 §7.1).
        if in_order && mo != slot.ordered_bytes {
            return Err(err(
                TerminateCode::DDP_INVALID_MO,
                not_tiling(h.qn, h.msn, h.mo, slot.ordered_bytes),
            ));
        }
        let target = match slot.place.as_deref() {
            _ if payload_len == 0 => Target::Nothing,
            // The buffer's registration ended after the receive was posted
            // (application memory deregistered): no octet can go there, and
            // the message cannot be delivered (a local catastrophic error,
            // RFC 5041 section 7.2), rather than completed with nothing
            // placed.
            Some(p) if !p.region.is_mapped() => {
                return Err(err(
                    TerminateCode::DDP_LOCAL_CATASTROPHIC,
                    format!(
                        "QN {} MSN {}: the receive buffer's registration has ended",
                        h.qn, h.msn
                    ),
                ));
            }
            Some(p) => Target::Region {
                region: p.region.clone(),
                offset: p.offset + h.mo as usize,
                len: payload_len,
            },
            None => Target::Buffer { len: payload_len },
        };
        let meta = SegMeta::Untagged {
            last: h.ctrl.last(),
            rsvd_ulp: h.rsvd_ulp,
            qn: h.qn,
            msn: h.msn,
            mo: h.mo,
            len: payload_len as u32,
        };
        Ok((meta, target))
    }
}

/// Where the payload of a segment accepted by [`DdpSink::begin_segment`] goes.
#[derive(Debug, Clone)]
pub enum Target {
    /// No payload octets.
    Nothing,
    /// Data octets `offset..offset + len` of `region` (lock it with
    /// [`crate::mem::Region::data_mut`] for each read).
    Region {
        /// The region the payload goes into.
        region: RegionRef,
        /// Offset of the payload's first octet in the region's data.
        offset: usize,
        /// Payload octets.
        len: usize,
    },
    /// `len` octets of the engine's receive buffer for this segment:
    /// [`DdpSink::segment_buffers`] gives exactly them.
    Buffer {
        /// Payload octets.
        len: usize,
    },
}

impl Target {
    /// Payload octets the target takes.
    pub fn len(&self) -> usize {
        match self {
            Self::Nothing => 0,
            Self::Region { len, .. } | Self::Buffer { len } => *len,
        }
    }

    /// Whether no payload octet goes anywhere.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The segment between `begin_segment` and `finish_segment`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Begun {
    seq: SenderSeq,
    meta: SegMeta,
    len: u32,
    /// Untagged: (QN, MSN, MO) of the receive buffer octets.
    buffer: Option<(u32, u32, usize)>,
}

/// Why [`DdpSink::begin_segment`] began nothing (and changed nothing).
#[derive(Debug)]
pub enum NotBegun {
    /// [`Begin::Alone`]: a check of RFC 5041 §7.1 refused it.
    Refused(DdpError),
    /// [`Begin::Ahead`]: it cannot join the batch (the LLP takes it alone
    /// once those before it are finished; a refusal is reported then).
    NotAhead,
}

impl DdpSink {
    /// Validate the segment whose DDP header is `head` (the first
    /// `min(segment length, header length)` octets) and whose payload is
    /// `payload_len` octets, at sender position `seq`, under the rules `how`
    /// names; nothing is placed or changed when it is not begun. Begun, the
    /// caller fills the target, then calls [`Self::finish_segment`]. Alone, a
    /// segment begun before and not finished is forgotten.
    pub fn begin_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        how: Begin<'_>,
    ) -> Result<Target, NotBegun> {
        match how {
            Begin::Alone => self
                .begin_alone(mem, seq, head, payload_len)
                .map_err(NotBegun::Refused),
            Begin::Ahead(fits) => self
                .begin_ahead(mem, seq, head, payload_len, fits)
                .ok_or(NotBegun::NotAhead),
        }
    }

    fn begin_alone(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
    ) -> Result<Target, DdpError> {
        self.begun.clear();
        let seg_len = head.len().saturating_add(payload_len);
        // LLP-level order information first (RFC 5041 §7.1).
        self.order.check(seq).map_err(|e| order_error(e, seg_len))?;
        let hdr = parse_header(head, seg_len)?;
        // A header parsed from `head` may leave octets of it unused: they are payload.
        let payload_len = seg_len - hdr.len();
        let len = u32::try_from(payload_len).map_err(|_| {
            DdpError::new(
                TerminateCode::DDP_LOCAL_CATASTROPHIC,
                Some(hdr),
                seg_len,
                format!("segment of {seg_len} octets is longer than DDP can describe"),
            )
        })?;
        // In sender order (always on MPA) the rules that span segments are
        // checked before placement too; otherwise when the gap before it fills.
        let in_order = seq == self.order.next();
        let (meta, target, buffer) = match hdr {
            DdpHeader::Tagged(h) => {
                let (meta, target) = self.check_tagged(mem, &h, payload_len, seg_len, in_order)?;
                (meta, target, None)
            }
            DdpHeader::Untagged(h) => {
                let (meta, target) = self.check_untagged(&h, payload_len, seg_len, in_order)?;
                (meta, target, Some((h.qn, h.msn, h.mo as usize)))
            }
        };
        self.begun.push_back(Begun {
            seq,
            meta,
            len,
            buffer,
        });
        Ok(target)
    }

    /// The receive-buffer octets of the begun untagged segment (its MO onwards,
    /// its payload length), or `None` (tagged, none begun, or flushed since).
    /// Of a batch's segments, the oldest.
    fn begun_buffer(&mut self) -> Option<&mut [u8]> {
        let b = *self.begun.front()?;
        let (qn, msn, mo) = b.buffer?;
        let slot = self.queues.get_mut(qn as usize)?.slot(msn)?;
        slot.buf.data.get_mut(mo..mo + b.len as usize)
    }

    /// Run `f` over the receive-buffer octets of the begun untagged segments'
    /// payloads, oldest first: one slice (on the stack, no allocation) for a
    /// segment begun alone, those with payload of a batch. `None` if one is
    /// gone (flushed since) or, alone, the segment is tagged.
    pub fn segment_buffers<R>(&mut self, f: impl FnOnce(&mut [&mut [u8]]) -> R) -> Option<R> {
        if self.begun.len() == 1 {
            let b = self.begun_buffer()?;
            return Some(f(&mut [b]));
        }
        let mut bufs = self.begun_buffers()?;
        Some(f(&mut bufs))
    }

    /// What the receive buffer that an untagged message of queue `qn`
    /// arriving next would fill from MO 0 holds now, and that message's MSN
    /// (a look, not a receive: a test sees that nothing was placed before the
    /// checks). Only on an ordered queue (strategy 1), whose buffers are posted
    /// for their MSNs; `None` under the pooled strategies (a buffer is taken
    /// only when its message arrives), for a receive posted into a region, and
    /// while a segment is begun or waits for an earlier one.
    pub fn next_posted(&self, qn: u32) -> Option<(u32, &[u8])> {
        if !self.begun.is_empty() || !self.order.is_idle() {
            return None;
        }
        self.queues.get(qn as usize)?.next_posted()
    }

    /// The begun segment's payload is in place and the LLP checked it
    /// (`llp_ok`: its CRC, or true where it has none): account for it and
    /// deliver what it completes (of a batch: the oldest begun). A failed
    /// check: the segment is forgotten, with a batch's other begun segments
    /// (the stream fails), and nothing is delivered or reported here (the LLP
    /// reports its own error).
    pub fn finish_segment(&mut self, llp_ok: bool) -> Result<(), DdpError> {
        if !llp_ok {
            self.begun.clear();
            return Ok(());
        }
        let Some(b) = self.begun.pop_front() else {
            return Err(DdpError::new(
                TerminateCode::DDP_LOCAL_CATASTROPHIC,
                None,
                0,
                "finish without a begun segment".into(),
            ));
        };
        self.account(b.seq, b.meta, b.len)
    }

    /// Handle one DDP segment (header + payload) that the LLP received whole, `seq`
    /// being its position in the sender's order. Nothing is placed unless every
    /// check passes; on error the caller must treat the stream as erroneous. The
    /// payload is copied into place (counted: [`crate::ddp::SinkStats::octets_copied`]).
    pub fn on_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), DdpError> {
        let (head, payload) = split_segment(seg);
        let target = self.begin_alone(mem, seq, head, payload.len())?;
        let copied = place_whole(&target, payload, || self.begun_buffer());
        self.count_copied(copied);
        self.finish_segment(true)
    }
}

/// A whole segment as (header octets, rest): the header as long as its T bit says,
/// or all of a segment shorter than that.
pub fn split_segment(seg: &[u8]) -> (&[u8], &[u8]) {
    let hl = seg
        .first()
        .map_or(UNTAGGED_HDR_LEN, |&c| DdpControl(c).header_len());
    seg.split_at(hl.min(seg.len()))
}

/// Parse the header, with the DDP version check of RFC 5041 §7.1. A version
/// error's header is not echoed: its layout cannot be trusted.
/// `seg`: the header octets (or all of a shorter segment); `seg_len`: the whole
/// segment's length.
fn parse_header(seg: &[u8], seg_len: usize) -> Result<DdpHeader, DdpError> {
    let Some(&c) = seg.first() else {
        return Err(DdpError::new(
            TerminateCode::DDP_LOCAL_CATASTROPHIC,
            None,
            0,
            "empty DDP segment".into(),
        ));
    };
    let ctrl = DdpControl(c);
    if ctrl.dv() != DDP_VERSION {
        let code = if ctrl.tagged() {
            TerminateCode::DDP_TAGGED_INVALID_VERSION
        } else {
            TerminateCode::DDP_UNTAGGED_INVALID_VERSION
        };
        return Err(DdpError::new(
            code,
            None,
            seg_len,
            format!("DDP version {} (only 1 exists)", ctrl.dv()),
        ));
    }
    // No DDP code names a segment shorter than its header; it is a local
    // catastrophic error of the stream (the LLP should have caught it).
    DdpHeader::parse(seg).map_err(|_| {
        let need = ctrl.header_len();
        DdpError::new(
            TerminateCode::DDP_LOCAL_CATASTROPHIC,
            None,
            seg_len,
            format!("{seg_len}-octet segment is shorter than its {need}-octet DDP header"),
        )
    })
}

/// An untagged message's segments tile [0, length) in sender order: each starts
/// where the previous one ended (RFC 5041 §5.3 asks increasing MO of the Data
/// Source; siw `siw_send_check_ntoh` requires exactly this). An overlap or a gap
/// is an Invalid MO (1/2/0x04), so a message is never delivered with octets its
/// sender did not write, and no octet is placed twice.
fn not_tiling(qn: u32, msn: u32, mo: u32, at: u64) -> String {
    format!("QN {qn} MSN {msn}: segment at MO {mo}, but its earlier segments end at {at}")
}

/// Messages of one queue do not interleave in sender order: the Data Source
/// MUST transmit DDP Messages in the order they were submitted (RFC 5041 §5.3),
/// so while one is incomplete, a segment of another MSN of the same queue is an
/// invalid MSN, 1/2/0x03 (as siw `siw_send_check_ntoh`). Messages of different
/// queues, and tagged with untagged, may interleave: nothing about them is
/// ambiguous (siw too lets a Send interleave with a Write).
fn interleaved(qn: u32, msn: u32, in_progress: u32) -> String {
    format!("QN {qn} MSN {msn} starts before the last segment of MSN {in_progress}")
}

/// An untagged message keeps one RDMAP opcode in all its segments (RFC 5040 §4):
/// 0/2/0x06, unexpected in the current state (RFC 5041 §7.1).
fn other_opcode(qn: u32, msn: u32, ctrl: u8, first: u8) -> String {
    format!(
        "QN {qn} MSN {msn}: segment with RDMAP control {ctrl:#04x} in a message begun with {first:#04x}"
    )
}

fn order_error(e: OrderError, seg_len: usize) -> DdpError {
    let detail = match e {
        OrderError::Duplicate(s) => format!("LLP handed up segment {s} twice"),
        OrderError::OutOfWindow { seq, next } => {
            format!(
                "LLP handed up segment {seq} while {next} is missing: beyond the reorder window"
            )
        }
    };
    DdpError::new(TerminateCode::DDP_LOCAL_CATASTROPHIC, None, seg_len, detail)
}

/// Process one segment in sender order: complete messages and deliver them.
fn in_order(
    queues: &mut [UntaggedQueue],
    tagged: &mut Option<TaggedAcc>,
    deliveries: &mut VecDeque<Delivery>,
    stats: &mut SinkStats,
    m: SegMeta,
) -> Result<(), DdpError> {
    match m {
        SegMeta::Tagged {
            last,
            rsvd_ulp,
            stag,
            to,
            len,
        } => {
            tagged_continues(tagged.as_ref(), rsvd_ulp, stag, to).map_err(|(code, d)| {
                let hdr = TaggedHeader::new(last, rsvd_ulp, stag, to);
                DdpError::new(
                    code,
                    Some(DdpHeader::Tagged(hdr)),
                    TAGGED_HDR_LEN + len as usize,
                    d,
                )
            })?;
            let acc = tagged.get_or_insert(TaggedAcc {
                rsvd_ulp,
                stag,
                to,
                len: 0,
            });
            acc.len += u64::from(len);
            if last && let Some(acc) = tagged.take() {
                deliveries.push_back(Delivery::Tagged {
                    rsvd_ulp: acc.rsvd_ulp,
                    stag: acc.stag,
                    to: acc.to,
                    len: acc.len,
                });
                stats.messages_delivered += 1;
            }
            Ok(())
        }
        SegMeta::Untagged {
            last,
            rsvd_ulp,
            qn,
            msn,
            mo,
            len,
        } => {
            let hdr = DdpHeader::Untagged(UntaggedHeader::new(last, rsvd_ulp, qn, msn, mo));
            let bad = |code, detail: String| {
                DdpError::new(code, Some(hdr), UNTAGGED_HDR_LEN + len as usize, detail)
            };
            let invalid_mo = |detail| bad(TerminateCode::DDP_INVALID_MO, detail);
            // Validated on arrival; a message is only delivered after this segment.
            let q = &mut queues[qn as usize];
            if let Some(m) = q.in_progress.filter(|&m| m != msn) {
                return Err(bad(
                    TerminateCode::DDP_INVALID_MSN_RANGE,
                    interleaved(qn, msn, m),
                ));
            }
            let slot = q.slot(msn).ok_or_else(|| {
                invalid_mo(format!("segment of QN {qn} MSN {msn} follows its delivery"))
            })?;
            if slot.end.is_some() {
                return Err(invalid_mo(format!(
                    "segment of QN {qn} MSN {msn} follows its last segment"
                )));
            }
            if let Some(c) = slot.ctrl.filter(|&c| c != rsvd_ulp[0]) {
                return Err(bad(
                    TerminateCode::RDMAP_UNEXPECTED_OPCODE,
                    other_opcode(qn, msn, rsvd_ulp[0], c),
                ));
            }
            if u64::from(mo) != slot.ordered_bytes {
                return Err(invalid_mo(not_tiling(qn, msn, mo, slot.ordered_bytes)));
            }
            slot.ctrl = Some(rsvd_ulp[0]);
            slot.ordered_bytes += u64::from(len);
            if last {
                // The segments tiled [0, end) in sender order; the buffer was
                // checked to hold them, so `end` fits.
                slot.end = Some(slot.ordered_bytes as u32);
                slot.rsvd_ulp = rsvd_ulp;
            }
            q.in_progress = (!last).then_some(msn);
            if last {
                while let Some((msn, s)) = q.pop_complete() {
                    deliveries.push_back(Delivery::Untagged {
                        rsvd_ulp: s.rsvd_ulp,
                        qn,
                        msn,
                        len: s.end.unwrap_or(0),
                        buffer: s.buf,
                    });
                    stats.messages_delivered += 1;
                }
            }
            Ok(())
        }
    }
}

/// What in-order processing needs to know of one placed segment.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SegMeta {
    Tagged {
        last: bool,
        rsvd_ulp: u8,
        stag: u32,
        to: u64,
        len: u32,
    },
    Untagged {
        last: bool,
        rsvd_ulp: [u8; 5],
        qn: u32,
        msn: u32,
        mo: u32,
        len: u32,
    },
}

#[derive(Debug)]
pub(crate) enum OrderError {
    /// The sequence number was already seen (a duplicate or replay).
    Duplicate(SenderSeq),
    /// The sequence number is beyond the reorder window.
    OutOfWindow { seq: SenderSeq, next: SenderSeq },
}

/// Recovering the sender's order of segments that were placed out of order:
/// placement happens on arrival; the per-segment facts that delivery needs are
/// kept here until every earlier segment has arrived, then released in sender
/// order. The state is bounded by `max_reorder` entries.
#[derive(Debug)]
pub(crate) struct SenderOrder {
    /// Sequence number of `pending[0]`: the oldest segment not yet seen.
    next: SenderSeq,
    pending: VecDeque<Option<SegMeta>>,
    max_reorder: usize,
}

impl SenderOrder {
    pub(super) fn new(max_reorder: usize) -> Self {
        Self {
            next: 0,
            pending: VecDeque::new(),
            max_reorder,
        }
    }

    /// Sequence number of the oldest segment not yet seen.
    pub(super) fn next(&self) -> SenderSeq {
        self.next
    }

    /// Nothing arrived ahead of `next` (always so on an in-order LLP).
    pub(super) fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Check that `seq` may be accepted, before anything is placed.
    pub(super) fn check(&self, seq: SenderSeq) -> Result<(), OrderError> {
        if seq < self.next {
            return Err(OrderError::Duplicate(seq));
        }
        let off = seq - self.next;
        if off > self.max_reorder as u64 {
            return Err(OrderError::OutOfWindow {
                seq,
                next: self.next,
            });
        }
        if matches!(self.pending.get(off as usize), Some(Some(_))) {
            return Err(OrderError::Duplicate(seq));
        }
        Ok(())
    }

    /// Record a placed segment (after a successful [`Self::check`]) and call `f` for
    /// every segment that is now in sender order, oldest first.
    pub(super) fn arrive<E>(
        &mut self,
        seq: SenderSeq,
        meta: SegMeta,
        mut f: impl FnMut(SegMeta) -> Result<(), E>,
    ) -> Result<(), E> {
        let off = (seq - self.next) as usize;
        if off == 0 && self.pending.is_empty() {
            // In-order LLP fast path: nothing to remember.
            self.next += 1;
            return f(meta);
        }
        if self.pending.len() <= off {
            self.pending.resize(off + 1, None);
        }
        self.pending[off] = Some(meta);
        while let Some(Some(m)) = self.pending.front() {
            let m = *m;
            self.pending.pop_front();
            self.next += 1;
            f(m)?;
        }
        Ok(())
    }

    /// Segments placed but still waiting for an earlier one.
    pub(super) fn waiting(&self) -> usize {
        self.pending.iter().filter(|m| m.is_some()).count()
    }
}

/// A queue's refusal of a post, as the stream reports it.
fn refused(qn: u32, r: PostRefused) -> SourceError {
    match r {
        PostRefused::Depth(limit) => SourceError::RecvQueueFull { qn, limit },
        PostRefused::PoolFull(n) => SourceError::PoolFull(n),
        PostRefused::OutsideRegion => SourceError::OutsideRegion { qn },
    }
}
