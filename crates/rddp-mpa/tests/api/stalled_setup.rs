//! Setup on the event loop (docs/data-path.md): peers that stay silent or stop
//! halfway through their Request hold nothing that another connection needs.
//! Each still gets its own deadline (RFC 5044 §7.1.2), and comes out of `accept` as its
//! error, in turn.

use crate::common::{frame, read_to_end, write_all};
use rddp_mpa::{MpaError, MpaOptions, connect_raw, listen};
use rddp_wire::mpa::frame::KEY_REQ;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const SILENT: usize = 60;
const HALF: usize = 40;

fn opts(request_timeout: Duration) -> MpaOptions {
    MpaOptions {
        request_timeout,
        ..MpaOptions::rev1()
    }
}

/// `SILENT` connections that send nothing, then `HALF` that send 10 of the 20
/// octets of a Rev 1 Request.
fn stalled(addr: SocketAddr) -> Vec<TcpStream> {
    let req = frame(&KEY_REQ, 0x40, 1, 0, &[]);
    (0..SILENT + HALF)
        .map(|i| {
            // A listener that does not take them fills its listen queue (128 for a
            // blocking std listener), and the next connect waits for a SYN retry.
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
                .unwrap_or_else(|e| panic!("connection {i} not taken by the listener: {e}"));
            if i >= SILENT {
                write_all(&mut s, &req[..10]);
            }
            s
        })
        .collect()
}

#[test]
fn stalled_peers_do_not_delay_the_next_honest_setup() {
    let timeout = Duration::from_secs(3);
    let l = listen("127.0.0.1:0", opts(timeout)).unwrap();
    let addr = l.local_addr().unwrap();
    let t0 = Instant::now();
    let mut held = stalled(addr);
    let honest = std::thread::spawn(move || connect_raw(addr, &MpaOptions::rev1()).map(|_| ()));
    // The honest connection came last, and it is the first setup that ends: a
    // blocking acceptor would be reading the first silent peer until its deadline.
    let r = l.accept_raw(|r| Ok(r.private_data.clone()));
    let (sock, _, neg, _) = r.unwrap_or_else(|e| panic!("first accept: {e}"));
    assert!(t0.elapsed() < timeout, "took {:?}", t0.elapsed());
    assert_eq!(neg.rev, 1);
    honest.join().unwrap().unwrap();
    drop(sock);
    // Every stalled peer then fails by its own deadline, one accept each.
    for _ in 0..SILENT + HALF {
        let e = l.accept_raw(|_| Ok(Vec::new())).map(|_| ()).unwrap_err();
        assert!(matches!(e, MpaError::Timeout), "{e}");
    }
    assert!(t0.elapsed() >= timeout);
    for s in &mut held {
        assert_eq!(read_to_end(s), Vec::<u8>::new(), "closed without a Reply");
    }
}

#[test]
fn dropping_the_listener_closes_connections_still_in_setup() {
    let l = listen("127.0.0.1:0", opts(Duration::from_secs(30))).unwrap();
    let addr = l.local_addr().unwrap();
    let mut held = stalled(addr);
    // The loop has taken them all (their first run happens at once): none
    // is left in the kernel's accept queue, where closing the listener
    // would reset it whatever the loop does.
    let deadline = Instant::now() + Duration::from_secs(20);
    while accept_queue(addr.port()) != Some(0) {
        assert!(
            Instant::now() < deadline,
            "accept queue {:?} after 20 s",
            accept_queue(addr.port())
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(l);
    let mut buf = [0u8; 16];
    for s in &mut held {
        // Long before their 30 s deadline.
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        match s.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            r => panic!("still open after the listener went: {r:?}"),
        }
    }
}

/// The length of the accept queue of the IPv4 socket listening on `port`, from
/// /proc/net/tcp (state 0A = LISTEN; its rx_queue is the accept queue).
fn accept_queue(port: u16) -> Option<u64> {
    let want = format!(":{port:04X}");
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols.len() > 4 && cols[1].ends_with(&want) && cols[3] == "0A" {
            let (_, rx) = cols[4].split_once(':')?;
            u64::from_str_radix(rx, 16).ok()
        } else {
            None
        }
    })
}
