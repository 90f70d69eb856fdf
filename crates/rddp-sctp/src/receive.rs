//! Received chunks (seed 001; spec §5.3-5.5): DDP-SSN unwrapping, the legal session
//! sequences, and placement of DDP segments as they arrive.

use crate::adaptation::{Adaptation, AssociationError, Event};
use crate::session::{CloseReason, LocalTerminate, Role, Session, SessionState};
use rddp_proto::ddp::SegmentEndpoint;
use rddp_proto::mem::MemoryTable;
use rddp_wire::sctp::{
    PPID_DDP_SEGMENT, PPID_SESSION_CONTROL, SSN_LEN, SessionControl, SessionFunction,
};

type Held = Vec<(u64, Vec<u8>)>;

impl Adaptation {
    /// A received chunk payload (DDP-SSN first). Problems of one session terminate
    /// that session; an `AssociationError` means the driver must abort the
    /// association (no Terminate on each stream, spec §5.6).
    pub fn on_chunk(
        &mut self,
        mem: &MemoryTable,
        sid: u16,
        ppid: u32,
        payload: &[u8],
    ) -> Result<(), AssociationError> {
        if self.dead {
            return Err(AssociationError("association already failed".into()));
        }
        let Some(slot) = self.slots.get_mut(usize::from(sid)) else {
            return Err(AssociationError(format!(
                "chunk on stream {sid} beyond the stream count"
            )));
        };
        let Some(ssn) = payload
            .get(..SSN_LEN)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
        else {
            return Err(AssociationError("chunk shorter than its DDP-SSN".into()));
        };
        if ppid != PPID_DDP_SEGMENT && ppid != PPID_SESSION_CONTROL {
            return Err(AssociationError(format!(
                "PPID {ppid} on a DDP association"
            )));
        }
        let index = slot
            .inbound
            .receive(ssn)
            .map_err(|e| AssociationError(format!("stream {sid}: DDP-SSN {e:?}")))?;
        if ppid == PPID_DDP_SEGMENT {
            self.on_segment(mem, sid, index, &payload[SSN_LEN..]);
        } else {
            match SessionControl::parse(payload) {
                Ok(c) => {
                    for (i, seg) in self.on_control(sid, index, c) {
                        self.on_segment(mem, sid, i, &seg);
                    }
                }
                Err(e) => self.violation(sid, format!("bad session control: {e}")),
            }
        }
        self.settle(sid);
        Ok(())
    }

    fn on_segment(&mut self, mem: &MemoryTable, sid: u16, index: u64, seg: &[u8]) {
        let window = self.cfg.reorder_window;
        let slot = &mut self.slots[usize::from(sid)];
        let Some(s) = slot.session.as_mut() else {
            return self.stray(sid, index, "DDP segment");
        };
        match s.state {
            SessionState::Established => {
                if index <= s.peer_start || s.peer_terminate.is_some_and(|t| index > t) {
                    return self.violation(
                        sid,
                        format!("DDP segment at index {index} outside the session"),
                    );
                }
                // The active side sends segments only after our Accept arrived.
                s.ctl_confirmed |= s.role == Role::Passive;
                if let Some(d) = s.ddp.as_mut() {
                    // DDP errors make the DDP stream erroneous and are reported by it
                    // (poll_event); tearing down is the ULP's decision (seed 000).
                    let _ = d.on_segment(mem, index - s.peer_start - 1, seg);
                }
            }
            // A segment the peer sent after its Accept, which has not arrived yet.
            SessionState::InitiateSent if index > s.peer_start && s.held.len() < window => {
                s.held.push((index, seg.to_vec()));
            }
            SessionState::Closed if !s.peer_done => {} // rest of a failed session
            SessionState::Closed => self.stray(sid, index, "DDP segment"),
            _ => self.violation(sid, format!("DDP segment at index {index} before Accept")),
        }
    }

