//! The receive buffer of both ends' sockets:
//! * `MpaOptions::recv_buffer`: the asked SO_RCVBUF (the listener's before
//!   listen, so every accepted socket inherits it), nothing raised over it;
//! * without it, `initial_receive_window` (default 2 MiB): a buffer that holds
//!   that window, with the low-water mark back at 1 octet (autotuning on),
//!   and a paused reader's queue takes a full send buffer before the window
//!   closes;
//! * without either, the kernel's default.

use rddp_mpa::{INITIAL_RECEIVE_WINDOW, MpaOptions, connect_raw, listen};
use std::net::TcpStream;
use std::os::fd::AsFd;

fn rcvbuf(s: &TcpStream) -> usize {
    socket2::SockRef::from(s).recv_buffer_size().unwrap()
}

fn pair(recv_buffer: Option<usize>, initial_receive_window: Option<u32>) -> [TcpStream; 2] {
    let opts = MpaOptions {
        recv_buffer,
        initial_receive_window,
        ..MpaOptions::default()
    };
    let l = listen("127.0.0.1:0", opts.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || l.accept_raw(|_| Ok(Vec::new())).unwrap().0);
    let (client, _, _) = connect_raw(addr, &opts).unwrap();
    [client, server.join().unwrap()]
}

const ENDS: [&str; 2] = ["client", "server"];

#[test]
fn both_ends_get_the_asked_receive_buffer() {
    const ASKED: usize = 1 << 20;
    // The initial window (2 MiB, the default) does not raise a fixed buffer.
    let socks = pair(Some(ASKED), Some(INITIAL_RECEIVE_WINDOW));
    // Linux doubles the value for its bookkeeping (socket(7)).
    for (end, sock) in ENDS.iter().zip(&socks) {
        let got = rcvbuf(sock);
        assert!(
            (ASKED..=2 * ASKED).contains(&got),
            "{end}: SO_RCVBUF {got}, asked {ASKED}"
        );
    }
}

#[test]
fn autotuned_ends_start_with_the_initial_window() {
    assert_eq!(
        MpaOptions::default().initial_receive_window,
        Some(INITIAL_RECEIVE_WINDOW)
    );
    let socks = pair(None, Some(INITIAL_RECEIVE_WINDOW));
    for (end, sock) in ENDS.iter().zip(&socks) {
        let got = rcvbuf(sock);
        assert!(
            got >= INITIAL_RECEIVE_WINDOW as usize,
            "{end}: SO_RCVBUF {got}, below the initial window"
        );
        // The mark that raised it is back at one octet: a lone octet still
        // wakes the reader.
        assert_eq!(rddp_sockopt::rcvlowat(sock.as_fd()).unwrap(), 1, "{end}");
    }
    let socks = pair(None, None);
    for (end, sock) in ENDS.iter().zip(&socks) {
        let got = rcvbuf(sock);
        assert!(got < 1 << 20, "{end}: the kernel's default stays ({got})");
    }
}

/// The largest value of a `/proc/sys/net/ipv4/tcp_{w,r}mem` triple.
fn largest(name: &str) -> usize {
    let s = std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).unwrap();
    s.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// Octets waiting in `s`'s receive queue (a peek takes what is there).
fn queued(s: &TcpStream, buf: &mut [u8]) -> usize {
    match s.peek(buf) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
        Err(e) => panic!("peek: {e}"),
    }
}

/// What the initial window comes to: a sender whose reader has paused gets a
/// full send buffer of the kernel's largest default size into the reader's
/// queue before the window closes (Linux makes a request by SO_RCVLOWAT of
/// 2 MiB a window of about 4 MiB on loopback: 4,126,913 octets were queued
/// when it closed; 1 MiB gave 2,031,033).
#[test]
fn a_paused_reader_takes_a_full_send_buffer_before_its_window_closes() {
    use std::io::Write;
    let [client, server] = pair(None, Some(INITIAL_RECEIVE_WINDOW));
    client.set_nonblocking(true).unwrap();
    server.set_nonblocking(true).unwrap();
    let chunk = vec![0x5au8; 256 << 10];
    let mut buf = vec![0u8; 64 << 20];
    let (mut last, mut still) = (0, 0);
    // Write until the kernel takes no more, until the reader's queue stops
    // growing (the window closed).
    while still < 5 {
        while let Ok(n) = (&client).write(&chunk) {
            assert!(n > 0);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let q = queued(&server, &mut buf);
        if q == last {
            still += 1;
        } else {
            (last, still) = (q, 0);
        }
    }
    // Linux's SO_RCVLOWAT raises the window at most to half of tcp_rmem's
    // largest buffer (`tcp_set_rcvlowat`).
    let want = largest("tcp_wmem").min(largest("tcp_rmem") / 2);
    eprintln!("queued {last} octets when the window closed; a full send buffer is {want}");
    assert!(
        last >= want * 7 / 8,
        "the window closed at {last} octets, below a full send buffer ({want})"
    );
}
