//! Shared by the library's integration tests: the library check, the
//! process's one stack, a connected pair of sockets over it, and a process
//! of its own for a test that must have the stack to itself.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::OnceLock;
use std::time::Duration;
use usrsctp_ffi::sys::SCTP_ASSOC_CHANGE;
use usrsctp_ffi::{Encapsulation, Error, Notification, Socket, Target, stack};

pub(crate) const T: Duration = Duration::from_secs(5);

/// Whether libusrsctp is here: missing, a loud skip, unless CI is set (then
/// the test fails).
pub(crate) fn library() -> bool {
    rddp_testkit::usrsctp_present("usrsctp tests", usrsctp_ffi::available())
}

/// Whether to run the usrsctp test `test` of module `module` (`module_path!()`)
/// here: a process runs one usrsctp stack on one UDP port, which is also the
/// SCTP port of its one listener, so such a test runs in a child process of
/// its own (`rddp_testkit::own_process`); `false` in the parent and without
/// libusrsctp.
pub(crate) fn own_process(module: &str, test: &str) -> bool {
    rddp_testkit::own_process(module, test, library)
}

/// The process's one stack, on a free UDP port.
pub(crate) fn port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let p = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        stack::init(Encapsulation::Udp(p)).unwrap();
        p
    })
}

pub(crate) fn prepare(s: &Socket) {
    s.set_init_streams(4).unwrap();
    s.subscribe(SCTP_ASSOC_CHANGE).unwrap();
    s.set_recv_rcvinfo(true).unwrap();
}

/// A connected pair (client, accepted server socket), the association up.
pub(crate) fn pair(sctp_port: u16) -> (Socket, Socket) {
    let port = port();
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, sctp_port);
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
    let s = l.accept(T).unwrap();
    let mut buf = [0u8; 512];
    let up = c.recv(&mut buf, T).unwrap();
    assert!(
        matches!(
            up,
            usrsctp_ffi::Received::Notification(Notification::AssocChange { .. })
        ),
        "unexpected {up:?}"
    );
    (c, s)
}

pub(crate) fn would_block(e: &Error) -> bool {
    matches!(e, Error::Io { err, .. } if err.kind() == std::io::ErrorKind::WouldBlock)
}
