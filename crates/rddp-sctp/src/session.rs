//! One DDP Stream Session on one stream number (seed 001; spec §5.5).
//!
//! Legal sequences, in DDP-SSN order: Initiate, Accept, segments, Terminate(s);
//! Initiate, Reject; Initiate, Terminate. Anything else terminates the session.

use rddp_proto::ddp::DdpStream;

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
    pub ddp: Option<DdpStream>,
    /// Active side: peer segments that arrived before the Accept, (index, chunk).
    pub held: Vec<(u64, Vec<u8>)>,
    pub local_terminate: LocalTerminate,
    /// Index of the peer's Terminate, once received.
    pub peer_terminate: Option<u64>,
    /// Our last control message is known to have arrived, so the next one cannot
    /// overtake it (spec §5.5).
    pub ctl_confirmed: bool,
    /// Every chunk the peer sent in this session has arrived.
    pub peer_done: bool,
}

impl Session {
    pub fn new(role: Role, state: SessionState, peer_start: u64, ddp: Option<DdpStream>) -> Self {
        Self {
            role,
            state,
            peer_start,
            ddp,
            held: Vec::new(),
            local_terminate: LocalTerminate::None,
            peer_terminate: None,
            ctl_confirmed: true,
            peer_done: false,
        }
    }
}
