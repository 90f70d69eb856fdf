//! rping over MPA/TCP: `rping [N]` (both ends here), `rping server|client ADDR [N]`.
//! The client advertises its buffer's first half in a Send; the server RDMA Reads it,
//! RDMA Writes it into the second half and Sends "done"; the client checks and prints.
use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue as Cq, Device, QueuePairBuilder, Quota, RemoteBuf};
use rddp::{SendFlags, WcStatus, WorkCompletion};
use rddp_mpa::MpaOptions;
use std::time::Duration;
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
const LEN: usize = 64;
const T: Duration = Duration::from_secs(10);

fn wait(cq: &Cq) -> Res<WorkCompletion> {
    let wc = cq.wait(1, T).pop().ok_or("timed out")?;
    if wc.status != WcStatus::Success {
        return Err(format!("work request {} failed: {:?}", wc.wr_id, wc.status).into());
    }
    Ok(wc)
}

/// One end: the server when given a listener, else the client of `addr`.
fn end(listener: Option<&Listener>, addr: &str, n: usize) -> Res<()> {
    let pd = Device::new().consumer("rping", Quota::default())?;
    let (pd, cq) = (pd.alloc_pd()?, Cq::new(64));
    let mut qp = QueuePairBuilder::new(&pd, &cq, &cq).build()?;
    qp.post_recv(0, 16)?;
    let qp = match listener {
        Some(l) => qp.attach(l.accept()?)?,
        None => qp.connect_mpa(addr, MpaOptions::default())?,
    };
    let buf = pd.register(vec![0; 2 * LEN], Access::REMOTE_READ | Access::REMOTE_WRITE)?;
    for i in 0..n {
        if listener.is_some() {
            let ad = wait(&cq)?.c.buffer.unwrap_or_default();
            let ad = RemoteBuf::from_bytes(&ad).ok_or("bad advertisement")?;
            qp.post_recv(0, 16)?;
            qp.post_read(1, &buf, 0, LEN as u32, ad, 0)?;
            wait(&cq)?;
            qp.post_write(2, &buf, 0, LEN as u64, ad, LEN as u64)?;
            qp.post_send_inline(3, b"done", SendFlags::default())?;
            wait(&cq).and_then(|_| wait(&cq))?;
            continue;
        }
        let ping = Vec::from_iter((0..LEN).map(|k| b'A' + ((i + k) % 26) as u8));
        buf.write(0, &ping)?;
        qp.post_send_inline(1, &buf.remote().to_bytes(), SendFlags::default())?;
        wait(&cq).and_then(|_| wait(&cq))?; // the advertisement sent, "done" received
        qp.post_recv(0, 16)?;
        if buf.read(LEN as u64, LEN as u64)? != ping {
            return Err(format!("iteration {i}: the data came back different").into());
        }
        println!("rdma-ping-{i}: {}", String::from_utf8_lossy(&ping));
    }
    if listener.is_none() {
        qp.disconnect(); // the server closes once it sees the client's close
    }
    // The last receive, flushed at the peer's close: waited for, not read.
    let _ = cq.wait(1, T);
    Ok(())
}

pub fn run(a: &[String]) -> Res<()> {
    let n = |i: usize| a.get(i).map_or(Ok(10), |s| s.parse::<usize>());
    let opts = MpaOptions::default;
    match (a.first().map(String::as_str), a.get(1)) {
        (Some("server"), Some(at)) => end(Some(&Listener::bind(at, opts())?), "", n(2)?),
        (Some("client"), Some(at)) => end(None, at, n(2)?),
        _ => {
            let (l, n) = (Listener::bind("127.0.0.1:0", opts())?, n(0)?);
            let addr = l.local_addr()?.to_string();
            let srv = std::thread::spawn(move || end(Some(&l), "", n));
            let res = end(None, &addr, n);
            srv.join().map_err(|_| "server thread panicked")?.and(res)
        }
    }
}

fn main() -> Res<()> {
    run(&std::env::args().skip(1).collect::<Vec<_>>())
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
        run(&args(&["5"])).unwrap();
    }

    #[test]
    fn server_and_client_by_argument() {
        by_argument(&["3"]);
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(run(&args(&["many"])).is_err());
        // Nobody listens on a port that was just freed.
        assert!(run(&args(&["client", &free_addr(), "1"])).is_err());
    }
}
