//! Direct placement on receive (issue 3 point 4), sans-IO half: for a tagged FPDU
//! whose header has arrived but whose payload has not, validate the segment
//! through the DDP sink from the header alone and tell the driver which region
//! octets to read the payload into; then check the CRC over the placed octets.
//!
//! Only without Markers in the receive direction (Markers would interleave with
//! the payload) and only between FPDUs. If the CRC fails, the octets already in
//! the region are undefined (spec §4.3): nothing is delivered, a Terminate
//! 2/0/0x02 goes out and the connection closes.

use super::conn::FpduConn;
use super::errors::terminate_for_wire;
use rddp_proto::mem::{MemoryTable, Stag};
use rddp_wire::crc::crc_from_wire;
use rddp_wire::ddp::TAGGED_HDR_LEN;
use rddp_wire::mpa::{MPA_CRC_LEN, MPA_HDR_LEN, pad_len};
use rddp_wire::{Crc32c, DdpControl, DdpHeader, WireError};

/// Octets of an FPDU before a tagged payload: ULPDU_Length + tagged DDP header.
pub const DIRECT_HEAD: usize = MPA_HDR_LEN + TAGGED_HDR_LEN;

/// The driver's next reads: payload octets `start..end` of region `stag`'s data,
/// then `trailer` octets (PAD + CRC) for [`FpduConn::direct_finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectRead {
    pub stag: Stag,
    pub start: usize,
    pub end: usize,
    pub trailer: usize,
}

/// What [`FpduConn::direct_begin`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectStart {
    /// Not a case for direct placement: feed the octets to `on_bytes`.
    No,
    /// `consumed` octets of the input were used (header and any payload already
    /// read, copied into the region); read the rest as told.
    Read { consumed: usize, read: DirectRead },
    /// The header was refused (a Terminate is queued; the connection is dead).
    Failed,
}

/// An FPDU being placed directly.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub head: [u8; DIRECT_HEAD],
    pub stag: Stag,
    pub offset: usize,
    pub len: usize,
    pub pad: usize,
}

impl Pending {
    /// CRC over ULPDU_Length, header, the payload where it now lies, and PAD.
    pub fn crc_ok(&self, mem: &MemoryTable, trailer: &[u8]) -> bool {
        let Some(r) = mem.region(self.stag) else {
            return false;
        };
        let data = r.data();
        let Some(payload) = data.get(self.offset..self.offset + self.len) else {
            return false;
        };
        let (pad, crc) = trailer.split_at(self.pad.min(trailer.len()));
        let Ok(crc) = <[u8; MPA_CRC_LEN]>::try_from(crc) else {
            return false;
        };
        let mut d = Crc32c::new();
        d.update(&self.head);
        d.update(payload);
        d.update(pad);
        d.finalize() == crc_from_wire(crc)
    }
}

/// Octets at the start of `data` that are whole FPDUs (scanning ULPDU_Length
/// fields only). An impossible length ends the scan "whole" so that `on_bytes`
/// reports it.
pub(crate) fn whole_prefix(data: &[u8], max_ulpdu: usize) -> usize {
    let mut i = 0;
    while let Some(b) = data.get(i..i + MPA_HDR_LEN) {
        let l = usize::from(u16::from_be_bytes([b[0], b[1]]));
        if !(TAGGED_HDR_LEN..=max_ulpdu).contains(&l) {
            return data.len();
        }
        let total = MPA_HDR_LEN + l + pad_len(l) + MPA_CRC_LEN;
        if i + total > data.len() {
            break;
        }
        i += total;
    }
    i
}

/// The header facts direct placement needs, if `head` starts a tagged FPDU whose
/// payload is not all in `head`: (ULPDU_Length, payload length).
pub(crate) fn tagged_partial(head: &[u8]) -> Option<(usize, usize)> {
    if head.len() < DIRECT_HEAD || !DdpControl(head[2]).tagged() {
        return None;
    }
    let l = usize::from(u16::from_be_bytes([head[0], head[1]]));
    let payload = l.checked_sub(TAGGED_HDR_LEN)?;
    (payload > 0 && head.len() < DIRECT_HEAD + payload).then_some((l, payload))
}

impl FpduConn {
    /// Payload octets placed straight from the socket so far.
    pub fn direct_bytes(&self) -> u64 {
        self.direct_bytes
    }

    /// Whether the driver may use direct placement now: established, no Markers
    /// in the receive direction, between FPDUs, alive.
    pub fn direct_capable(&self) -> bool {
        !self.dead
            && self.established
            && self.rtr_wait.is_none()
            && self.direct.is_none()
            && self.rx.direct_ok()
    }

