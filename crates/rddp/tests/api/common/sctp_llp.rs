//! Shared by the SCTP LLP tests (one test per file: a usrsctp stack per process
//! has one UDP encapsulation port, which a listener must use): the library check,
//! a free address, and a peer that floods a session while the queue pair's side
//! of the relay does not read.
#![allow(dead_code)]

use bytes::Bytes;
use rddp::transport::sctp::{Listener, SctpOptions};
use rddp::transport::{Connection, Inbound};
use rddp_proto::mem::MemoryTable;
use rddp_sctp::driver::SctpConnection;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

/// Whether libusrsctp is here: missing, a loud skip, unless CI is set (then
/// the test fails).
pub(crate) fn library() -> bool {
    rddp_testkit::usrsctp_present("SCTP LLP tests", usrsctp_ffi::available())
}

/// Whether to run the usrsctp test `test` of module `module` (`module_path!()`)
/// here: a process runs one usrsctp stack on one UDP port, which is also the
/// SCTP port of its one listener, so such a test runs in a child process of
/// its own (`rddp_testkit::own_process`); `false` in the parent and without
/// libusrsctp.
pub(crate) fn own_process(module: &str, test: &str) -> bool {
    rddp_testkit::own_process(module, test, library)
}

/// The opening of a queue-pair test over SCTP: `None` without libusrsctp
/// (the test then returns, as [`library`] says), else a free address and a
/// listener bound to it with the default options.
pub(crate) fn listening() -> Option<(SocketAddrV4, Listener)> {
    if !library() {
        return None;
    }
    let addr = free_addr();
    Some((addr, Listener::bind(addr, SctpOptions::default()).unwrap()))
}

pub(crate) fn free_addr() -> SocketAddrV4 {
    let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, s.local_addr().unwrap().port())
}

/// A raw DDP/SCTP peer (rddp-sctp's own DDP stream, no queue pair) connected
/// to `addr` with an established session on stream 0.
pub(crate) fn ddp_peer(addr: SocketAddrV4) -> SctpConnection {
    let mut c = rddp_sctp::driver::connect(addr, Default::default()).unwrap();
    c.adaptation()
        .initiate(
            0,
            rddp_proto::mem::StreamId(1),
            rddp_proto::mem::PdId(1),
            b"",
        )
        .unwrap();
    let mem = MemoryTable::new();
    c.run_until(&mem, Duration::from_secs(10), |c| {
        c.poll_event()
            .is_some_and(|e| matches!(e, rddp_sctp::Event::Accepted { .. }))
    })
    .unwrap();
    c
}

/// Octets of DDP payload the peer offers to a reader that does not read.
const FLOOD: usize = 24 << 20;
/// With backpressure the peer is held back long before this.
const STALL_BELOW: usize = 8 << 20;

/// The peer's half: an established session on stream 0 sending `FLOOD` octets of
/// tagged segments. It reports on `stalled` how much it had sent when first held
/// back for half a second (None: it sent everything), and keeps the association
/// up until `done`.
pub(crate) fn flood(mut c: SctpConnection, stalled: Sender<Option<usize>>, done: Receiver<()>) {
    let mem = MemoryTable::new();
    let msg = 1 << 20;
    for i in 0..FLOOD / msg {
        c.stream(0)
            .unwrap()
            .send_tagged(0, 0x100, (i * msg) as u64, Bytes::from(vec![7; msg]))
            .unwrap();
    }
    let per = c.adaptation().max_segment() - 14;
    let (mut last, mut since, mut told) = (0, Instant::now(), false);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the peer never finished");
        let all_out = c.flush().unwrap();
        if all_out && c.stream(0).unwrap().drained() {
            break;
        }
        let sent = c.stats().chunks_sent as usize;
        if sent != last {
            (last, since) = (sent, Instant::now());
        } else if !told && since.elapsed() > Duration::from_millis(500) {
            told = true;
            stalled.send(Some(sent * per)).unwrap();
        }
        c.poll(&mem, Duration::from_millis(1)).unwrap();
    }
    if !told {
        stalled.send(None).unwrap();
    }
    // Keep the association up until the reader has everything.
    let _ = done.recv_timeout(Duration::from_secs(60));
}

/// Wait until the peer is held back (or has sent everything), then read every
/// segment of the flood from the queue pair's side of the relay; let the peer go.
pub(crate) fn read_after_stall(
    mut conn: Connection,
    stalled: Receiver<Option<usize>>,
    done: Sender<()>,
) -> Option<usize> {
    let at = stalled.recv_timeout(Duration::from_secs(60)).unwrap();
    read_all(&mut conn);
    let _ = done.send(());
    at
}

/// Read every segment of the flood from the queue pair's side of the relay.
fn read_all(conn: &mut Connection) {
    let mut octets = 0;
    while octets < FLOOD {
        let rddp::transport::Llp::Sctp(s) = &mut conn.llp else {
            panic!("an SCTP connection");
        };
        match s.recv(Duration::from_secs(30)).unwrap() {
            Inbound::Segment { bytes, .. } => octets += bytes.len() - 14,
            Inbound::Mulpdu(_) => {}
            other => panic!("{other:?} after {octets} octets"),
        }
    }
}

pub(crate) fn check_backpressure(stalled: Option<usize>) {
    let at = stalled.unwrap_or_else(|| {
        panic!("the peer sent all {FLOOD} octets to a reader that did not read")
    });
    assert!(at < STALL_BELOW, "held back only after {at} octets");
    eprintln!("peer held back after {at} octets");
}
