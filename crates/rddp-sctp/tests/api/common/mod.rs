//! Helpers of the real-usrsctp tests and of the sans-IO ones (`sides`).

pub(crate) mod link;
pub(crate) mod sides;
pub(crate) mod wire;

use rddp_proto::mem::MemoryTable;
use rddp_sctp::driver::SctpConnection;
use rddp_sctp::{CloseReason, Event};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

/// Whether libusrsctp is here. Missing: a loud skip, unless CI is set (then fail).
pub(crate) fn library() -> bool {
    match usrsctp_ffi::available() {
        Ok(()) => true,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("\n*** SKIPPED: real SCTP tests need libusrsctp (CI unset): {e}\n");
            false
        }
        Err(e) => panic!("CI is set and libusrsctp is missing: {e}"),
    }
}

/// Environment variable naming the one test a child process runs (see
/// [`own_process`]).
const OWN_PROCESS_ENV: &str = "RDDP_TEST_OWN_PROCESS";

/// Whether to run the usrsctp test `test` of module `module` (`module_path!()`)
/// here. A process runs one usrsctp stack on one UDP port, which is also the
/// SCTP port of the one listener it can have (src/driver/setup.rs), so every
/// test that starts the stack runs in a child process of its own: in the
/// parent this runs the test binary again for that one test, checks that it
/// ran and passed, and returns `false`; in that child it returns `true`.
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