    /// Octets at the start of `data` forming whole FPDUs (for `on_bytes`); the
    /// rest is a partial FPDU the driver may place directly.
    pub fn whole_prefix(&self, data: &[u8]) -> usize {
        whole_prefix(data, self.rx.max_ulpdu())
    }

    /// `head` starts a partial FPDU (at least [`DIRECT_HEAD`] octets, not the whole
    /// FPDU). If it is a tagged segment with payload, validate it with the DDP
    /// sink, copy any payload octets already in `head` into the region, and tell
    /// the driver where to read the rest.
    pub fn direct_begin(&mut self, mem: &MemoryTable, head: &[u8]) -> DirectStart {
        if !self.direct_capable() {
            return DirectStart::No;
        }
        let Some((ulpdu_len, len)) = tagged_partial(head) else {
            return DirectStart::No;
        };
        if ulpdu_len > self.rx.max_ulpdu() {
            let e = WireError::UlpduLength {
                len: ulpdu_len as u16,
                min: DIRECT_HEAD - 2,
                max: self.rx.max_ulpdu(),
            };
            self.fail_local(terminate_for_wire(&e), e.to_string());
            return DirectStart::Failed;
        }
        let target = match self
            .stream
            .direct_target(mem, self.rx_seq, &head[2..DIRECT_HEAD], len)
        {
            Ok(Some(t)) => t,
            Ok(None) => return DirectStart::No,
            Err(_) => {
                self.ddp_failed();
                return DirectStart::Failed;
            }
        };
        let have = head.len() - DIRECT_HEAD;
        if let Some(r) = mem.region(target.stag) {
            r.data_mut()[target.offset..target.offset + have].copy_from_slice(&head[DIRECT_HEAD..]);
        }
        let mut h = [0u8; DIRECT_HEAD];
        h.copy_from_slice(&head[..DIRECT_HEAD]);
        let pad = rddp_wire::pad_len(ulpdu_len);
        self.direct = Some(Pending {
            head: h,
            stag: target.stag,
            offset: target.offset,
            len,
            pad,
        });
        DirectStart::Read {
            consumed: head.len(),
            read: DirectRead {
                stag: target.stag,
                start: target.offset + have,
                end: target.offset + len,
                trailer: pad + rddp_wire::mpa::MPA_CRC_LEN,
            },
        }
    }

    /// The payload is in the region and `trailer` (PAD + CRC) has arrived: check
    /// the CRC over the placed octets and complete the segment, or send 2/0/0x02.
    pub fn direct_finish(&mut self, mem: &MemoryTable, trailer: &[u8]) {
        let Some(p) = self.direct.take() else {
            return;
        };
        if self.neg.crc && !p.crc_ok(mem, trailer) {
            let e = WireError::CrcMismatch {
                wire: 0,
                computed: 0,
            };
            self.fail_local(
                terminate_for_wire(&e),
                "MPA CRC mismatch on a directly placed FPDU (placed octets undefined)".into(),
            );
            return;
        }
        let Ok(DdpHeader::Tagged(hdr)) = DdpHeader::parse(&p.head[2..]) else {
            return self.ddp_failed();
        };
        if self.stream.direct_placed(self.rx_seq, &hdr, p.len).is_err() {
            return self.ddp_failed();
        }
        self.rx_seq += 1;
        self.may_send = true;
        self.direct_bytes += p.len as u64;
        while let Some(d) = self.stream.poll_delivery() {
            self.raw.push(d);
        }
        self.sort_deliveries();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rddp_wire::FpduEncoder;

    #[test]
    fn prefix_and_partial() {
        let mut enc = FpduEncoder::new(true, false);
        let mut w = Vec::new();
        let seg = |n: usize| {
            let mut v = rddp_wire::TaggedHeader::new(true, 0x40, 1, 0)
                .to_bytes()
                .to_vec();
            v.resize(14 + n, 7);
            v
        };
        enc.encode(&seg(10), &mut w).unwrap();
        let first = w.len();
        enc.encode(&seg(100), &mut w).unwrap();
        assert_eq!(whole_prefix(&w, 1000), w.len());
        assert_eq!(whole_prefix(&w[..w.len() - 1], 1000), first);
        assert_eq!(whole_prefix(&w[..first + 1], 1000), first);
        assert_eq!(whole_prefix(&[0, 13, 0], 1000), 3);
        assert_eq!(tagged_partial(&w[first..first + 16]), Some((114, 100)));
        assert_eq!(tagged_partial(&w[first..first + 115]), Some((114, 100)));
        assert_eq!(tagged_partial(&w[first..first + 116]), None);
        assert_eq!(tagged_partial(&w[first..first + 15]), None);
    }
}
