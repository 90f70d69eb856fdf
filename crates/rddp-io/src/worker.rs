//! One I/O thread: its `Poll`, its tasks, its timers, and an inbox that other
//! threads post to (new tasks, wakes) behind a `mio::Waker`.

use crate::task::{Cx, Next, Task};
use crate::timers::Timers;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use std::cell::Cell;
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The inbox's token; task ids count up from 0 and never reach it.
const WAKER: Token = Token(usize::MAX);

/// Readiness events taken per `poll` call.
const EVENTS: usize = 1024;

pub(crate) enum Msg {
    Spawn(u64, Box<dyn Task>),
    Wake(u64),
    Stop,
}

/// Where other threads leave messages for one worker.
pub(crate) struct Inbox {
    msgs: Mutex<Vec<Msg>>,
    waker: Waker,
}

thread_local! {
    /// The inbox of the worker running on this thread, if any.
    static OWN_INBOX: Cell<*const Inbox> = const { Cell::new(std::ptr::null()) };
}

impl Inbox {
    pub(crate) fn post(&self, m: Msg) -> io::Result<()> {
        let mut q = self.msgs.lock().unwrap_or_else(|p| p.into_inner());
        let first = q.is_empty();
        q.push(m);
        drop(q);
        // After a wake the worker takes every message there is: only the
        // first one since its last take needs a wake (one per message was an
        // eventfd write each, e.g. per usrsctp upcall). A message from a task
        // of the same worker needs none: the worker looks at its inbox after
        // every round of runs, before it waits (`Worker::run`).
        let own = OWN_INBOX.with(|c| std::ptr::eq(c.get(), self));
        if first && !own {
            self.waker.wake()
        } else {
            Ok(())
        }
    }

    fn is_empty(&self) -> bool {
        self.msgs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    fn take(&self) -> Vec<Msg> {
        std::mem::take(&mut *self.msgs.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

struct Entry {
    task: Box<dyn Task>,
    fd: Option<RawFd>,
    /// What the poll set watches for now.
    watching: Option<Interest>,
    deadline: Option<Instant>,
    woken: bool,
}

pub(crate) struct Worker {
    poll: Poll,
    inbox: Arc<Inbox>,
    ids: Arc<AtomicU64>,
    tasks: HashMap<u64, Entry>,
    timers: Timers,
    spawned: Vec<(u64, Box<dyn Task>)>,
}

impl Worker {
    pub(crate) fn new(ids: Arc<AtomicU64>) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        Ok(Self {
            poll,
            inbox: Arc::new(Inbox {
                msgs: Mutex::new(Vec::new()),
                waker,
            }),
            ids,
            tasks: HashMap::new(),
            timers: Timers::default(),
            spawned: Vec::new(),
        })
    }

    pub(crate) fn inbox(&self) -> Arc<Inbox> {
        self.inbox.clone()
    }

    /// The loop: wait for readiness, the inbox or the earliest deadline; run
    /// what is due. Returns on [`Msg::Stop`] (the tasks are dropped with it).
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(EVENTS);
        let mut ready: Vec<u64> = Vec::new();
        OWN_INBOX.with(|c| c.set(Arc::as_ptr(&self.inbox)));
        loop {
            // Messages this thread's own tasks posted (no wake for them): run
            // them before waiting.
            let timeout = if self.inbox.is_empty() {
                self.timers.timeout(Instant::now())
            } else {
                Some(Duration::ZERO)
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // epoll_wait fails only on a broken epoll fd: nothing can be
                // served any more. Dropping the tasks closes their sockets, so
                // their peers see it.
                return;
            }
            let now = Instant::now();
            for ev in events.iter() {
                if ev.token() != WAKER {
                    ready.push(ev.token().0 as u64);
                }
            }
            // Every round, not only on the waker's event (see above).
            for m in self.inbox.take() {
                match m {
                    Msg::Spawn(id, t) => self.add(id, t, now),
                    Msg::Wake(id) => {
                        if let Some(e) = self.tasks.get_mut(&id) {
                            e.woken = true;
                            ready.push(id);
                        }
                    }
                    Msg::Stop => return,
                }
            }
            for id in ready.drain(..) {
                self.run_task(id, now);
            }
            let now = Instant::now();
            while let Some((at, id)) = self.timers.pop_due(now) {
                // Skip entries the task has since replaced.
                if let Some(e) = self.tasks.get_mut(&id)
                    && e.deadline == Some(at)
                {
                    // This entry is used up: a deadline the run asks for, even
                    // the same instant, is a new one.
                    e.deadline = None;
                    self.run_task(id, now);
                }
            }
        }
    }

    fn add(&mut self, id: u64, task: Box<dyn Task>, now: Instant) {
        let fd = task.fd();
        let e = Entry {
            task,
            fd,
            watching: None,
            deadline: None,
            woken: false,
        };
        self.tasks.insert(id, e);
        self.run_task(id, now);
    }

    fn run_task(&mut self, id: u64, now: Instant) {
        let Self {
            poll,
            inbox,
            ids,
            tasks,
            timers,
            spawned,
        } = self;
        let Some(e) = tasks.get_mut(&id) else {
            return;
        };
        let mut cx = Cx {
            now,
            woken: std::mem::take(&mut e.woken),
            id,
            inbox,
            ids,
            spawned,
        };
        let next = e.task.run(&mut cx);
        let result = match next {
            Next::Done => Ok(true),
            Next::Wait { interest, deadline } => {
                if deadline != e.deadline {
                    if let Some(at) = deadline {
                        timers.insert(at, id);
                    }
                    e.deadline = deadline;
                }
                watch(poll, id, e, interest).map(|()| false)
            }
        };
        match result {
            Ok(false) => {}
            Ok(true) => {
                if let Some(e) = tasks.remove(&id) {
                    let mut e = e;
                    // Best effort: a socket already closed has left the set.
                    let _ = watch(poll, id, &mut e, None);
                    e.task.finish();
                }
            }
            Err(err) => {
                if let Some(e) = tasks.remove(&id) {
                    e.task.failed(err);
                }
            }
        }
        for (id, t) in std::mem::take(&mut self.spawned) {
            self.add(id, t, now);
        }
    }
}

/// Make the poll set watch `e`'s socket for `want`.
fn watch(poll: &Poll, id: u64, e: &mut Entry, want: Option<Interest>) -> io::Result<()> {
    if want == e.watching {
        return Ok(());
    }
    let Some(fd) = e.fd else {
        return Ok(());
    };
    let reg = poll.registry();
    let token = Token(id as usize);
    let mut src = SourceFd(&fd);
    match (e.watching, want) {
        (None, Some(i)) => reg.register(&mut src, token, i)?,
        (Some(_), Some(i)) => reg.reregister(&mut src, token, i)?,
        (Some(_), None) => reg.deregister(&mut src)?,
        (None, None) => {}
    }
    e.watching = want;
    Ok(())
}
