//! A DDP stream: source and sink under one state machine, with teardown
//! (RFC 5041 §6).
//!
//! * Errors are reported to the ULP; DDP never starts a teardown by itself.
//! * After a fatal error the stream is `Erroneous`: it accepts no more data and
//!   stays until the ULP asks for abortive teardown ([`DdpStream::abort`]).
//! * Graceful teardown ([`DdpStream::close`]) lets queued messages finish and fails
//!   later requests; abortive teardown (ULP request, LLP loss, bad header) discards.
//! * Receive (docs/data-path.md, "Receive"): [`DdpStream::begin_segment`],
//!   [`DdpStream::segment_buffers`] and [`DdpStream::finish_segment`] wrap the
//!   sink's with the stream's state rules and error reporting, exactly as for
//!   [`DdpStream::on_segment`], a segment held whole.

use super::Payload;
use super::error::{DdpError, SourceError, StreamError};
use super::pool::BufferPool;
use super::recv_queue::{RecvBuffer, RegionSpan};
use super::sink::{Begin, DdpSink, Delivery, NotBegun, SinkStats, Target};
use super::source::{DdpSource, OutSegment};
use super::{DdpConfig, SenderSeq};
use crate::cq::{CqError, CqLedger};
use crate::mem::{MemoryTable, PdId, StreamId};
use crate::stats::SourceStats;
use bytes::Bytes;
use rddp_wire::TerminateCode;
use std::collections::VecDeque;

/// Where a stream is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamState {
    /// Sending and receiving.
    Open,
    /// Graceful teardown requested: queued messages still leave, new ones are refused.
    Closing,
    /// A fatal error was reported; waiting for the ULP's abortive teardown.
    Erroneous(TerminateCode),
    /// Torn down (gracefully or not): nothing is sent or received any more.
    Closed,
}

/// Things the ULP learns from the stream, besides deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// A fatal error on received data (reported once).
    Error(DdpError),
    /// A posted receive buffer handed back unused by teardown.
    Flushed(RecvBuffer),
    /// The stream is closed; `graceful` tells which teardown ended it.
    Closed {
        /// Whether the teardown was graceful (RFC 5041 §6).
        graceful: bool,
    },
}

/// One DDP stream (one MPA connection or one SCTP stream pair).
#[derive(Debug)]
pub struct DdpStream {
    source: DdpSource,
    sink: DdpSink,
    state: StreamState,
    /// A last message (a Terminate) is queued: only it may still leave.
    last_queued: bool,
    events: VecDeque<StreamEvent>,
    /// Received segments that failed validation (counters, docs/features.md).
    refused: u64,
    /// A refusal of `begin_segment`, held until the LLP's check
    /// (`finish_segment`).
    held: Option<Box<DdpError>>,
}

impl DdpStream {
    /// An open stream `stream` of protection domain `pd` (RFC 5042: its tagged
    /// segments may use STags of `pd` only); refused if `cfg.mulpdu` is too small.
    pub fn new(stream: StreamId, pd: PdId, cfg: DdpConfig) -> Result<Self, SourceError> {
        Ok(Self {
            source: DdpSource::new(cfg.num_qns, cfg.mulpdu)?,
            sink: DdpSink::new(stream, pd, &cfg),
            state: StreamState::Open,
            last_queued: false,
            events: VecDeque::new(),
            refused: 0,
            held: None,
        })
    }

    /// The stream's identity, as the ULP chose it.
    pub fn id(&self) -> StreamId {
        self.sink.stream()
    }

    /// The stream's protection domain.
    pub fn pd(&self) -> PdId {
        self.sink.pd()
    }

    /// Where the stream is in its life.
    pub fn state(&self) -> &StreamState {
        &self.state
    }

    fn may_submit(&self) -> Result<(), StreamError> {
        match self.state {
            StreamState::Open => Ok(()),
            StreamState::Closing => Err(StreamError::Closing),
            StreamState::Erroneous(c) => Err(StreamError::Erroneous(c)),
            StreamState::Closed => Err(StreamError::Closed),
        }
    }

