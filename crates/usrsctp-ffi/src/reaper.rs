//! Closing a socket whose association is still up: off the dropping thread,
//! and only once the association is gone.
//!
//! Why: in usrsctp 0.9.5.0 (and upstream master), `usrsctp_close` and a
//! usrsctp thread handling the same socket's association can both free the
//! socket, an open upstream bug (sctplab/usrsctp#676 and #709). The closer
//! drops the socket's count to 0 and frees it; the other thread (AF_CONN
//! input, the UDP receive thread or the timer thread), holding the
//! association's lock, tests `SCTP_PCB_FLAGS_SOCKET_GONE` without the socket
//! lock and then takes a new reference (0.9.5.0: `sctp_input.c` 5975-5986 and
//! 6078-6089, `sctputil.c` 1871-1877). When its test came before the close and
//! its reference after, it frees the socket a second time as it finishes.
//! The upstream fix takes that reference only while the socket is not
//! condemned, under the socket lock, at those and the ICMP sites; no release
//! carries it. With no association, no usrsctp thread reaches the socket, so:
//!
//! * a socket with no association (a listener, a socket never connected, one
//!   whose association has ended) is closed at once;
//! * any other one goes to one process-wide reaper thread. The association is
//!   ended as `usrsctp_close` ends it (ABORT when anything was left unread or
//!   the association was still being set up, else a graceful SHUTDOWN), what
//!   still arrives is read and discarded, and the socket is closed once
//!   `SCTP_STATUS` finds no association (it answers EINVAL exactly then for a
//!   one-to-one socket; an association whose free is deferred stays listed).
//!   After [`ABORT_AFTER`] a lingering association is aborted, after
//!   [`CLOSE_AFTER`] the socket is closed regardless.
//!
//! Not covered: a listener closed while an association it has just accepted
//! is mid-packet (sctplab/usrsctp#697: `so_head` read without the accept
//! lock). A listener has no association of its own to wait for.

use crate::api::Api;
use crate::socket::{getopt_of, sendv_on};
use crate::sys::*;
use libc::{c_int, c_uint, socklen_t};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A condemned association still up this long after its socket was dropped
/// is aborted.
pub const ABORT_AFTER: Duration = Duration::from_secs(2);
/// A condemned socket is closed this long after it was dropped, whatever its
/// association's state.
pub const CLOSE_AFTER: Duration = Duration::from_millis(2500);
/// Set (to anything): every socket is closed at once, as before the reaper
/// existed. Only for `scripts/usrsctp-race.sh`, which shows the race this
/// module avoids still crashes a process without it.
pub const CLOSE_AT_ONCE_ENV: &str = "RDDP_USRSCTP_CLOSE_AT_ONCE";
/// How often the reaper looks at the sockets it holds (only while it holds
/// any: an idle reaper sleeps until a socket is handed over).
const POLL: Duration = Duration::from_millis(1);

struct Condemned {
    so: *mut socket,
    api: &'static Api,
    since: Instant,
    aborted: bool,
}

// SAFETY: usrsctp sockets may be used from any thread (their locks are
// usrsctp's own); a condemned socket is used by the reaper alone.
unsafe impl Send for Condemned {}

#[derive(Default)]
struct Reaper {
    held: Mutex<Vec<Condemned>>,
    cv: Condvar,
    /// Notified (under `held`'s lock) each time the reaper has closed every
    /// socket it was given: what [`wait_idle`] waits for.
    idle: Condvar,
    /// Handed over and not yet closed (`held` is empty while the reaper
    /// works through its sockets).
    count: AtomicUsize,
}

fn reaper() -> &'static Reaper {
    static R: OnceLock<Reaper> = OnceLock::new();
    R.get_or_init(Reaper::default)
}

/// Sockets handed to the reaper and not yet closed.
#[must_use]
pub fn condemned() -> usize {
    reaper().count.load(Ordering::Acquire)
}

/// Wait until the reaper holds no socket, at most `timeout`; whether it then
/// holds none. A dropped socket whose association was still up keeps its local
/// port until the reaper closes it (at most [`CLOSE_AFTER`] after the drop):
/// binding that port again may wait for this.
pub fn wait_idle(timeout: Duration) -> bool {
    let r = reaper();
    let deadline = Instant::now() + timeout;
    let Ok(mut h) = r.held.lock() else {
        return condemned() == 0;
    };
    // The reaper decrements `count` before it takes the lock to notify, so a
    // count read under the lock is never followed by a missed notification.
    while r.count.load(Ordering::Acquire) > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        h = match r.idle.wait_timeout(h, left) {
            Ok((h, _)) => h,
            Err(_) => return condemned() == 0,
        };
    }
    true
}

/// The state of `so`'s association, or `None` when it has none.
///
/// # Safety
/// `so` is a live socket.
unsafe fn association(api: &Api, so: *mut socket) -> Option<i32> {
    // SAFETY: all-zero is a valid sctp_status.
    let mut st: sctp_status = unsafe { core::mem::zeroed() };
    // SAFETY: `so` is live (the caller's promise).
    (unsafe { getopt_of(api, so, SCTP_STATUS, &mut st) } == 0).then_some(st.sstat_state)
}

