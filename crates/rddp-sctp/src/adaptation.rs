//! The sans-IO RFC 5043 adaptation layer of one association:
//! chunks in ([`Adaptation::on_chunk`]), chunks out ([`Adaptation::poll_transmit`]),
//! one [`DdpStream`] per accepted session. No sockets: a driver moves the chunks.

use crate::session::{CloseReason, LocalTerminate, Role, Session, SessionState, Upper};
use crate::ssn::{InboundSsn, OutboundSsn};
use rddp_proto::ddp::{DdpConfig, DdpStream, Payload, SegmentEndpoint};
use rddp_proto::mem::{PdId, StreamId};
use rddp_wire::sctp::{MAX_SESSION_PD, MIN_MAX_SEGMENT, SSN_LEN, SessionFunction};
use std::collections::VecDeque;

/// Settings of one association's adaptation layer.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Inbound = outbound stream count (RFC 5043: equal); DDP streams 0..streams.
    pub streams: u16,
    /// Bound of Initiates awaiting the ULP; beyond it Initiate gets Terminate.
    pub max_pending_initiates: usize,
    /// How far ahead of the lowest missing DDP-SSN a chunk may arrive.
    pub reorder_window: usize,
    /// Octets of DDP segments the active side holds per session while its Accept
    /// has not arrived (segments that overtook it); beyond it the session fails.
    pub max_held_octets: usize,
    /// Settings of each session's DDP stream (its MULPDU is set by the adaptation).
    pub ddp: DdpConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            streams: 16,
            max_pending_initiates: 8,
            reorder_window: 1024,
            max_held_octets: 256 * 1024,
            ddp: DdpConfig::default(),
        }
    }
}

/// A chunk for the driver to send unordered (U=1), unfragmented, on stream `sid`:
/// one message, `head` then `body` (the driver gathers them, no copy first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutChunk {
    /// SCTP stream number: the DDP stream (session) the chunk belongs to.
    pub sid: u16,
    /// 16 for a DDP segment, 17 for Session Control (RFC 5043).
    pub ppid: u32,
    /// A DDP segment's DDP-SSN and DDP header, or a whole Session Control message.
    pub head: Vec<u8>,
    /// A DDP segment's payload, read where it lies when sent (a lease on a
    /// registered region, or owned octets); empty for Session Control.
    pub body: Payload,
}

impl OutChunk {
    /// A chunk of owned octets only (Session Control, tests).
    pub fn whole(sid: u16, ppid: u32, octets: Vec<u8>) -> Self {
        Self {
            sid,
            ppid,
            head: octets,
            body: Payload::default(),
        }
    }

    /// Octets of the message (`head` and `body`).
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// Whether the message has no octets.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message's octets, copied into one buffer (a data path that does so
    /// counts the lease's octets: [`Adaptation::count_copied`]).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        v.extend_from_slice(&self.head);
        self.body.with(|b| v.extend_from_slice(b));
        v
    }
}

/// What the ULP learns about sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The peer asks for a session on `sid`: call `accept` or `reject`.
    InitiateRequest {
        /// The stream number of the requested session.
        sid: u16,
        /// The Initiate's private data (at most 512 octets).
        private_data: Vec<u8>,
    },
    /// Our Initiate was accepted: DDP may flow on `sid`.
    Accepted {
        /// The stream number of the session.
        sid: u16,
        /// The Accept's private data (at most 512 octets).
        private_data: Vec<u8>,
    },
    /// The session on `sid` is over.
    Closed {
        /// The stream number of the session.
        sid: u16,
        /// How it ended.
        reason: CloseReason,
    },
    /// A received chunk fit no session (there was no session to terminate).
    Stray {
        /// The stream the chunk came on.
        sid: u16,
        /// What the chunk was and what became of it, for the log.
        detail: String,
    },
}

