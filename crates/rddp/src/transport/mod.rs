//! What a queue pair needs from a lower-layer protocol: whole DDP segments each way.
//!
//! MPA over TCP and DDP over SCTP both implement these two halves; the queue pair
//! runs one thread reading and one writing, so neither half is shared.

use rddp_proto::ddp::{OutSegment, SenderSeq};
use rddp_wire::TerminateCode;
use std::io;

/// What the reading half hands up.
#[derive(Debug)]
pub enum Inbound {
    /// One whole DDP segment and its place in the sender's order.
    Segment { seq: SenderSeq, bytes: Vec<u8> },
    /// The LLP's largest segment changed (seed 000: MULPDU changes are exposed).
    Mulpdu(usize),
    /// The LLP found a fatal error in the peer's octets (e.g. an MPA CRC error): a
    /// Terminate with this code goes out, then the connection closes.
    Error { code: TerminateCode, detail: String },
    /// The peer closed the connection gracefully.
    Closed,
}

/// The reading half of a connected LLP.
pub trait SegmentReader: Send + 'static {
    /// Block until something arrives. An `Err` means the connection is lost.
    fn read(&mut self) -> io::Result<Inbound>;
}

/// The writing half of a connected LLP.
pub trait SegmentWriter: Send + 'static {
    /// Write one DDP segment whole.
    fn write_segment(&mut self, seg: &OutSegment) -> io::Result<()>;
    /// Close the connection: abortive (after a Terminate) or graceful.
    fn close(&mut self, abortive: bool);
}

/// What connection setup agreed, for the ULP and tools to show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LlpInfo {
    /// "mpa", "sctp" or "memory".
    pub transport: &'static str,
    /// The peer's address, if it has one.
    pub peer: Option<std::net::SocketAddr>,
    /// MPA revision in use (1 or 2), for MPA.
    pub mpa_rev: Option<u8>,
    /// CRC32c on FPDUs (MPA).
    pub crc: bool,
    /// Markers in FPDUs we receive / we send (MPA).
    pub markers_rx: bool,
    pub markers_tx: bool,
    /// The RFC 6581 ready-to-receive message agreed (MPA peer-to-peer mode):
    /// "write" or "read", `None` without one.
    pub rtr: Option<&'static str>,
}

/// A connected LLP, ready to carry DDP segments.
pub struct Connection {
    pub reader: Box<dyn SegmentReader>,
    pub writer: Box<dyn SegmentWriter>,
    /// Largest DDP segment the LLP carries now.
    pub mulpdu: usize,
    /// IRD/ORD agreed at connection setup (RFC 6581), if the LLP negotiated them
    /// (`ird_ord_negotiated`).
    pub ird: u32,
    pub ord: u32,
    /// Whether `ird`/`ord` were agreed by the LLP's setup. False (DDP over SCTP:
    /// RFC 5043 exchanges no IRD/ORD): the queue pair uses its builder's values,
    /// which the ULPs agree on by other means (e.g. session private data).
    pub ird_ord_negotiated: bool,
    /// Private data the peer sent during setup.
    pub peer_private_data: Vec<u8>,
    /// What setup agreed.
    pub info: LlpInfo,
    /// The queue pair must begin with a zero-length RDMA Read (the RFC 6581 RTR
    /// the initiator agreed to send; it goes through RDMAP so MSNs count it).
    pub send_read_rtr: bool,
    /// Stop both halves at once (TCP: shutdown of both directions), so that a
    /// blocked reader returns. Called when the queue pair is dropped.
    pub abort: Box<dyn FnMut() + Send>,
}

mod memory;
pub mod mpa;
pub mod sctp;
pub use memory::memory_pair;