/// Read and discard what `so` holds for reading, data or notification;
/// whether there was anything.
///
/// # Safety
/// `so` is a live socket no other thread reads.
unsafe fn discard_input(api: &Api, so: *mut socket) -> bool {
    let mut buf = [0u8; 2048];
    let mut any = false;
    // Bounded: a peer cannot keep one call of this busy.
    for _ in 0..64 {
        let mut from: libc::sockaddr_storage =
            // SAFETY: all-zero is a valid sockaddr_storage.
            unsafe { core::mem::zeroed() };
        let mut fromlen = core::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
        let mut info = sctp_rcvinfo::default();
        let mut infolen = core::mem::size_of::<sctp_rcvinfo>() as socklen_t;
        let (mut infotype, mut flags): (c_uint, c_int) = (0, 0);
        // SAFETY: `so` is live and read by no one else (the caller's
        // promise); every pointer is valid for the length passed with it.
        let n = unsafe {
            (api.recvv)(
                so,
                buf.as_mut_ptr().cast(),
                buf.len(),
                (&mut from as *mut libc::sockaddr_storage).cast(),
                &mut fromlen,
                (&mut info as *mut sctp_rcvinfo).cast(),
                &mut infolen,
                &mut infotype,
                &mut flags,
            )
        };
        // Nothing to read (or an error), or the end of the peer's data.
        if n < 0 || (n == 0 && flags == 0) {
            break;
        }
        any = true;
    }
    any
}

/// Close `so`: at once when it has no association, otherwise through the
/// reaper (see the module docs). Never blocks.
///
/// # Safety
/// `so` is a live socket whose upcall is silenced, and nothing else uses it
/// after this call.
pub(crate) unsafe fn close(api: &'static Api, so: *mut socket) {
    static AT_ONCE: OnceLock<bool> = OnceLock::new();
    let at_once = *AT_ONCE.get_or_init(|| std::env::var_os(CLOSE_AT_ONCE_ENV).is_some());
    // SAFETY: `so` is live (the caller's promise) throughout.
    let state = unsafe { association(api, so) };
    let Some(state) = state.filter(|_| !at_once) else {
        // SAFETY: no association: no usrsctp thread can reach the socket.
        unsafe { (api.close)(so) };
        return;
    };
    // SAFETY: `so` is live, and no other thread reads it: nothing else uses
    // it after this call (the caller's promise).
    let unread = unsafe { discard_input(api, so) };
    let setting_up = state == SCTP_COOKIE_WAIT || state == SCTP_COOKIE_ECHOED;
    let aborted = unread || setting_up;
    // SAFETY: `so` is live (the caller's promise); both calls are
    // non-blocking on these sockets, and the ABORT's empty message passes a
    // valid pointer (`sendv_on`).
    unsafe {
        if aborted {
            let _ = sendv_on(api, so, 0, 0, SCTP_ABORT, &[]);
        } else {
            (api.shutdown)(so, libc::SHUT_WR);
        }
    }
    let r = reaper();
    static RUNNING: OnceLock<bool> = OnceLock::new();
    let running = *RUNNING.get_or_init(|| {
        std::thread::Builder::new()
            .name("usrsctp-reaper".into())
            .spawn(move || run(r))
            .is_ok()
    });
    if !running {
        // No thread could be started: close as `usrsctp_close` alone would.
        // SAFETY: `so` is live and ours.
        unsafe { (api.close)(so) };
        return;
    }
    let c = Condemned {
        so,
        api,
        since: Instant::now(),
        aborted,
    };
    match r.held.lock() {
        Ok(mut h) => {
            r.count.fetch_add(1, Ordering::AcqRel);
            h.push(c);
            r.cv.notify_one();
        }
        // A poisoned list (a panic in the reaper): close as before.
        // SAFETY: `so` is live and ours.
        Err(_) => unsafe { (api.close)(so) },
    }
}

/// The reaper thread: look at each held socket every [`POLL`], close those
/// whose association is gone or whose time is up.
fn run(r: &'static Reaper) {
    loop {
        let mut work = {
            let Ok(mut h) = r.held.lock() else { return };
            while h.is_empty() {
                h = match r.cv.wait(h) {
                    Ok(h) => h,
                    Err(_) => return,
                };
            }
            std::mem::take(&mut *h)
        };
        // usrsctp is called with the list unlocked: a Drop on another thread
        // (maybe one usrsctp calls back into) only ever waits for a push.
        work.retain_mut(|c| {
            let closed = reap_step(c);
            if closed {
                r.count.fetch_sub(1, Ordering::AcqRel);
            }
            !closed
        });
        let Ok(mut h) = r.held.lock() else { return };
        h.extend(work);
        if r.count.load(Ordering::Acquire) == 0 {
            r.idle.notify_all();
        }
        if !h.is_empty() {
            let _ = r.cv.wait_timeout(h, POLL);
        }
    }
}

/// One look at a condemned socket; whether it is now closed.
fn reap_step(c: &mut Condemned) -> bool {
    let age = c.since.elapsed();
    // SAFETY: the reaper alone holds the socket, live until closed here.
    unsafe {
        discard_input(c.api, c.so);
        if association(c.api, c.so).is_none() || age >= CLOSE_AFTER {
            (c.api.close)(c.so);
            return true;
        }
        if age >= ABORT_AFTER && !c.aborted {
            let _ = sendv_on(c.api, c.so, 0, 0, SCTP_ABORT, &[]);
            c.aborted = true;
        }
    }
    false
}
