//! Outgoing FPDUs as slices for a vectored write (RFC 5044 §4): small owned
//! pieces (ULPDU_Length, DDP header, Markers, PAD, CRC) around views of the message
//! payload, so the payload is never copied in user space. The CRC is computed over
//! the pieces in stream order, Markers included. Same octets as
//! [`rddp_wire::FpduEncoder::encode`] (tested below).

use bytes::Bytes;
use rddp_wire::crc::crc_wire_bytes;
use rddp_wire::mpa::marker::{Marker, at_marker, fpduptr, until_marker};
use rddp_wire::mpa::{MPA_CRC_LEN, pad_len};
use rddp_wire::{Crc32c, FpduEncoder};

/// One FPDU ready for the socket: write `parts` in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutFpdu {
    /// The FPDU's octets in order: header, payload, pad and CRC, Markers.
    pub parts: Vec<Bytes>,
}

impl OutFpdu {
    /// An FPDU already in one buffer.
    pub fn from_vec(v: Vec<u8>) -> Self {
        Self {
            parts: vec![Bytes::from(v)],
        }
    }
    /// Octets on the wire.
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }
    /// Whether it has no octet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// All octets in one buffer (tests, capture).
    pub fn to_vec(&self) -> Vec<u8> {
        self.parts.concat()
    }
}

/// Most octets of one owned piece: ULPDU_Length and the largest DDP header
/// (2 + 28), PAD and CRC (3 + 4), and the Markers that fall among them (4 each,
/// at most one per 512 octets of stream, RFC 5044 §4.3): under 64 in any run
/// between two payload pieces.
pub const SMALL_MAX: usize = 64;

/// A small owned run of octets, inline (no allocation per FPDU).
#[derive(Clone, PartialEq, Eq)]
pub struct Small {
    len: u8,
    buf: [u8; SMALL_MAX],
}

impl Small {
    /// `b` as a piece; `None` if it is longer than [`SMALL_MAX`].
    pub fn new(b: &[u8]) -> Option<Self> {
        let mut s = Self {
            len: 0,
            buf: [0; SMALL_MAX],
        };
        s.buf.get_mut(..b.len())?.copy_from_slice(b);
        s.len = b.len() as u8;
        Some(s)
    }
}

impl std::ops::Deref for Small {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for Small {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Small").field(&&self[..]).finish()
    }
}

/// One piece of an FPDU laid out over a borrowed payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// ULPDU_Length, header, Markers, PAD, CRC (owned, small, inline).
    Own(Small),
    /// This range of the payload.
    Payload(std::ops::Range<usize>),
}

/// An FPDU as pieces over a payload the caller holds (e.g. a locked region):
/// write them in order; [`Piece::Payload`] ranges index that payload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FpduLayout {
    /// The FPDU's pieces in wire order.
    pub pieces: Vec<Piece>,
}

impl FpduLayout {
    /// The pieces as slices for one vectored write.
    pub fn slices<'a>(&'a self, payload: &'a [u8]) -> Vec<std::io::IoSlice<'a>> {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Own(b) => std::io::IoSlice::new(b),
                Piece::Payload(r) => std::io::IoSlice::new(&payload[r.clone()]),
            })
            .collect()
    }

    /// Octets on the wire.
    pub fn len(&self) -> usize {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Own(b) => b.len(),
                Piece::Payload(r) => r.len(),
            })
            .sum()
    }

    /// Whether it has no octet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

struct Builder<'a> {
    enc: &'a mut FpduEncoder,
    parts: &'a mut Vec<Piece>,
    small: [u8; SMALL_MAX],
    small_len: usize,
    /// `small[crc_from..small_len]`: covered octets not yet fed to the CRC.
    /// They go in one update where they end (before the payload, before an
    /// uncovered piece, at the end): crc-fast costs about 70 instructions a
    /// call whatever its length, and the ULPDU_LENGTH, header and PAD are
    /// each a few octets.
    crc_from: usize,
    digest: Crc32c,
    len_off: Option<u32>,
}

