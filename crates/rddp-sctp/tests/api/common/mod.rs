//! Helpers of the real-usrsctp tests and of the sans-IO ones (`sides`).

pub(crate) mod link;
pub(crate) mod sides;
pub(crate) mod wire;

use rddp_proto::mem::MemoryTable;
use rddp_sctp::driver::SctpConnection;
use rddp_sctp::{CloseReason, Event};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

/// Whether libusrsctp is here: missing, a loud skip, unless CI is set (then
/// the test fails).
pub(crate) fn library() -> bool {
    rddp_testkit::usrsctp_present("real SCTP tests", usrsctp_ffi::available())
}

/// Whether to run the usrsctp test `test` of module `module` (`module_path!()`)
/// here: a process runs one usrsctp stack on one UDP port, which is also the
/// SCTP port of its one listener, so such a test runs in a child process of
/// its own (`rddp_testkit::own_process`); `false` in the parent and without
/// libusrsctp.
pub(crate) fn own_process(module: &str, test: &str) -> bool {
    rddp_testkit::own_process(module, test, library)
}

/// A free UDP port for this process's encapsulation (127.0.0.1).
pub(crate) fn free_port() -> u16 {
    let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    s.local_addr().unwrap().port()
}

/// The test pattern of `len` octets for a seed.
pub(crate) fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Run `c` until an event matching `f` arrives; returns it.
pub(crate) fn wait_event(
    c: &mut SctpConnection,
    mem: &MemoryTable,
    mut f: impl FnMut(&Event) -> bool,
) -> Event {
    let mut found = None;
    c.run_until(mem, Duration::from_secs(20), |c| {
        while let Some(e) = c.poll_event() {
            if f(&e) {
                found = Some(e);
                return true;
            }
            eprintln!("event: {e:?}");
        }
        false
    })
    .unwrap();
    found.unwrap()
}

/// Flush and poll both ends of an in-process association until `done`.
pub(crate) fn drive(
    a: &mut SctpConnection,
    ma: &MemoryTable,
    b: &mut SctpConnection,
    mb: &MemoryTable,
    mut done: impl FnMut(&mut SctpConnection, &mut SctpConnection) -> bool,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done(a, b) {
        assert!(std::time::Instant::now() < deadline, "timed out");
        a.flush().unwrap();
        b.flush().unwrap();
        a.poll(ma, Duration::from_millis(1)).unwrap();
        b.poll(mb, Duration::from_millis(1)).unwrap();
    }
}

pub(crate) fn is_closed(e: &Event, sid: u16) -> bool {
    matches!(e, Event::Closed { sid: s, reason: CloseReason::Terminated } if *s == sid)
}
