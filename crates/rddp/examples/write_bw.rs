//! ib_write_bw over MPA/TCP: `write_bw [server|client ADDR] [ITERS [SIZE [DEPTH]]]`, both
//! ends here without ADDR. The client RDMA Writes, DEPTH in flight, into the server's buffer.
use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue as Cq, Device, PreparedQueuePair, ProtectionDomain};
use rddp::{QueuePairBuilder, Quota, RemoteBuf, SendFlags, WcStatus, WorkCompletion};
use rddp_mpa::MpaOptions;
use std::time::{Duration, Instant};
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn wait(cq: &Cq, n: usize) -> Res<Vec<WorkCompletion>> {
    let got = cq.wait(n, Duration::from_secs(10));
    match got.iter().find(|w| w.status != WcStatus::Success) {
        Some(w) => Err(format!("work request {} failed: {:?}", w.wr_id, w.status).into()),
        None if got.is_empty() => Err("timed out".into()),
        None => Ok(got),
    }
}
fn prepare(depth: usize) -> Res<(ProtectionDomain, Cq, PreparedQueuePair)> {
    let pd = Device::new().consumer("bw", Quota::default())?.alloc_pd()?;
    let cq = Cq::new(depth + 32);
    let b = QueuePairBuilder::new(&pd, &cq, &cq);
    let mut qp = b.max_send_wr(depth as u32).build()?;
    qp.post_recv(0, 16).and_then(|_| qp.post_recv(1, 16))?;
    Ok((pd, cq, qp))
}
fn server(l: &Listener, size: usize) -> Res<f64> {
    let (pd, cq, qp) = prepare(4)?;
    let qp = qp.attach(l.accept()?)?;
    let buf = pd.register(vec![0; size], Access::REMOTE_WRITE)?;
    qp.post_send_inline(2, &buf.remote().to_bytes(), SendFlags::default())?;
    while !wait(&cq, 1)?.iter().any(|w| w.wr_id == 0) {} // until "done" arrives
    let ok = buf.read(0, size as u64)? == vec![0x5A; size];
    ok.then_some(()).ok_or("the written data did not arrive")?;
    qp.post_send_inline(3, b"ack", SendFlags::default())?; // then dropping qp closes it
    Ok(0.0)
}
fn client(addr: &str, iters: usize, size: usize, depth: usize) -> Res<f64> {
    let (pd, cq, qp) = prepare(depth)?;
    let qp = qp.connect_mpa(addr, MpaOptions::default())?;
    let ad = wait(&cq, 1)?.remove(0).c.buffer.unwrap_or_default();
    let ad = RemoteBuf::from_bytes(&ad).ok_or("bad advertisement")?;
    let src = pd.register(vec![0x5A; size], Access::NONE)?;
    let (t, mut posted, mut done) = (Instant::now(), 0, 0);
    while done < iters {
        while posted < iters && posted - done < depth {
            qp.post_write(posted as u64, &src, 0, size as u64, ad, 0)?;
            posted += 1;
        }
        done += wait(&cq, depth)?.len();
    }
    // A Write completes once handed to TCP: the clock stops at the server's "ack".
    qp.post_send_inline(u64::MAX / 2, b"done", SendFlags::default())?;
    wait(&cq, 1).and_then(|_| wait(&cq, 1))?;
    let gbps = (iters * size * 8) as f64 / t.elapsed().as_secs_f64() / 1e9;
    println!("#bytes {size} #iterations {iters} depth {depth}: {gbps:.3} Gbit/s");
    qp.disconnect();
    Ok(gbps)
}
/// Returns the client's Gbit/s (0 for a server).
pub fn run(a: &[String]) -> Res<f64> {
    let remote = a.len() > 1 && (a[0] == "server" || a[0] == "client");
    let rest = &a[if remote { 2 } else { 0 }..];
    let num = |i: usize, d: usize| rest.get(i).map_or(Ok(d), |s| s.parse::<usize>());
    let (iters, size, depth) = (num(0, 1000)?, num(1, 65536)?, num(2, 16)?.max(1));
    match a.first().map(String::as_str) {
        Some("server") if remote => server(&Listener::bind(&a[1], MpaOptions::default())?, size),
        Some(_) if remote => client(&a[1], iters, size, depth),
        _ => {
            let l = Listener::bind("127.0.0.1:0", MpaOptions::default())?;
            let addr = l.local_addr()?.to_string();
            let srv = std::thread::spawn(move || server(&l, size));
            let res = client(&addr, iters, size, depth);
            srv.join().map_err(|_| "server thread panicked")?.and(res)
        }
    }
}
fn main() -> Res<()> {
    run(&std::env::args().skip(1).collect::<Vec<_>>()).map(|_| ())
}

/// Run by `cargo test` (the example is built as a test too): both ends in
/// process, both ends by argument, bad arguments refused with an error.
#[cfg(test)]
mod tests {
    use super::run;
    use std::time::Duration;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    /// A loopback address whose port was free a moment ago.
    fn free_addr() -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    }

    /// `server ADDR extra..` in a thread, `client ADDR extra..` here, the
    /// client tried again (at most 50 times, 100 ms apart) while the server
    /// does not listen yet.
    fn by_argument(extra: &[&str]) {
        let addr = free_addr();
        let s = [&["server", addr.as_str()][..], extra].concat();
        let s = args(&s);
        let server = std::thread::spawn(move || run(&s).map(|_| ()).map_err(|e| e.to_string()));
        let c = args(&[&["client", addr.as_str()][..], extra].concat());
        let mut res = run(&c).map(|_| ());
        for _ in 0..50 {
            if res.is_ok() || server.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            res = run(&c).map(|_| ());
        }
        res.unwrap();
        server.join().unwrap().unwrap();
    }

    #[test]
    fn both_ends_in_process() {
        let gbps = run(&args(&["64", "8192", "8"])).unwrap();
        assert!(gbps > 0.0, "{gbps}");
    }

    #[test]
    fn server_and_client_by_argument() {
        by_argument(&["16", "4096", "4"]);
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(run(&args(&["1", "lots"])).is_err());
        // Nobody listens on a port that was just freed.
        assert!(run(&args(&["client", &free_addr(), "1"])).is_err());
    }
}
