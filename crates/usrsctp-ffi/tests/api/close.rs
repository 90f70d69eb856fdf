//! Closing sockets (the crate's `reaper` module): a socket whose association
//! is up is closed only once the association is gone, ended as
//! `usrsctp_close` would end it (SHUTDOWN, or ABORT with data left unread),
//! within a bound when the peer is gone, and `Drop` never waits for it. Also
//! the stack-wide settings `stack::init` makes, read back from the library.
//! The reaper is process-wide: each test that counts the sockets it holds
//! (`condemned`) runs in a process of its own, where no other test drops one.
//!
//! That the reaper removes the close race itself (sctplab/usrsctp#709) is
//! shown by `scripts/usrsctp-race.sh`, which widens the race's window in a
//! build of the library.

use crate::common::{T, library, own_process, pair, port, prepare};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use usrsctp_ffi::reaper::{ABORT_AFTER, CLOSE_AFTER, condemned};
use usrsctp_ffi::stack::{self, Protections};
use usrsctp_ffi::sys::{SCTP_COMM_LOST, SCTP_SHUTDOWN_COMP, SCTP_STATUS, sctp_status};
use usrsctp_ffi::{ConnAddress, Error, Notification, Received, Socket, Target};

/// `f()` holds within `t`, looked at every millisecond.
fn within(t: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + t;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// How the peer saw its association end: SHUTDOWN_COMP, COMM_LOST, or an
/// end of data (0: the peer's SHUTDOWN arrived, the association may still
/// be completing).
fn how_it_ended(s: &Socket) -> u16 {
    let mut buf = [0u8; 2048];
    loop {
        match s.recv(&mut buf, T) {
            Ok(Received::Notification(Notification::AssocChange { state, .. }))
                if state == SCTP_COMM_LOST || state == SCTP_SHUTDOWN_COMP =>
            {
                return state;
            }
            Ok(_) => {}
            Err(Error::Io { err, .. }) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
                return 0;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn the_stack_settings_hold_after_init() {
    if !library() {
        return;
    }
    port();
    // usrsctp_init resets every sysctl: set before it, they read 0 and 1.
    assert_eq!(
        stack::protections().unwrap(),
        Protections {
            blackhole: 2,
            no_csum_on_loopback: 0
        }
    );
}

/// The inodes of this process's sockets listed in `/proc/self/net/{table}`
/// whose local "port" is `0084`: for a raw socket the protocol, SCTP's 132.
fn own_raw_sctp_sockets(table: &str) -> usize {
    let mine: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let list = std::fs::read_to_string(format!("/proc/self/net/{table}")).unwrap_or_default();
    list.lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() > 9 && f[1].ends_with(":0084") && mine.contains(f[9]))
        .count()
}

/// A stack over UDP opens no raw SCTP socket, root or not: one would receive
/// every SCTP packet of the host and, until the sysctls above are set,
/// answer other processes' raw IP associations with ABORT (it ended
/// rddp-sctp's raw IP test about once in 300 runs beside the rest of the
/// suite).
#[test]
fn a_udp_stack_has_no_raw_socket() {
    if !library() {
        return;
    }
    port();
    assert_eq!(
        own_raw_sctp_sockets("raw") + own_raw_sctp_sockets("raw6"),
        0,
        "a raw IP protocol 132 socket in a UDP stack"
    );
}

#[test]
fn a_socket_dropped_with_nothing_unread_shuts_its_association_down() {
    if !own_process(
        module_path!(),
        "a_socket_dropped_with_nothing_unread_shuts_its_association_down",
    ) {
        return;
    }
    let (c, s) = pair(7101);
    c.send(1, 0, false, b"last words").unwrap();
    drop(c);
    // The message sent before the drop arrives, then the end of data: a
    // graceful SHUTDOWN, not an ABORT.
    let mut buf = [0u8; 64];
    let got = loop {
        match s.recv(&mut buf, T).unwrap() {
            Received::Data { len, .. } => break buf[..len].to_vec(),
            Received::Notification(n) => {
                assert!(
                    !matches!(n, Notification::AssocChange { state, .. } if state == SCTP_COMM_LOST),
                    "aborted"
                );
            }
        }
    };
    assert_eq!(got, b"last words");
    assert_ne!(how_it_ended(&s), SCTP_COMM_LOST);
    assert!(
        within(T, || condemned() == 0),
        "{} sockets left unclosed after a graceful shutdown",
        condemned()
    );
}

#[test]
fn a_socket_dropped_with_data_unread_aborts_its_association() {
    if !own_process(
        module_path!(),
        "a_socket_dropped_with_data_unread_aborts_its_association",
    ) {
        return;
    }
    let (c, s) = pair(7102);
    s.send(1, 0, false, b"never read").unwrap();
    // Acknowledged: it is in c's receive buffer.
    let acked = || {
        // SAFETY: all-zero is a valid sctp_status.
        let mut st: sctp_status = unsafe { std::mem::zeroed() };
        s.getopt(SCTP_STATUS, &mut st).unwrap();
        st.sstat_unackdata == 0 && st.sstat_penddata == 0
    };
    assert!(within(T, acked), "the message was never acknowledged");
    drop(c);
    // As usrsctp_close would: data left unread ends the association with ABORT.
    assert_eq!(how_it_ended(&s), SCTP_COMM_LOST);
    assert!(
        within(T, || condemned() == 0),
        "the aborted socket was not closed"
    );
}

/// Two AF_CONN addresses whose packets are carried by a thread, until cut.
struct CutLink {
    a: ConnAddress,
    b: ConnAddress,
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    pump: Option<std::thread::JoinHandle<()>>,
}

impl CutLink {
    fn new() -> Self {
        let (tx, rx) = channel::<(usize, Vec<u8>)>();
        let far = [Arc::new(Mutex::new(0)), Arc::new(Mutex::new(0))];
        let end = |far: Arc<Mutex<usize>>| {
            let tx = Mutex::new(tx.clone());
            // Called by usrsctp with its locks held: only queue the packet.
            ConnAddress::register(move |p| {
                let to = *far.lock().unwrap();
                let _ = tx.lock().unwrap().send((to, p.to_vec()));
            })
            .unwrap()
        };
        let (a, b) = (end(far[0].clone()), end(far[1].clone()));
        *far[0].lock().unwrap() = b.id();
        *far[1].lock().unwrap() = a.id();
        let cut = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let pump = {
            let (cut, stop) = (cut.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match rx.recv_timeout(Duration::from_millis(5)) {
                        Ok((to, p)) if !cut.load(Ordering::Relaxed) => {
                            let _ = stack::conn_input(to, &p);
                        }
                        Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
            })
        };
        Self {
            a,
            b,
            cut,
            stop,
            pump: Some(pump),
        }
    }
}

impl Drop for CutLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(p) = self.pump.take() {
            let _ = p.join();
        }
    }
}

#[test]
fn a_socket_whose_peer_is_gone_is_closed_within_the_bound_and_drop_does_not_wait() {
    if !own_process(
        module_path!(),
        "a_socket_whose_peer_is_gone_is_closed_within_the_bound_and_drop_does_not_wait",
    ) {
        return;
    }
    port();
    let link = CutLink::new();
    let l = Socket::new(true).unwrap();
    prepare(&l);
    l.bind(Target::Conn {
        id: link.b.id(),
        port: 7103,
    })
    .unwrap();
    l.listen(1).unwrap();
    let c = Socket::new(true).unwrap();
    prepare(&c);
    // usrsctp names a link by one address at both ends: the client binds and
    // connects to its own, the pump carries its packets to the far one.
    c.bind(Target::Conn {
        id: link.a.id(),
        port: 0,
    })
    .unwrap();
    c.connect(Target::Conn {
        id: link.a.id(),
        port: 7103,
    })
    .unwrap();
    let s = l.accept(T).unwrap();
    drop(l);
    // Its COMM_UP read: nothing unread, so the drop shuts down gracefully
    // (an unread notification would make it an ABORT, as usrsctp_close).
    let mut buf = [0u8; 512];
    assert!(matches!(
        c.recv(&mut buf, T).unwrap(),
        Received::Notification(Notification::AssocChange { .. })
    ));
    link.cut.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    drop(c);
    // Dropped at once; the association, its SHUTDOWN lost, is still up.
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "drop waited {:?}",
        t0.elapsed()
    );
    assert_eq!(condemned(), 1);
    assert!(
        within(CLOSE_AFTER + T, || condemned() == 0),
        "still condemned after {:?}",
        t0.elapsed()
    );
    // Closed by the bound, not before: nothing answered the SHUTDOWN.
    assert!(
        t0.elapsed() >= ABORT_AFTER,
        "closed after {:?}",
        t0.elapsed()
    );
    drop(s);
    assert!(within(CLOSE_AFTER + T, || condemned() == 0));
}