    // ---- Data Source ----

    /// The LLP's MULPDU changed (RFC 5041 §3: MULPDU and its changes are exposed).
    pub fn set_mulpdu(&mut self, mulpdu: usize) -> Result<(), SourceError> {
        self.source.set_mulpdu(mulpdu)
    }

    /// The current MULPDU: the largest segment cut, header included.
    pub fn mulpdu(&self) -> usize {
        self.source.mulpdu()
    }

    /// Queue a tagged message: `payload` goes to the peer's (`stag`, `to`), with
    /// `rsvd_ulp` in every segment's header (RFC 5041 §4.2). Refused on a stream
    /// not open, or if the message is 2^32 octets or longer or its TOs would wrap.
    pub fn send_tagged(
        &mut self,
        rsvd_ulp: u8,
        stag: u32,
        to: u64,
        payload: impl Into<Payload>,
    ) -> Result<(), StreamError> {
        self.may_submit()?;
        Ok(self
            .source
            .submit_tagged(rsvd_ulp, stag, to, payload.into())?)
    }

    /// Returns the MSN the message takes on `qn`.
    pub fn send_untagged(
        &mut self,
        qn: u32,
        rsvd_ulp: [u8; 5],
        payload: impl Into<Payload>,
    ) -> Result<u32, StreamError> {
        self.may_submit()?;
        Ok(self.source.submit_untagged(qn, rsvd_ulp, payload.into())?)
    }

    /// Next segment for the LLP. Also drains during graceful teardown; nothing more
    /// leaves once the stream is erroneous or closed.
    pub fn poll_segment(&mut self) -> Option<OutSegment> {
        match self.state {
            StreamState::Open | StreamState::Closing => self.source.poll_segment(),
            StreamState::Erroneous(_) if self.last_queued => self.source.poll_segment(),
            StreamState::Erroneous(_) | StreamState::Closed => None,
        }
    }

    /// A fatal error found above DDP (by the ULP, e.g. RDMAP): the stream becomes
    /// erroneous exactly as for a DDP validation failure, and accepts no more data.
    pub fn fail(&mut self, code: TerminateCode) {
        if matches!(self.state, StreamState::Open | StreamState::Closing) {
            self.state = StreamState::Erroneous(code);
        }
    }

    /// Queue the stream's last message (RDMAP's Terminate, RFC 5040 §4.8): every message
    /// not yet fully handed to the LLP is dropped, this one goes out, then nothing
    /// more. Allowed once, on an open or erroneous stream; makes it erroneous.
    pub fn send_last(
        &mut self,
        code: TerminateCode,
        qn: u32,
        rsvd_ulp: [u8; 5],
        payload: Bytes,
    ) -> Result<(), StreamError> {
        let payload = Payload::from(payload);
        if self.state == StreamState::Closed {
            return Err(StreamError::Closed);
        }
        if self.last_queued {
            return Err(StreamError::Erroneous(code));
        }
        self.fail(code);
        self.source.discard();
        self.source.submit_untagged(qn, rsvd_ulp, payload)?;
        self.last_queued = true;
        Ok(())
    }

    /// Messages not yet fully handed to the LLP.
    pub fn pending_out(&self) -> usize {
        self.source.pending()
    }

    // ---- Data Sink ----

    /// Choose how `qn` validates MSNs (docs/receive-strategies.md); before any traffic on it.
    pub fn set_recv_model(&mut self, qn: u32, model: super::RecvModel) -> Result<(), StreamError> {
        Ok(self.sink.set_recv_model(qn, model)?)
    }

    /// Credits model: enable the next `n` MSNs of `qn`.
    pub fn grant_credits(&mut self, qn: u32, n: u32) -> bool {
        self.sink.grant_credits(qn, n)
    }

    /// Draw `qn`'s receive buffers from a pool that other streams may share
    /// (docs/receive-strategies.md, strategies 2 and 3); before any traffic on it.
    pub fn set_recv_pool(&mut self, qn: u32, pool: &BufferPool) -> Result<(), StreamError> {
        Ok(self.sink.set_recv_pool(qn, pool)?)
    }

