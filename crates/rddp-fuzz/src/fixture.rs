//! What the targets share: memory regions with guard octets and a check that
//! nothing outside a writable region changed, and a generator of DDP/RDMAP
//! segments that are near valid (real STags, TOs at the bounds, small MSNs)
//! as often as they are garbage.

use crate::input::Input;
use rddp_proto::mem::{Access, MemoryTable, PdId, Stag, StagScope, StreamId};
use rddp_wire::read_request::ReadRequestHeader;
use rddp_wire::{Opcode, RdmapControl, TaggedHeader, UntaggedHeader};

/// The protection domain and stream of the engine under test.
pub const PD: PdId = PdId(1);
/// The stream of the engine under test.
pub const STREAM: StreamId = StreamId(7);

/// Which regions the peer may legitimately write.
pub const WRITABLE: [bool; REGIONS] = [true, false, false, false, false, true];
/// How many regions the fixture registers.
pub const REGIONS: usize = 6;

/// Six regions: 0 writable (PD scope), 1 read-only, 2 writable in another PD,
/// 3 writable but bound to another stream, 4 writable but invalidated,
/// 5 writable and bound to our stream.
#[derive(Debug, Clone)]
pub struct Regions {
    /// Each region's STag.
    pub stags: [u32; REGIONS],
    /// Each region's base TO.
    pub base: [u64; REGIONS],
    /// Contents at registration (what the non-writable ones must keep).
    pub before: Vec<Vec<u8>>,
}

impl Regions {
    /// Register the six regions in `mem`; sizes and TOs come from `input`
    /// (including TOs that end exactly at 2^64).
    pub fn new(mem: &MemoryTable, input: &mut Input<'_>, stream: StreamId) -> Self {
        let mut stags = [0; REGIONS];
        let mut base = [0; REGIONS];
        let mut before = Vec::new();
        let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
        for i in 0..REGIONS {
            let len = 1 + usize::from(input.u8());
            let b = match input.u8() & 3 {
                0 => 0x1000,
                1 => 0,
                2 => u64::MAX - len as u64,
                _ => 0x1000 + u64::from(input.u16()),
            };
            let (pd, scope, access) = match i {
                1 => (PD, StagScope::Pd, Access::REMOTE_READ),
                2 => (PdId(2), StagScope::Pd, rw),
                3 => (PD, StagScope::Stream(StreamId(stream.0 + 1)), rw),
                5 => (PD, StagScope::Stream(stream), rw),
                _ => (PD, StagScope::Pd, rw),
            };
            let data: Vec<u8> = (0..len)
                .map(|k| (k as u8).wrapping_mul(7) ^ i as u8)
                .collect();
            let s = mem
                .register(pd, scope, access, b, data.clone())
                .expect("fixture region registers");
            if i == 4 {
                mem.invalidate(s).expect("fixture region invalidates");
            }
            stags[i] = s.0;
            base[i] = b;
            before.push(data);
        }
        Self {
            stags,
            base,
            before,
        }
    }

    /// Which region `stag` names, if any.
    pub fn index_of(&self, stag: u32) -> Option<usize> {
        self.stags.iter().position(|&s| s == stag)
    }

    /// A model of the regions' memory, starting from the registered contents.
    pub fn model(&self) -> Vec<Vec<u8>> {
        self.before.clone()
    }

    /// Guards intact everywhere, non-writable regions unchanged, and (if given)
    /// the writable ones equal to `model`.
    pub fn check(&self, mem: &MemoryTable, model: Option<&[Vec<u8>]>) {
        assert!(mem.all_guards_intact(), "a guard octet was overwritten");
        for i in 0..REGIONS {
            let r = mem
                .region(Stag(self.stags[i]))
                .expect("fixture region exists");
            if !WRITABLE[i] {
                assert_eq!(r.data(), &self.before[i][..], "region {i} must not change");
            } else if let Some(m) = model {
                assert_eq!(r.data(), &m[i][..], "region {i} differs from the model");
            }
        }
    }

    /// Apply a tagged placement the engine accepted to `model`, checking that
    /// it was allowed: a writable region, inside its bounds.
    pub fn apply(&self, model: &mut [Vec<u8>], stag: u32, to: u64, payload: &[u8]) {
        let i = self
            .index_of(stag)
            .unwrap_or_else(|| panic!("accepted a placement at unknown STag {stag:#x}"));
        assert!(WRITABLE[i], "accepted a placement into region {i}");
        let off = to
            .checked_sub(self.base[i])
            .unwrap_or_else(|| panic!("accepted TO {to:#x} below region {i}"))
            as usize;
        let end = off + payload.len();
        assert!(end <= model[i].len(), "accepted TO range past region {i}");
        model[i][off..end].copy_from_slice(payload);
    }

    /// For a tagged segment the engine refused: it may still have been placed
    /// when the refusal was about an earlier-arrived segment whose in-order
    /// checks ran only now (placement on arrival, delivery in order). Apply it
    /// to `model` if it was a legal placement and its octets are now there.
    pub fn apply_if_placed(
        &self,
        mem: &MemoryTable,
        model: &mut [Vec<u8>],
        stag: u32,
        to: u64,
        payload: &[u8],
    ) {
        let Some(i) = self.index_of(stag).filter(|&i| WRITABLE[i]) else {
            return;
        };
        let Some(off) = to.checked_sub(self.base[i]).map(|o| o as usize) else {
            return;
        };
        let end = off.saturating_add(payload.len());
        let r = mem.region(Stag(stag)).expect("fixture region exists");
        if r.data().get(off..end) == Some(payload) {
            model[i][off..end].copy_from_slice(payload);
        }
    }