/// A local request the adaptation refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The stream number is not below the association's stream count.
    #[error("stream {0} does not exist on this association")]
    NoSuchStream(u16),
    /// A session is open on the stream, or a chunk of the last one may still be
    /// outstanding (RFC 5043: no reuse before then).
    #[error("stream {0} is busy: a session is open or chunks may still be outstanding")]
    Busy(u16),
    /// `accept` or `reject` without the peer's Initiate awaiting a decision.
    #[error("stream {0} has no Initiate awaiting a decision")]
    NoInitiate(u16),
    /// `terminate` before the session was accepted.
    #[error("stream {0} has no established session (Terminate waits for Accept)")]
    NotEstablished(u16),
    /// Session Control private data longer than 512 octets (RFC 5043).
    #[error("private data of {0} octets exceeds 512")]
    PrivateDataTooLong(usize),
    /// The session's DDP stream could not be created.
    #[error("DDP stream: {0}")]
    Ddp(String),
}

/// An error that ends the whole association (no Terminate on each stream).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("association error: {0}")]
pub struct AssociationError(pub String);

#[derive(Debug)]
pub(crate) struct Slot {
    pub out: OutboundSsn,
    pub inbound: InboundSsn,
    pub session: Option<Session>,
    /// First controls of a session, ready to leave in order (Initiate, Accept,
    /// Reject, refusal): none of them can overtake an earlier one.
    pub ctl: VecDeque<(SessionFunction, Vec<u8>)>,
    /// Something we sent may be unacknowledged (cleared by sender-dry).
    pub unacked: bool,
}

/// The DDP/SCTP adaptation layer of one association.
#[derive(Debug)]
pub struct Adaptation {
    pub(crate) cfg: Config,
    pub(crate) max_segment: usize,
    /// Largest DDP segment accepted from the peer: the largest `max_segment` this
    /// association has had (segments sized before a path MTU drop stay valid).
    pub(crate) max_recv_segment: usize,
    pub(crate) slots: Vec<Slot>,
    /// Stream numbers whose Initiate awaits the ULP (bounded by the config).
    pub(crate) pending: VecDeque<u16>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) cursor: usize,
    pub(crate) dead: bool,
}

/// The largest DDP segment for a fragmentation point (largest unfragmented SCTP
/// user message): the DDP-SSN takes 2 octets, and 516 is the floor (RFC 5043).
pub fn max_segment_for(fragmentation_point: usize) -> usize {
    fragmentation_point
        .saturating_sub(SSN_LEN)
        .max(MIN_MAX_SEGMENT)
}

impl Adaptation {
    /// An association whose SCTP fragmentation point is `fragmentation_point`.
    pub fn new(cfg: Config, fragmentation_point: usize) -> Self {
        let slots = (0..cfg.streams)
            .map(|_| Slot {
                out: OutboundSsn::default(),
                inbound: InboundSsn::new(cfg.reorder_window),
                session: None,
                ctl: VecDeque::new(),
                unacked: false,
            })
            .collect();
        Self {
            max_segment: max_segment_for(fragmentation_point),
            max_recv_segment: max_segment_for(fragmentation_point),
            cfg,
            slots,
            pending: VecDeque::new(),
            events: VecDeque::new(),
            cursor: 0,
            dead: false,
        }
    }

    /// Largest DDP segment (the MULPDU told to DDP); larger ones are rejected.
    pub fn max_segment(&self) -> usize {
        self.max_segment
    }

    /// Largest DDP segment accepted from the peer (RFC 5043: larger ones were
    /// fragmented by SCTP): the largest maximum segment this association has had,
    /// as the fragmentation point applies to both directions of the path.
    pub fn max_recv_segment(&self) -> usize {
        self.max_recv_segment
    }

    /// The path changed: tell every DDP stream its new MULPDU (RFC 5043).
    pub fn set_fragmentation_point(&mut self, fragmentation_point: usize) {
        self.max_segment = max_segment_for(fragmentation_point);
        let m = self.max_segment;
        self.max_recv_segment = self.max_recv_segment.max(m);
        for s in self.slots.iter_mut().filter_map(|s| s.session.as_mut()) {
            if let Some(d) = s.ddp.as_mut() {
                let _ = d.set_mulpdu(m);
            }
        }
    }

