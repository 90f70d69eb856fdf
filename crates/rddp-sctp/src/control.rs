//! Received session control chunks (RFC 5043): the legal sequences
//! Initiate, Accept, segments, Terminate(s) / Initiate, Reject / Initiate, Terminate;
//! anything else terminates the session it belongs to, or the one it claims.

use crate::adaptation::{Adaptation, Event};
use crate::session::{CloseReason, LocalTerminate, Role, Session, SessionState};
use rddp_proto::ddp::SegmentEndpoint;
use rddp_wire::sctp::{SSN_LEN, SessionControl, SessionFunction};

/// Held segments to place once the Accept they overtook has arrived.
pub(crate) type Held = Vec<(u64, Vec<u8>)>;

impl Adaptation {
    /// A control chunk; returns held segments to place (those that overtook Accept).
    pub(crate) fn on_control(&mut self, sid: u16, index: u64, c: SessionControl) -> Held {
        use SessionFunction::*;
        let slot = &mut self.slots[usize::from(sid)];
        let state = slot
            .session
            .as_ref()
            .map(|s| (s.role, s.state, s.peer_start, s.peer_done));
        match (state, c.function) {
            // A new session: nothing of the previous one may be outstanding.
            (None | Some((_, SessionState::Closed, ..)), Initiate)
                if slot.inbound.complete_below(index + 1) =>
            {
                self.new_initiate(sid, index, Ok(c.private_data));
            }
            (
                Some((Role::Active, SessionState::InitiateSent, start, _)),
                f @ (Accept | Reject | Terminate),
            ) if index == start => {
                let Some(s) = slot.session.as_mut() else {
                    return Vec::new();
                };
                s.ctl_confirmed = true;
                if f == Accept {
                    s.state = SessionState::Established;
                    s.held_octets = 0;
                    self.events.push_back(Event::Accepted {
                        sid,
                        private_data: c.private_data,
                    });
                    return std::mem::take(&mut s.held);
                }
                s.state = SessionState::Closed;
                s.peer_done = true;
                s.local_terminate = LocalTerminate::Sent;
                s.held.clear();
                s.held_octets = 0;
                if let Some(d) = s.ddp.as_mut() {
                    d.on_llp_closed(false);
                }
                let reason = match f {
                    Reject => CloseReason::Rejected(c.private_data),
                    _ => CloseReason::Refused,
                };
                self.events.push_back(Event::Closed { sid, reason });
            }
            (Some((_, SessionState::Established, start, _)), Terminate) if index > start => {
                let Some(s) = slot.session.as_mut() else {
                    return Vec::new();
                };
                // "At least one Terminate" (RFC 5043): a later one is legal; the
                // first in DDP-SSN order ends the peer's side of the session.
                s.peer_terminate = Some(s.peer_terminate.map_or(index, |t| t.min(index)));
                s.ctl_confirmed = true;
                if s.local_terminate == LocalTerminate::None {
                    // Answer with our own Terminate once our queued data has left.
                    s.local_terminate = LocalTerminate::Wanted;
                    if let Some(d) = s.ddp.as_mut() {
                        d.close();
                    }
                }
            }
            // After a violation: the peer's Terminate ends its side (settle marks
            // the stream free once everything before it has arrived).
            (Some((_, SessionState::Closed, _, false)), Terminate) => {
                if let Some(s) = slot.session.as_mut() {
                    s.peer_terminate = Some(s.peer_terminate.map_or(index, |t| t.min(index)));
                }
            }
            (Some((_, SessionState::Closed, _, false)), _) => {} // rest of a failed session
            // A further Terminate of a session that is over: legal, nothing to do.
            (Some((_, SessionState::Closed, _, true)), Terminate) => {}
            (None, Terminate) => self.stray(sid, index, "Terminate"),
            // Accept, Reject, or an Initiate that overtook chunks of the old session,
            // on a stream without a session: fits no legal sequence.
            (None | Some((_, SessionState::Closed, _, true)), f) => {
                self.bogus(sid, index, &format!("{f:?}"));
            }
            (_, f) => self.violation(
                sid,
                format!("{f:?} at index {index} fits no legal sequence"),
            ),
        }
        Vec::new()
    }

