//! The DDP Data Source: segmentation (RFC 5041 §5).

use super::Payload;
use super::error::SourceError;
use crate::stats::SourceStats;
use rddp_wire::ddp::{TAGGED_HDR_LEN, UNTAGGED_HDR_LEN};
use rddp_wire::{DdpHeader, TaggedHeader, UntaggedHeader};
use std::collections::VecDeque;

/// One segment for the LLP: a header and a view of the message payload (no copy;
/// a region lease is read when the LLP writes the segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutSegment {
    /// The segment's DDP header (tagged or untagged, RFC 5041 §4).
    pub header: DdpHeader,
    /// The segment's payload: at most the MULPDU less the header.
    pub payload: Payload,
}

impl OutSegment {
    /// Header plus payload octets, as one DDP segment.
    pub fn len(&self) -> usize {
        self.header.len() + self.payload.len()
    }

    /// Always false: a segment has at least its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Append the segment's octets to `out` (a lease's octets are copied: the
    /// caller counts them, [`super::DdpStream::count_copied`]).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + self.header.len(), 0);
        // The slice was sized for the header just above.
        let _ = self.header.emit(&mut out[start..]);
        self.payload.with(|p| out.extend_from_slice(p));
    }

    /// The segment's octets, copied (tests and diagnostics).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        self.write_to(&mut v);
        v
    }
}

#[derive(Debug)]
enum Target {
    Tagged {
        rsvd_ulp: u8,
        stag: u32,
        to: u64,
    },
    Untagged {
        rsvd_ulp: [u8; 5],
        qn: u32,
        msn: u32,
    },
}

#[derive(Debug)]
struct OutMessage {
    target: Target,
    payload: Payload,
    /// Octets of the payload already handed to the LLP.
    sent: usize,
    /// Whether at least one segment went out (a zero-length message needs one).
    started: bool,
}

/// Cuts messages into segments of at most the current MULPDU, in submission order.
#[derive(Debug)]
pub struct DdpSource {
    mulpdu: usize,
    /// Next MSN per QN; starts at 1, wraps 0xFFFFFFFF -> 0 (RFC 5041 §4.3).
    next_msn: Vec<u32>,
    queue: VecDeque<OutMessage>,
    stats: SourceStats,
}

impl DdpSource {
    /// A source for `num_qns` untagged queues, each starting at MSN 1 (RFC 5041
    /// §4.3), cutting segments of at most `mulpdu` octets; refused if `mulpdu`
    /// cannot hold an untagged header and one octet.
    pub fn new(num_qns: u32, mulpdu: usize) -> Result<Self, SourceError> {
        check_mulpdu(mulpdu)?;
        Ok(Self {
            mulpdu,
            next_msn: vec![1; num_qns as usize],
            queue: VecDeque::new(),
            stats: SourceStats::default(),
        })
    }

    /// The MULPDU changed: later segments use the new value; segments already handed
    /// to the LLP are never re-cut (RFC 5041).
    pub fn set_mulpdu(&mut self, mulpdu: usize) -> Result<(), SourceError> {
        check_mulpdu(mulpdu)?;
        self.mulpdu = mulpdu;
        Ok(())
    }

    /// The current MULPDU: the largest segment cut, header included.
    pub fn mulpdu(&self) -> usize {
        self.mulpdu
    }

    /// Queue a tagged message for (`stag`, `to`).
    pub fn submit_tagged(
        &mut self,
        rsvd_ulp: u8,
        stag: u32,
        to: u64,
        payload: impl Into<Payload>,
    ) -> Result<(), SourceError> {
        let payload = payload.into();
        let len = check_len(&payload)?;
        if to.checked_add(len).is_none() {
            return Err(SourceError::ToWrap { to, len });
        }
        self.push(Target::Tagged { rsvd_ulp, stag, to }, payload);
        Ok(())
    }

    /// Queue an untagged message on `qn`; returns the MSN it takes.
    pub fn submit_untagged(
        &mut self,
        qn: u32,
        rsvd_ulp: [u8; 5],
        payload: impl Into<Payload>,
    ) -> Result<u32, SourceError> {
        let payload = payload.into();
        check_len(&payload)?;
        let count = self.next_msn.len() as u32;
        let slot = self
            .next_msn
            .get_mut(qn as usize)
            .ok_or(SourceError::InvalidQn { qn, count })?;
        let msn = *slot;
        *slot = msn.wrapping_add(1);
        self.push(Target::Untagged { rsvd_ulp, qn, msn }, payload);
        Ok(msn)
    }

