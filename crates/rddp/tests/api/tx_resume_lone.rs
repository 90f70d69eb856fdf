//! Transmit of Writes posted one at a time (each written alone, its FPDU's
//! head and trailer built on the stack, `MpaOut::write_lone`) into a socket
//! that fills: the FPDU the socket took only part of keeps its lease and
//! resumes from where it stopped, no octet copied, every CRC matching the
//! octets on the wire though the application overwrote the region
//! meanwhile.

use crate::common::held_peer;

use held_peer::{held_peer, sender};
use rddp::{Access, RemoteBuf, WcStatus};
use std::time::Duration;

/// Octets of each Write: one FPDU (under MULPDU on loopback).
const ONE: usize = 16 << 10;
/// Writes: more than the loopback socket buffers hold.
const WRITES: usize = 1024;

#[test]
fn lone_fpdus_into_a_filling_socket_resume_from_the_lease() {
    let total = ONE * WRITES;
    let (addr, peer) = held_peer(total);
    let (pd, cq, qp) = sender(addr, Some(WRITES as u32));
    let src = pd.register(vec![0xA5; total], Access::NONE).unwrap();
    let before = qp.stats().tx_copied_octets;
    let remote = RemoteBuf {
        stag: 0x100,
        to: 0,
        len: total as u64,
    };
    let mut sent_alone = 0;
    for i in 0..WRITES {
        let at = (i * ONE) as u64;
        qp.post_write(i as u64, &src, at, ONE as u64, remote, at)
            .unwrap();
        // Each Write completes once the socket took it whole: those that
        // completed at once went alone, the first that did not was taken
        // in part (or not at all) while alone in the queue.
        sent_alone += cq.poll(64).len();
    }
    assert!(
        sent_alone > 0 && sent_alone < WRITES,
        "{sent_alone} of {WRITES} completed before the peer read: the socket never filled"
    );
    // Change the region under the Writes still posted: their octets become
    // undefined, their CRCs must not break.
    src.write(0, &vec![0x5A; total]).unwrap();
    peer.go();
    let (payload, fpdus) = peer.join();
    let mut done = sent_alone;
    while done < WRITES {
        let wc = cq.wait(64, Duration::from_secs(20));
        assert!(!wc.is_empty(), "{done} of {WRITES} Writes completed");
        assert!(wc.iter().all(|w| w.status == WcStatus::Success), "{wc:?}");
        done += wc.len();
    }
    let copied = qp.stats().tx_copied_octets - before;
    eprintln!(
        "{sent_alone} sent alone; {payload} payload octets in {fpdus} FPDUs, {copied} copied"
    );
    assert_eq!(payload, total);
    assert!(fpdus >= WRITES, "{fpdus} FPDUs");
    assert_eq!(copied, 0, "payload octets copied out of the region");
}
