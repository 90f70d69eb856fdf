//! No non-DDP traffic on a DDP association (RFC 5043): an ordered DATA
//! chunk or a PPID other than 16/17 is an association error; the association is
//! aborted (no Terminate on each stream). The offending peer is a plain usrsctp
//! socket that announces the DDP indication; real usrsctp over UDP encapsulation.
//! Likewise an association whose inbound and outbound stream counts differ.

use crate::common::*;
use rddp_proto::mem::MemoryTable;
use rddp_sctp::driver::{DriverError, Listener, Options};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};
use usrsctp_ffi::sys::{SCTP_ASSOC_CHANGE, SCTP_COMM_LOST, SCTP_COMM_UP};
use usrsctp_ffi::{Notification, Received, Socket, Target};

/// A plain socket that passes the adaptation check, then misbehaves.
fn plain_peer(addr: SocketAddrV4) -> Socket {
    plain_peer_with(addr, 16, 16)
}

fn plain_peer_with(addr: SocketAddrV4, ostreams: u16, max_instreams: u16) -> Socket {
    let s = Socket::new(false).unwrap();
    s.set_adaptation_layer(1).unwrap();
    s.set_init_msg(ostreams, max_instreams).unwrap();
    s.subscribe(SCTP_ASSOC_CHANGE).unwrap();
    s.set_remote_udp_encaps_port(addr.port()).unwrap();
    s.bind(Target::Inet(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)))
        .unwrap();
    s.connect(Target::Inet(addr)).unwrap();
    s
}

fn wait_state(s: &Socket, want: u16) {
    let mut buf = vec![0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Received::Notification(Notification::AssocChange { state, .. })) =
            s.recv(&mut buf, Duration::from_millis(100))
            && state == want
        {
            return;
        }
    }
    panic!("association state {want} not reached");
}

#[test]
fn non_ddp_traffic_aborts_and_unequal_stream_counts_are_refused() {
    if !own_process(
        module_path!(),
        "non_ddp_traffic_aborts_and_unequal_stream_counts_are_refused",
    ) {
        return;
    }
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, free_port());
    let l = Listener::bind(addr, Options::default()).unwrap();
    // (ordered?, PPID): an ordered DDP Segment chunk, then an unordered PPID 51.
    for (unordered, ppid) in [(false, 16u32), (true, 51)] {
        let peer = plain_peer(addr);
        let mut c = l.accept(Duration::from_secs(5)).unwrap();
        wait_state(&peer, SCTP_COMM_UP);
        let mut chunk = vec![0, 0, 0xC1, 0];
        chunk.extend_from_slice(&[0; 12]);
        peer.send(0, ppid, unordered, &chunk).unwrap();
        let mem = MemoryTable::new();
        let err = loop {
            match c.poll(&mem, Duration::from_secs(5)) {
                Ok(true) => continue,
                Ok(false) => panic!("nothing received"),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, DriverError::Association(_)), "{err}");
        eprintln!("ordered={} ppid={ppid}: {err}", !unordered);
        wait_state(&peer, SCTP_COMM_LOST); // we aborted
        assert!(matches!(c.flush(), Err(DriverError::Closed)));
    }
    // A peer offering 4 outbound streams but accepting 16 inbound leaves us with
    // 4 inbound and 16 outbound: refused (RFC 5043, equal counts).
    let _peer = plain_peer_with(addr, 4, 16);
    let err = l
        .accept(Duration::from_secs(5))
        .expect_err("unequal counts accepted");
    assert!(
        matches!(
            err,
            DriverError::UnequalStreams {
                inbound: 4,
                outbound: 16
            }
        ),
        "{err}"
    );
}
