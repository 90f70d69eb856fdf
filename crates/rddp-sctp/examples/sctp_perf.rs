//! Throughput of RDMA-Write-like tagged DDP messages over DDP/SCTP against plain
//! usrsctp unordered messages, in the same run, between two processes over UDP
//! encapsulation on 127.0.0.1 (this binary spawns itself as the receiver).
//!
//! `cargo run --release -p rddp-sctp --example sctp_perf [-- RUNS MIB [MODES]]`
//! (MODES: `raw,ddp` by default; `raw` alone is the baseline that
//! `scripts/bench-perf.sh` puts next to the verbs queue pair over SCTP).
//!
//! * ddp: tagged messages of 64 KiB, cut by DDP into segments of the maximum size
//!   (fragmentation point - 2), one unordered PPID 16 chunk each, placed at the
//!   receiver into a registered region.
//! * raw: unordered messages of the fragmentation point's size (one DATA chunk each,
//!   the same chunk size as ddp) carrying the same number of payload octets.
//!
//! Goodput counts payload octets only (DDP headers and DDP-SSNs are overhead).

use bytes::Bytes;
use rddp_proto::ddp::{Delivery, RecvBuffer};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_sctp::Event;
use rddp_sctp::driver::{Listener, Options, connect};
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use usrsctp_ffi::sys::{SCTP_ASSOC_CHANGE, SCTP_COMM_UP};
use usrsctp_ffi::{Encapsulation, Notification, Received, Socket, Target, stack};

const MSG: usize = 64 * 1024;
const T: Duration = Duration::from_secs(60);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("receiver") {
        let addr: SocketAddrV4 = args[3].parse()?;
        let total: usize = args[4].parse()?;
        return match args[2].as_str() {
            "ddp" => ddp_receiver(addr, total),
            _ => raw_receiver(addr, total),
        };
    }
    usrsctp_ffi::available()?;
    let runs: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(5);
    let mib: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(64);
    let total = mib * 1024 * 1024;
    let modes = args.get(3).map_or("raw,ddp", String::as_str);
    let modes: Vec<&str> = modes.split(',').collect();
    if let Some(bad) = modes.iter().find(|m| !["raw", "ddp"].contains(m)) {
        return Err(format!("unknown mode {bad} (raw, ddp)").into());
    }
    let (mut ddp, mut raw) = (Vec::new(), Vec::new());
    for run in 0..runs {
        for &mode in &modes {
            let gbps = one_run(mode, total)?;
            println!("run {run} {mode}: {gbps:.3} Gbit/s");
            if mode == "ddp" {
                ddp.push(gbps)
            } else {
                raw.push(gbps)
            }
        }
    }
    match (median(&mut ddp), median(&mut raw)) {
        (Some(d), Some(r)) => println!(
            "median of {runs} runs, {mib} MiB each: ddp {d:.3} Gbit/s, raw {r:.3} Gbit/s, ratio {:.3}",
            d / r
        ),
        (d, r) => {
            let (name, m) = if d.is_some() { ("ddp", d) } else { ("raw", r) };
            let m = m.unwrap_or(0.0);
            println!("median of {runs} runs, {mib} MiB each: {name} {m:.3} Gbit/s");
        }
    }
    Ok(())
}

fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied()
}

