//! What the loop runs: a [`Task`], and what it answers after each run ([`Next`]).

use crate::driver::TaskHandle;
use crate::worker::Inbox;
use mio::Interest;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One unit of work on the loop: usually one non-blocking socket and the sans-IO
/// engine behind it.
///
/// The socket behind [`Task::fd`] must stay open until [`Task::finish`]: the loop
/// removes it from its poll set after the last run and before `finish`, so a task
/// that hands its socket on (to a caller that uses it blocking) does so in
/// `finish`, never in `run`.
pub trait Task: Send + 'static {
    /// The file descriptor to watch, if any (a task may live on timers and wakes
    /// alone). Read once, when the task is spawned.
    fn fd(&self) -> Option<RawFd>;

    /// Do whatever can be done now without blocking, and say what to wait for.
    /// Called once when spawned, then on readiness (edge-triggered: read or write
    /// until `WouldBlock`), on the deadline, and after [`crate::TaskHandle::wake`].
    fn run(&mut self, cx: &mut Cx<'_>) -> Next;

    /// After the last run, the socket no longer watched: hand results and the
    /// socket on, or drop them.
    fn finish(self: Box<Self>) {}

    /// The loop could not watch the socket as asked (e.g. out of memory for the
    /// poll set): the task is dropped from the loop without `finish`.
    fn failed(self: Box<Self>, err: std::io::Error) {
        let _ = err;
    }
}

/// A task's answer after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run again when the socket is ready for `interest` (`None`: not watched),
    /// at `deadline` if that comes first, or when woken.
    Wait {
        /// The readiness to wait for; `None` leaves the socket unwatched.
        interest: Option<Interest>,
        /// When to run at the latest; `None`: no deadline.
        deadline: Option<Instant>,
    },
    /// Finished: the loop stops watching the socket and calls [`Task::finish`].
    Done,
}

impl Next {
    /// Wait for the socket to be readable, or until `deadline`.
    pub fn readable(deadline: Option<Instant>) -> Self {
        Self::Wait {
            interest: Some(Interest::READABLE),
            deadline,
        }
    }

    /// Wait for the socket to be writable, or until `deadline`.
    pub fn writable(deadline: Option<Instant>) -> Self {
        Self::Wait {
            interest: Some(Interest::WRITABLE),
            deadline,
        }
    }
}

/// What a run knows and may do.
pub struct Cx<'a> {
    /// The time the loop woke up (one clock read per iteration).
    pub now: Instant,
    /// Whether [`crate::TaskHandle::wake`] was called since the last run.
    pub woken: bool,
    pub(crate) id: u64,
    pub(crate) inbox: &'a Arc<Inbox>,
    pub(crate) ids: &'a AtomicU64,
    pub(crate) spawned: &'a mut Vec<(u64, Box<dyn Task>)>,
}

impl Cx<'_> {
    /// Start `task` on this same thread, right after this run.
    pub fn spawn(&mut self, task: Box<dyn Task>) -> TaskHandle {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        self.spawned.push((id, task));
        TaskHandle::new(self.inbox.clone(), id)
    }

    /// A handle that wakes the running task (to give to other threads).
    pub fn handle(&self) -> TaskHandle {
        TaskHandle::new(self.inbox.clone(), self.id)
    }
}
