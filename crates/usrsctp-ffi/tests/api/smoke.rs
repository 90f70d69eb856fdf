//! The socket type against the real library: association over UDP encapsulation
//! on 127.0.0.1 (one process, its own free port), adaptation indication, PPID and U.

use crate::common::own_process;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::Duration;
use usrsctp_ffi::sys::{SCTP_ADAPTATION_INDICATION, SCTP_ASSOC_CHANGE, SCTP_COMM_UP};
use usrsctp_ffi::{Encapsulation, Notification, Received, Socket, Target, stack};

fn free_udp_port() -> u16 {
    let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    s.local_addr().unwrap().port()
}

fn prepare(s: &Socket) {
    s.set_adaptation_layer(1).unwrap();
    s.set_init_streams(4).unwrap();
    s.subscribe(SCTP_ASSOC_CHANGE).unwrap();
    s.subscribe(SCTP_ADAPTATION_INDICATION).unwrap();
    s.set_recv_rcvinfo(true).unwrap();
}

#[test]
fn unordered_message_with_ppid() {
    if !own_process(module_path!(), "unordered_message_with_ppid") {
        return;
    }
    let port = free_udp_port();
    stack::init(Encapsulation::Udp(port)).unwrap();
    let t = Duration::from_secs(5);
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let l = Socket::new(false).unwrap();
    prepare(&l);
    l.bind(Target::Inet(addr)).unwrap();
    l.listen(1).unwrap();
    let c = Socket::new(false).unwrap();
    prepare(&c);
    c.set_remote_udp_encaps_port(port).unwrap();
    c.bind(Target::Inet(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)))
        .unwrap();
    c.connect(Target::Inet(addr)).unwrap();
    let s = l.accept(t).unwrap();
    let mut buf = vec![0u8; 2048];
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match c.recv(&mut buf, t).unwrap() {
            Received::Notification(n) => seen.push(n),
            d => panic!("unexpected {d:?}"),
        }
    }
    assert!(matches!(
        seen[0],
        Notification::AssocChange {
            state: SCTP_COMM_UP,
            ..
        }
    ));
    assert_eq!(seen[1], Notification::Adaptation { indication: 1 });
    let st = c.status().unwrap();
    assert_eq!((st.instrms, st.outstrms), (4, 4));
    assert!(st.fragmentation_point >= 516, "{st:?}");
    c.send(3, 16, true, b"hello").unwrap();
    loop {
        match s.recv(&mut buf, t).unwrap() {
            Received::Data {
                len,
                info,
                complete,
            } => {
                assert_eq!(&buf[..len], b"hello");
                assert!(complete && info.unordered);
                assert_eq!((info.sid, info.ppid), (3, 16));
                break;
            }
            Received::Notification(_) => {}
        }
    }
}