    fn push(&mut self, target: Target, payload: Payload) {
        self.queue.push_back(OutMessage {
            target,
            payload,
            sent: 0,
            started: false,
        });
    }

    /// The next segment for the LLP, if any. Segments leave in submission order, each
    /// message's in offset order, L=1 only on (and after all others of) the last.
    pub fn poll_segment(&mut self) -> Option<OutSegment> {
        let msg = self.queue.front_mut()?;
        let room = self.mulpdu
            - match msg.target {
                Target::Tagged { .. } => TAGGED_HDR_LEN,
                Target::Untagged { .. } => UNTAGGED_HDR_LEN,
            };
        let off = msg.sent;
        let n = room.min(msg.payload.len() - off);
        let last = off + n == msg.payload.len();
        let header = match msg.target {
            Target::Tagged { rsvd_ulp, stag, to } => {
                DdpHeader::Tagged(TaggedHeader::new(last, rsvd_ulp, stag, to + off as u64))
            }
            // MO fits: the message length was checked below 2^32 on submission.
            Target::Untagged { rsvd_ulp, qn, msn } => {
                DdpHeader::Untagged(UntaggedHeader::new(last, rsvd_ulp, qn, msn, off as u32))
            }
        };
        self.stats.segments_sent += 1;
        self.stats.octets_sent += n as u64;
        if !last {
            let payload = msg.payload.slice(off..off + n);
            msg.sent += n;
            msg.started = true;
            return Some(OutSegment { header, payload });
        }
        self.stats.messages_sent += 1;
        let msg = self.queue.pop_front()?;
        // A message in one segment hands its payload over as it is (a
        // region lease not cloned and dropped: two locked instructions).
        let payload = if off == 0 {
            msg.payload
        } else {
            msg.payload.slice(off..off + n)
        };
        Some(OutSegment { header, payload })
    }

    /// What was handed to the LLP so far.
    pub fn stats(&self) -> SourceStats {
        self.stats
    }

    /// The LLP copied `n` octets of a region lease in user space.
    pub fn count_copied(&mut self, n: usize) {
        self.stats.octets_copied += n as u64;
    }

    /// Messages (whole or partly sent) still queued.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Whether a message is partly handed to the LLP (some segments out, not L=1).
    pub fn mid_message(&self) -> bool {
        self.queue.front().is_some_and(|m| m.started)
    }

    /// Drop every queued message (abortive teardown); returns how many were dropped.
    pub fn discard(&mut self) -> usize {
        let n = self.queue.len();
        self.queue.clear();
        n
    }

    #[cfg(test)]
    pub(crate) fn set_next_msn(&mut self, qn: u32, msn: u32) {
        self.next_msn[qn as usize] = msn;
    }
}

fn check_len(payload: &Payload) -> Result<u64, SourceError> {
    let len = payload.len() as u64;
    if len > u64::from(u32::MAX) {
        return Err(SourceError::MessageTooLong(len));
    }
    Ok(len)
}

fn check_mulpdu(mulpdu: usize) -> Result<(), SourceError> {
    if mulpdu <= UNTAGGED_HDR_LEN {
        return Err(SourceError::MulpduTooSmall(mulpdu));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn msn_starts_at_one_and_wraps_to_zero() {
        let mut s = DdpSource::new(3, 100).unwrap();
        assert_eq!(s.submit_untagged(0, [0; 5], Bytes::new()).unwrap(), 1);
        assert_eq!(s.submit_untagged(1, [0; 5], Bytes::new()).unwrap(), 1);
        s.set_next_msn(0, 0xFFFF_FFFF);
        assert_eq!(
            s.submit_untagged(0, [0; 5], Bytes::new()).unwrap(),
            0xFFFF_FFFF
        );
        assert_eq!(s.submit_untagged(0, [0; 5], Bytes::new()).unwrap(), 0);
        assert_eq!(s.submit_untagged(0, [0; 5], Bytes::new()).unwrap(), 1);
    }
}
