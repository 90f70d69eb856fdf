//! `MpaOptions::recv_buffer`: both ends' sockets get the asked SO_RCVBUF (the
//! listener's before listen, so every accepted socket inherits it), and without
//! it the kernel's default (autotuning) stays.

use rddp_mpa::{MpaOptions, connect_raw, listen};
use std::net::TcpStream;

fn rcvbuf(s: &TcpStream) -> usize {
    socket2::SockRef::from(s).recv_buffer_size().unwrap()
}

fn pair(recv_buffer: Option<usize>) -> (TcpStream, TcpStream) {
    let opts = MpaOptions {
        recv_buffer,
        ..MpaOptions::default()
    };
    let l = listen("127.0.0.1:0", opts.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || l.accept_raw(|_| Ok(Vec::new())).unwrap().0);
    let (client, _, _) = connect_raw(addr, &opts).unwrap();
    (client, server.join().unwrap())
}

#[test]
fn both_ends_get_the_asked_receive_buffer() {
    const ASKED: usize = 1 << 20;
    let (c, s) = pair(Some(ASKED));
    // Linux doubles the value for its bookkeeping (socket(7)).
    for (end, sock) in [("client", &c), ("server", &s)] {
        let got = rcvbuf(sock);
        assert!(
            (ASKED..=2 * ASKED).contains(&got),
            "{end}: SO_RCVBUF {got}, asked {ASKED}"
        );
    }
    let (c, s) = pair(None);
    for (end, sock) in [("client", &c), ("server", &s)] {
        assert!(rcvbuf(sock) < ASKED, "{end}: the default stays");
    }
}
