//! RDMAP (RFC 5040): Send (with Solicited Event and/or Invalidate), RDMA
//! Write, RDMA Read and Terminate over one DDP stream, sans-IO.
//!
//! * [`RdmapStream::post`] takes work requests; [`RdmapStream::poll_segment`] hands
//!   DDP segments to the LLP; [`RdmapStream::on_segment`] takes received segments.
//! * Completions ([`RdmapStream::poll_completion`]) and asynchronous events
//!   ([`RdmapStream::poll_event`]) come out in order; the send queue's in
//!   posting order (`sq_order.rs`).
//! * Ordering (RFC 5040 §5.5): DDP delivers in order, so a Send is never delivered before
//!   earlier Writes and Read Responses are placed; Read Requests are served in arrival
//!   order; Read Responses are matched first-in first-out to outstanding requests.
//!   ORD bounds our outstanding Reads, IRD the peer's; fencing waits for Reads.

mod rx;
mod sq_order;
mod terminate;
mod tx;
mod wr;

pub use tx::RtrRefused;
pub use wr::{AsyncEvent, Completion, WcOpcode, WcStatus, WorkRequest};

use crate::ddp::{
    DdpConfig, DdpStream, RecvBuffer, RegionSpan, SourceError, StreamError, StreamState,
};
use crate::mem::{PdId, StreamId};
use crate::stats::{RdmapCounters, StreamStats};
use rddp_wire::rdmap::qn;
use sq_order::{SqOrder, SqSeq};
use std::collections::VecDeque;

/// Receive-buffer ids at or above this are RDMAP's own (Read Request and Terminate
/// queues); the ULP's wr_ids for receives must stay below it.
pub const INTERNAL_WR_ID: u64 = 1 << 63;

/// Per-stream RDMAP settings; IRD/ORD come from connection setup (RFC 6581).
#[derive(Debug, Clone, Copy)]
pub struct RdmapConfig {
    /// The DDP stream's settings; RDMAP needs its 3 untagged queues (RFC 5040 §4.2).
    pub ddp: DdpConfig,
    /// Inbound RDMA Read queue depth: Read Requests we serve at once.
    pub ird: u32,
    /// Outbound RDMA Read queue depth: our Read Requests outstanding at once.
    pub ord: u32,
}

impl Default for RdmapConfig {
    fn default() -> Self {
        Self {
            ddp: DdpConfig::default(),
            ird: 16,
            ord: 16,
        }
    }
}

/// A DDP message handed to DDP, awaiting its L=1 segment's departure.
#[derive(Debug)]
enum TxTrack {
    Send {
        wr_id: u64,
        len: u32,
        signaled: bool,
        seq: SqSeq,
    },
    Write {
        wr_id: u64,
        len: u32,
        signaled: bool,
        seq: SqSeq,
    },
    ReadRequest,
    ReadResponse,
    Terminate,
    /// Flushed while its last segment was on its way to the LLP: nothing more to do
    /// when [`RdmapStream::segment_sent`] reaches it.
    Flushed,
}

/// One of our RDMA Reads whose response has not been delivered.
#[derive(Debug, Clone, Copy)]
struct OutRead {
    wr_id: u64,
    sink_stag: u32,
    sink_to: u64,
    len: u32,
    /// Its place in the send queue; `None`: RDMAP's own RFC 6581 Read RTR,
    /// whose completion is never the ULP's.
    seq: Option<SqSeq>,
    /// Its success completes to the ULP ([`RdmapStream::post_as`]).
    signaled: bool,
}

