//! Baseline for the Send message rate of `scripts/bench-perf.sh`: a plain TCP
//! stream of length-prefixed messages over loopback, both ends in this process.
//!
//! Each message is a 2-octet big-endian length (as MPA's ULPDU_LENGTH) and SIZE
//! octets of payload. The sender writes BATCH messages per write(2), as rddp's
//! transmit path writes that many FPDUs per call (one for Sends posted one by
//! one; N for `rddp perf --post-list N`); TCP_NODELAY on, as
//! rddp sets it. The receiver reads into a 256 KiB buffer and parses every
//! message, checking its length. Prints one JSON line with `msgs_per_s`.
//!
//! SENDER_CPU and RECEIVER_CPU, if given, pin the two threads (as `taskset`
//! pins `rddp perf`'s client and server in the benchmark's pinned row).
//!
//! Usage: tcp_msg_rate [SIZE=64] [COUNT=200000] [BATCH=1] [SENDER_CPU RECEIVER_CPU]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

/// Pin the calling thread to `cpu`.
fn pin(cpu: usize) -> std::io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(std::io::Error::from)
}

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map(|s| s.parse().expect("a number"))
        .unwrap_or(default)
}

/// Read and parse `count` messages of `size` octets; returns when the last is in.
fn receive(mut s: TcpStream, size: usize, count: u64) -> std::io::Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    let (mut have, mut got) = (0usize, 0u64);
    while got < count {
        let n = s.read(&mut buf[have..])?;
        if n == 0 {
            return Err(std::io::Error::other("sender closed early"));
        }
        have += n;
        let mut at = 0;
        while have - at >= 2 {
            let len = usize::from(u16::from_be_bytes([buf[at], buf[at + 1]]));
            if len != size {
                return Err(std::io::Error::other(format!("message of {len} octets")));
            }
            if have - at < 2 + len {
                break;
            }
            at += 2 + len;
            got += 1;
        }
        buf.copy_within(at..have, 0);
        have -= at;
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let size = arg(1, 64) as usize;
    let count = arg(2, 200_000);
    let batch = arg(3, 1).max(1);
    let cpus = std::env::args()
        .nth(5)
        .map(|_| (arg(4, 0) as usize, arg(5, 0) as usize));
    assert!(
        size <= usize::from(u16::MAX),
        "SIZE must fit the 2-octet length"
    );
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let rx = std::thread::spawn(move || -> std::io::Result<()> {
        if let Some((_, c)) = cpus {
            pin(c)?;
        }
        let (s, _) = l.accept()?;
        receive(s, size, count)
    });
    if let Some((c, _)) = cpus {
        pin(c)?;
    }
    let mut tx = TcpStream::connect(addr)?;
    tx.set_nodelay(true)?;
    let mut msg = vec![0x5a; 2 + size];
    msg[..2].copy_from_slice(&(size as u16).to_be_bytes());
    let start = Instant::now();
    let mut sent = 0u64;
    let mut out = Vec::with_capacity(msg.len() * batch as usize);
    while sent < count {
        let n = batch.min(count - sent);
        out.clear();
        for _ in 0..n {
            out.extend_from_slice(&msg);
        }
        tx.write_all(&out)?;
        sent += n;
    }
    rx.join().expect("receiver thread")?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"size\":{size},\"count\":{count},\"batch\":{batch},\"seconds\":{secs},\"msgs_per_s\":{}}}",
        count as f64 / secs
    );
    Ok(())
}
