//! docs/target.md: peers that never finish MPA setup hold nothing that an honest
//! session needs. Against the real `rddp target`: 2,000 TCP connections that never
//! send an MPA Request and 500 that stop halfway through one are held open; ten
//! honest sessions (verbs API: MPA setup, one Send, its echo) then each succeed
//! within 1 s, while every stalled connection is still open; and the target's
//! setup deadline (its 5 s Request timeout, RFC 5044 §7.1.2) closes every one of them.

use crate::common;

use common::Target;
use rddp::{CompletionQueue, Device, QueuePairBuilder, Quota, SendFlags, WcOpcode, WcStatus};
use rddp_mpa::MpaOptions;
use rddp_wire::MpaFrame;
use rddp_wire::mpa::frame::KEY_REQ;
use rddp_wire::{FrameKind, MpaFlags};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

const SILENT: usize = 2000;
const HALF: usize = 500;
const HONEST: usize = 10;
/// The bound for one honest session.
const HONEST_MAX: Duration = Duration::from_secs(1);
/// `rddp target`'s wait for a Request (MpaOptions::default().request_timeout).
const TARGET_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Threads the target may run while thousands of setups wait: a few I/O threads,
/// its acceptors, main; never one per connection.
const TARGET_THREADS_MAX: usize = 16;

/// Open `n` connections from `threads` threads, each attempt bounded, all of them
/// by `until`; half of a Rev 2 Request (10 of its 24 octets) is sent on each if
/// `half`. Returns the connections that opened.
fn open_stalled(addr: SocketAddr, n: usize, half: bool, until: Instant) -> Vec<TcpStream> {
    let req = MpaFrame::new(
        FrameKind::Request,
        MpaFlags::new(false, true, false, false),
        1,
        None,
        Vec::new(),
    )
    .to_vec()
    .unwrap();
    assert_eq!(&req[..16], &KEY_REQ[..]);
    let threads = 8;
    let hs: Vec<_> = (0..threads)
        .map(|i| {
            let req = req.clone();
            std::thread::spawn(move || {
                let mut out = Vec::new();
                'each: for _ in (i..n).step_by(threads) {
                    // A connect that fails is tried again while time is left:
                    // on a loaded machine a SYN may be dropped once (the kernel
                    // would send it again only after 1 s, the most one try waits).
                    loop {
                        let Some(left) = until.checked_duration_since(Instant::now()) else {
                            break 'each;
                        };
                        let wait = left
                            .min(Duration::from_secs(1))
                            .max(Duration::from_millis(1));
                        let Ok(mut s) = TcpStream::connect_timeout(&addr, wait) else {
                            continue;
                        };
                        if half && s.write_all(&req[..10]).is_err() {
                            continue;
                        }
                        out.push(s);
                        break;
                    }
                }
                out
            })
        })
        .collect();
    hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
}

/// One honest session on the verbs API: MPA setup, the advertisement, one Send
/// and its echo. Returns how long it took.
fn honest_session(addr: SocketAddr) -> Result<Duration, String> {
    let t0 = Instant::now();
    let dev = Device::new();
    let pd = dev
        .consumer("honest", Quota::default())
        .and_then(|c| c.alloc_pd())
        .map_err(|e| e.to_string())?;
    let cq = CompletionQueue::new(64);
    let mut p = QueuePairBuilder::new(&pd, &cq, &cq)
        .build()
        .map_err(|e| e.to_string())?;
    for i in 0..4 {
        p.post_recv(i, 4096).map_err(|e| e.to_string())?;
    }
    let opts = MpaOptions {
        reply_timeout: Duration::from_secs(5),
        ..MpaOptions::default()
    };
    let qp = p
        .connect_mpa(addr, opts)
        .map_err(|e| format!("setup: {e}"))?;
    let recv = || -> Result<Vec<u8>, String> {
        loop {
            let wc = cq.wait(1, Duration::from_secs(5));
            let wc = wc.into_iter().next().ok_or("no completion within 5 s")?;
            if wc.status != WcStatus::Success {
                return Err(format!("{wc:?}"));
            }
            if wc.opcode == WcOpcode::Recv {
                let b = wc.buffer.as_deref().unwrap_or(&[]);
                return Ok(b[..wc.byte_len as usize].to_vec());
            }
        }
    };
    let advert = recv()?;
    if advert.len() != 16 {
        return Err(format!("advertisement of {} octets", advert.len()));
    }
    qp.post_send_inline(0, b"honest", SendFlags::default())
        .map_err(|e| e.to_string())?;
    let echo = recv()?;
    if echo != b"honest" {
        return Err(format!("echo {echo:?}"));
    }
    Ok(t0.elapsed())
}

