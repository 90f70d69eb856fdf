//! Received chunks (RFC 5043): DDP-SSN unwrapping, the maximum
//! segment size, placement of DDP segments as they arrive, violations and the end
//! of a session.

use crate::adaptation::{Adaptation, AssociationError, Event};
use crate::session::{CloseReason, LocalTerminate, Role, SessionState};
use rddp_proto::ddp::SegmentEndpoint;
use rddp_proto::mem::MemoryTable;
use rddp_wire::sctp::{PPID_DDP_SEGMENT, PPID_SESSION_CONTROL, SSN_LEN, SessionControl};

/// What [`Adaptation::admit`] decided for a DDP segment.
enum Admit {
    /// Hand it to the session's upper layer at this sender position.
    Place(u64),
    /// Hold it until the Accept arrives.
    Hold,
    /// Nothing more to do (a violation reported, or the rest of a closed session).
    Drop,
}

impl Adaptation {
    /// A received chunk payload (DDP-SSN first). Problems of one session terminate
    /// that session; an `AssociationError` means the driver must abort the
    /// association (no Terminate on each stream, RFC 5043).
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
        match self.admit(sid, index, seg.len()) {
            Admit::Place(seq) => {
                if let Some(d) = self.upper(sid) {
                    // DDP errors make the DDP stream erroneous and are reported by it
                    // (poll_event); tearing down is the ULP's decision (RFC 5041).
                    let _ = d.on_segment(mem, seq, seg);
                }
            }
            Admit::Hold => self.hold(sid, index, seg.to_vec()),
            Admit::Drop => {}
        }
    }

    /// Header-first form of [`Self::on_chunk`] for a DDP segment (PPID 16,
    /// unordered): `head` is the chunk's DDP-SSN and the segment's DDP header,
    /// `payload_len` payload octets follow in the message, and `fill` reads
    /// them (into exactly the slice it is given; `false`: the LLP failed). The
    /// session's upper layer decides from the header where they go
    /// ([`SegmentEndpoint::place_segment`]); every check of `on_chunk` runs
    /// before any of them is read. What is not read (a refused segment) the
    /// driver drains.
    pub fn on_chunk_direct(
        &mut self,
        mem: &MemoryTable,
        sid: u16,
        head: &[u8],
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Result<(), AssociationError> {
        if self.dead {
            return Err(AssociationError("association already failed".into()));
        }
        let Some(slot) = self.slots.get_mut(usize::from(sid)) else {
            return Err(AssociationError(format!(
                "chunk on stream {sid} beyond the stream count"
            )));
        };
        let Some(ssn) = head
            .get(..SSN_LEN)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
        else {
            return Err(AssociationError("chunk shorter than its DDP-SSN".into()));
        };
        let index = slot
            .inbound
            .receive(ssn)
            .map_err(|e| AssociationError(format!("stream {sid}: DDP-SSN {e:?}")))?;
        let ddp_head = &head[SSN_LEN..];
        match self.admit(sid, index, ddp_head.len() + payload_len) {
            Admit::Place(seq) => {
                if let Some(d) = self.upper(sid) {
                    let _ = d.place_segment(mem, seq, ddp_head, payload_len, fill);
                }
            }
            Admit::Hold => {
                // Rare (segments that overtook the Accept): held whole.
                let mut seg = ddp_head.to_vec();
                seg.resize(ddp_head.len() + payload_len, 0);
                if fill(&mut seg[ddp_head.len()..]) {
                    self.count_copied(sid, payload_len, 0);
                    self.hold(sid, index, seg);
                }
            }
            Admit::Drop => {}
        }
        self.settle(sid);
        Ok(())
    }

    /// The driver (or this layer) copied payload of the session on `sid` in
    /// user space: `rx` received octets on their way into place, `tx` octets
    /// of a region lease on their way out; counted in the session's stream
    /// statistics (not counted once the session is gone).
    pub fn count_copied(&mut self, sid: u16, rx: usize, tx: usize) {
        if let Some(u) = self
            .slots
            .get_mut(usize::from(sid))
            .and_then(|s| s.session.as_mut())
            .and_then(|s| s.ddp.as_mut())
        {
            u.count_copied(rx, tx);
        }
    }

    /// The session's upper layer, if it is placing.
    fn upper(&mut self, sid: u16) -> Option<&mut crate::session::Upper> {
        self.slots[usize::from(sid)].session.as_mut()?.ddp.as_mut()
    }

    /// What becomes of the DDP segment of `seg_len` octets at DDP-SSN index
    /// `index` on `sid` (the checks before any octet is placed).
    fn admit(&mut self, sid: u16, index: u64, seg_len: usize) -> Admit {
        let (max, held_max) = (self.max_recv_segment, self.cfg.max_held_octets);
        let slot = &mut self.slots[usize::from(sid)];
        let Some(s) = slot.session.as_mut().filter(|s| !s.idle()) else {
            self.bogus(sid, index, "DDP segment");
            return Admit::Drop;
        };
        match s.state {
            SessionState::Closed => Admit::Drop, // rest of a failed session
            // RFC 5043: segments above the maximum are rejected, received ones too
            // (SCTP fragmented them): before any octet is placed.
            _ if seg_len > max => {
                self.violation(
                    sid,
                    format!("DDP segment of {seg_len} octets > maximum {max}"),
                );
                Admit::Drop
            }
            SessionState::Established => {
                if index <= s.peer_start || s.peer_terminate.is_some_and(|t| index > t) {
                    self.violation(
                        sid,
                        format!("DDP segment at index {index} outside the session"),
                    );
                    return Admit::Drop;
                }
                // The active side sends segments only after our Accept arrived.
                s.ctl_confirmed |= s.role == Role::Passive;
                if s.ddp.is_some() {
                    Admit::Place(index - s.peer_start - 1)
                } else {
                    Admit::Drop
                }
            }
            // A segment the peer sent after its Accept, which has not arrived yet:
            // held, up to `max_held_octets` per session.
            SessionState::InitiateSent if index > s.peer_start => {
                if s.held_octets + seg_len > held_max {
                    self.violation(
                        sid,
                        format!("more than {held_max} octets of DDP segments before Accept"),
                    );
                    return Admit::Drop;
                }
                s.held_octets += seg_len;
                Admit::Hold
            }
            _ => {
                self.violation(sid, format!("DDP segment at index {index} before Accept"));
                Admit::Drop
            }
        }
    }

    /// Keep a segment that overtook the Accept (counted by `admit`).
    fn hold(&mut self, sid: u16, index: u64, seg: Vec<u8>) {
        if let Some(s) = self.slots[usize::from(sid)].session.as_mut() {
            s.held.push((index, seg));
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