/// One RDMAP stream over one DDP stream.
#[derive(Debug)]
pub struct RdmapStream {
    ddp: DdpStream,
    cfg: RdmapConfig,
    /// Requests waiting for an ORD slot or a fence, in posting order, each
    /// with whether its success completes to the ULP ([`Self::post_as`]) and
    /// its place in the send queue.
    sq: VecDeque<(WorkRequest, bool, SqSeq)>,
    /// Send-queue completions wait here for every earlier one.
    sq_order: SqOrder,
    /// Messages given to DDP, in order, until their last segment leaves.
    tx: VecDeque<TxTrack>,
    /// With [`Self::complete_when_sent`]: messages whose last segment was polled,
    /// in order, until the LLP reports it written ([`Self::segment_sent`]).
    unsent: VecDeque<TxTrack>,
    complete_when_sent: bool,
    /// Our Reads in flight (at most ORD), oldest first.
    orq: VecDeque<OutRead>,
    /// Peer Reads accepted whose Read Response has not fully left (at most IRD).
    irq_active: u32,
    completions: VecDeque<Completion>,
    events: VecDeque<AsyncEvent>,
    /// A Terminate was sent or received: the stream is dead.
    terminated: bool,
    /// The Terminate we queued has left: the LLP may close now.
    terminate_sent: bool,
    /// The first flushed receive gets this status instead of Flushed.
    first_recv_status: Option<WcStatus>,
    /// A Read Response keeps its IRD slot until the LLP writer reports it sent
    /// ([`Self::read_response_sent`]) rather than until its last segment is polled.
    hold_ird_until_sent: bool,
    /// The ULP asked for graceful teardown ([`Self::close`]).
    closing: bool,
    /// Counters (docs/features.md): refusals, Terminates, CRC errors, completions by status.
    counters: RdmapCounters,
    /// Header-first receive: the sender position of the segment begun and not
    /// yet finished (`rx.rs`).
    rx_begun: VecDeque<crate::ddp::SenderSeq>,
    /// A header refusal held until the LLP checked its FPDU (`rx.rs`).
    rx_held: Option<rx::HeldRefusal>,
}

impl RdmapStream {
    /// An RDMAP stream over a new DDP stream `stream` of protection domain `pd`.
    /// RDMAP's own receive buffers are posted at once: IRD + 1 for Read Requests
    /// (QN 1) and one for the Terminate (QN 2, RFC 5040 §4.2). Refused if the DDP
    /// stream cannot be made (MULPDU too small) or has fewer than 3 untagged queues.
    pub fn new(stream: StreamId, pd: PdId, cfg: RdmapConfig) -> Result<Self, SourceError> {
        let mut ddp = DdpStream::new(stream, pd, cfg.ddp)?;
        // RDMAP's own untagged buffers: IRD + 1 for Read Requests (one spare, so an
        // IRD overflow is seen by RDMAP, RFC 5040 §5.5, rather than as a DDP
        // buffer error), one for the single Terminate (QN 2, RFC 5040 §4.2).
        for i in 0..=cfg.ird {
            let buf = RecvBuffer {
                id: INTERNAL_WR_ID | u64::from(i),
                data: vec![0; rddp_wire::read_request::READ_REQ_HDR_LEN],
            };
            ddp.post_recv(qn::READ_REQUEST, buf).map_err(internal)?;
        }
        let term = RecvBuffer {
            id: INTERNAL_WR_ID,
            data: vec![0; rddp_wire::terminate::TERM_MAX_BODY],
        };
        ddp.post_recv(qn::TERMINATE, term).map_err(internal)?;
        Ok(Self {
            ddp,
            cfg,
            sq: VecDeque::new(),
            sq_order: SqOrder::default(),
            tx: VecDeque::new(),
            unsent: VecDeque::new(),
            complete_when_sent: false,
            orq: VecDeque::new(),
            irq_active: 0,
            completions: VecDeque::new(),
            events: VecDeque::new(),
            terminated: false,
            terminate_sent: false,
            first_recv_status: None,
            hold_ird_until_sent: false,
            closing: false,
            counters: RdmapCounters::default(),
            rx_begun: VecDeque::new(),
            rx_held: None,
        })
    }

    /// The DDP stream underneath.
    pub fn ddp(&self) -> &DdpStream {
        &self.ddp
    }

    /// The DDP stream underneath, to drive it directly (LLP adaptations, tests).
    pub fn ddp_mut(&mut self) -> &mut DdpStream {
        &mut self.ddp
    }

    /// The settings the stream was made with.
    pub fn config(&self) -> &RdmapConfig {
        &self.cfg
    }

    /// Whether the stream is dead (Terminate sent or received, or closed).
    pub fn is_terminated(&self) -> bool {
        self.terminated
    }