impl Builder<'_> {
    fn advance(&mut self, n: usize) {
        // Pieces are < 2^16 octets; offsets wrap by design.
        self.enc.offset = self.enc.offset.wrapping_add(n as u32);
    }
    fn small(&mut self, b: &[u8], covered: bool) {
        if !covered {
            self.crc_pending();
        }
        for c in b.chunks(SMALL_MAX) {
            if self.small_len + c.len() > SMALL_MAX {
                // Not reached (see SMALL_MAX); stays correct if it were.
                self.flush_small();
            }
            let at = self.small_len;
            self.small[at..at + c.len()].copy_from_slice(c);
            self.small_len += c.len();
        }
        if !covered {
            self.crc_from = self.small_len;
        }
        self.advance(b.len());
    }
    /// Feed the covered small octets not yet in the CRC to it.
    fn crc_pending(&mut self) {
        if self.crc_from < self.small_len {
            self.digest
                .update(&self.small[self.crc_from..self.small_len]);
            self.crc_from = self.small_len;
        }
    }
    fn flush_small(&mut self) {
        self.crc_pending();
        if self.small_len > 0 {
            let n = std::mem::take(&mut self.small_len);
            self.crc_from = 0;
            if let Some(p) = Small::new(&self.small[..n]) {
                self.parts.push(Piece::Own(p));
            }
        }
    }
    fn marker_if_due(&mut self) {
        if self.enc.markers && at_marker(self.enc.offset) {
            let ptr = self.len_off.map_or(0, |l| fpduptr(self.enc.offset, l));
            self.small(&Marker::new(ptr).to_bytes(), true);
        }
    }
    /// Room before the next Marker (unbounded without Markers).
    fn room(&self) -> usize {
        if self.enc.markers {
            until_marker(self.enc.offset)
        } else {
            usize::MAX
        }
    }
    fn write_small(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            self.marker_if_due();
            let n = self.room().min(b.len());
            self.small(&b[..n], true);
            b = &b[n..];
        }
    }
    fn write_payload(&mut self, p: &[u8]) {
        let mut at = 0;
        while at < p.len() {
            self.marker_if_due();
            let n = self.room().min(p.len() - at);
            // The small octets before it first (flush_small feeds them).
            self.flush_small();
            self.digest.update(&p[at..at + n]);
            self.advance(n);
            self.parts.push(Piece::Payload(at..at + n));
            at += n;
        }
    }
}

/// Build one FPDU of `header ++ payload` (a DDP segment of at most 65535 octets,
/// checked by the caller) and advance `enc.offset`.
pub fn build_fpdu(enc: &mut FpduEncoder, header: &[u8], payload: Bytes) -> OutFpdu {
    let layout = layout_fpdu(enc, header, &payload);
    OutFpdu {
        parts: layout
            .pieces
            .into_iter()
            .map(|p| match p {
                Piece::Own(b) => Bytes::copy_from_slice(&b),
                Piece::Payload(r) => payload.slice(r),
            })
            .collect(),
    }
}

/// Lay out one FPDU of `header ++ payload` over the caller's `payload` (the CRC
/// is computed over it now: the caller writes exactly these octets) and advance
/// `enc.offset`.
pub fn layout_fpdu(enc: &mut FpduEncoder, header: &[u8], payload: &[u8]) -> FpduLayout {
    let mut out = FpduLayout::default();
    layout_fpdu_into(enc, header, payload, &mut out);
    out
}

/// [`layout_fpdu`] into `out`, reusing its allocation (a writer that lays out
/// FPDUs all the time allocates nothing per FPDU).
pub fn layout_fpdu_into(
    enc: &mut FpduEncoder,
    header: &[u8],
    payload: &[u8],
    out: &mut FpduLayout,
) {
    out.pieces.clear();
    if !enc.markers && MPA_LEN + header.len() + 3 + MPA_CRC_LEN <= SMALL_MAX {
        layout_plain(enc, header, payload, out);
    } else {
        layout_built(enc, header, payload, out);
    }
}

/// [`layout_fpdu_into`] by the general builder (Markers, any header).
fn layout_built(enc: &mut FpduEncoder, header: &[u8], payload: &[u8], out: &mut FpduLayout) {
    let ulpdu_len = header.len() + payload.len();
    let mut b = Builder {
        enc,
        parts: &mut out.pieces,
        small: [0; SMALL_MAX],
        small_len: 0,
        crc_from: 0,
        digest: Crc32c::new(),
        len_off: None,
    };
    b.marker_if_due();
    b.len_off = Some(b.enc.offset);
    b.write_small(&(ulpdu_len as u16).to_be_bytes());
    b.write_small(header);
    b.write_payload(payload);
    b.write_small(&[0u8; 3][..pad_len(ulpdu_len)]);
    b.marker_if_due();
    b.crc_pending();
    let crc = if b.enc.crc { b.digest.finalize() } else { 0 };
    b.small(&crc_wire_bytes(crc), false);
    b.flush_small();
}