    fn slot(&mut self, sid: u16) -> Result<&mut Slot, SessionError> {
        self.slots
            .get_mut(usize::from(sid))
            .ok_or(SessionError::NoSuchStream(sid))
    }

    fn new_ddp(&self, stream: StreamId, pd: PdId) -> Result<DdpStream, SessionError> {
        let cfg = DdpConfig {
            mulpdu: self.max_segment,
            max_reorder: self.cfg.reorder_window,
            ..self.cfg.ddp
        };
        DdpStream::new(stream, pd, cfg).map_err(|e| SessionError::Ddp(e.to_string()))
    }

    /// The DDP stream of the session on `sid` (post buffers, send, poll deliveries).
    pub fn stream(&mut self, sid: u16) -> Option<&mut DdpStream> {
        self.slots
            .get_mut(usize::from(sid))?
            .session
            .as_mut()?
            .ddp
            .as_mut()?
            .ddp()
    }

    /// The state of the session on `sid`, if there is one.
    pub fn session_state(&self, sid: u16) -> Option<SessionState> {
        Some(self.slots.get(usize::from(sid))?.session.as_ref()?.state)
    }

    /// The oldest event not yet taken, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether [`Self::poll_event`] has something.
    pub fn has_event(&self) -> bool {
        !self.events.is_empty()
    }

    /// Initiates waiting for the ULP.
    pub fn pending_initiates(&self) -> usize {
        self.pending.len()
    }

    // ---- ULP requests ----

    /// Open a session on `sid` as the active side. Its DDP stream exists at once (so
    /// buffers can be posted) but sends nothing before the Accept (RFC 5043).
    pub fn initiate(
        &mut self,
        sid: u16,
        stream: StreamId,
        pd: PdId,
        private_data: &[u8],
    ) -> Result<(), SessionError> {
        check_pd(private_data)?;
        let ddp = Upper::Ddp(Box::new(self.new_ddp(stream, pd)?));
        self.initiate_with(sid, ddp, private_data)
    }

    /// [`Self::initiate`] with the session's segments relayed to `upper` (a ULP
    /// engine that owns its DDP stream) instead of a DDP stream of the session's own.
    pub fn initiate_relay(
        &mut self,
        sid: u16,
        upper: Box<dyn SegmentEndpoint>,
        private_data: &[u8],
    ) -> Result<(), SessionError> {
        check_pd(private_data)?;
        self.initiate_with(sid, Upper::Relay(upper), private_data)
    }

    fn initiate_with(
        &mut self,
        sid: u16,
        ddp: Upper,
        private_data: &[u8],
    ) -> Result<(), SessionError> {
        let slot = self.slot(sid)?;
        if !reusable(slot) {
            return Err(SessionError::Busy(sid));
        }
        let start = slot.inbound.base();
        slot.session = Some(Session::new(
            Role::Active,
            SessionState::InitiateSent,
            start,
            Some(ddp),
        ));
        slot.ctl
            .push_back((SessionFunction::Initiate, private_data.to_vec()));
        Ok(())
    }

    /// Accept the peer's Initiate on `sid`.
    pub fn accept(
        &mut self,
        sid: u16,
        stream: StreamId,
        pd: PdId,
        private_data: &[u8],
    ) -> Result<(), SessionError> {
        check_pd(private_data)?;
        let ddp = Upper::Ddp(Box::new(self.new_ddp(stream, pd)?));
        self.accept_with(sid, ddp, private_data)
    }

    /// [`Self::accept`] with the session's segments relayed to `upper`.
    pub fn accept_relay(
        &mut self,
        sid: u16,
        upper: Box<dyn SegmentEndpoint>,
        private_data: &[u8],
    ) -> Result<(), SessionError> {
        check_pd(private_data)?;
        self.accept_with(sid, Upper::Relay(upper), private_data)
    }

