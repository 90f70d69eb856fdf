//! The receive buffer of both ends' sockets:
//! * `MpaOptions::recv_buffer`: the asked SO_RCVBUF (the listener's before
//!   listen, so every accepted socket inherits it), nothing raised over it;
//! * without it, `initial_receive_window` (default 2 MiB): a buffer that holds
//!   that window, with the low-water mark back at 1 octet (autotuning on);
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
