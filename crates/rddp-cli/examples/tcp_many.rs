//! Baseline for the many-queue-pair rows of `scripts/bench-perf.sh`: plain TCP
//! over loopback on CONNS connections, both ends in this process, each end on
//! min(cores, 4) threads with mio (as rddp's I/O threads), every connection
//! moving PER_CONN octets in LEN-octet non-blocking writes, the receivers
//! reading into a 64 KiB buffer per thread. Timed from the moment every
//! connection is up to the last octet received (as `rddp perf --qps N`: the
//! span from the first data start to the last end of data). RCVBUF (0: the
//! kernel's autotuning) sets SO_RCVBUF on both ends before connecting.
//! Prints one JSON line with `gbit_per_s`.
//!
//! What it answers: how much of one connection's rate plain TCP keeps when the
//! same octets are spread over many connections on a few threads, so that the
//! rddp row can be read against the kernel's own behaviour (docs/perf.md,
//! "Many queue pairs").
//!
//! Usage: tcp_many [CONNS=1000] [PER_CONN=1966080] [LEN=65536] [RCVBUF=0]

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map(|s| s.parse().expect("a number"))
        .unwrap_or(default)
}

fn set_rcvbuf(s: &socket2::Socket, n: usize) -> std::io::Result<()> {
    if n > 0 {
        s.set_recv_buffer_size(n)?;
    }
    Ok(())
}

/// Write `per_conn` octets on each of `conns` in `len`-octet writes.
fn send(conns: Vec<TcpStream>, per_conn: u64, len: usize) -> std::io::Result<()> {
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(1024);
    let buf = vec![0x5au8; len];
    let mut left: Vec<u64> = vec![per_conn; conns.len()];
    let mut conns: Vec<Option<TcpStream>> = conns.into_iter().map(Some).collect();
    let mut open = conns.len();
    for (i, c) in conns.iter_mut().enumerate() {
        let c = c.as_mut().expect("open");
        poll.registry().register(c, Token(i), Interest::WRITABLE)?;
    }
    // Edge-triggered: every connection is writable at first.
    let mut ready: Vec<usize> = (0..conns.len()).collect();
    while open > 0 {
        for i in ready.drain(..) {
            let Some(c) = conns[i].as_mut() else { continue };
            while left[i] > 0 {
                let n = left[i].min(len as u64) as usize;
                match c.write(&buf[..n]) {
                    Ok(w) => left[i] -= w as u64,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if left[i] == 0 {
                poll.registry().deregister(c)?;
                conns[i] = None; // closes: the receiver sees its end
                open -= 1;
            }
        }
        if open > 0 {
            poll.poll(&mut events, None)?;
            ready.extend(events.iter().map(|e| e.token().0));
        }
    }
    Ok(())
}

/// Read every connection to its end; returns the octets read.
fn receive(conns: Vec<TcpStream>) -> std::io::Result<u64> {
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 64 * 1024];
    let mut conns: Vec<Option<TcpStream>> = conns.into_iter().map(Some).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        let c = c.as_mut().expect("open");
        poll.registry().register(c, Token(i), Interest::READABLE)?;
    }
    let (mut open, mut total) = (conns.len(), 0u64);
    let mut ready: Vec<usize> = (0..conns.len()).collect();
    while open > 0 {
        for i in ready.drain(..) {
            let Some(c) = conns[i].as_mut() else { continue };
            loop {
                match c.read(&mut buf) {
                    Ok(0) => {
                        poll.registry().deregister(c)?;
                        conns[i] = None;
                        open -= 1;
                        break;
                    }
                    Ok(n) => total += n as u64,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if open > 0 {
            poll.poll(&mut events, Some(Duration::from_secs(30)))?;
            if events.is_empty() {
                return Err(std::io::Error::other("no progress for 30 s"));
            }
            ready.extend(events.iter().map(|e| e.token().0));
        }
    }
    Ok(total)
}

fn main() -> std::io::Result<()> {
    let conns = arg(1, 1000) as usize;
    let per_conn = arg(2, 30 * 65536);
    let len = arg(3, 65536).max(1) as usize;
    let rcvbuf = arg(4, 0) as usize;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4)
        .min(conns.max(1));
    // Both ends of CONNS connections need 2 x CONNS descriptors.
    if let Err(w) = rddp::raise_open_file_limit() {
        eprintln!("{w}");
    }

    let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    set_rcvbuf(&l, rcvbuf)?; // inherited by accepted sockets
    l.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())?;
    l.listen(1024)?;
    let l = TcpListener::from(l);
    let at: SocketAddr = l.local_addr()?;
    let (mut tx, mut rx) = (Vec::new(), Vec::new());
    for _ in 0..conns {
        let s = socket2_connect(at, rcvbuf)?;
        let (r, _) = l.accept()?;
        s.set_nodelay(true)?;
        r.set_nonblocking(true)?;
        s.set_nonblocking(true)?;
        tx.push(TcpStream::from_std(s));
        rx.push(TcpStream::from_std(r));
    }
    let share = |v: &mut Vec<TcpStream>| -> Vec<Vec<TcpStream>> {
        let mut parts: Vec<Vec<TcpStream>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, c) in v.drain(..).enumerate() {
            parts[i % threads].push(c);
        }
        parts
    };
    let start = Arc::new(Barrier::new(2 * threads + 1));
    let mut handles = Vec::new();
    for part in share(&mut rx) {
        let b = start.clone();
        handles.push(std::thread::spawn(move || {
            b.wait();
            receive(part)
        }));
    }
    let mut senders = Vec::new();
    for part in share(&mut tx) {
        let b = start.clone();
        senders.push(std::thread::spawn(move || {
            b.wait();
            send(part, per_conn, len)
        }));
    }
    start.wait();
    let t0 = Instant::now();
    for s in senders {
        s.join().expect("sender thread")?;
    }
    let mut total = 0;
    for h in handles {
        total += h.join().expect("receiver thread")?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let want = per_conn * conns as u64;
    if total != want {
        return Err(std::io::Error::other(format!(
            "received {total} octets, sent {want}"
        )));
    }
    println!(
        "{{\"conns\":{conns},\"threads_per_end\":{threads},\"bytes\":{total},\"seconds\":{secs},\"gbit_per_s\":{}}}",
        total as f64 * 8.0 / secs / 1e9
    );
    Ok(())
}

/// A blocking connect with SO_RCVBUF set first (a window is agreed at the
/// handshake), then handed to std.
fn socket2_connect(at: SocketAddr, rcvbuf: usize) -> std::io::Result<std::net::TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    set_rcvbuf(&s, rcvbuf)?;
    s.connect(&at.into())?;
    Ok(s.into())
}
