//! The relay from usrsctp to the queue pair applies
//! backpressure, active side. Real usrsctp, UDP encapsulation.

use crate::common::sctp_llp as llp;

use llp::{check_backpressure, flood, free_addr, library, read_after_stall};
use rddp::transport::sctp::{SctpOptions, connect};
use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_sctp::Event;
use std::sync::mpsc::channel;
use std::time::Duration;

/// The relay from usrsctp to the queue pair applies
/// backpressure. Active side (`connect`): its reader does not read, the peer is
/// held back; then every octet arrives once it reads.
#[test]
fn active_relay_holds_the_peer_back_instead_of_queueing() {
    if !llp::own_process(
        module_path!(),
        "active_relay_holds_the_peer_back_instead_of_queueing",
    ) {
        return;
    }
    if !library() {
        return;
    }
    let addr = free_addr();
    let l = rddp_sctp::driver::Listener::bind(addr, Default::default()).unwrap();
    let ((st_tx, st_rx), (done_tx, done_rx)) = (channel(), channel());
    let peer = std::thread::spawn(move || {
        let mut c = l.accept(Duration::from_secs(10)).unwrap();
        let mem = MemoryTable::new();
        c.run_until(&mem, Duration::from_secs(10), |c| {
            c.poll_event()
                .is_some_and(|e| matches!(e, Event::InitiateRequest { .. }))
        })
        .unwrap();
        c.adaptation().accept(0, StreamId(1), PdId(1), b"").unwrap();
        flood(c, st_tx, done_rx);
    });
    let conn = connect(addr, SctpOptions::default(), b"").unwrap();
    let stalled = read_after_stall(conn, st_rx, done_tx);
    peer.join().unwrap();
    check_backpressure(stalled);
}