fn free_port() -> std::io::Result<u16> {
    Ok(UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// Spawn a receiver process (its own stack) and send from this process (whose one
/// stack serves every run): returns payload goodput in Gbit/s.
fn one_run(mode: &str, total: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, free_port()?);
    let exe = std::env::current_exe()?;
    let mut rx = Command::new(&exe)
        .args(["receiver", mode, &addr.to_string(), &total.to_string()])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut lines = BufReader::new(rx.stdout.take().ok_or("no stdout")?).lines();
    let ready = lines.next().ok_or("receiver died")??;
    if ready != "READY" {
        return Err(format!("receiver said {ready}").into());
    }
    let secs = if mode == "ddp" {
        ddp_sender(addr, total)
    } else {
        raw_sender(addr, total)
    };
    let st = rx.wait()?;
    let secs = secs?;
    if !st.success() {
        return Err(format!("receiver failed: {st}").into());
    }
    Ok(total as f64 * 8.0 / secs / 1e9)
}

fn ddp_sender(addr: SocketAddrV4, total: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let mem = MemoryTable::new();
    let mut c = connect(addr, Options::default())?;
    c.adaptation().initiate(0, StreamId(0), PdId(1), b"")?;
    let mut pd = Vec::new();
    c.run_until(&mem, T, |c| {
        while let Some(e) = c.poll_event() {
            if let Event::Accepted { private_data, .. } = e {
                pd = private_data;
                return true;
            }
        }
        false
    })?;
    let stag = u32::from_be_bytes(pd[..4].try_into()?);
    c.stream(0).ok_or("no stream")?.post_recv(
        0,
        RecvBuffer {
            id: 0,
            data: vec![0; 16],
        },
    )?;
    let data = Bytes::from(vec![0x5a; MSG]);
    let start = Instant::now();
    for i in 0..total / MSG {
        c.stream(0)
            .ok_or("no stream")?
            .send_tagged(0, stag, (i * MSG) as u64, data.clone())?;
    }
    c.run_until(&mem, T, |c| {
        c.stream(0).is_some_and(|s| s.poll_delivery().is_some())
    })?;
    Ok(start.elapsed().as_secs_f64())
}

fn ddp_receiver(addr: SocketAddrV4, total: usize) -> Result<(), Box<dyn std::error::Error>> {
    let l = Listener::bind(addr, Options::default())?;
    println!("READY");
    let mut c = l.accept(T)?;
    let mem = MemoryTable::new();
    mem.set_limits(rddp_proto::mem::TableLimits {
        max_bytes: 1 << 31,
        ..Default::default()
    });
    let stag = mem.register(
        PdId(1),
        StagScope::Pd,
        Access::REMOTE_WRITE,
        0,
        vec![0; total],
    )?;
    c.run_until(&mem, T, |c| c.adaptation().pending_initiates() == 1)?;
    c.adaptation()
        .accept(0, StreamId(1), PdId(1), &stag.0.to_be_bytes())?;
    let mut n = 0;
    c.run_until(&mem, T, |c| {
        while let Some(Delivery::Tagged { .. }) = c.stream(0).and_then(|s| s.poll_delivery()) {
            n += 1;
        }
        n == total / MSG
    })?;
    c.stream(0)
        .ok_or("no stream")?
        .send_untagged(0, [0; 5], Bytes::from_static(b"done"))?;
    c.run_until(&mem, T, |_| true)?;
    std::thread::sleep(Duration::from_millis(200));
    Ok(())
}

fn raw_socket() -> Result<Socket, usrsctp_ffi::Error> {
    let s = Socket::new(false)?;
    s.set_init_streams(16)?;
    s.subscribe(SCTP_ASSOC_CHANGE)?;
    s.set_recv_rcvinfo(true)?;
    s.set_nodelay(true)?;
    Ok(s)
}

fn raw_sender(addr: SocketAddrV4, total: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let port = match stack::running() {
        Some(Encapsulation::Udp(p)) => p,
        _ => free_port()?,
    };
    stack::init(Encapsulation::Udp(port))?;
    let s = raw_socket()?;
    s.set_remote_udp_encaps_port(addr.port())?;
    s.bind(Target::Inet(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)))?;
    s.connect(Target::Inet(addr))?;
    let mut buf = vec![0u8; 2048];
    loop {
        if let Received::Notification(Notification::AssocChange {
            state: SCTP_COMM_UP,
            ..
        }) = s.recv(&mut buf, T)?
        {
            break;
        }
    }
    let size = s.status()?.fragmentation_point as usize;
    let msg = vec![0x5a; size];
    let start = Instant::now();
    let mut left = total;
    while left > 0 {
        let n = left.min(size);
        s.send_wait(0, 0, true, &msg[..n], T)?;
        left -= n;
    }
    loop {
        if let Received::Data { .. } = s.recv(&mut buf, T)? {
            break;
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

fn raw_receiver(addr: SocketAddrV4, total: usize) -> Result<(), Box<dyn std::error::Error>> {
    stack::init(Encapsulation::Udp(addr.port()))?;
    let l = raw_socket()?;
    l.bind(Target::Inet(addr))?;
    l.listen(1)?;
    println!("READY");
    let s = l.accept(T)?;
    let mut buf = vec![0u8; 65536];
    let mut got = 0;
    while got < total {
        if let Received::Data { len, .. } = s.recv(&mut buf, T)? {
            got += len;
        }
    }
    s.send(0, 0, true, b"done")?;
    std::thread::sleep(Duration::from_millis(200));
    Ok(())
}