    fn accept_with(
        &mut self,
        sid: u16,
        ddp: Upper,
        private_data: &[u8],
    ) -> Result<(), SessionError> {
        self.take_pending(sid)?;
        let slot = self.slot(sid)?;
        if let Some(s) = slot.session.as_mut() {
            s.state = SessionState::Established;
            s.ddp = Some(ddp);
        }
        slot.ctl
            .push_back((SessionFunction::Accept, private_data.to_vec()));
        Ok(())
    }

    /// Reject the peer's Initiate on `sid` (only ever at the ULP's direction).
    pub fn reject(&mut self, sid: u16, private_data: &[u8]) -> Result<(), SessionError> {
        check_pd(private_data)?;
        self.take_pending(sid)?;
        let slot = self.slot(sid)?;
        if let Some(s) = slot.session.as_mut() {
            s.state = SessionState::Closed;
            s.peer_done = true;
        }
        slot.ctl
            .push_back((SessionFunction::Reject, private_data.to_vec()));
        self.events.push_back(Event::Closed {
            sid,
            reason: CloseReason::Rejected(private_data.to_vec()),
        });
        Ok(())
    }

    fn take_pending(&mut self, sid: u16) -> Result<(), SessionError> {
        let at = self
            .pending
            .iter()
            .position(|&s| s == sid)
            .ok_or(SessionError::NoInitiate(sid))?;
        self.pending.remove(at);
        Ok(())
    }

    /// Graceful end of the session on `sid`: queued DDP messages still leave, then
    /// Terminate (once it cannot overtake our previous control message).
    pub fn terminate(&mut self, sid: u16) -> Result<(), SessionError> {
        let slot = self.slot(sid)?;
        let s = slot
            .session
            .as_mut()
            .filter(|s| s.state == SessionState::Established)
            .ok_or(SessionError::NotEstablished(sid))?;
        if s.local_terminate == LocalTerminate::None {
            s.local_terminate = LocalTerminate::Wanted;
            if let Some(d) = s.ddp.as_mut() {
                d.close();
            }
        }
        Ok(())
    }

    // ---- LLP events ----

    /// Every chunk we sent has been acknowledged (SCTP sender-dry): our controls
    /// have arrived and nothing of ours is outstanding.
    pub fn on_sender_dry(&mut self) {
        for slot in &mut self.slots {
            slot.unacked = false;
            if let Some(s) = slot.session.as_mut() {
                s.ctl_confirmed = true;
            }
        }
    }

    /// The association ended (error or loss): every session closes without a
    /// Terminate on each stream (RFC 5043).
    pub fn on_association_lost(&mut self) {
        self.dead = true;
        for (sid, slot) in self.slots.iter_mut().enumerate() {
            slot.ctl.clear();
            if let Some(s) = slot.session.as_mut() {
                if let Some(d) = s.ddp.as_mut() {
                    d.on_llp_closed(false);
                }
                if s.state != SessionState::Closed {
                    s.state = SessionState::Closed;
                    self.events.push_back(Event::Closed {
                        sid: sid as u16,
                        reason: CloseReason::AssociationLost,
                    });
                }
            }
        }
    }
}

fn check_pd(pd: &[u8]) -> Result<(), SessionError> {
    if pd.len() > MAX_SESSION_PD {
        return Err(SessionError::PrivateDataTooLong(pd.len()));
    }
    Ok(())
}

/// A stream number may carry a new session we start only when the old session is
/// over and nothing of it can be outstanding in either direction (RFC 5043): our
/// Terminate sent and acknowledged, the peer's last chunk and all before it here.
pub(crate) fn reusable(slot: &Slot) -> bool {
    !slot.unacked
        && slot.ctl.is_empty()
        && slot
            .session
            .as_ref()
            .is_none_or(|s| s.idle() && s.local_terminate != LocalTerminate::Wanted)
}