    /// Whether work posted now completes at once as flushed: the stream died (a
    /// Terminate, an abort) or its LLP closed, gracefully or not. A verbs queue
    /// pair does the same in its error state, where the LLP's close leaves it
    /// (siw: `siw_qp_llp_close`, then `siw_sq_flush_wr`/`siw_rq_flush_wr`).
    pub fn flushes_new_work(&self) -> bool {
        self.terminated || *self.ddp.state() == StreamState::Closed
    }

    /// Whether a received message is partly in (more of its segments are to
    /// come): see [`crate::ddp::DdpSink::mid_message`].
    pub fn rx_mid_message(&self) -> bool {
        self.ddp.sink().mid_message()
    }

    /// Whether the LLP should now close: our Terminate has left, or the peer's
    /// arrived.
    pub fn should_close(&self) -> bool {
        self.terminate_sent || (self.terminated && self.ddp.pending_out() == 0)
    }

    /// For an LLP whose writer runs behind [`Self::poll_segment`] (a queue between
    /// them): a Read Response holds its IRD slot until the writer calls
    /// [`Self::read_response_sent`], so a peer that sends Read Requests without
    /// reading the responses exceeds IRD (0/2/0x07) instead of making us queue
    /// responses without bound.
    pub fn hold_ird_until_sent(&mut self) {
        self.hold_ird_until_sent = true;
    }

    /// The writer is about to put a Read Response's last segment on the LLP: its
    /// IRD slot is free (see [`Self::hold_ird_until_sent`]).
    pub fn read_response_sent(&mut self) {
        if self.hold_ird_until_sent {
            self.irq_active = self.irq_active.saturating_sub(1);
        }
    }

    /// For an LLP whose writer runs behind [`Self::poll_segment`]: a Send or Write
    /// completes (and our Terminate counts as sent) only when the writer reports
    /// its last segment accepted by the LLP ([`Self::segment_sent`]), not when it
    /// is polled (docs/data-path.md: completion when the last octet left).
    pub fn complete_when_sent(&mut self) {
        self.complete_when_sent = true;
    }

    /// The LLP accepted a segment polled from [`Self::poll_segment`] (in polling
    /// order) whole; `last` is its L flag. Completes the Send or Write it ends.
    pub fn segment_sent(&mut self, last: bool) {
        if !self.complete_when_sent || !last {
            return;
        }
        let t = self.unsent.pop_front();
        self.track_sent(t);
    }

    /// A message's last segment left: a Send or Write completes (as
    /// [`Completion::signaled`] says), our Terminate is out.
    fn track_sent(&mut self, t: Option<TxTrack>) {
        let (wr_id, opcode, len, signaled, seq) = match t {
            Some(TxTrack::Send {
                wr_id,
                len,
                signaled,
                seq,
            }) => (wr_id, WcOpcode::Send, len, signaled, seq),
            Some(TxTrack::Write {
                wr_id,
                len,
                signaled,
                seq,
            }) => (wr_id, WcOpcode::RdmaWrite, len, signaled, seq),
            Some(TxTrack::Terminate) => {
                self.terminate_sent = true;
                return;
            }
            Some(TxTrack::ReadRequest | TxTrack::ReadResponse | TxTrack::Flushed) | None => return,
        };
        let mut c = Completion::new(wr_id, opcode, WcStatus::Success, len);
        c.signaled = signaled;
        self.sq_done(seq, c);
    }

    /// A send-queue request completed: out once every earlier one is
    /// (`sq_order.rs`).
    fn sq_done(&mut self, seq: SqSeq, c: Completion) {
        self.sq_order.done(seq, c, &mut self.completions);
    }

    /// Our Reads outstanding.
    pub fn reads_outstanding(&self) -> usize {
        self.orq.len()
    }

    /// Post a receive buffer for Sends. `wr_id` must be below [`INTERNAL_WR_ID`].
    /// After the stream died it completes at once as flushed.
    pub fn post_recv(&mut self, wr_id: u64, buf: Vec<u8>) -> Result<(), StreamError> {
        let Some(buf) = self.open_for_recv(wr_id, buf)? else {
            return Ok(());
        };
        self.ddp.post_recv(
            qn::SEND,
            RecvBuffer {
                id: wr_id,
                data: buf,
            },
        )
    }

