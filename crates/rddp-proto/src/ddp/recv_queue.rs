//! Untagged receive buffers of one queue (QN), ordered receive queue model: each
//! posted buffer is pre-assigned to the next MSN, and an MSN is valid iff it already
//! has a buffer (seed 003, strategy 1).

use std::collections::VecDeque;

/// A receive buffer the ULP posts for one untagged message. Owned by DDP from
/// posting until delivery (or flush), then handed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvBuffer {
    /// The ULP's own identifier (a verbs wr_id).
    pub id: u64,
    /// Capacity is `data.len()`; a delivery says how many octets the message filled.
    pub data: Vec<u8>,
}

/// One posted buffer and the progress of the message that is filling it.
#[derive(Debug)]
pub(crate) struct MsgSlot {
    pub buf: RecvBuffer,
    /// Payload octets of segments already processed in sender order.
    pub ordered_bytes: u64,
    /// Message length, known once the L=1 segment is processed in sender order.
    pub end: Option<u32>,
    /// RsvdULP of the L=1 segment (RDMAP control, Invalidate STag).
    pub rsvd_ulp: [u8; 5],
}

#[derive(Debug)]
pub(crate) struct UntaggedQueue {
    /// MSN of the oldest undelivered message = MSN of `slots[0]`.
    expected_msn: u32,
    slots: VecDeque<MsgSlot>,
}

impl UntaggedQueue {
    pub fn new() -> Self {
        Self {
            expected_msn: 1,
            slots: VecDeque::new(),
        }
    }

    pub fn post(&mut self, buf: RecvBuffer) {
        self.slots.push_back(MsgSlot {
            buf,
            ordered_bytes: 0,
            end: None,
            rsvd_ulp: [0; 5],
        });
    }

    /// The buffer pre-assigned to `msn`, if any. MSNs behind `expected_msn` (already
    /// delivered) wrap to a huge distance and so have none.
    pub fn slot(&mut self, msn: u32) -> Option<&mut MsgSlot> {
        let d = msn.wrapping_sub(self.expected_msn) as usize;
        self.slots.get_mut(d)
    }

    /// Pop the oldest message if it is complete; returns its MSN and slot.
    pub fn pop_complete(&mut self) -> Option<(u32, MsgSlot)> {
        self.slots.front()?.end?;
        let slot = self.slots.pop_front()?;
        let msn = self.expected_msn;
        self.expected_msn = msn.wrapping_add(1);
        Some((msn, slot))
    }

    /// Hand every posted buffer back (teardown).
    pub fn flush(&mut self) -> impl Iterator<Item = RecvBuffer> + '_ {
        self.slots.drain(..).map(|s| s.buf)
    }

    pub fn posted(&self) -> usize {
        self.slots.len()
    }

    pub fn expected_msn(&self) -> u32 {
        self.expected_msn
    }

    #[cfg(test)]
    pub(crate) fn set_expected_msn(&mut self, msn: u32) {
        self.expected_msn = msn;
    }
}
