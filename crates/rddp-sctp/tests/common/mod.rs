//! Helpers of the real-usrsctp tests.
#![allow(dead_code)]

pub mod link;
pub mod sides;
pub mod wire;

use rddp_proto::mem::MemoryTable;
use rddp_sctp::driver::SctpConnection;
use rddp_sctp::{CloseReason, Event};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

/// Whether libusrsctp is here. Missing: a loud skip, unless CI is set (then fail).
pub fn library() -> bool {
    match usrsctp_ffi::available() {
        Ok(()) => true,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("\n*** SKIPPED: real SCTP tests need libusrsctp (CI unset): {e}\n");
            false
        }
        Err(e) => panic!("CI is set and libusrsctp is missing: {e}"),
    }
}

/// A free UDP port for this process's encapsulation (127.0.0.1).
pub fn free_port() -> u16 {
    let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    s.local_addr().unwrap().port()
}

/// The test pattern of `len` octets for a seed.
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Run `c` until an event matching `f` arrives; returns it.
pub fn wait_event(
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
pub fn drive(
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

pub fn is_closed(e: &Event, sid: u16) -> bool {
    matches!(e, Event::Closed { sid: s, reason: CloseReason::Terminated } if *s == sid)
}
