//! Untagged receive buffers of one queue (QN) and the rule that says which MSNs are
//! valid (seed 003):
//!
//! * [`RecvModel::OrderedQueue`] (strategy 1): each posted buffer is pre-assigned to
//!   the next MSN; an MSN is valid iff it already has a buffer (else 1/2/0x02).
//! * [`RecvModel::Credits`] (strategy 3): the ULP grants credits, each enabling the
//!   next MSN; an MSN is valid iff it lies in the granted range (else 1/2/0x03); a
//!   buffer is taken from the queue's pool when the MSN's first segment arrives, and
//!   a valid MSN with no buffer left is a fault (1/2/0x02).

use rddp_wire::TerminateCode;
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

/// How a queue decides that an MSN is valid and when a buffer is associated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecvModel {
    #[default]
    OrderedQueue,
    Credits,
}

/// One buffer and the progress of the message that is filling it.
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

impl MsgSlot {
    fn new(buf: RecvBuffer) -> Self {
        Self {
            buf,
            ordered_bytes: 0,
            end: None,
            rsvd_ulp: [0; 5],
        }
    }
}

#[derive(Debug)]
pub(crate) struct UntaggedQueue {
    model: RecvModel,
    /// MSN of the oldest undelivered message = MSN of `slots[0]`.
    expected_msn: u32,
    /// Slot `i` belongs to MSN `expected_msn + i`; `None` = no buffer associated yet.
    slots: VecDeque<Option<MsgSlot>>,
    /// Credits model: buffers not yet associated with an MSN.
    pool: VecDeque<RecvBuffer>,
    /// Credits model: MSNs `expected_msn .. expected_msn + window` are valid.
    window: u64,
}

impl UntaggedQueue {
    pub fn new(model: RecvModel) -> Self {
        Self {
            model,
            expected_msn: 1,
            slots: VecDeque::new(),
            pool: VecDeque::new(),
            window: 0,
        }
    }

    pub fn post(&mut self, buf: RecvBuffer) {
        match self.model {
            RecvModel::OrderedQueue => self.slots.push_back(Some(MsgSlot::new(buf))),
            RecvModel::Credits => self.pool.push_back(buf),
        }
    }

    /// Credits model: enable the next `n` MSNs. Returns false under the ordered model.
    pub fn grant(&mut self, n: u32) -> bool {
        if self.model != RecvModel::Credits {
            return false;
        }
        self.window = (self.window + u64::from(n)).min(u64::from(u32::MAX));
        true
    }

    /// Validate `msn` for a newly arrived segment and return its buffer, associating
    /// one from the pool on the MSN's first segment (credits model).
    pub fn slot_for_arrival(&mut self, msn: u32) -> Result<&mut MsgSlot, TerminateCode> {
        // MSNs behind `expected_msn` (delivered) wrap to a huge distance.
        let d = msn.wrapping_sub(self.expected_msn) as usize;
        match self.model {
            RecvModel::OrderedQueue => self
                .slots
                .get_mut(d)
                .and_then(Option::as_mut)
                .ok_or(TerminateCode::DDP_INVALID_MSN_NO_BUFFER),
            RecvModel::Credits => {
                if d as u64 >= self.window {
                    return Err(TerminateCode::DDP_INVALID_MSN_RANGE);
                }
                if self.slots.len() <= d {
                    self.slots.resize_with(d + 1, || None);
                }
                let slot = &mut self.slots[d];
                if slot.is_none() {
                    let buf = self
                        .pool
                        .pop_front()
                        .ok_or(TerminateCode::DDP_INVALID_MSN_NO_BUFFER)?;
                    *slot = Some(MsgSlot::new(buf));
                }
                slot.as_mut()
                    .ok_or(TerminateCode::DDP_INVALID_MSN_NO_BUFFER)
            }
        }
    }

    /// The buffer already associated with `msn`, if any.
    pub fn slot(&mut self, msn: u32) -> Option<&mut MsgSlot> {
        let d = msn.wrapping_sub(self.expected_msn) as usize;
        self.slots.get_mut(d)?.as_mut()
    }

    /// Pop the oldest message if it is complete; returns its MSN and slot.
    pub fn pop_complete(&mut self) -> Option<(u32, MsgSlot)> {
        self.slots.front()?.as_ref()?.end?;
        let slot = self.slots.pop_front()??;
        let msn = self.expected_msn;
        self.expected_msn = msn.wrapping_add(1);
        self.window = self.window.saturating_sub(1);
        Some((msn, slot))
    }

    /// Hand every buffer back (teardown).
    pub fn flush(&mut self) -> Vec<RecvBuffer> {
        let mut out: Vec<RecvBuffer> = self.slots.drain(..).flatten().map(|s| s.buf).collect();
        out.extend(self.pool.drain(..));
        out
    }

    /// Buffers posted and not yet delivered.
    pub fn posted(&self) -> usize {
        self.slots.iter().flatten().count() + self.pool.len()
    }

    pub fn expected_msn(&self) -> u32 {
        self.expected_msn
    }
}