/// How many of `socks` the peer has closed (EOF or reset) by now.
fn closed(socks: &[TcpStream]) -> usize {
    let mut b = [0u8; 64];
    socks
        .iter()
        .filter(|s| {
            let mut s: &TcpStream = s;
            s.set_nonblocking(true).unwrap();
            match s.read(&mut b) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => e.kind() != ErrorKind::WouldBlock,
            }
        })
        .count()
}

#[test]
fn stalled_setups_do_not_starve_honest_sessions() {
    let _machine = crate::common::heavy();
    crate::common::raise_nofile((SILENT + HALF + 200) as u64);
    let t = Target::start(&["--buffer-size", "4096"]);
    let addr = t.addr;

    let t0 = Instant::now();
    let silent = open_stalled(addr, SILENT, false, t0 + Duration::from_secs(3));
    let half = open_stalled(addr, HALF, true, t0 + Duration::from_secs(4));
    let opened = t0.elapsed();
    let pending_threads = crate::common::proc_status(t.pid(), "Threads").unwrap() as usize;

    // The honest sessions, at once; a session that hangs counts as failed.
    let (tx, rx) = channel();
    for _ in 0..HONEST {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send(honest_session(addr));
        });
    }
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut times = Vec::new();
    let mut failures = Vec::new();
    while times.len() + failures.len() < HONEST {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(d)) => times.push(d),
            Ok(Err(e)) => failures.push(e),
            Err(_) => break,
        }
    }
    let hung = HONEST - times.len() - failures.len();
    let honest_done = t0.elapsed();
    // Every stalled connection the target accepted was still open all along.
    let (silent_closed, half_closed) = (closed(&silent), closed(&half));
    let checked = t0.elapsed();

    times.sort();
    eprintln!(
        "opened {}/{SILENT} silent and {}/{HALF} half-Request connections in {opened:?}; \
         honest sessions: {} ok (max {:?}), {} failed {failures:?}, {hung} hung; \
         {silent_closed} silent and {half_closed} half closed by {checked:?}; \
         target threads while they waited: {pending_threads}",
        silent.len(),
        half.len(),
        times.len(),
        times.last(),
        failures.len(),
    );
    assert_eq!(
        (silent.len(), half.len()),
        (SILENT, HALF),
        "the target did not take every stalled connection"
    );
    assert!(
        pending_threads <= TARGET_THREADS_MAX,
        "the target ran {pending_threads} threads for {} pending setups",
        SILENT + HALF
    );
    assert_eq!(
        (times.len(), failures.len(), hung),
        (HONEST, 0, 0),
        "honest sessions failed: {failures:?}"
    );
    let slowest = *times.last().unwrap();
    assert!(slowest <= HONEST_MAX, "an honest session took {slowest:?}");
    assert!(
        honest_done < TARGET_REQUEST_TIMEOUT,
        "too slow a machine for this test: the target's setup deadline passed before the honest sessions ended"
    );
    assert_eq!(
        (silent_closed, half_closed),
        (0, 0),
        "stalled connections were closed before their deadline"
    );

    // Each stalled connection's own deadline closes it: by 5 s (plus slack) after
    // it was opened, every one reads EOF.
    let until = t0 + opened + TARGET_REQUEST_TIMEOUT + Duration::from_secs(3);
    loop {
        let n = closed(&silent) + closed(&half);
        if n == SILENT + HALF {
            break;
        }
        assert!(
            Instant::now() < until,
            "{n} of {} stalled connections closed by the target {:?} after they were opened",
            SILENT + HALF,
            t0.elapsed()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("all stalled connections closed by {:?}", t0.elapsed());
}