/// Octets of ULPDU_LENGTH.
const MPA_LEN: usize = 2;

/// An FPDU without Markers whose owned octets lie on the stack: its head
/// (ULPDU_LENGTH and the DDP header) and its trailer (PAD and CRC, RFC 5044
/// §4.1), to be written around the payload as three slices. What
/// [`layout_fpdu_into`] lays out for it, without the layout: a writer that
/// sends one FPDU at a time (a ping-pong) builds nothing else.
#[derive(Debug, Clone, Copy)]
pub struct PlainFpdu {
    head: [u8; SMALL_MAX],
    head_len: u8,
    trailer: [u8; 3 + MPA_CRC_LEN],
    trailer_len: u8,
    payload_len: usize,
}

impl PlainFpdu {
    /// The FPDU of `header` and `payload` at `enc`'s offset, `enc` advanced
    /// past it; `None` (and `enc` as it was) with Markers, or a header too
    /// long for one small piece (then [`layout_fpdu_into`] lays it out).
    pub fn new(enc: &mut FpduEncoder, header: &[u8], payload: &[u8]) -> Option<Self> {
        if enc.markers || MPA_LEN + header.len() + 3 + MPA_CRC_LEN > SMALL_MAX {
            return None;
        }
        let ulpdu_len = header.len() + payload.len();
        let pad = pad_len(ulpdu_len);
        let mut head = [0u8; SMALL_MAX];
        head[..MPA_LEN].copy_from_slice(&(ulpdu_len as u16).to_be_bytes());
        head[MPA_LEN..MPA_LEN + header.len()].copy_from_slice(header);
        let head_len = MPA_LEN + header.len();
        let crc = if enc.crc {
            let mut d = Crc32c::new();
            d.update(&head[..head_len]);
            if !payload.is_empty() {
                d.update(payload);
            }
            d.update(&[0u8; 3][..pad]);
            d.finalize()
        } else {
            0
        };
        let mut trailer = [0u8; 3 + MPA_CRC_LEN];
        trailer[pad..pad + MPA_CRC_LEN].copy_from_slice(&crc_wire_bytes(crc));
        let wire = MPA_LEN + ulpdu_len + pad + MPA_CRC_LEN;
        // Offsets wrap by design (they only place Markers).
        enc.offset = enc.offset.wrapping_add(wire as u32);
        Some(Self {
            head,
            head_len: head_len as u8,
            trailer,
            trailer_len: (pad + MPA_CRC_LEN) as u8,
            payload_len: payload.len(),
        })
    }

    /// ULPDU_LENGTH and the DDP header.
    pub fn head(&self) -> &[u8] {
        &self.head[..usize::from(self.head_len)]
    }

    /// PAD and CRC.
    pub fn trailer(&self) -> &[u8] {
        &self.trailer[..usize::from(self.trailer_len)]
    }

    /// Octets on the wire.
    pub fn len(&self) -> usize {
        usize::from(self.head_len) + self.payload_len + usize::from(self.trailer_len)
    }