    /// Reserve `qn`'s worst-case completions on `cq`; see [`DdpSink::bind_cq`].
    pub fn bind_cq(
        &mut self,
        qn: u32,
        cq: &impl AsRef<CqLedger>,
        limit: u64,
    ) -> Result<(), CqError> {
        self.sink.bind_cq(qn, cq, limit)
    }

    /// Post a receive buffer on `qn`: on an ordered queue it is assigned to the
    /// next MSN without one, else it goes to the queue's pool. Refused once the
    /// stream is erroneous or closed.
    pub fn post_recv(&mut self, qn: u32, buf: RecvBuffer) -> Result<(), StreamError> {
        match self.state {
            StreamState::Open | StreamState::Closing => Ok(self.sink.post_recv(qn, buf)?),
            StreamState::Erroneous(c) => Err(StreamError::Erroneous(c)),
            StreamState::Closed => Err(StreamError::Closed),
        }
    }

    /// Post a receive on `qn` whose message goes into `place` (see
    /// [`super::RegionSpan`]): on an ordered queue or into its pool.
    pub fn post_recv_in_region(
        &mut self,
        qn: u32,
        id: u64,
        place: RegionSpan,
    ) -> Result<(), StreamError> {
        match self.state {
            StreamState::Open | StreamState::Closing => {
                Ok(self.sink.post_recv_in_region(qn, id, place)?)
            }
            StreamState::Erroneous(c) => Err(StreamError::Erroneous(c)),
            StreamState::Closed => Err(StreamError::Closed),
        }
    }

