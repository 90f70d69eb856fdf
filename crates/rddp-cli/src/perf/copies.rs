//! User-space copies of payload over one size (docs/data-path.md): the
//! process-wide counters of `rddp_proto::ddp`, read before and after. The
//! server reports its own in the Result, so a run shows both ends.

use rddp_proto::ddp::{lease_copied_octets, rx_copied_octets};

/// Payload octets copied in user space (both 0 on the direct paths).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Copies {
    /// Received payload copied on its way into place.
    pub rx: u64,
    /// Payload copied out of a region's lease on its way to the socket.
    pub tx: u64,
}

impl Copies {
    /// This process's counters now.
    pub fn now() -> Self {
        Self {
            rx: rx_copied_octets(),
            tx: lease_copied_octets(),
        }
    }

    /// What was counted since `before` (counters only grow).
    pub fn since(before: Self) -> Self {
        let now = Self::now();
        Self {
            rx: now.rx.saturating_sub(before.rx),
            tx: now.tx.saturating_sub(before.tx),
        }
    }

    /// Per field, the larger: the counters are per process, so queue pairs of
    /// one process that ran at the same time saw the same copies.
    pub fn max(self, o: Self) -> Self {
        Self {
            rx: self.rx.max(o.rx),
            tx: self.tx.max(o.tx),
        }
    }
}

/// Both ends' copies over one size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCopies {
    pub client: Copies,
    pub server: Copies,
}

impl RunCopies {
    /// Every payload octet copied at either end.
    pub fn total(&self) -> u64 {
        self.client.rx + self.client.tx + self.server.rx + self.server.tx
    }

    pub fn max(self, o: Self) -> Self {
        Self {
            client: self.client.max(o.client),
            server: self.server.max(o.server),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rddp_proto::ddp::{count_lease_copy, count_rx_copy};

    #[test]
    fn a_copy_counted_in_the_process_shows_in_the_window() {
        let before = Copies::now();
        count_rx_copy(7);
        count_lease_copy(3);
        let c = Copies::since(before);
        // Other tests of this binary may count too: at least ours.
        assert!(c.rx >= 7 && c.tx >= 3, "{c:?}");
        let run = RunCopies {
            client: c,
            server: Copies { rx: 1, tx: 2 },
        };
        assert_eq!(run.total(), c.rx + c.tx + 3);
    }
}