    /// A control chunk; returns held segments to place (those that overtook Accept).
    fn on_control(&mut self, sid: u16, index: u64, c: SessionControl) -> Held {
        use SessionFunction::*;
        let full = self.pending.len() >= self.cfg.max_pending_initiates;
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
                let mut s =
                    Session::new(Role::Passive, SessionState::InitiateReceived, index, None);
                if full {
                    // Bounded queue: refuse without the ULP (Initiate, Terminate).
                    s.state = SessionState::Closed;
                    s.peer_done = true;
                    s.local_terminate = LocalTerminate::Sent;
                    slot.ctl.push_back((Terminate, Vec::new()));
                    self.events.push_back(Event::Closed {
                        sid,
                        reason: CloseReason::Refused,
                    });
                } else {
                    self.pending.push_back(sid);
                    self.events.push_back(Event::InitiateRequest {
                        sid,
                        private_data: c.private_data,
                    });
                }
                slot.session = Some(s);
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
                if s.peer_terminate.is_some() {
                    self.violation(sid, "a second Terminate".into());
                    return Vec::new();
                }
                s.peer_terminate = Some(index);
                s.ctl_confirmed = true;
                if s.local_terminate == LocalTerminate::None {
                    // Answer with our own Terminate once our queued data has left.
                    s.local_terminate = LocalTerminate::Wanted;
                    if let Some(d) = s.ddp.as_mut() {
                        d.close();
                    }
                }
            }
            (Some((_, SessionState::Closed, _, false)), _) => {} // rest of a failed session
            (None | Some((_, SessionState::Closed, ..)), f) => {
                self.stray(sid, index, &format!("{f:?}"));
            }
            (_, f) => self.violation(
                sid,
                format!("{f:?} at index {index} fits no legal sequence"),
            ),
        }
        Vec::new()
    }

    fn stray(&mut self, sid: u16, index: u64, what: &str) {
        self.events.push_back(Event::Stray {
            sid,
            detail: format!("{what} at DDP-SSN index {index} outside any session"),
        });
    }

    /// Terminate the session on `sid` for a protocol violation: its DDP stream is
    /// torn down and a Terminate goes out once it cannot overtake our last control.
    pub(crate) fn violation(&mut self, sid: u16, detail: String) {
        let slot = &mut self.slots[usize::from(sid)];
        let Some(s) = slot
            .session
            .as_mut()
            .filter(|s| s.state != SessionState::Closed)
        else {
            // No live session to terminate: report it.
            self.events.push_back(Event::Stray { sid, detail });
            return;
        };
        if s.state == SessionState::InitiateReceived {
            self.pending.retain(|&p| p != sid);
        }
        s.state = SessionState::Closed;
        s.peer_done = false;
        s.held.clear();
        if s.local_terminate != LocalTerminate::Sent {
            s.local_terminate = LocalTerminate::Wanted;
        }
        if let Some(d) = s.ddp.as_mut() {
            d.on_llp_closed(false);
        }
        self.events.push_back(Event::Closed {
            sid,
            reason: CloseReason::Violation(detail),
        });
    }

    /// Close an accepted session once both Terminates are done and every chunk the
    /// peer sent before its Terminate has arrived.
    pub(crate) fn settle(&mut self, sid: u16) {
        let slot = &mut self.slots[usize::from(sid)];
        let Some(s) = slot.session.as_mut() else {
            return;
        };
        let Some(t) = s.peer_terminate else { return };
        if s.state != SessionState::Established || !slot.inbound.complete_below(t + 1) {
            return;
        }
        s.peer_done = true;
        if s.local_terminate == LocalTerminate::Sent {
            s.state = SessionState::Closed;
            if let Some(d) = s.ddp.as_mut() {
                d.on_llp_closed(true);
            }
            self.events.push_back(Event::Closed {
                sid,
                reason: CloseReason::Terminated,
            });
        }
    }
}
