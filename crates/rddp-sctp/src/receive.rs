//! Received chunks (seed 001; spec §5.3-5.5): DDP-SSN unwrapping, the maximum
//! segment size, placement of DDP segments as they arrive, violations and the end
//! of a session.

use crate::adaptation::{Adaptation, AssociationError, Event};
use crate::session::{CloseReason, LocalTerminate, Role, SessionState};
use rddp_proto::ddp::SegmentEndpoint;
use rddp_proto::mem::MemoryTable;
use rddp_wire::sctp::{PPID_DDP_SEGMENT, PPID_SESSION_CONTROL, SSN_LEN, SessionControl};

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
                Err(e) => self.bad_control(sid, index, payload, &e.to_string()),
            }
        }
        self.settle(sid);
        Ok(())
    }

    fn on_segment(&mut self, mem: &MemoryTable, sid: u16, index: u64, seg: &[u8]) {
        let (max, held_max) = (self.max_recv_segment, self.cfg.max_held_octets);
        let slot = &mut self.slots[usize::from(sid)];
        let Some(s) = slot.session.as_mut().filter(|s| !s.idle()) else {
            return self.bogus(sid, index, "DDP segment");
        };
        match s.state {
            SessionState::Closed => {} // rest of a failed session
            // Seed 001: segments above the maximum are rejected, received ones too
            // (SCTP fragmented them): before any octet is placed.
            _ if seg.len() > max => self.violation(
                sid,
                format!("DDP segment of {} octets > maximum {max}", seg.len()),
            ),
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
            // A segment the peer sent after its Accept, which has not arrived yet:
            // held, up to `max_held_octets` per session.
            SessionState::InitiateSent if index > s.peer_start => {
                if s.held_octets + seg.len() > held_max {
                    return self.violation(
                        sid,
                        format!("more than {held_max} octets of DDP segments before Accept"),
                    );
                }
                s.held_octets += seg.len();
                s.held.push((index, seg.to_vec()));
            }
            _ => self.violation(sid, format!("DDP segment at index {index} before Accept")),
        }
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
        s.held_octets = 0;
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
    /// peer sent before its Terminate has arrived. After a violation, the peer's
    /// Terminate with everything before it means nothing of it is outstanding.
    pub(crate) fn settle(&mut self, sid: u16) {
        let slot = &mut self.slots[usize::from(sid)];
        let Some(s) = slot.session.as_mut() else {
            return;
        };
        let Some(t) = s.peer_terminate else { return };
        if !slot.inbound.complete_below(t + 1) {
            return;
        }
        match s.state {
            SessionState::Established => {
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
            SessionState::Closed => s.peer_done = true,
            _ => {}
        }
    }
}
