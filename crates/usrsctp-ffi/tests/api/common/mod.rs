//! Shared by the library's integration tests: the library check, the
//! process's one stack, a connected pair of sockets over it, and a process
//! of its own for a test that must have the stack to itself.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::OnceLock;
use std::time::Duration;
use usrsctp_ffi::sys::SCTP_ASSOC_CHANGE;
use usrsctp_ffi::{Encapsulation, Error, Notification, Socket, Target, stack};

pub(crate) const T: Duration = Duration::from_secs(5);

/// Skip loudly without the library, unless CI is set (then fail).
pub(crate) fn library() -> bool {
    match usrsctp_ffi::available() {
        Ok(()) => true,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED (no libusrsctp, CI unset): {e}");
            false
        }
        Err(e) => panic!("CI: {e}"),
    }
}

/// Environment variable naming the one test a child process runs (see
/// [`own_process`]).
const OWN_PROCESS_ENV: &str = "RDDP_TEST_OWN_PROCESS";

/// Whether to run the test `test` of module `module` (`module_path!()`) here:
/// for a test that starts a stack of its own (a process has one, on one UDP
/// port), counts what the process-wide reaper holds, or measures the stack's
/// threads, so that no other test's socket shares its stack. In the parent
/// this runs the test binary again for that one test, checks that it ran
/// and passed, and returns `false`; in that child it returns `true`.
/// `false` without libusrsctp too (see [`library`]).
pub(crate) fn own_process(module: &str, test: &str) -> bool {
    // The harness names a test by its path below the crate root.
    let path = match module.split_once("::") {
        Some((_, m)) => format!("{m}::{test}"),
        None => test.to_string(),
    };
    if std::env::var(OWN_PROCESS_ENV).is_ok_and(|v| v == path) {
        return true;
    }
    if !library() {
        return false;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &path, "--nocapture", "--test-threads", "1"])
        .env(OWN_PROCESS_ENV, &path)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{path} in its own process:\n{text}");
    assert!(
        text.contains("1 passed"),
        "{path} did not run in its own process:\n{text}"
    );
    eprint!("{text}");
    false
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
