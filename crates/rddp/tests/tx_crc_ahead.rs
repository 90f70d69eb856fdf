//! CRCs computed when a Write is posted (`rddp_proto::ddp::CrcAhead`): the
//! writer lays out each FPDU's CRC from them without reading the payload, and
//! a region written after the post gets CRCs of its new octets, never stale
//! ones. The peer checks every FPDU's CRC (MPA, CRC on). (One test in this
//! binary: the counter is the process's.)

#[path = "common/held_peer.rs"]
mod held_peer;

use held_peer::{held_peer, sender};
use rddp::transport::mpa::crc_ahead_octets;
use rddp::{Access, RemoteBuf, WcStatus};
use std::time::Duration;

/// Writes of LEN posted at once: more than the loopback socket buffers hold,
/// so most are laid out only after the region was written.
const POSTS: usize = 24;
const LEN: usize = 1 << 20;

#[test]
fn crcs_computed_ahead_serve_the_writer_until_the_region_is_written() {
    let total = 2 * POSTS * LEN;
    let (addr, peer) = held_peer(total);
    let (pd, cq, qp) = sender(addr, Some(2 * POSTS as u32));
    let src = pd.register(vec![0x5A; LEN], Access::NONE).unwrap();
    // Any STag: the peer does not check it.
    let remote = RemoteBuf {
        stag: 0x100,
        to: 0,
        len: LEN as u64,
    };
    let before = crc_ahead_octets();
    for i in 0..POSTS {
        qp.post_write(i as u64, &src, 0, LEN as u64, remote, 0)
            .unwrap();
    }
    // Not a timing check: give the socket time to fill (the peer reads
    // nothing yet; a Write completes once the socket took it), then change
    // every octet the Writes still queued lease.
    std::thread::sleep(Duration::from_millis(300));
    let early = cq.poll(2 * POSTS);
    assert!(
        early.len() < POSTS,
        "the socket took every Write with the peer reading nothing"
    );
    let queued_ahead = crc_ahead_octets() - before;
    src.write(0, &vec![0xC3; LEN]).unwrap();
    // Posted after the write: computed ahead over the new octets.
    for i in POSTS..2 * POSTS {
        qp.post_write(i as u64, &src, 0, LEN as u64, remote, 0)
            .unwrap();
    }
    // The peer fails on the first FPDU whose CRC is not of its octets.
    peer.go();
    assert_eq!(peer.join().0, total);
    let mut done = early;
    while done.len() < 2 * POSTS {
        let wc = cq.wait(2 * POSTS - done.len(), Duration::from_secs(20));
        assert!(!wc.is_empty(), "{} Writes completed", done.len());
        done.extend(wc);
    }
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?}"
    );
    let ahead = crc_ahead_octets() - before;
    // What the socket took before the region was written used the CRCs
    // computed ahead; the Writes posted after it too. Those laid out in
    // between could not (the region changed): some payload went without.
    assert!(queued_ahead > 0, "no FPDU used a CRC computed ahead");
    assert!(
        ahead >= (POSTS * LEN) as u64 / 2,
        "{ahead} octets with CRCs computed ahead"
    );
    assert!(
        ahead < total as u64,
        "every octet used a CRC computed ahead, also after the region changed"
    );
}