    /// A segment from the LLP. On a validation failure nothing is placed, the stream
    /// becomes erroneous, the error is returned (and queued as an event once), and
    /// every later segment is refused unplaced.
    pub fn on_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), StreamError> {
        self.may_receive()?;
        self.sink
            .on_segment(mem, seq, seg)
            .map_err(|e| self.refuse(e))
    }

    fn refuse(&mut self, e: DdpError) -> StreamError {
        self.refused += 1;
        let code = e.code;
        self.state = StreamState::Erroneous(code);
        self.events.push_back(StreamEvent::Error(e));
        StreamError::Erroneous(code)
    }

    fn may_receive(&self) -> Result<(), StreamError> {
        match self.state {
            StreamState::Open | StreamState::Closing => Ok(()),
            StreamState::Erroneous(c) => Err(StreamError::Erroneous(c)),
            StreamState::Closed => Err(StreamError::Closed),
        }
    }

    /// Validate a segment from its DDP header (`head`) and payload length and
    /// say where its payload goes; then the LLP fills the target
    /// ([`Self::segment_buffers`] for a receive buffer) and calls
    /// [`Self::finish_segment`].
    ///
    /// [`Begin::Alone`]: a refusal (`StreamError::Erroneous`) is held, nothing
    /// placed: the LLP's own check of the same segment (its CRC) comes first
    /// (RFC 5041 §7.1), and `finish_segment(true)` reports it (the stream
    /// erroneous, the error queued as an event once, as `on_segment`). Other
    /// errors: the stream receives nothing any more, nothing held.
    ///
    /// [`Begin::Ahead`]: one more segment of a batch (see
    /// `DdpSink::begin_segment`); `StreamError::NotAhead` when it cannot join
    /// (nothing changed, no error raised) or the stream receives nothing any
    /// more (taken alone, it is told why).
    pub fn begin_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        how: Begin<'_>,
    ) -> Result<Target, StreamError> {
        self.held = None;
        if let Err(e) = self.may_receive() {
            return Err(match how {
                Begin::Ahead(_) => StreamError::NotAhead,
                Begin::Alone => e,
            });
        }
        self.sink
            .begin_segment(mem, seq, head, payload_len, how)
            .map_err(|e| match e {
                NotBegun::NotAhead => StreamError::NotAhead,
                NotBegun::Refused(e) => {
                    let code = e.code;
                    self.held = Some(Box::new(e));
                    StreamError::Erroneous(code)
                }
            })
    }

    /// Run `f` over the receive-buffer octets of the begun untagged segments
    /// (see [`DdpSink::segment_buffers`]); `None` once the stream is not
    /// open.
    pub fn segment_buffers<R>(&mut self, f: impl FnOnce(&mut [&mut [u8]]) -> R) -> Option<R> {
        self.may_receive().ok()?;
        self.sink.segment_buffers(f)
    }

    /// The begun segment's payload is in place and the LLP checked it
    /// (`crc_ok`; true where it has no check of its own): account for it and
    /// deliver what it completes (of a batch: the oldest begun). A failed
    /// check: nothing of the begun segments is delivered, nothing reported
    /// (the LLP reports its own error). After a refused
    /// [`Self::begin_segment`]: the refusal is reported now if the check
    /// passed, else dropped.
    pub fn finish_segment(&mut self, crc_ok: bool) -> Result<(), StreamError> {
        if let Some(e) = self.held.take() {
            return Err(if crc_ok {
                self.refuse(*e)
            } else {
                StreamError::Erroneous(TerminateCode::MPA_CRC_ERROR)
            });
        }
        if !crc_ok {
            let _ = self.sink.finish_segment(false);
            return Err(StreamError::Erroneous(TerminateCode::MPA_CRC_ERROR));
        }
        if let Err(e) = self.may_receive() {
            let _ = self.sink.finish_segment(false);
            return Err(e);
        }
        self.sink.finish_segment(true).map_err(|e| self.refuse(e))
    }

    /// The next message delivered in order, if any.
    pub fn poll_delivery(&mut self) -> Option<Delivery> {
        self.sink.poll_delivery()
    }

    /// The next event (error, flushed buffer, close), if any.
    pub fn poll_event(&mut self) -> Option<StreamEvent> {
        self.events.pop_front()
    }

    /// The receiving half, for inspection.
    pub fn sink(&self) -> &DdpSink {
        &self.sink
    }

    /// The sink's counters.
    pub fn sink_stats(&self) -> SinkStats {
        self.sink.stats()
    }

    /// The source's counters.
    pub fn source_stats(&self) -> SourceStats {
        self.source.stats()
    }

    /// The LLP (or the ULP's engine above) copied payload in user space: `rx`
    /// received octets on their way into place, `tx` octets of region leases
    /// on their way out ([`crate::stats::StreamStats`]' `*_copied_octets`).
    pub fn count_copied(&mut self, rx: usize, tx: usize) {
        self.sink.count_copied(rx);
        self.source.count_copied(tx);
    }

    /// Received segments DDP refused by validation (none of them placed).
    pub fn segments_refused(&self) -> u64 {
        self.refused
    }

    // ---- Teardown ----

    /// Graceful teardown by the ULP: queued messages still leave; new requests fail.
    /// The LLP closes once [`Self::drained`] is true, then calls [`Self::on_llp_closed`].
    pub fn close(&mut self) {
        if self.state == StreamState::Open {
            self.state = StreamState::Closing;
        }
    }

    /// Whether every queued message has been handed to the LLP.
    pub fn drained(&self) -> bool {
        self.source.pending() == 0
    }

    /// Abortive teardown by the ULP (the only way out of `Erroneous`): queued sends
    /// are dropped and posted receive buffers are flushed back.
    pub fn abort(&mut self) {
        self.shut(false);
    }

    /// The LLP closed the stream. A graceful close keeps every delivered message
    /// (partial ones are discarded); a lost connection is an abortive teardown.
    pub fn on_llp_closed(&mut self, graceful: bool) {
        self.shut(graceful && matches!(self.state, StreamState::Open | StreamState::Closing));
    }

    fn shut(&mut self, graceful: bool) {
        if self.state == StreamState::Closed {
            return;
        }
        self.source.discard();
        for b in self.sink.flush() {
            self.events.push_back(StreamEvent::Flushed(b));
        }
        self.state = StreamState::Closed;
        self.events.push_back(StreamEvent::Closed { graceful });
    }
}
