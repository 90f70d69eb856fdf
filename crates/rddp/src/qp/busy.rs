//! Busy polling: a thread that waits for a completion of an MPA queue pair on
//! the loop reads the queue pair's socket itself, instead of letting the I/O
//! thread read it and hand the completion over (a wake-up and a switch between
//! threads per message, the larger part of a ping-pong's round trip).
//!
//! [`crate::CompletionQueue::poll_busy`] asks for the receive side: the loop's
//! task stops watching the socket for reading (it still watches for writing
//! when output waits) and the polling thread reads, places and completes under
//! the queue pair's lock, as the task would. Each look renews a lease of
//! [`LEASE`] (the task checks at its end whether there was a look during it);
//! a lease without a look, [`crate::CompletionQueue::end_busy`], the
//! end of the stream or any error gives the socket back to the task, which
//! reads what came meanwhile at once. So a queue pair nobody polls any more
//! goes on receiving (Read Requests answered, Writes placed) after the lease.
//!
//! Linux does the same for sockets (SO_BUSY_POLL); libfabric calls it manual
//! progress.

use super::Shared;
use super::task::{RxEnd, receive_here};
use crate::transport::mpa_in::MpaIn;
use std::sync::TryLockError;
use std::time::{Duration, Instant};

/// How long a busy-polling thread keeps the receive side after its last look.
/// The loop's timers have millisecond resolution (epoll_wait).
pub(super) const LEASE: Duration = Duration::from_millis(1);

/// Who reads an MPA queue pair's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reader {
    /// The loop's task, on READABLE.
    Loop,
    /// A thread asked to read; the task hands over at its next run.
    Wanted,
    /// A busy-polling thread. `looks` counts its looks (no clock read per
    /// look); at `until` the task checks whether there were any since `seen`:
    /// if so, the lease goes on, else the socket goes back to the loop.
    Busy {
        looks: u64,
        seen: u64,
        until: Instant,
    },
}

impl Reader {
    /// At the task's run: take a request over, or take the socket back once a
    /// lease went by without a look. True while a busy-polling thread reads.
    pub(super) fn settle(&mut self, now: Instant) -> bool {
        match *self {
            Reader::Wanted => {
                *self = Reader::Busy {
                    looks: 0,
                    seen: 0,
                    until: now + LEASE,
                };
                true
            }
            Reader::Busy { until, .. } if now < until => true,
            Reader::Busy { looks, seen, .. } if looks != seen => {
                *self = Reader::Busy {
                    looks,
                    seen: looks,
                    until: now + LEASE,
                };
                true
            }
            Reader::Busy { .. } => {
                *self = Reader::Loop;
                false
            }
            Reader::Loop => false,
        }
    }

    /// When the task should look again at a busy-polling thread's lease.
    pub(super) fn lease_end(&self) -> Option<Instant> {
        match *self {
            Reader::Busy { until, .. } => Some(until),
            _ => None,
        }
    }

    /// A thread asks for the receive side (or, holding it, renews its
    /// lease): from the loop, the task (`task`) hands it over at its next run.
    fn ask(&mut self, task: Option<&rddp_io::TaskHandle>) {
        match self {
            Reader::Loop => {
                *self = Reader::Wanted;
                if let Some(t) = task {
                    t.wake();
                }
            }
            Reader::Wanted => {}
            Reader::Busy { looks, .. } => *looks = looks.wrapping_add(1),
        }
    }
}

/// The receive half of an MPA queue pair on the loop, under the queue pair's
/// lock so that the task or a busy-polling thread can drive it.
pub(super) struct RxHalf {
    pub input: MpaIn,
    /// The task lets another thread read (it is reading itself: not held,
    /// not ended, not draining after a Terminate).
    pub open: bool,
    pub reader: Reader,
    /// How a busy-polling thread's read ended (the task takes it over).
    pub end: Option<RxEnd>,
}

impl RxHalf {
    pub(super) fn new(input: MpaIn) -> Self {
        Self {
            input,
            open: false,
            reader: Reader::Loop,
            end: None,
        }
    }
}

/// A queue pair whose receive side a completion queue's busy poll may drive.
pub(crate) trait Driven: Send + Sync {
    /// Read and place what the socket has now, on this thread (never waits for
    /// the queue pair's lock: if another thread holds it, that one is reading).
    /// Whether a message is arriving: this look read octets of one whose end
    /// has not come yet (within an FPDU, or between a message's FPDUs).
    fn progress(&self) -> bool;
    /// Ask for the receive side as [`Self::progress`] does, without reading
    /// now (a poll that found its completion already queued by the loop).
    fn claim(&self);
    /// Give the receive side back to the loop now.
    fn release(&self);
}

impl Driven for Shared {
    fn progress(&self) -> bool {
        let mut g = match self.state.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        let st = &mut *g;
        let Some(io) = &mut st.mpa else {
            return false;
        };
        let Some(h) = &mut io.rx else {
            return false;
        };
        if !h.open {
            return false;
        }
        h.reader.ask(io.handle.as_ref());
        // This thread looks again soon, so a short read may end this look (a
        // read less per look). Not for the task: a short read says nothing of
        // an end of stream already pending, whose readiness edge is spent.
        h.input.rx.set_stream_source(true);
        let before = (h.input.rx.fpdus(), h.input.rx.placed_octets());
        let end = receive_here(self, st, false);
        let mid_message = st.rdmap.rx_mid_message();
        let mut moved = false;
        if let Some(h) = st.mpa.as_mut().and_then(|io| io.rx.as_mut()) {
            h.input.rx.set_stream_source(false);
            moved = (h.input.rx.fpdus(), h.input.rx.placed_octets()) != before
                && (mid_message || !h.input.rx.at_boundary());
        }
        let Some(end) = end else {
            return moved;
        };
        // Once more, as the task's run does after its receive: completions
        // taken from the engine above may let it close now (a graceful
        // disconnect whose last work just completed). Only then: otherwise
        // the receive's own pump left nothing to do (a few hundred
        // instructions a message of a ping-pong).
        if st.rdmap.is_closing() || st.rdmap.is_terminated() {
            self.pump_in(st, false);
        }
        let Some(io) = &mut st.mpa else {
            return moved;
        };
        let Some(h) = &mut io.rx else {
            return moved;
        };
        let ended = !matches!(end, RxEnd::Blocked | RxEnd::More);
        if ended {
            h.end = Some(end);
            h.open = false;
        }
        if !h.open {
            // Ended, or the stream is dead (a Terminate): the task takes over.
            h.reader = Reader::Loop;
            if let Some(t) = &io.handle {
                t.wake();
            }
        }
        moved
    }

    fn claim(&self) {
        let Ok(mut g) = self.state.try_lock() else {
            // Another thread holds it: the loop reading, or a poller.
            return;
        };
        if let Some(io) = &mut g.mpa
            && let Some(h) = &mut io.rx
            && h.open
        {
            h.reader.ask(io.handle.as_ref());
        }
    }

    fn release(&self) {
        let mut g = crate::device::lock(&self.state);
        if let Some(io) = &mut g.mpa
            && let Some(h) = &mut io.rx
            && h.reader != Reader::Loop
        {
            h.reader = Reader::Loop;
            if let Some(t) = &io.handle {
                t.wake();
            }
        }
    }
}
