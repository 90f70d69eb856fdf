//! One association as a task on the event loop (no descriptor): woken by
//! usrsctp's upcall, by its queue pairs and by a timer; non-blocking sends and
//! receives; the passive side's ULP commands (accept, reject) in, its session
//! requests out.

use super::relay::{Relay, RelayEndpoint, wake};
use super::{SID, SessionRequest};
use crate::transport::Inbound;
use rddp_io::{Cx, Next, Task, TaskHandle};
use rddp_proto::mem::MemoryTable;
use rddp_sctp::Event;
use rddp_sctp::driver::SctpConnection;
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, TryLockError, Weak};
use std::time::{Duration, Instant};

pub(super) enum Cmd {
    Accept(u16, Arc<Relay>, Vec<u8>),
    Reject(u16, Vec<u8>),
}

#[derive(Default)]
pub(super) struct AssocState {
    pub(super) requests: VecDeque<SessionRequest>,
    cmds: VecDeque<Cmd>,
    pub(super) mulpdu: usize,
    pub(super) lost: bool,
    /// The association's task.
    pub(super) task: Option<TaskHandle>,
    /// Its connection (for the queue pairs' direct sends).
    pub(super) conn: Option<Arc<Mutex<SctpConnection>>>,
    /// Told when a request arrives or the association is lost.
    pub(super) notify: Option<Notify>,
}

/// See [`Association::set_notify`](super::Association::set_notify).
pub type Notify = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
pub(super) struct AssocShared {
    st: Mutex<AssocState>,
    pub(super) cv: Condvar,
}

impl AssocShared {
    pub(super) fn lock(&self) -> MutexGuard<'_, AssocState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Wake whoever waits for requests (and the notify function).
    fn tell(&self) {
        self.cv.notify_all();
        let n = self.lock().notify.clone();
        if let Some(n) = n {
            n();
        }
    }
    pub(super) fn command(&self, c: Cmd) {
        let mut st = self.lock();
        st.cmds.push_back(c);
        let h = st.task.clone();
        drop(st);
        wake(h);
    }
}

/// Runs per association task: messages received (or chunks sent) before it
/// lets the loop's other tasks go first.
const MESSAGES_PER_RUN: usize = 64;

/// How long a closing association lets queued output (a Terminate) leave.
const LINGER: Duration = Duration::from_secs(2);

/// When an idle association looks again anyway (the path's fragmentation point;
/// a safety net only: every upcall wakes the task). Cheap with thousands of
/// associations.
const IDLE_CHECK: Duration = Duration::from_millis(500);

/// When a blocked send tries again if no upcall says there is space.
const BLOCKED_CHECK: Duration = Duration::from_millis(1);

/// Receiving in usrsctp's upcall, on usrsctp's own thread: a message goes
/// from usrsctp into place (`Placer`) with no wake of the loop's thread per
/// DATA chunk (that hop was most of the receiver's switches).
/// usrsctp 0.9.5 calls upcalls with none of its locks held (its
/// programs/*_upcall.c receive in them). Whatever else the upcall may mean (a
/// session request, a close, send space while output waits, an error) wakes
/// the task, which does the rest as before.
struct UpcallRx {
    /// Weak: the socket holds this (its upcall), and the connection the socket.
    conn: Weak<Mutex<SctpConnection>>,
    /// The sessions' relays, as the task keeps them (backpressure).
    relays: Mutex<Vec<Arc<Relay>>>,
    /// The task lets the upcall receive: not closing, not lost.
    open: AtomicBool,
    task: OnceLock<TaskHandle>,
    /// The memory table `SctpConnection::poll` is given, for the task too
    /// (the queue pairs place through their relays); made once: a table
    /// seeds its RNG from the OS.
    scratch: MemoryTable,
}

impl UpcallRx {
    fn on_upcall(&self) {
        if !self.receive()
            && let Some(h) = self.task.get()
        {
            h.wake();
        }
    }

    /// Read what usrsctp has now. False: the task must run (it holds the
    /// connection, a session lags, something other than data came, or the
    /// run's budget is spent).
    fn receive(&self) -> bool {
        if !self.open.load(Ordering::Acquire) {
            return false;
        }
        // Never waits: the task or a posting thread that holds it reads or
        // sends itself (lock order: connection, then queue pair).
        let Some(conn) = self.conn.upgrade() else {
            return false;
        };
        let mut c = match conn.try_lock() {
            Ok(c) => c,
            Err(TryLockError::WouldBlock | TryLockError::Poisoned(_)) => return false,
        };
        for _ in 0..MESSAGES_PER_RUN {
            let room = self
                .relays
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .all(|r| r.has_room());
            if !room {
                return false;
            }
            match c.poll(&self.scratch, Duration::ZERO) {
                Ok(true) if c.has_event() => return false,
                Ok(true) => {}
                Ok(false) => return !c.is_blocked(),
                Err(_) => return false,
            }
        }
        false
    }
}

