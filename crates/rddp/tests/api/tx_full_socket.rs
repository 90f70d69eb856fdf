//! Posting into a full socket makes no write (docs/data-path.md): once a write
//! found the socket's buffer full, a post only looks (poll(2)) until the
//! socket takes more. A write lays out every FPDU it gathers, each FPDU's CRC
//! computed over its payload, and what the socket does not take is laid out
//! again next time: before, every post into a full socket made a `sendmsg`
//! that took nothing and computed the CRCs of everything queued for it. The
//! Writes all arrive once the peer reads. (One test in this binary: the
//! `sendmsg` counter is the process's.)

use crate::common;
use crate::common::held_peer;

use held_peer::{held_peer, sender};
use rddp::{Access, RemoteBuf, WcStatus};
use std::time::Duration;

/// More than the loopback socket buffers hold: the socket fills.
const FIRST: usize = 16 << 20;
/// Writes posted while the socket is full, and their length.
const POSTS: usize = 40;
const LEN: usize = 64 << 10;

#[test]
fn posts_into_a_full_socket_make_no_write_until_it_drains() {
    // The peer: MPA setup, then it reads nothing until told to.
    let total = FIRST + POSTS * LEN;
    let (addr, peer) = held_peer(total);

    let (pd, cq, qp) = sender(addr, Some(POSTS as u32 + 1));
    let src = pd.register(vec![0xA5; FIRST], Access::NONE).unwrap();
    // Any STag: the peer does not check it.
    let remote = RemoteBuf {
        stag: 0x100,
        to: 0,
        len: FIRST as u64,
    };
    qp.post_write(0, &src, 0, FIRST as u64, remote, 0).unwrap();
    // The socket fills: the peer reads nothing, and the Write is longer
    // than the socket buffers hold.
    common::wait_until("the socket full", || qp.llp_full());
    assert!(
        cq.poll(1).is_empty(),
        "completed with the peer reading nothing"
    );
    let before = qp.stats().llp_writes;
    for i in 0..POSTS {
        qp.post_write(1 + i as u64, &src, 0, LEN as u64, remote, 0)
            .unwrap();
    }
    let calls = qp.stats().llp_writes - before;
    assert!(
        calls <= 2,
        "{calls} sendmsg calls for {POSTS} Writes posted into a full socket"
    );
    peer.go();
    assert_eq!(peer.join().0, total);
    let mut done = Vec::new();
    while done.len() < POSTS + 1 {
        let wc = cq.wait(POSTS + 1 - done.len(), Duration::from_secs(20));
        assert!(
            !wc.is_empty(),
            "{} of {} Writes completed",
            done.len(),
            POSTS + 1
        );
        done.extend(wc);
    }
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?}"
    );
}