    /// Post a receive for Sends whose message goes into `place`, octets of a
    /// registered region (see [`RegionSpan`]); its completion hands back an
    /// empty buffer. `wr_id` and a dead stream as [`Self::post_recv`].
    pub fn post_recv_in_region(
        &mut self,
        wr_id: u64,
        place: RegionSpan,
    ) -> Result<(), StreamError> {
        if self.open_for_recv(wr_id, Vec::new())?.is_none() {
            return Ok(());
        }
        self.ddp.post_recv_in_region(qn::SEND, wr_id, place)
    }

    /// Before a receive is posted: a `wr_id` of RDMAP's own range is refused;
    /// after the stream died the receive completes at once as flushed, with
    /// `buf` (`None`: posted that way). Else `buf` back to be posted.
    fn open_for_recv(&mut self, wr_id: u64, buf: Vec<u8>) -> Result<Option<Vec<u8>>, StreamError> {
        if wr_id >= INTERNAL_WR_ID {
            return Err(StreamError::Source(SourceError::InvalidQn {
                qn: qn::SEND,
                count: qn::COUNT,
            }));
        }
        if self.flushes_new_work() {
            let mut c = Completion::new(wr_id, WcOpcode::Recv, WcStatus::Flushed, 0);
            c.buffer = Some(buf);
            self.completions.push_back(c);
            return Ok(None);
        }
        Ok(Some(buf))
    }

