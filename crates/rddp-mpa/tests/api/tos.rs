//! `MpaOptions::tos`: the IP type of service of both ends' sockets, IP_TOS
//! over IPv4 and IPV6_TCLASS over IPv6 (the listener's set before it
//! listens, so every socket it accepts inherits it); without it, the
//! system's 0.

use rddp_mpa::{MpaOptions, connect_raw, listen};
use std::net::TcpStream;

/// A connected pair on `host` (a loopback address), both ends asking `tos`:
/// `None` when the host has no such address.
fn pair(host: &str, tos: Option<u8>) -> Option<[TcpStream; 2]> {
    let opts = MpaOptions {
        tos,
        ..MpaOptions::default()
    };
    let l = listen(format!("{host}:0"), opts.clone()).ok()?;
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || l.accept_raw(|_| Ok(Vec::new())).unwrap().0);
    let (client, _, _) = connect_raw(addr, &opts).unwrap();
    Some([client, server.join().unwrap()])
}

/// The socket's type of service, by its address family.
fn tos(s: &TcpStream) -> u32 {
    let r = socket2::SockRef::from(s);
    if s.local_addr().unwrap().is_ipv6() {
        r.tclass_v6().unwrap()
    } else {
        r.tos_v4().unwrap()
    }
}

#[test]
fn both_ends_carry_the_asked_type_of_service() {
    // DSCP AF11 (10 << 2).
    const ASKED: u8 = 0x28;
    for host in ["127.0.0.1", "[::1]"] {
        let Some(ends) = pair(host, Some(ASKED)) else {
            eprintln!("no {host} here: skipped");
            continue;
        };
        for (end, s) in ["client", "server"].iter().zip(&ends) {
            assert_eq!(tos(s), u32::from(ASKED), "{end} on {host}");
        }
        let plain = pair(host, None).unwrap();
        for (end, s) in ["client", "server"].iter().zip(&plain) {
            assert_eq!(tos(s), 0, "{end} on {host}, none asked");
        }
    }
}