    /// Never: an FPDU has at least its head and CRC.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// [`layout_fpdu_into`] without Markers, the same pieces as the general
/// builder lays out: ULPDU_LENGTH and header, the payload, PAD and CRC (RFC
/// 5044 §4.1; all in one piece for an empty payload). Laid out directly: the
/// builder's Marker checks and small-piece bookkeeping cost more than the rest
/// of a small FPDU's layout.
fn layout_plain(enc: &mut FpduEncoder, header: &[u8], payload: &[u8], out: &mut FpduLayout) {
    let Some(f) = PlainFpdu::new(enc, header, payload) else {
        // The caller checked: no Markers, a header that fits.
        return layout_built(enc, header, payload, out);
    };
    // Both fit a Small: the head was checked, the trailer is at most 7 octets.
    let small = |b: &[u8]| Piece::Own(Small::new(b).unwrap_or_else(|| unreachable!()));
    if payload.is_empty() {
        let mut own = [0u8; SMALL_MAX];
        let (h, t) = (f.head(), f.trailer());
        own[..h.len()].copy_from_slice(h);
        own[h.len()..h.len() + t.len()].copy_from_slice(t);
        out.pieces.push(small(&own[..h.len() + t.len()]));
    } else {
        out.pieces.push(small(f.head()));
        out.pieces.push(Piece::Payload(0..payload.len()));
        out.pieces.push(small(f.trailer()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn same_octets_as_the_wire_encoder(off in 0u32..2048, hdr in 14usize..=18,
                                           len in 0usize..3000, crc: bool, markers: bool) {
            let off = off * 4;
            let seg: Vec<u8> = (0..hdr + len).map(|i| i as u8).collect();
            let mut a = FpduEncoder { crc, markers, offset: off };
            let mut want = Vec::new();
            a.encode(&seg, &mut want).unwrap();
            let mut b = FpduEncoder { crc, markers, offset: off };
            let got = build_fpdu(&mut b, &seg[..hdr], Bytes::copy_from_slice(&seg[hdr..]));
            prop_assert_eq!(got.to_vec(), want);
            prop_assert_eq!(a.offset, b.offset);
        }
    }

    proptest! {
        /// Without Markers the direct layout gives the builder's very pieces
        /// (the writer's partial-write bookkeeping goes by pieces).
        #[test]
        fn the_plain_layout_is_the_builders(off in 0u32..4096, hdr in 14usize..=18,
                                            len in prop_oneof![Just(0usize), 0usize..300],
                                            crc: bool) {
            let header: Vec<u8> = (0..hdr).map(|i| i as u8).collect();
            let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let (mut a, mut b) = (FpduLayout::default(), FpduLayout::default());
            let mut ea = FpduEncoder { crc, markers: false, offset: off };
            let mut eb = ea;
            layout_plain(&mut ea, &header, &payload, &mut a);
            layout_built(&mut eb, &header, &payload, &mut b);
            prop_assert_eq!(a, b);
            prop_assert_eq!(ea.offset, eb.offset);
        }
    }

    proptest! {
        /// A plain FPDU's head, payload and trailer are the wire encoder's
        /// octets; with Markers there is none and the encoder is untouched.
        #[test]
        fn a_plain_fpdu_is_the_wire_encoders(off in 0u32..4096, hdr in 14usize..=18,
                                             len in 0usize..3000, crc: bool, markers: bool) {
            let seg: Vec<u8> = (0..hdr + len).map(|i| (i * 3) as u8).collect();
            let mut a = FpduEncoder { crc, markers, offset: off * 4 };
            let mut b = a;
            let got = PlainFpdu::new(&mut b, &seg[..hdr], &seg[hdr..]);
            if markers {
                prop_assert!(got.is_none());
                prop_assert_eq!(b.offset, a.offset);
            } else {
                let f = got.unwrap();
                let mut want = Vec::new();
                a.encode(&seg, &mut want).unwrap();
                prop_assert_eq!([f.head(), &seg[hdr..], f.trailer()].concat(), want.clone());
                prop_assert_eq!(f.len(), want.len());
                prop_assert_eq!(a.offset, b.offset);
            }
        }
    }

    #[test]
    fn a_reused_layout_keeps_its_allocation_and_lays_out_the_same_octets() {
        let mut a = FpduEncoder::new(true, false);
        let mut b = FpduEncoder::new(true, false);
        let mut out = FpduLayout::default();
        let mut at = None;
        for len in [64usize, 10, 64, 3000, 1] {
            let payload = vec![len as u8; len];
            layout_fpdu_into(&mut a, &[0x41; 14], &payload, &mut out);
            let want = layout_fpdu(&mut b, &[0x41; 14], &payload);
            assert_eq!(out, want, "payload {len}");
            assert_eq!(a.offset, b.offset);
            // Header and trailer are inline: the only allocation is the list
            // of pieces, and a reused layout keeps it.
            assert!(
                out.pieces
                    .iter()
                    .all(|p| !matches!(p, Piece::Own(s) if s.len() > SMALL_MAX))
            );
            let p = out.pieces.as_ptr();
            assert_eq!(
                *at.get_or_insert(p),
                p,
                "payload {len}: the pieces were reallocated"
            );
        }
    }

    #[test]
    fn payload_is_not_copied() {
        let payload = Bytes::from(vec![9u8; 4000]);
        let mut e = FpduEncoder::new(true, true);
        let f = build_fpdu(&mut e, &[0x41; 14], payload.clone());
        // Every payload piece points into the original allocation.
        let base = payload.as_ptr() as usize;
        let inside = f
            .parts
            .iter()
            .filter(|p| (p.as_ptr() as usize) >= base && (p.as_ptr() as usize) < base + 4000)
            .map(|p| p.len())
            .sum::<usize>();
        assert_eq!(inside, 4000);
    }
}