/// Spawn an association's task on the process's event loop; usrsctp's upcall
/// receives data itself (`UpcallRx`) and wakes the task for the rest.
pub(super) fn spawn_assoc(task: AssocTask) -> io::Result<TaskHandle> {
    let driver = rddp_io::Driver::global()?;
    let rx = task.rx.clone();
    let r2 = rx.clone();
    task.conn().set_wake(Some(Arc::new(move || r2.on_upcall())));
    if let Some(sh) = &task.shared {
        sh.lock().conn = Some(task.conn.clone());
    }
    let relays = rx.relays.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let task_conn = task.conn.clone();
    let h = driver.spawn(Box::new(task))?;
    let _ = rx.task.set(h.clone());
    for r in relays {
        r.set_assoc(h.clone());
        r.set_conn(&task_conn);
    }
    // Anything that came before the handle was known is looked at now.
    h.wake();
    Ok(h)
}

struct Session {
    sid: u16,
    relay: Arc<Relay>,
    /// Our Session Terminate was asked for.
    terminated: bool,
}

/// One association on the event loop: the ULP's accepts and rejects in (passive
/// side), session requests out, each session's segments relayed to and from its
/// queue pair. No thread of its own: woken by usrsctp's upcall, by its queue
/// pairs, and by a timer.
pub(super) struct AssocTask {
    /// Shared with the sessions' relays: their posting threads send directly
    /// when it is free (`Relay::send`); the task locks it for each run.
    conn: Arc<Mutex<SctpConnection>>,
    sessions: Vec<Session>,
    /// The passive side's ULP (requests, accepts); `None`: the active side, whose
    /// one session is the association (its end ends the association).
    shared: Option<Arc<AssocShared>>,
    /// Closing: queued output may leave until then; then SHUTDOWN.
    linger: Option<Instant>,
    /// After the linger: the relays are lost (an abortive close), or not.
    lose_after: bool,
    /// The timer asked for (kept while it is ahead and no sooner one is
    /// needed, so that a busy association does not fill the loop's timer heap).
    check_at: Instant,
    /// The upcall's receiver (its wake is set when spawned).
    rx: Arc<UpcallRx>,
}

impl AssocTask {
    pub(super) fn new(
        conn: SctpConnection,
        relays: Vec<Arc<Relay>>,
        shared: Option<Arc<AssocShared>>,
    ) -> Self {
        let conn = Arc::new(Mutex::new(conn));
        let rx = Arc::new(UpcallRx {
            conn: Arc::downgrade(&conn),
            relays: Mutex::new(relays.clone()),
            open: AtomicBool::new(true),
            task: OnceLock::new(),
            scratch: MemoryTable::new(),
        });
        Self {
            conn,
            sessions: relays
                .into_iter()
                .map(|relay| Session {
                    sid: SID,
                    relay,
                    terminated: false,
                })
                .collect(),
            shared,
            linger: None,
            lose_after: false,
            check_at: Instant::now(),
            rx,
        }
    }

    /// Tell the upcall's receiver the sessions now.
    fn sync_relays(&self) {
        *self.rx.relays.lock().unwrap_or_else(|p| p.into_inner()) =
            self.sessions.iter().map(|s| s.relay.clone()).collect();
    }

    /// Let the upcall receive, or not.
    fn set_open(&self, open: bool) {
        self.rx.open.store(open, Ordering::Release);
    }

    pub(super) fn conn(&self) -> MutexGuard<'_, SctpConnection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The association is gone: every session's queue pair and the ULP learn it.
    fn lose_all(&mut self) -> Next {
        self.set_open(false);
        for s in &self.sessions {
            s.relay.lose();
        }
        if let Some(sh) = &self.shared {
            sh.lock().lost = true;
            sh.tell();
        }
        Next::Done
    }