    /// The next completion, in order: the send queue's in posting order (RFC 5040
    /// §5.5), receives in the order their messages were delivered.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        let c = self.completions.pop_front();
        // The RFC 6581 Read RTR is the LLP's, not the ULP's: not counted. (By
        // reference: the completion is not moved out and back in.)
        if let Some(c) = &c
            && !(c.opcode == WcOpcode::RdmaRead && c.wr_id == INTERNAL_WR_ID)
        {
            self.counters.completions.count(c.status);
        }
        c
    }

    /// The stream's counters (docs/features.md): what DDP sent, placed and delivered, what
    /// was refused, Terminates by class, CRC errors, completions by status.
    pub fn stats(&self) -> StreamStats {
        let (tx, rx) = (self.ddp.source_stats(), self.ddp.sink_stats());
        let c = &self.counters;
        StreamStats {
            segments_sent: tx.segments_sent,
            octets_sent: tx.octets_sent,
            messages_sent: tx.messages_sent,
            segments_placed: rx.segments_placed,
            octets_placed: rx.bytes_placed,
            placed_out_of_order: rx.placed_out_of_order,
            messages_delivered: rx.messages_delivered,
            segments_refused: self.ddp.segments_refused() + c.segments_refused,
            crc_errors: c.crc_errors,
            // The transport's (rddp's queue pair fills them in).
            llp_writes: 0,
            llp_reads: 0,
            rx_copied_octets: rx.octets_copied,
            tx_copied_octets: tx.octets_copied,
            terminates_sent: c.terminates_sent,
            terminates_received: c.terminates_received,
            completions: c.completions,
        }
    }

    /// The LLP copied payload in user space: `rx` received octets on their
    /// way into place, `tx` octets of region leases on their way out (counted
    /// in [`Self::stats`]).
    pub fn count_copied(&mut self, rx: usize, tx: usize) {
        self.ddp.count_copied(rx, tx);
    }

    /// The next asynchronous event (a Terminate sent or received, the close), if any.
    pub fn poll_event(&mut self) -> Option<AsyncEvent> {
        self.events.pop_front()
    }

    /// Graceful teardown by the ULP (RFC 5040 §6, RFC 5041 §6): every DDP message
    /// in progress completes before the LLP stream is closed, and later ULP
    /// requests return an error. Every request posted before still runs,
    /// including those that ORD or a fence holds back, and every Read waits for
    /// its response; new requests complete as flushed. [`Self::poll_close`] says
    /// when the LLP may close.
    pub fn close(&mut self) {
        if !self.terminated {
            self.closing = true;
        }
    }

    /// Whether [`Self::close`] was called.
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// After [`Self::close`]: true once every request posted before it has left
    /// (the send queue held back by ORD and fences included) and every Read has its
    /// response, so the LLP may now close gracefully. DDP then accepts no new
    /// message. False on a dead stream (that closes abortively, see
    /// [`Self::should_close`]).
    pub fn poll_close(&mut self) -> bool {
        let done = self.closing
            && !self.terminated
            && self.sq.is_empty()
            && self.orq.is_empty()
            && self.tx.is_empty()
            && self.ddp.drained();
        if done {
            self.ddp.close();
        }
        done
    }

    /// Abortive teardown (the ULP's call, or the LLP is gone): everything pending
    /// completes as flushed.
    pub fn abort(&mut self) {
        self.terminated = true;
        self.flush_all();
        self.ddp.abort();
        self.drain_ddp_events();
    }

    /// The LLP closed (gracefully or not).
    pub fn on_llp_closed(&mut self, graceful: bool) {
        if !graceful {
            self.terminated = true;
        }
        self.flush_all();
        self.ddp.on_llp_closed(graceful);
        self.drain_ddp_events();
    }

    fn flush_all(&mut self) {
        // Deliveries are taken as they come; none should be left, but if one were
        // its buffer still comes back.
        while let Some(d) = self.ddp.poll_delivery() {
            self.discard_delivery(d);
        }
        self.flush_in_flight();
        self.flush_sq();
    }

    /// Requests still waiting in the send queue complete as flushed.
    fn flush_sq(&mut self) {
        for (wr, _, seq) in std::mem::take(&mut self.sq) {
            let c = Completion::new(wr.wr_id(), wr.opcode(), WcStatus::Flushed, 0);
            self.sq_done(seq, c);
        }
    }

    /// Flush what was handed to DDP but not finished: unsent Sends and Writes, and
    /// Reads awaiting their response.
    fn flush_in_flight(&mut self) {
        // Polled but not yet reported written: flushed now, the place kept so that
        // later `segment_sent` calls still match their segments. Oldest first.
        for t in self.unsent.iter_mut() {
            let flushed = match t {
                TxTrack::Send { wr_id, seq, .. } => Some((*wr_id, WcOpcode::Send, *seq)),
                TxTrack::Write { wr_id, seq, .. } => Some((*wr_id, WcOpcode::RdmaWrite, *seq)),
                _ => None,
            };
            if let Some((wr_id, op, seq)) = flushed {
                *t = TxTrack::Flushed;
                let c = Completion::new(wr_id, op, WcStatus::Flushed, 0);
                // (`Self::sq_done`, with `self.unsent` borrowed.)
                self.sq_order.done(seq, c, &mut self.completions);
            }
        }
        for t in std::mem::take(&mut self.tx) {
            let (wr_id, op, seq) = match t {
                TxTrack::Send { wr_id, seq, .. } => (wr_id, WcOpcode::Send, seq),
                TxTrack::Write { wr_id, seq, .. } => (wr_id, WcOpcode::RdmaWrite, seq),
                TxTrack::ReadRequest
                | TxTrack::ReadResponse
                | TxTrack::Terminate
                | TxTrack::Flushed => continue,
            };
            self.sq_done(seq, Completion::new(wr_id, op, WcStatus::Flushed, 0));
        }
        for r in std::mem::take(&mut self.orq) {
            self.read_done(r, WcStatus::Flushed);
        }
    }

    /// An outstanding Read is over: its completion, unless it is the Read RTR
    /// (RFC 6581: the RTR is absorbed by RDMAP, not a ULP message), so
    /// whatever becomes of it nothing reaches the ULP, and the ULP's own Reads keep
    /// their own completions.
    fn read_done(&mut self, r: OutRead, status: WcStatus) {
        let Some(seq) = r.seq else {
            return;
        };
        let ok = status == WcStatus::Success;
        let mut c = Completion::new(
            r.wr_id,
            WcOpcode::RdmaRead,
            status,
            if ok { r.len } else { 0 },
        );
        c.signaled = r.signaled || !ok;
        self.sq_done(seq, c);
    }
}

fn internal(e: StreamError) -> SourceError {
    match e {
        StreamError::Source(s) => s,
        // A fresh stream accepts buffers; anything else is a bug in this file.
        _ => SourceError::InvalidQn {
            qn: qn::READ_REQUEST,
            count: qn::COUNT,
        },
    }
}
