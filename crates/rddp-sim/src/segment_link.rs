//! One direction of a simulated whole-segment LLP (like SCTP, RFC 5043) on
//! the virtual clock: each DDP segment is one message, due at the tick it was
//! sent plus the link's delay, tagged with its place in the sender's order;
//! among the segments due, one of the oldest `window` is handed up next (at
//! random, from the pair's seed), so segments overtake each other.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Segments on the way.
#[derive(Debug, Default)]
pub(crate) struct SegmentLink {
    /// Ticks from sending to arrival.
    pub(crate) delay: u64,
    /// How many of the oldest due segments may be handed up next (at least 1).
    pub(crate) window: usize,
    /// (tick due, sender order, segment), in sending order.
    in_flight: Vec<(u64, u64, Vec<u8>)>,
    /// Sender order of the next segment sent.
    next_seq: u64,
    /// The sender's close: arrives at this tick, after every segment.
    fin: Option<u64>,
    /// The close arrived.
    eof: bool,
}

impl SegmentLink {
    /// A link whose segments arrive `delay` ticks after they are sent, one of
    /// the oldest `window` due next.
    pub(crate) fn new(delay: u64, window: usize) -> Self {
        Self {
            delay,
            window,
            ..Self::default()
        }
    }

    /// Put one segment on the link at tick `now`.
    pub(crate) fn send(&mut self, now: u64, seg: Vec<u8>) {
        if self.fin.is_some() {
            return;
        }
        let due = now.saturating_add(self.delay);
        // Due times never decrease along the list (a delay may have shrunk).
        let due = self.in_flight.last().map_or(due, |&(d, _, _)| d.max(due));
        self.in_flight.push((due, self.next_seq, seg));
        self.next_seq += 1;
    }

    /// Close the sending side (after every segment sent); once only.
    pub(crate) fn close(&mut self, now: u64) {
        if self.fin.is_none() {
            let due = now.saturating_add(self.delay);
            self.fin = Some(self.in_flight.last().map_or(due, |&(d, _, _)| d.max(due)));
        }
    }

    /// The earliest tick at which a segment or the close arrives.
    pub(crate) fn next_arrival(&self) -> Option<u64> {
        match self.in_flight.first() {
            Some(&(d, _, _)) => Some(d),
            None if !self.eof => self.fin,
            None => None,
        }
    }

    /// Whether the close arrives now (once every segment has arrived).
    pub(crate) fn arrive_fin(&mut self, now: u64) -> bool {
        if self.in_flight.is_empty() && !self.eof && self.fin.is_some_and(|d| d <= now) {
            self.eof = true;
            return true;
        }
        false
    }

    /// One segment due by `now`, with its sender order: one of the oldest
    /// `window` of those due.
    pub(crate) fn arrive_one(&mut self, now: u64, rng: &mut ChaCha8Rng) -> Option<(u64, Vec<u8>)> {
        let due = self.in_flight.iter().take_while(|s| s.0 <= now).count();
        if due == 0 {
            return None;
        }
        let w = self.window.clamp(1, due);
        let i = rng.next_u32() as usize % w;
        let (_, seq, seg) = self.in_flight.remove(i);
        Some((seq, seg))
    }

    /// Octets of every segment on the way, in sending order, for a test to
    /// change (`f` may not change their lengths: each keeps its own).
    pub(crate) fn tamper_in_flight(&mut self, f: impl FnOnce(&mut [u8])) {
        let mut all: Vec<u8> = self.in_flight.iter().flat_map(|s| s.2.clone()).collect();
        f(&mut all);
        let mut at = 0;
        for (_, _, s) in &mut self.in_flight {
            let n = s.len();
            s.copy_from_slice(&all[at..at + n]);
            at += n;
        }
    }
}
