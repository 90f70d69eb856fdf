//! Transmit from the region when the socket is full (docs/data-path.md): an FPDU
//! the socket took only part of keeps its lease and resumes from where it
//! stopped, with no octet copied, and its CRC matches the octets on the wire even
//! though the application overwrote the region meanwhile.

use crate::common;
use crate::common::held_peer;

use held_peer::{held_peer, sender};
use rddp::{Access, RemoteBuf, WcStatus};
use std::time::Duration;

/// More than the loopback socket buffers hold, so the socket fills mid-FPDU.
const LEN: usize = 16 << 20;

#[test]
fn a_partial_fpdu_resumes_from_the_lease_with_a_crc_over_what_was_sent() {
    // The peer: MPA setup, then it reads nothing until told to.
    let (addr, peer) = held_peer(LEN);

    let (pd, cq, qp) = sender(addr, None);
    let src = pd.register(vec![0xA5; LEN], Access::NONE).unwrap();
    let before = qp.stats().tx_copied_octets;
    // Any STag: the peer does not check it.
    let remote = RemoteBuf {
        stag: 0x100,
        to: 0,
        len: LEN as u64,
    };
    qp.post_write(1, &src, 0, LEN as u64, remote, 0).unwrap();
    // The socket fills: the peer reads nothing, and the Write is longer
    // than the socket buffers hold.
    common::wait_until("the socket full", || qp.llp_full());
    assert!(
        cq.poll(1).is_empty(),
        "completed with the peer reading nothing"
    );
    // Change the region under the Write still posted: its octets become
    // undefined, its CRCs must not break.
    src.write(0, &vec![0x5A; LEN]).unwrap();
    peer.go();
    let (payload, fpdus) = peer.join();
    let wc = cq.wait(1, Duration::from_secs(20));
    assert_eq!(wc.len(), 1);
    assert_eq!(wc[0].status, WcStatus::Success);
    let copied = qp.stats().tx_copied_octets - before;
    eprintln!("{payload} payload octets in {fpdus} FPDUs, {copied} copied");
    assert_eq!(payload, LEN);
    assert_eq!(
        copied, 0,
        "payload octets copied out of the region on the way out"
    );
}
