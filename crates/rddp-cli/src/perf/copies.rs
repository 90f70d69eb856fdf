//! User-space copies of payload over one size (docs/data-path.md): the
//! queue pair's own counters (`QpStats::rx_copied_octets` and
//! `tx_copied_octets`), read before and after. The server reports its own in
//! the Result, so a run shows both ends.

use rddp::QpStats;

/// Payload octets copied in user space (both 0 on the direct paths).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Copies {
    /// Received payload copied on its way into place.
    pub rx: u64,
    /// Payload copied out of a region's lease on its way to the socket.
    pub tx: u64,
}

impl Copies {
    /// A queue pair's counters.
    pub(crate) fn of(s: &QpStats) -> Self {
        Self {
            rx: s.rx_copied_octets,
            tx: s.tx_copied_octets,
        }
    }

    /// What was counted between `before` and `now` (counters only grow).
    pub(crate) fn since(now: Self, before: Self) -> Self {
        Self {
            rx: now.rx.saturating_sub(before.rx),
            tx: now.tx.saturating_sub(before.tx),
        }
    }

    /// The copies of two queue pairs together.
    pub(crate) fn add(self, o: Self) -> Self {
        Self {
            rx: self.rx + o.rx,
            tx: self.tx + o.tx,
        }
    }
}

/// Both ends' copies over one size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RunCopies {
    pub client: Copies,
    pub server: Copies,
}

impl RunCopies {
    /// Every payload octet copied at either end.
    pub(crate) fn total(&self) -> u64 {
        self.client.rx + self.client.tx + self.server.rx + self.server.tx
    }

    /// The copies of two connections' runs together.
    pub(crate) fn add(self, o: Self) -> Self {
        Self {
            client: self.client.add(o.client),
            server: self.server.add(o.server),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_counts_what_moved_and_runs_add_up() {
        let at = |rx, tx| QpStats {
            rx_copied_octets: rx,
            tx_copied_octets: tx,
            ..QpStats::default()
        };
        let c = Copies::since(Copies::of(&at(17, 5)), Copies::of(&at(10, 2)));
        assert_eq!(c, Copies { rx: 7, tx: 3 });
        let run = RunCopies {
            client: c,
            server: Copies { rx: 1, tx: 2 },
        };
        assert_eq!(run.total(), 13);
        assert_eq!(run.add(run).total(), 26);
    }
}