    /// The peer's Initiate on a free stream: to the ULP (bounded queue), or answered
    /// with Terminate without the ULP (Initiate, Terminate: RFC 5043) when the queue
    /// is full or the Initiate is malformed (`Err`: private data over 512 octets).
    fn new_initiate(&mut self, sid: u16, index: u64, private_data: Result<Vec<u8>, String>) {
        let full = self.pending.len() >= self.cfg.max_pending_initiates;
        let slot = &mut self.slots[usize::from(sid)];
        let mut s = Session::new(Role::Passive, SessionState::InitiateReceived, index, None);
        let refusal = match private_data {
            Err(why) => Some(CloseReason::Violation(why)),
            Ok(_) if full => Some(CloseReason::Refused),
            Ok(private_data) => {
                self.pending.push_back(sid);
                self.events
                    .push_back(Event::InitiateRequest { sid, private_data });
                None
            }
        };
        if let Some(reason) = refusal {
            // The active side sends nothing after its Initiate before our answer.
            s.state = SessionState::Closed;
            s.peer_done = true;
            s.local_terminate = LocalTerminate::Sent;
            slot.ctl.push_back((SessionFunction::Terminate, Vec::new()));
            self.events.push_back(Event::Closed { sid, reason });
        }
        slot.session = Some(s);
    }

    /// A control chunk that does not parse (unknown function, private data over
    /// 512 octets or on a Terminate): a violation of a live session; on a free
    /// stream an Initiate is refused with Terminate, never handed to the ULP.
    pub(crate) fn bad_control(&mut self, sid: u16, index: u64, payload: &[u8], why: &str) {
        let function = payload
            .get(SSN_LEN..SSN_LEN + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]));
        let slot = &self.slots[usize::from(sid)];
        let free = slot.session.as_ref().is_none_or(|s| s.idle());
        let closed = slot
            .session
            .as_ref()
            .is_none_or(|s| s.state == SessionState::Closed);
        let is = |f: SessionFunction| function == Some(f.code());
        if closed && is(SessionFunction::Initiate) && slot.inbound.complete_below(index + 1) {
            self.new_initiate(sid, index, Err(format!("Initiate: {why}")));
        } else if free && is(SessionFunction::Terminate) {
            // Never answer a Terminate with a Terminate (no ping-pong).
            self.stray(sid, index, "Terminate");
        } else if free {
            self.bogus(sid, index, &format!("session control ({why})"));
        } else if !closed {
            self.violation(sid, format!("bad session control: {why}"));
        } // else: the rest of a failed session
    }

    fn stray(&mut self, sid: u16, index: u64, what: &str) {
        self.events.push_back(Event::Stray {
            sid,
            detail: format!("{what} at DDP-SSN index {index} outside any session"),
        });
    }

    /// A chunk on a stream without a session fits no legal sequence (RFC 5043): the
    /// session it claims is terminated at once. One Terminate per such session:
    /// later chunks of it are ignored until the peer's Terminate or a new Initiate.
    pub(crate) fn bogus(&mut self, sid: u16, index: u64, what: &str) {
        let slot = &mut self.slots[usize::from(sid)];
        let mut s = Session::new(Role::Passive, SessionState::Closed, index, None);
        s.local_terminate = LocalTerminate::Sent;
        slot.session = Some(s);
        slot.ctl.push_back((SessionFunction::Terminate, Vec::new()));
        self.events.push_back(Event::Stray {
            sid,
            detail: format!(
                "{what} at DDP-SSN index {index} outside any session: answered with Terminate"
            ),
        });
    }
}
