//! What a queue pair needs from a lower-layer protocol: whole DDP segments each way.
//!
//! Kinds of LLP ([`Llp`]): MPA over TCP runs on the process's event loop
//! (rddp-io: a non-blocking socket and its FPDU state, driven by one task per
//! queue pair, see `crate::qp`); DDP over SCTP too (a relay to its
//! association's task on the same loop, see [`sctp`]); the in-memory LLP
//! implements the two blocking halves [`SegmentReader`]/[`SegmentWriter`], and
//! the queue pair runs one thread reading and one writing.

use rddp_proto::ddp::{OutSegment, SenderSeq};
use rddp_wire::TerminateCode;
use std::io;
use std::sync::{Arc, Condvar, Mutex};

/// What the reading half hands up.
#[derive(Debug)]
pub enum Inbound {
    /// One whole DDP segment and its place in the sender's order.
    Segment {
        /// Its place in the sender's order (MPA: FPDUs counted; SCTP: the DDP-SSN).
        seq: SenderSeq,
        /// The segment, DDP header first.
        bytes: Vec<u8>,
    },
    /// The LLP's largest segment changed, to this many octets (RFC 5041:
    /// MULPDU changes are exposed).
    Mulpdu(usize),
    /// The LLP found a fatal error in the peer's octets (e.g. an MPA CRC error): a
    /// Terminate with this code goes out, then the connection closes.
    Error {
        /// The Terminate code that goes out.
        code: TerminateCode,
        /// What was wrong, in words, for logs and events.
        detail: String,
    },
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
    /// See `markers_rx`.
    pub markers_tx: bool,
    /// The RFC 6581 ready-to-receive message agreed (MPA peer-to-peer mode):
    /// "write" or "read", `None` without one.
    pub rtr: Option<&'static str>,
}

/// How a connection's octets move.
pub enum Llp {
    /// Two blocking halves, a thread each: the in-memory LLP, or any pair of
    /// [`SegmentReader`] and [`SegmentWriter`] (tests).
    Threads {
        /// The receiving half, run by the queue pair's reader thread.
        reader: Box<dyn SegmentReader>,
        /// The sending half, run by its writer thread.
        writer: Box<dyn SegmentWriter>,
        /// Stop both halves at once (TCP: shutdown of both directions), so that a
        /// blocked reader returns. Called when the queue pair is dropped.
        abort: Box<dyn FnMut() + Send>,
    },
    /// MPA over a non-blocking TCP socket, on the event loop.
    Mpa(Box<mpa::MpaLlp>),
    /// A DDP over SCTP session, relayed to and from its association's task on
    /// the event loop.
    Sctp(Box<sctp::SctpLlp>),
}

/// A connected LLP, ready to carry DDP segments.
pub struct Connection {
    /// How its octets move.
    pub llp: Llp,
    /// Largest DDP segment the LLP carries now.
    pub mulpdu: usize,
    /// IRD/ORD agreed at connection setup (RFC 6581), if the LLP negotiated them
    /// (`ird_ord_negotiated`).
    pub ird: u32,
    /// See `ird`.
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
}

impl Connection {
    /// Read nothing from the LLP until the returned hold is released (or
    /// dropped): a Send from the peer that comes before the first receive is
    /// posted would otherwise find no buffer. (Receives posted on the
    /// `PreparedQueuePair` before attach need no hold.)
    pub fn hold_reads(&mut self) -> ReadHold {
        let inner = Arc::new(HoldInner::default());
        match &mut self.llp {
            Llp::Threads { reader, .. } => {
                let r = std::mem::replace(reader, Box::new(Nothing));
                *reader = Box::new(HeldReader {
                    inner: r,
                    hold: Some(inner.clone()),
                });
            }
            Llp::Mpa(m) => m.hold = Some(inner.clone()),
            Llp::Sctp(s) => s.hold = Some(inner.clone()),
        }
        ReadHold { inner }
    }

    /// Lets this side, an MPA responder whose initiator agreed no RTR, send
    /// before the initiator's first FPDU, as Linux siw's responder does.
    /// RFC 5044 §7.1.2 has the responder wait for it, and RFC 6581's RTR
    /// exists so that a ULP whose server speaks first can still run; an
    /// initiator that negotiates none (siw's default build) never sends
    /// first for such a ULP (ucmatose's server, ib_write_lat), and the two
    /// would wait for each other for ever. The caller holds its first FPDU
    /// until the initiator is in FPDU mode (the verbs library holds
    /// ESTABLISHED for a while after its Reply). Returns whether the gate
    /// opened: not for SCTP (no gate), an initiator (open already) or a
    /// responder that expects an RTR (it opens with the RTR).
    pub fn send_before_first_fpdu(&mut self) -> bool {
        match &mut self.llp {
            Llp::Mpa(m) if m.input.gate_closed && !m.rtr_expected => {
                m.input.gate_closed = false;
                true
            }
            _ => false,
        }
    }
}

/// See [`Connection::hold_reads`]; dropping it releases it too.
#[must_use = "the hold is released as soon as it is dropped"]
pub struct ReadHold {
    inner: Arc<HoldInner>,
}

impl ReadHold {
    /// Let the LLP's segments in.
    pub fn release(&self) {
        self.inner.release();
    }
}

impl Drop for ReadHold {
    fn drop(&mut self) {
        self.inner.release();
    }
}

/// Whom a released hold tells (the event loop task reading the LLP).
type Tell = Box<dyn Fn() + Send>;

#[derive(Default)]
pub(crate) struct HoldInner {
    state: Mutex<(bool, Option<Tell>)>,
    released: Condvar,
}

impl HoldInner {
    fn release(&self) {
        let mut st = crate::device::lock(&self.state);
        st.0 = true;
        let tell = st.1.take();
        drop(st);
        if let Some(tell) = tell {
            tell();
        }
        self.released.notify_all();
    }

    pub(crate) fn is_released(&self) -> bool {
        crate::device::lock(&self.state).0
    }

    /// Call `tell` once when released (at once if it already is).
    pub(crate) fn on_release(&self, tell: Tell) {
        let mut st = crate::device::lock(&self.state);
        if st.0 {
            drop(st);
            tell();
        } else {
            st.1 = Some(tell);
        }
    }

    fn wait(&self) {
        let mut st = crate::device::lock(&self.state);
        while !st.0 {
            st = self.released.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A reader behind a [`ReadHold`].
struct HeldReader {
    inner: Box<dyn SegmentReader>,
    hold: Option<Arc<HoldInner>>,
}

impl SegmentReader for HeldReader {
    fn read(&mut self) -> io::Result<Inbound> {
        if let Some(h) = self.hold.take() {
            h.wait();
        }
        self.inner.read()
    }
}

/// A placeholder while a reader is wrapped.
struct Nothing;

impl SegmentReader for Nothing {
    fn read(&mut self) -> io::Result<Inbound> {
        Ok(Inbound::Closed)
    }
}

mod memory;
pub mod mpa;
pub(crate) mod mpa_in;
pub mod sctp;
pub use memory::memory_pair;