    /// An STag: one of ours (mostly), a near miss, or anything.
    pub fn stag(&self, input: &mut Input<'_>) -> u32 {
        match input.u8() % 8 {
            0..=4 => self.stags[input.below(REGIONS)],
            5 => self.stags[input.below(REGIONS)] ^ 1,
            6 => self.stags[input.below(REGIONS)] ^ 0x100,
            _ => input.u32(),
        }
    }

    /// A TO around region `stag`'s bounds (or anything).
    pub fn to(&self, input: &mut Input<'_>, stag: u32) -> u64 {
        let (b, len) = self.index_of(stag).map_or((0x1000, 64), |i| {
            (self.base[i], self.before[i].len() as u64)
        });
        match input.u8() % 8 {
            0..=3 => b.wrapping_add(u64::from(input.u8()) % (len + 1)),
            4 => b.wrapping_add(len).wrapping_sub(u64::from(input.u8() % 16)),
            5 => b.wrapping_sub(u64::from(input.u8() % 16)),
            6 => u64::MAX - u64::from(input.u8()),
            _ => input.u64(),
        }
    }
}

/// `n` payload octets: from the input, then a fill pattern.
pub fn payload(input: &mut Input<'_>, n: usize) -> Vec<u8> {
    let mut p = input.bytes(n).to_vec();
    let have = p.len();
    p.extend((have..n).map(|k| k as u8 ^ 0x5A));
    p
}

fn ctrl(op: Opcode) -> u8 {
    RdmapControl::new(op).0
}

/// A DDP segment as a hostile or confused peer might send it.
pub fn segment(input: &mut Input<'_>, regions: &Regions) -> Vec<u8> {
    let kind = input.u8();
    let last = kind & 0x10 == 0;
    let mut seg = match kind % 8 {
        // Tagged: RDMA Write or Read Response (or any RsvdULP).
        0..=2 => {
            let op = match input.u8() % 4 {
                0 | 1 => ctrl(Opcode::RDMA_WRITE),
                2 => ctrl(Opcode::READ_RESPONSE),
                _ => input.u8(),
            };
            let stag = regions.stag(input);
            let to = regions.to(input, stag);
            let n = usize::from(input.u8() % 96);
            let mut v = TaggedHeader::new(last, op, stag, to).to_bytes().to_vec();
            v.extend_from_slice(&payload(input, n));
            v
        }
        // Untagged Send (of any flavour) on a small QN/MSN/MO.
        3 | 4 => {
            let op = [
                Opcode::SEND,
                Opcode::SEND_SE,
                Opcode::SEND_INVALIDATE,
                Opcode::SEND_SE_INVALIDATE,
            ][input.below(4)];
            let inv = regions.stag(input).to_be_bytes();
            let rsvd = [ctrl(op), inv[0], inv[1], inv[2], inv[3]];
            let qn = if input.u8().is_multiple_of(4) {
                input.u32()
            } else {
                0
            };
            let msn = match input.u8() % 4 {
                0 => input.u32(),
                m => u32::from(m),
            };
            let mo = u32::from(input.u8() % 64);
            let n = usize::from(input.u8() % 80);
            let mut v = UntaggedHeader::new(last, rsvd, qn, msn, mo)
                .to_bytes()
                .to_vec();
            v.extend_from_slice(&payload(input, n));
            v
        }
        // A Read Request on QN 1 for a region of ours.
        5 => {
            let sink_stag = input.u32();
            let src_stag = regions.stag(input);
            let rr = ReadRequestHeader {
                sink_stag,
                sink_to: input.u64(),
                size: match input.u8() % 4 {
                    0 => 0,
                    1 => input.u32(),
                    _ => u32::from(input.u8()),
                },
                src_stag,
                src_to: regions.to(input, src_stag),
            };
            let msn = 1 + u32::from(input.u8() % 4);
            let rsvd = [ctrl(Opcode::READ_REQUEST), 0, 0, 0, 0];
            let mut v = UntaggedHeader::new(true, rsvd, 1, msn, 0)
                .to_bytes()
                .to_vec();
            v.extend_from_slice(&rr.to_bytes());
            v
        }
        // A Terminate on QN 2 with an arbitrary body.
        6 => {
            let rsvd = [ctrl(Opcode::TERMINATE), 0, 0, 0, 0];
            let mut v = UntaggedHeader::new(true, rsvd, 2, 1, 0).to_bytes().to_vec();
            v.extend_from_slice(input.blob(60));
            v
        }
        _ => input.blob(2048).to_vec(),
    };
    // Now and then a wrong DDP or RDMAP version, or reserved bits set.
    if let Some(c) = seg.first_mut()
        && kind & 0x20 != 0
    {
        let flip = input.u8();
        *c ^= flip & 0x3F;
        if let Some(r) = seg.get_mut(1) {
            *r ^= flip & 0xC0;
        }
    }
    seg
}
