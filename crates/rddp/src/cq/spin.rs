//! How long a thread that waits for a completion busy-polls
//! ([`CompletionQueue::poll_busy`]) before it sleeps.
//!
//! A completion is often microseconds away (an answer on its way): reading
//! for it on the waiting thread saves a wake-up and a switch between threads.
//! So a wait looks for [`SPIN`] first. Once a look has read part of a message
//! (within an FPDU, or between a message's FPDUs), the message is arriving:
//! the wait goes on looking until [`MOVING`] has passed without such a look,
//! so the waiting thread reads it to its end, rather than reading its start
//! and leaving the rest to the I/O thread, the socket handed over twice a
//! completion (docs/journal.md, "Who reads a Read Response").

use super::{CompletionQueue, WorkCompletion};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a wait looks before it sleeps when nothing arrives.
pub(super) const SPIN: Duration = Duration::from_micros(20);

/// How long a wait goes on looking after its last look that saw a message
/// arriving: a Read Response of 1 MiB comes in 64 KiB FPDUs, tens of
/// microseconds apart on a loaded machine.
pub(super) const MOVING: Duration = Duration::from_micros(100);

/// The clock is read every this many looks (a read costs about as much as a
/// look that finds nothing).
const LOOKS_A_CLOCK: u32 = 16;

/// One wait's busy poll: [`Self::look_into`] while [`Self::going`], then
/// [`CompletionQueue::end_busy`] before sleeping.
pub struct Spin<'a> {
    cq: &'a CompletionQueue,
    /// The wait's limit; its clock starts at the first look that found
    /// nothing ([`Self::going`]): a wait answered at its first look reads no
    /// clock (a ping-pong's every wait).
    limit: Duration,
    /// Set at the first clock read: (until, end). Looking ends at `until`,
    /// unless a look sees a message arriving first; never beyond `end` (the
    /// wait's own limit).
    clock: Option<(Instant, Instant)>,
    /// [`CompletionQueue::busy_arrivals`] as last seen.
    arrivals: u64,
    looks: u32,
}

impl CompletionQueue {
    /// Start a wait's busy poll of at most `limit`.
    #[must_use]
    pub fn spin(&self, limit: Duration) -> Spin<'_> {
        Spin {
            cq: self,
            limit,
            clock: None,
            arrivals: self.inner.arriving.load(Ordering::Relaxed),
            looks: 0,
        }
    }

    /// Busy-poll looks so far that read part of a message whose end had not
    /// come (its queue pairs' sockets, [`Self::poll_busy`]).
    pub fn busy_arrivals(&self) -> u64 {
        self.inner.arriving.load(Ordering::Relaxed)
    }
}

impl Spin<'_> {
    /// One look ([`CompletionQueue::poll_busy_into`]); how many completions
    /// it took.
    pub fn look_into(&mut self, max: usize, out: &mut impl Extend<WorkCompletion>) -> usize {
        self.looks = self.looks.wrapping_add(1);
        self.cq.poll_busy_into(max, out)
    }

    /// Looks made so far.
    pub fn looks(&self) -> u32 {
        self.looks
    }

    /// Whether to look again: before 20 µs have passed (counted from the
    /// first call), or 100 µs after the last look that saw a message
    /// arriving, within the limit (the module's `SPIN` and `MOVING`).
    pub fn going(&mut self) -> bool {
        let Some((until, end)) = &mut self.clock else {
            let now = Instant::now();
            let end = now + self.limit;
            self.clock = Some(((now + SPIN).min(end), end));
            return !self.limit.is_zero();
        };
        if !self.looks.is_multiple_of(LOOKS_A_CLOCK) {
            return true;
        }
        let now = Instant::now();
        let arrivals = self.cq.busy_arrivals();
        if arrivals != self.arrivals {
            self.arrivals = arrivals;
            *until = (*until).max((now + MOVING).min(*end));
        }
        now < *until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrive(cq: &CompletionQueue) {
        cq.inner.arriving.fetch_add(1, Ordering::Relaxed);
    }

    #[test]
    fn a_spin_ends_after_spin_unless_a_message_is_arriving() {
        let cq = CompletionQueue::new(4);
        let mut quiet = cq.spin(Duration::from_secs(1));
        assert!(quiet.going());
        std::thread::sleep(SPIN * 5);
        assert!(!quiet.going(), "went on with nothing arriving");

        let mut busy = cq.spin(Duration::from_secs(1));
        assert!(busy.going(), "the clock starts");
        std::thread::sleep(SPIN * 2);
        arrive(&cq);
        assert!(busy.going(), "stopped while a message was arriving");
        std::thread::sleep(MOVING * 3);
        assert!(!busy.going(), "went on after the message stopped arriving");
    }

    #[test]
    fn a_spin_never_outlasts_its_limit() {
        let cq = CompletionQueue::new(4);
        let mut s = cq.spin(Duration::from_micros(1));
        assert!(s.going(), "the clock starts");
        std::thread::sleep(SPIN);
        arrive(&cq);
        assert!(!s.going());
    }

    #[test]
    fn the_clock_starts_at_the_first_going_not_before() {
        let cq = CompletionQueue::new(4);
        let mut s = cq.spin(Duration::from_secs(1));
        let mut out = Vec::new();
        // A wait whose first look is answered never asks.
        s.look_into(1, &mut out);
        assert!(s.clock.is_none(), "no clock read for a spin and a look");
        std::thread::sleep(SPIN * 5);
        // SPIN counts from here, not from the spin's creation.
        assert!(s.going());
        assert!(s.clock.is_some());
    }

    #[test]
    fn the_clock_is_read_every_16_looks() {
        let cq = CompletionQueue::new(4);
        let mut s = cq.spin(Duration::ZERO);
        assert!(!s.going());
        let mut out = Vec::new();
        s.look_into(1, &mut out);
        // Between two clock reads a spin goes on, whatever the time.
        assert!(s.going());
        for _ in 1..LOOKS_A_CLOCK {
            s.look_into(1, &mut out);
        }
        assert_eq!(s.looks(), LOOKS_A_CLOCK);
        assert!(!s.going());
    }
}
