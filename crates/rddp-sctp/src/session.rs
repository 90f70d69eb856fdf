//! One DDP Stream Session on one stream number (RFC 5043).
//!
//! Legal sequences, in DDP-SSN order: Initiate, Accept, segments, Terminate(s);
//! Initiate, Reject; Initiate, Terminate. Anything else terminates the session.

use rddp_proto::ddp::{
    DdpStream, OutSegment, SegmentEndpoint, SenderSeq, SourceError, StreamError,
};
use rddp_proto::mem::MemoryTable;

/// Which side opened the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sent the Initiate.
    Active,
    /// Received the Initiate.
    Passive,
}

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Active: Initiate sent, waiting for Accept, Reject or Terminate.
    InitiateSent,
    /// Passive: Initiate received, waiting for the ULP's decision.
    InitiateReceived,
    /// Accept sent or received: DDP segments may flow.
    Established,
    /// Over; the stream number may be reused once nothing can be outstanding.
    Closed,
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// Both sides sent Terminate after an accepted session.
    Terminated,
    /// The passive side's ULP rejected (private data of the Reject).
    Rejected(Vec<u8>),
    /// Initiate answered with Terminate (the passive side's queue was full).
    Refused,
    /// A chunk fit no legal sequence, or a local segment was too large.
    Violation(String),
    /// The association went away (no Terminate is sent on each stream).
    AssociationLost,
}

/// Our Terminate for this session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LocalTerminate {
    None,
    /// Send once DDP has drained and our previous control is known delivered.
    Wanted,
    Sent,
}

#[derive(Debug)]
pub(crate) struct Session {
    pub role: Role,
    pub state: SessionState,
    /// Index of the peer's first chunk of this session on the inbound stream (active:
    /// where its Accept must be).
    pub peer_start: u64,
    pub ddp: Option<Upper>,
    /// Active side: peer segments that arrived before the Accept, (index, chunk).
    pub held: Vec<(u64, Vec<u8>)>,
    /// Octets in `held` (bounded by `Config::max_held_octets`).
    pub held_octets: usize,
    pub local_terminate: LocalTerminate,
    /// Index of the peer's Terminate, once received.
    pub peer_terminate: Option<u64>,
    /// Our last control message is known to have arrived, so the next one cannot
    /// overtake it (RFC 5043).
    pub ctl_confirmed: bool,
    /// Every chunk the peer sent in this session has arrived.
    pub peer_done: bool,
}

impl Session {
    pub(crate) fn new(
        role: Role,
        state: SessionState,
        peer_start: u64,
        ddp: Option<Upper>,
    ) -> Self {
        Self {
            role,
            state,
            peer_start,
            ddp,
            held: Vec::new(),
            held_octets: 0,
            local_terminate: LocalTerminate::None,
            peer_terminate: None,
            ctl_confirmed: true,
            peer_done: false,
        }
    }

    /// Over, with nothing of the peer's outstanding: the stream is free for the
    /// peer's next Initiate, and any other chunk on it fits no session.
    pub(crate) fn idle(&self) -> bool {
        self.state == SessionState::Closed && self.peer_done
    }
}

/// What a session carries: its own DDP stream, or a relay to a ULP engine that
/// owns the DDP stream (a verbs queue pair's RDMAP, through `rddp`).
#[derive(Debug)]
pub enum Upper {
    /// The session's own DDP stream, used through [`crate::Adaptation::stream`].
    Ddp(Box<DdpStream>),
    /// A ULP engine that owns the DDP stream: segments are handed to it as they come.
    Relay(Box<dyn SegmentEndpoint>),
}

impl Upper {
    fn ep(&mut self) -> &mut dyn SegmentEndpoint {
        match self {
            Self::Ddp(d) => d.as_mut(),
            Self::Relay(r) => r.as_mut(),
        }
    }

    /// The session's own DDP stream, if it has one.
    pub fn ddp(&mut self) -> Option<&mut DdpStream> {
        match self {
            Self::Ddp(d) => Some(d.as_mut()),
            Self::Relay(_) => None,
        }
    }
}

impl SegmentEndpoint for Upper {
    fn on_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), StreamError> {
        self.ep().on_segment(mem, seq, seg)
    }
    fn poll_segment(&mut self) -> Option<OutSegment> {
        self.ep().poll_segment()
    }
    fn drained(&self) -> bool {
        match self {
            Self::Ddp(d) => d.drained(),
            Self::Relay(r) => r.drained(),
        }
    }
    fn set_mulpdu(&mut self, mulpdu: usize) -> Result<(), SourceError> {
        self.ep().set_mulpdu(mulpdu)
    }
    fn close(&mut self) {
        self.ep().close()
    }
    fn on_llp_closed(&mut self, graceful: bool) {
        self.ep().on_llp_closed(graceful)
    }
    fn segment_accepted(&mut self) {
        self.ep().segment_accepted()
    }
    fn count_copied(&mut self, rx: usize, tx: usize) {
        self.ep().count_copied(rx, tx)
    }
    fn place_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Result<(), StreamError> {
        self.ep().place_segment(mem, seq, head, payload_len, fill)
    }
}
