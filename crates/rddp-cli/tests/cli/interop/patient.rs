//! A TCP forwarder on 127.0.0.1 in front of a port QEMU forwards into the
//! guest, for host clients of guest servers that listen again on the same
//! port between two connections (perftest's `-R` servers: the handshake's
//! connection, then the test's). QEMU's user network accepts the host's
//! connection at once and resets it when the guest refuses, so a host client
//! that connects before the guest server listens again is refused, which
//! perftest's client does not survive (`lost_perftest_race` in
//! interop_siw.rs), and under TCG it always connects first. Here such a
//! connection is tried again, with the octets the client has sent so far,
//! until the guest answers (or 20 s have passed): as a network whose SYN to
//! a port not listening yet is retransmitted, not answered with a reset.
//! Once the guest has sent an octet the two connections are joined as they
//! are.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a connection is tried again before the client's is closed.
const PATIENCE: Duration = Duration::from_secs(20);
/// Between two tries (QEMU answers a refused one at once).
const RETRY: Duration = Duration::from_millis(50);

pub(crate) struct Patient {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Patient {
    /// Listens on a free port; each connection goes to 127.0.0.1:`upstream`.
    pub(crate) fn start(upstream: u16) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        std::thread::spawn(move || {
            for down in l.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(down) = down {
                    std::thread::spawn(move || join(down, upstream));
                }
            }
        });
        Self { port, stop }
    }
}

impl Drop for Patient {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Connects `down` to `upstream` once the guest answers, then copies both ways.
fn join(mut down: TcpStream, upstream: u16) {
    let _ = down.set_nodelay(true);
    // What the client sent before the guest answered: sent again on each try.
    let mut early = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + PATIENCE;
    let (up, first) = 'tries: loop {
        if Instant::now() > deadline {
            return;
        }
        let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)) else {
            std::thread::sleep(RETRY);
            continue;
        };
        let _ = up.set_nodelay(true);
        if up.write_all(&early).is_err() {
            std::thread::sleep(RETRY);
            continue;
        }
        // Until the guest answers: the client's octets go up (and are kept),
        // a closed or reset upstream is tried again.
        let tick = Some(Duration::from_millis(20));
        let _ = (up.set_read_timeout(tick), down.set_read_timeout(tick));
        loop {
            match up.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => break 'tries (up, buf[..n].to_vec()),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
            match down.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    early.extend_from_slice(&buf[..n]);
                    if up.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => return,
            }
            if Instant::now() > deadline {
                return;
            }
        }
        std::thread::sleep(RETRY);
    };
    let _ = (up.set_read_timeout(None), down.set_read_timeout(None));
    if down.write_all(&first).is_err() {
        return;
    }
    let (d2, u2) = (down.try_clone().unwrap(), up.try_clone().unwrap());
    let a = std::thread::spawn(move || copy(down, up));
    copy(u2, d2);
    let _ = a.join();
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}
