//! DDP-SSN numbering (RFC 5043).
//!
//! * Outbound: every chunk on stream S, control or segment, takes the value the
//!   SCTP SSN would have had if sent ordered: 0, 1, 2, ... modulo 2^16, no gaps.
//! * Inbound: the 16-bit DDP-SSN is unwrapped to a 64-bit chunk index on the stream,
//!   counted from the association's start, inside a bounded window above the lowest
//!   index not yet received (no unbounded state on peer input).

/// The next DDP-SSN of one outbound stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboundSsn {
    next: u16,
}

impl OutboundSsn {
    /// Take the next DDP-SSN (wraps 0xFFFF -> 0, like the SCTP SSN).
    pub fn take(&mut self) -> u16 {
        let s = self.next;
        self.next = self.next.wrapping_add(1);
        s
    }

    /// The DDP-SSN the next [`Self::take`] returns.
    pub fn peek(&self) -> u16 {
        self.next
    }
}

/// Why a received DDP-SSN cannot be placed in the stream's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SsnError {
    /// Already received (or so far behind that it wrapped).
    Duplicate {
        /// The DDP-SSN received.
        ssn: u16,
    },
    /// Further ahead of the lowest missing DDP-SSN than the window allows.
    OutOfWindow {
        /// The DDP-SSN received.
        ssn: u16,
        /// Index of the lowest chunk not yet received.
        base: u64,
        /// How far ahead of `base` a chunk may be.
        window: usize,
    },
}

/// Received DDP-SSNs of one inbound stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundSsn {
    /// Index of the lowest chunk not yet received.
    base: u64,
    /// `seen[d]`: whether index `base + d` arrived; never longer than `window`.
    seen: std::collections::VecDeque<bool>,
    window: usize,
}

impl InboundSsn {
    /// `window` (at most 32768) bounds how far ahead of the lowest missing chunk a
    /// chunk may arrive.
    pub fn new(window: usize) -> Self {
        Self {
            base: 0,
            seen: Default::default(),
            window: window.clamp(1, 1 << 15),
        }
    }

    /// The lowest index not yet received: every chunk below it has arrived.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Whether every chunk below `index` has arrived.
    pub fn complete_below(&self, index: u64) -> bool {
        self.base >= index
    }

    /// Record a received DDP-SSN; returns its 64-bit index on the stream.
    pub fn receive(&mut self, ssn: u16) -> Result<u64, SsnError> {
        let d = usize::from(ssn.wrapping_sub(self.base as u16));
        if d >= self.window {
            return Err(if d >= (1 << 15) {
                SsnError::Duplicate { ssn }
            } else {
                SsnError::OutOfWindow {
                    ssn,
                    base: self.base,
                    window: self.window,
                }
            });
        }
        if self.seen.len() <= d {
            self.seen.resize(d + 1, false);
        }
        if self.seen[d] {
            return Err(SsnError::Duplicate { ssn });
        }
        self.seen[d] = true;
        let index = self.base + d as u64;
        while self.seen.front() == Some(&true) {
            self.seen.pop_front();
            self.base += 1;
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outbound_numbering_is_the_sctp_ssn() {
        let mut o = OutboundSsn::default();
        assert_eq!((o.take(), o.take()), (0, 1));
        let mut o = OutboundSsn { next: 0xFFFF };
        assert_eq!((o.take(), o.take()), (0xFFFF, 0));
    }

    #[test]
    fn inbound_unwraps_out_of_order_across_the_wrap() {
        let mut i = InboundSsn::new(64);
        for s in 0..0xFFF0u32 {
            i.receive(s as u16).unwrap();
        }
        assert_eq!(i.base(), 0xFFF0);
        // 0x10001 (ssn 1) arrives before 0xFFF0..0x10000.
        assert_eq!(i.receive(1), Ok(0x1_0001));
        assert_eq!(i.base(), 0xFFF0);
        for s in 0xFFF0u32..=0x1_0000 {
            assert_eq!(i.receive(s as u16), Ok(u64::from(s)));
        }
        assert_eq!(i.base(), 0x1_0002);
        assert!(i.complete_below(0x1_0002));
    }

    #[test]
    fn inbound_refuses_duplicates_and_far_chunks() {
        let mut i = InboundSsn::new(8);
        assert_eq!(i.receive(0), Ok(0));
        assert_eq!(i.receive(0), Err(SsnError::Duplicate { ssn: 0 }));
        assert_eq!(i.receive(3), Ok(3));
        assert_eq!(i.receive(3), Err(SsnError::Duplicate { ssn: 3 }));
        assert!(matches!(i.receive(9), Err(SsnError::OutOfWindow { .. })));
        assert_eq!(i.base(), 1);
    }
}
