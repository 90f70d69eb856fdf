//! A TCP proxy on 127.0.0.1 that flips one octet of one FPDU, in one direction:
//! a corrupting middlebox, so that the side behind it finds an MPA CRC error
//! (RFC 5044 §8: Terminate 2/0/0x02) from real traffic.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Which FPDU to break and in which direction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Corrupt {
    /// Break what the connecting side sends (else what the upstream answers).
    pub from_connector: bool,
    /// The n-th FPDU after the MPA Request or Reply (0 = the first).
    pub fpdu: usize,
}

pub(crate) struct Proxy {
    pub port: u16,
    log: Arc<Mutex<String>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listen on a free port; the first connection is joined to 127.0.0.1:`upstream`.
    pub(crate) fn start(upstream: u16, c: Corrupt) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(String::new()));
        let log2 = Arc::clone(&log);
        let thread = std::thread::spawn(move || {
            let Ok((down, _)) = l.accept() else { return };
            let up = match TcpStream::connect(("127.0.0.1", upstream)) {
                Ok(s) => s,
                Err(e) => {
                    log2.lock().unwrap().push_str(&format!("upstream: {e}\n"));
                    return;
                }
            };
            let _ = (down.set_nodelay(true), up.set_nodelay(true));
            let (d2, u2) = (down.try_clone().unwrap(), up.try_clone().unwrap());
            let l1 = Arc::clone(&log2);
            let a =
                std::thread::spawn(move || pump(down, up, c.from_connector.then_some(c.fpdu), &l1));
            pump(u2, d2, (!c.from_connector).then_some(c.fpdu), &log2);
            let _ = a.join();
        });
        Self {
            port,
            log,
            thread: Some(thread),
        }
    }

    /// What was corrupted (or why nothing was), once both directions ended or
    /// after 5 s (a proxy nobody connected to is left waiting, not joined).
    pub(crate) fn report(mut self) -> String {
        if let Some(t) = self.thread.take() {
            for _ in 0..100 {
                if t.is_finished() {
                    let _ = t.join();
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        let log = self.log.lock().unwrap().clone();
        if log.is_empty() {
            "nothing flipped".into()
        } else {
            log
        }
    }
}

/// The offset of the last ULPDU octet of FPDU `n` after the MPA frame, once the
/// octets before it are known (FPDU: length, ULPDU, pad to 4, CRC; no Markers).
fn target(seen: &[u8], n: usize) -> Option<usize> {
    let be16 = |i: usize| {
        Some(usize::from(u16::from_be_bytes([
            *seen.get(i)?,
            *seen.get(i + 1)?,
        ])))
    };
    let mut at = 20 + be16(18)?;
    for k in 0..=n {
        let ulpdu = be16(at)?;
        if k == n {
            return Some(at + 2 + ulpdu - 1);
        }
        at += (2 + ulpdu).div_ceil(4) * 4 + 4;
    }
    None
}

fn pump(mut from: TcpStream, mut to: TcpStream, corrupt: Option<usize>, log: &Mutex<String>) {
    let mut seen = Vec::new();
    let mut sent = 0;
    let mut done = corrupt.is_none();
    let mut buf = [0u8; 65536];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if done {
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
            continue;
        }
        // The target octet comes after the length fields that locate it, so it is
        // found before it is forwarded.
        seen.extend_from_slice(&buf[..n]);
        if let Some(t) = corrupt.and_then(|f| target(&seen, f))
            && t < seen.len()
        {
            seen[t] ^= 0x5A;
            log.lock()
                .unwrap()
                .push_str(&format!("flipped the octet at stream offset {t}\n"));
            done = true;
        }
        if to.write_all(&seen[sent..]).is_err() {
            break;
        }
        sent = seen.len();
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}
