//! Chunks to send (RFC 5043): DDP-SSN assignment in submission order,
//! the maximum segment size, and Terminate only when it cannot overtake.

use crate::adaptation::{Adaptation, OutChunk};
use crate::session::{LocalTerminate, SessionState};
use rddp_proto::ddp::SegmentEndpoint;
use rddp_wire::sctp::{
    PPID_DDP_SEGMENT, PPID_SESSION_CONTROL, SSN_LEN, SessionControl, SessionFunction,
};

impl Adaptation {
    /// The next chunk to hand to SCTP (unordered, unfragmented), streams served in
    /// turn. Chunks of one stream leave in DDP-SSN order: the driver must send them
    /// in the order returned.
    pub fn poll_transmit(&mut self) -> Option<OutChunk> {
        if self.dead {
            return None;
        }
        let n = self.slots.len();
        for k in 0..n {
            let sid = ((self.cursor + k) % n) as u16;
            if let Some(c) = self.transmit_from(sid) {
                self.cursor = usize::from(sid) + 1;
                return Some(c);
            }
        }
        None
    }

    /// SCTP accepted the DDP segment chunk (PPID 16) last returned for `sid`
    /// by [`Self::poll_transmit`] and not yet reported: its session's upper
    /// layer hears it (a Send or Write completes once its last one is in).
    pub fn chunk_accepted(&mut self, sid: u16) {
        if let Some(d) = self
            .slots
            .get_mut(usize::from(sid))
            .and_then(|s| s.session.as_mut())
            .and_then(|s| s.ddp.as_mut())
        {
            d.segment_accepted();
        }
    }

    fn control(&mut self, sid: u16, function: SessionFunction, private_data: Vec<u8>) -> OutChunk {
        let slot = &mut self.slots[usize::from(sid)];
        let c = SessionControl {
            ssn: slot.out.take(),
            function,
            private_data,
        };
        slot.unacked = true;
        if let Some(s) = slot.session.as_mut() {
            s.ctl_confirmed = false;
        }
        // Private data was checked on entry (0..=512, none on Terminate).
        OutChunk::whole(sid, PPID_SESSION_CONTROL, c.to_vec().unwrap_or_default())
    }

    fn transmit_from(&mut self, sid: u16) -> Option<OutChunk> {
        let max = self.max_segment;
        let slot = &mut self.slots[usize::from(sid)];
        if let Some((f, pd)) = slot.ctl.pop_front() {
            return Some(self.control(sid, f, pd));
        }
        let s = slot.session.as_mut()?;
        if s.state == SessionState::Established
            && s.local_terminate != LocalTerminate::Sent
            && let Some(seg) = s.ddp.as_mut().and_then(|d| d.poll_segment())
        {
            if seg.len() > max {
                // Never fragmented, never sent: the session fails (RFC 5043).
                let len = seg.len();
                self.violation(
                    sid,
                    format!("local DDP segment of {len} octets > maximum {max}"),
                );
                return None;
            }
            // The DDP-SSN and the DDP header here; the payload stays where it
            // is (a lease is read when the driver sends: no copy here).
            let mut head = vec![0; SSN_LEN + seg.header.len()];
            head[..SSN_LEN].copy_from_slice(&slot.out.take().to_be_bytes());
            // The slice was sized for the header just above.
            let _ = seg.header.emit(&mut head[SSN_LEN..]);
            slot.unacked = true;
            return Some(OutChunk {
                sid,
                ppid: PPID_DDP_SEGMENT,
                head,
                body: seg.payload,
            });
        }
        // A graceful Terminate follows our queued DDP messages; after a violation
        // nothing more of the session leaves, so it does not wait for them.
        let drained =
            s.state != SessionState::Established || s.ddp.as_ref().is_none_or(|d| d.drained());
        if s.local_terminate == LocalTerminate::Wanted && drained && s.ctl_confirmed {
            s.local_terminate = LocalTerminate::Sent;
            let c = self.control(sid, SessionFunction::Terminate, Vec::new());
            self.settle(sid);
            return Some(c);
        }
        None
    }
}
