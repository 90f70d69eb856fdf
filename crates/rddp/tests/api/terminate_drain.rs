//! A peer flooding Sends that it has no buffers for still gets its Terminate
//! (RFC 5040 §5.4, RFC 5044 §7's abortive close): the queue pair's task shuts its
//! side down for writing once the Terminate is handed to the socket and goes on
//! reading (and dropping) the flood until the peer closes or a short bound
//! passes. Closing the socket with the flood unread makes the kernel answer
//! with a reset, which drops a Terminate still queued behind the peer's window.

use crate::common;
use crate::common::raw_peer;

use raw_peer::RawPeer;
use rddp::{Access, CompletionQueue, Device, RemoteBuf};
use rddp_wire::FpduEncoder;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const MIB: usize = 1 << 20;

/// An untagged Send (QN 0, MSN `msn`) of `len` octets.
fn send_segment(msn: u32, len: usize) -> Vec<u8> {
    let mut s = vec![0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0];
    s.extend_from_slice(&msn.to_be_bytes());
    s.extend_from_slice(&[0; 4]);
    s.resize(s.len() + len, 0xEE);
    s
}

#[test]
fn a_flooding_peer_gets_its_terminate_behind_queued_output() {
    let dev = Device::new();
    let pd = common::pd(&dev, "target");
    let cq = CompletionQueue::new(64);
    // No receive buffer posted: the first Send is refused (Terminate 1/2/...).
    // The raw peer's first FPDU lets the queue pair send.
    let (mut raw, qp) = RawPeer::responder_qp(&pd, &cq, 16);
    // Output the peer does not read yet: the Terminate queues behind it.
    let src = pd.register(vec![0x5A; MIB], Access::NONE).unwrap();
    let sink = RemoteBuf {
        stag: 0x0000_1000,
        to: 0,
        len: MIB as u64,
    };
    for i in 0..4 {
        qp.post_write(i, &src, 0, MIB as u64, sink, 0).unwrap();
    }

    // The flood: Sends with nowhere to go, until the connection fails.
    let stop = Arc::new(AtomicBool::new(false));
    let mut w = raw.sock.try_clone().unwrap();
    let flag = stop.clone();
    let flood = std::thread::spawn(move || {
        let mut enc = FpduEncoder::new(true, false);
        let mut msn = 1u32;
        while !flag.load(Ordering::Relaxed) {
            let mut out = Vec::new();
            enc.encode(&send_segment(msn, 1024), &mut out).unwrap();
            if w.write_all(&out).is_err() {
                return;
            }
            msn = msn.wrapping_add(1);
        }
    });
    // The queue pair refuses the flood while the peer reads nothing yet.
    let sent = common::terminate_sent(&qp).expect("the queue pair sent no Terminate");
    // Not a synchronisation: what is asserted below holds however long this
    // lasts. It only lets more of the flood pile up unread behind the
    // queued Terminate, the state in which a close would reset.
    std::thread::sleep(Duration::from_millis(300));
    // Now the peer reads everything: the Writes, then the Terminate.
    let (term, closed) = raw.terminate();
    stop.store(true, Ordering::Relaxed);
    let term = term.expect("no Terminate reached the flooding peer (reset?)");
    assert_eq!(term.code, sent);
    assert!(closed, "the connection did not close");
    drop(raw);
    flood.join().unwrap();
}
