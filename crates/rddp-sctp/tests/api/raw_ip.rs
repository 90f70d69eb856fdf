//! The raw IP option (IP protocol 132, root only): a session with a tagged write
//! between two endpoints of this process on 127.0.0.1. Skipped loudly when not root
//! (and then failing only if CI is set, where the suite runs as root).

use crate::common::*;
use bytes::Bytes;
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_sctp::SessionState;
use rddp_sctp::driver::{Listener, Options, Transport, connect};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

fn root() -> bool {
    let uid = std::process::Command::new("id").arg("-u").output();
    let root = uid.is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !root {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run as root for raw IP"
        );
        eprintln!("\n*** SKIPPED: raw IP SCTP needs root\n");
    }
    root
}

#[test]
fn session_over_raw_ip() {
    if !root() || !own_process(module_path!(), "session_over_raw_ip") {
        return;
    }
    let opts = Options {
        transport: Transport::RawIp,
        ..Options::default()
    };
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, free_port());
    let l = Listener::bind(addr, opts.clone()).unwrap();
    let mut a = connect(addr, opts).unwrap();
    let mut b = l.accept(Duration::from_secs(5)).unwrap();
    let (ma, mb) = (MemoryTable::with_seed(1), MemoryTable::with_seed(2));
    a.adaptation()
        .initiate(0, StreamId(0), PdId(1), b"raw")
        .unwrap();
    drive(&mut a, &ma, &mut b, &mb, |_, b| {
        b.adaptation().pending_initiates() == 1
    });
    let stag = mb
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            0,
            vec![0; 10_000],
        )
        .unwrap();
    b.adaptation().accept(0, StreamId(1), PdId(1), b"").unwrap();
    drive(&mut a, &ma, &mut b, &mb, |a, _| {
        a.adaptation().session_state(0) == Some(SessionState::Established)
    });
    a.stream(0)
        .unwrap()
        .send_tagged(0, stag.0, 0, Bytes::from(pattern(8, 10_000)))
        .unwrap();
    drive(&mut a, &ma, &mut b, &mb, |_, b| {
        b.stream(0).unwrap().poll_delivery().is_some()
    });
    assert_eq!(mb.region(stag).unwrap().data(), &pattern(8, 10_000)[..]);
    eprintln!("raw IP: fragmentation point {}", a.fragmentation_point());
}