    fn commands(&mut self, conn: &mut SctpConnection) {
        let Some(shared) = &self.shared else {
            return;
        };
        let cmds: Vec<Cmd> = {
            let mut st = shared.lock();
            st.mulpdu = conn.adaptation().max_segment();
            st.cmds.drain(..).collect()
        };
        for c in cmds {
            match c {
                Cmd::Accept(sid, relay, pd) => {
                    let ep = Box::new(RelayEndpoint(relay.clone()));
                    match conn.adaptation().accept_relay(sid, ep, &pd) {
                        Ok(()) => {
                            relay.set_conn(&self.conn);
                            tracing::info!("SCTP: session on stream {sid} accepted");
                            self.sessions.push(Session {
                                sid,
                                relay,
                                terminated: false,
                            });
                            self.sync_relays();
                        }
                        Err(e) => {
                            tracing::warn!("SCTP: session on stream {sid} not accepted: {e}");
                            relay.lose();
                        }
                    }
                }
                Cmd::Reject(sid, pd) => {
                    tracing::info!("SCTP: session on stream {sid} rejected by the ULP");
                    let _ = conn.adaptation().reject(sid, &pd);
                }
            }
        }
    }

    /// A queue pair that closes (after its Terminate, or gracefully) ends its
    /// session with Session Terminate. On the active side an abortive close
    /// ends the association after the linger.
    fn closes(&mut self, conn: &mut SctpConnection, now: Instant) {
        let active = self.shared.is_none();
        for s in self.sessions.iter_mut() {
            match s.relay.close_requested() {
                Some(false) if active => {
                    // What the queue pair already handed over (its Terminate,
                    // say) still leaves, briefly; then the association ends.
                    self.linger.get_or_insert(now + LINGER);
                    self.lose_after = true;
                }
                Some(_) if !s.terminated => {
                    s.terminated = true;
                    let _ = conn.adaptation().terminate(s.sid);
                }
                _ => {}
            }
        }
    }

    fn events(&mut self, conn: &mut SctpConnection, now: Instant) {
        while let Some(e) = conn.poll_event() {
            match e {
                Event::InitiateRequest { sid, private_data } => {
                    let Some(shared) = &self.shared else {
                        continue;
                    };
                    tracing::debug!(
                        "SCTP: the peer asks for a session on stream {sid} ({} octets of private data)",
                        private_data.len()
                    );
                    shared
                        .lock()
                        .requests
                        .push_back(SessionRequest { sid, private_data });
                    shared.tell();
                }
                Event::Closed { sid, reason } => {
                    tracing::info!("SCTP: session on stream {sid} closed: {reason:?}");
                    self.sessions.retain(|s| {
                        if s.sid == sid {
                            s.relay.push(Inbound::Closed);
                        }
                        s.sid != sid
                    });
                    self.sync_relays();
                    if self.shared.is_none() && self.linger.is_none() {
                        // The active side's one session ended: so does the
                        // association, once what is queued has left.
                        self.linger = Some(now + LINGER);
                    }
                }
                _ => {}
            }
        }
    }
}

impl Drop for AssocTask {
    fn drop(&mut self) {
        // A late upcall finds nothing to read for.
        self.set_open(false);
    }
}

impl Task for AssocTask {
    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        let now = cx.now;
        let conn = self.conn.clone();
        // A posting thread's direct send holds it only while it sends.
        let mut guard = conn.lock().unwrap_or_else(|p| p.into_inner());
        let c = &mut *guard;
        self.commands(c);
        // What the upcall's receiver read and left for us (a request, a close).
        self.events(c, now);
        self.closes(c, now);
        let mut more = false;
        let mut all_out = false;
        for i in 0..=MESSAGES_PER_RUN {
            all_out = match c.flush() {
                Ok(a) => a,
                Err(_) => return self.lose_all(),
            };
            // Backpressure: while one session's queue pair lags, read nothing more
            // from the association (SCTP has one receive window for all streams);
            // the queue pair wakes us when it made room.
            if self.sessions.iter().any(|s| !s.relay.has_room()) {
                break;
            }
            if i == MESSAGES_PER_RUN {
                more = true;
                break;
            }
            match c.poll(&self.rx.scratch, Duration::ZERO) {
                Ok(true) => self.events(c, now),
                Ok(false) => break,
                Err(_) => {
                    self.events(c, now);
                    return self.lose_all();
                }
            }
            self.closes(c, now);
        }
        if let Some(t) = self.linger {
            let drained = all_out && self.sessions.iter().all(|s| s.relay.outbound_idle());
            if drained || now >= t {
                let _ = c.shutdown();
                self.set_open(false);
                if self.lose_after {
                    return self.lose_all();
                }
                return Next::Done;
            }
        }
        if more {
            cx.handle().wake();
        }
        let check = if c.is_blocked() || self.linger.is_some() {
            BLOCKED_CHECK
        } else {
            IDLE_CHECK
        };
        let want = now + check;
        if self.check_at <= now || want < self.check_at {
            self.check_at = want;
        }
        Next::Wait {
            interest: None,
            deadline: Some(self.check_at),
        }
    }
}
