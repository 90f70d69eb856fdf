//! One RDMAP stream fed crafted segments by a hostile peer, in any sender order.

use rddp_proto::mem::{Access, MemoryTable, PdId, Stag, StagScope, StreamId};
use rddp_proto::rdmap::{AsyncEvent, Completion, RdmapConfig, RdmapStream, WorkRequest};
use rddp_wire::{Opcode, RdmapControl, TaggedHeader, TerminateCode, UntaggedHeader};

pub(crate) const BASE: u64 = 0x4000;

pub(crate) struct Host {
    pub mem: MemoryTable,
    pub s: RdmapStream,
    /// Sender position of the next segment [`Self::feed`] hands up.
    pub seq: u64,
}

impl Host {
    /// Default settings: up to 4096 segments of reordering (an SCTP-like LLP).
    pub(crate) fn new() -> Self {
        Self::with(RdmapConfig::default())
    }

    pub(crate) fn with(cfg: RdmapConfig) -> Self {
        Self {
            mem: MemoryTable::with_seed(5),
            s: RdmapStream::new(StreamId(1), PdId(1), cfg).unwrap(),
            seq: 0,
        }
    }

    /// A zeroed region of `len` octets at TO [`BASE`].
    pub(crate) fn region(&mut self, access: Access, len: usize) -> Stag {
        self.mem
            .register(PdId(1), StagScope::Pd, access, BASE, vec![0; len])
            .unwrap()
    }

    pub(crate) fn data(&self, stag: Stag) -> Vec<u8> {
        self.mem.region(stag).unwrap().data().to_vec()
    }

    /// Post an RDMA Read of `len` octets into (`sink`, `to`) and let its Read
    /// Request leave (what the peer does with it is up to the test).
    pub(crate) fn read(&mut self, wr_id: u64, sink: Stag, to: u64, len: u32) {
        let wr = WorkRequest::Read {
            wr_id,
            local_stag: sink.0,
            local_to: to,
            len,
            remote_stag: 0x0BAD_0100,
            remote_to: 0,
            fence: false,
        };
        self.s.post(&self.mem, wr);
        while self.s.poll_segment().is_some() {}
    }

    /// Hand up `seg` as the next segment in sender order.
    pub(crate) fn feed(&mut self, seg: &[u8]) -> bool {
        let seq = self.seq;
        self.seq += 1;
        self.feed_at(seq, seg)
    }

    /// Hand up `seg` at sender position `seq` (an out-of-order LLP); true if it
    /// was accepted.
    pub(crate) fn feed_at(&mut self, seq: u64, seg: &[u8]) -> bool {
        self.s.on_segment(&self.mem, seq, seg).is_ok()
    }

    pub(crate) fn completions(&mut self) -> Vec<Completion> {
        std::iter::from_fn(|| self.s.poll_completion()).collect()
    }

    pub(crate) fn events(&mut self) -> Vec<AsyncEvent> {
        std::iter::from_fn(|| self.s.poll_event()).collect()
    }

    /// The code of the Terminate this side queued, if any.
    pub(crate) fn terminate_sent(&mut self) -> Option<TerminateCode> {
        self.events().into_iter().find_map(|e| match e {
            AsyncEvent::TerminateSent { code, .. } => Some(code),
            _ => None,
        })
    }

    /// The Terminate segment this side put on the wire (its RDMAP body).
    pub(crate) fn terminate_on_wire(&mut self) -> Option<rddp_wire::Terminate> {
        std::iter::from_fn(|| self.s.poll_segment())
            .map(|seg| seg.to_vec())
            .find(|s| s.len() >= 18 && s[0] & 0x80 == 0 && s[1] & 0x0F == 7)
            .and_then(|s| rddp_wire::Terminate::parse(&s[18..]).ok())
    }
}

impl Default for Host {
    fn default() -> Self {
        Self::new()
    }
}

/// A tagged segment of RDMAP opcode `op`.
pub(crate) fn tseg(last: bool, op: Opcode, stag: Stag, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = TaggedHeader::new(last, RdmapControl::new(op).0, stag.0, to)
        .to_bytes()
        .to_vec();
    v.extend_from_slice(payload);
    v
}

/// A Read Response segment.
pub(crate) fn rresp(last: bool, stag: Stag, to: u64, payload: &[u8]) -> Vec<u8> {
    tseg(last, Opcode::READ_RESPONSE, stag, to, payload)
}

/// An untagged segment of RDMAP opcode `op` (`inval`: the Invalidate STag field).
pub(crate) fn useg(
    last: bool,
    op: Opcode,
    inval: u32,
    qn: u32,
    msn: u32,
    mo: u32,
    p: &[u8],
) -> Vec<u8> {
    let s = inval.to_be_bytes();
    let rsvd = [RdmapControl::new(op).0, s[0], s[1], s[2], s[3]];
    let mut v = UntaggedHeader::new(last, rsvd, qn, msn, mo)
        .to_bytes()
        .to_vec();
    v.extend_from_slice(p);
    v
}

/// A Send segment on QN 0.
pub(crate) fn send(last: bool, msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    useg(last, Opcode::SEND, 0, 0, msn, mo, payload)
}
