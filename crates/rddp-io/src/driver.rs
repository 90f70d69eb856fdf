//! The pool of I/O threads, and handles to wake a task from another thread.

use crate::task::Task;
use crate::worker::{Inbox, Msg, Worker};
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, ThreadId};

/// A fixed pool of I/O threads. Cheap to clone; the threads stop (and drop their
/// tasks) when the last clone goes, except those of [`Driver::global`], which
/// serve the process for its life.
#[derive(Clone)]
pub struct Driver {
    inner: Arc<Inner>,
}

struct Inner {
    inboxes: Vec<Arc<Inbox>>,
    threads: Vec<(ThreadId, JoinHandle<()>)>,
    next: AtomicUsize,
    ids: Arc<AtomicU64>,
}

/// Threads of the process-wide driver: one per core, at most this many.
const GLOBAL_MAX_THREADS: usize = 4;

static GLOBAL: Mutex<Option<Driver>> = Mutex::new(None);

impl Driver {
    /// Start `threads` I/O threads (at least one).
    pub fn new(threads: usize) -> io::Result<Self> {
        let ids = Arc::new(AtomicU64::new(0));
        let mut inboxes = Vec::new();
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let w = Worker::new(ids.clone())?;
            inboxes.push(w.inbox());
            let h = std::thread::Builder::new()
                .name(format!("rddp-io-{i}"))
                .spawn(move || w.run())?;
            handles.push((h.thread().id(), h));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                inboxes,
                threads: handles,
                next: AtomicUsize::new(0),
                ids,
            }),
        })
    }

    /// The process-wide driver, started on first use: one thread per core, at
    /// most four.
    pub fn global() -> io::Result<Self> {
        let mut g = GLOBAL.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = &*g {
            return Ok(d.clone());
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let d = Self::new(cores.min(GLOBAL_MAX_THREADS))?;
        *g = Some(d.clone());
        Ok(d)
    }

    /// How many I/O threads this driver runs.
    pub fn threads(&self) -> usize {
        self.inner.inboxes.len()
    }

    /// Run `task` on one of the threads (round robin); its first run follows at
    /// once on that thread.
    pub fn spawn(&self, task: Box<dyn Task>) -> io::Result<TaskHandle> {
        let n = self.inner.next.fetch_add(1, Ordering::Relaxed) % self.inner.inboxes.len();
        let inbox = self.inner.inboxes[n].clone();
        let id = self.inner.ids.fetch_add(1, Ordering::Relaxed);
        inbox.post(Msg::Spawn(id, task))?;
        Ok(TaskHandle::new(inbox, id))
    }

    /// Run `task` on the thread of `near`'s task: tasks that wake each other
    /// for every message (an SCTP association and its queue pairs) do so
    /// without a switch between threads, and a wake from a task on the same
    /// thread needs no system call (see `Inbox::post`).
    pub fn spawn_near(&self, task: Box<dyn Task>, near: &TaskHandle) -> io::Result<TaskHandle> {
        let inbox = near.inbox.clone();
        let id = self.inner.ids.fetch_add(1, Ordering::Relaxed);
        inbox.post(Msg::Spawn(id, task))?;
        Ok(TaskHandle::new(inbox, id))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for i in &self.inboxes {
            let _ = i.post(Msg::Stop);
        }
        let me = std::thread::current().id();
        for (id, h) in self.threads.drain(..) {
            // The last clone may go from a task on one of the threads: that one
            // stops after this run and is not waited for.
            if id != me {
                let _ = h.join();
            }
        }
    }
}

/// Wakes one task from any thread: its next run has [`crate::Cx::woken`] set.
/// Waking a task that has finished does nothing.
#[derive(Clone)]
pub struct TaskHandle {
    inbox: Arc<Inbox>,
    id: u64,
}

impl TaskHandle {
    pub(crate) fn new(inbox: Arc<Inbox>, id: u64) -> Self {
        Self { inbox, id }
    }

    /// The task's id: unique within its driver, never reused.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Run the task soon, with [`crate::Cx::woken`] set.
    pub fn wake(&self) {
        let _ = self.inbox.post(Msg::Wake(self.id));
    }
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle").field("id", &self.id).finish()
    }
}
