//! The relay from usrsctp to the queue pair applies
//! backpressure, passive side. Real usrsctp, UDP encapsulation.

use crate::common::sctp_llp as llp;

use llp::{check_backpressure, ddp_peer, flood, read_after_stall};
use std::sync::mpsc::channel;
use std::time::Duration;

/// The same on the passive side (`Listener::accept`): one association, one
/// session, its queue pair's reader idle.
#[test]
fn passive_relay_holds_the_peer_back_instead_of_queueing() {
    if !llp::own_process(
        module_path!(),
        "passive_relay_holds_the_peer_back_instead_of_queueing",
    ) {
        return;
    }
    let Some((addr, listener)) = llp::listening() else {
        return;
    };
    let ((st_tx, st_rx), (done_tx, done_rx)) = (channel(), channel());
    let peer = std::thread::spawn(move || flood(ddp_peer(addr), st_tx, done_rx));
    let conn = listener.accept(Duration::from_secs(10), b"").unwrap();
    let stalled = read_after_stall(conn, st_rx, done_tx);
    peer.join().unwrap();
    check_backpressure(stalled);
}
