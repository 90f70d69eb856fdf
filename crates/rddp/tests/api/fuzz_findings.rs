//! Regressions found by the fuzz targets (crates/rddp-fuzz, fuzz/regressions/).

use crate::common;

use rddp::transport::memory_pair;
use rddp::{CompletionQueue, Device, Error, QueuePairBuilder, SendFlags, WcStatus};
use std::time::{Duration, Instant};

#[test]
fn a_send_queue_never_overflows_a_cq_sized_for_it() {
    // Found by verbs_ops: a Send's slot was free as soon as it completed, so
    // posting again and again without polling filled the CQ (sized for the
    // queue pair's depths) and later completions were lost (counted as
    // overflows). The rule now (rddp_proto::wq): a send slot is held from
    // posting until its completion is polled; a post past max_send_wr is
    // refused with SendQueueFull, also while the completions wait in the CQ.
    let dev = Device::new();
    let pd = common::pd(&dev, "a");
    let peer_pd = common::pd(&dev, "b");
    let (la, lb) = memory_pair(256);
    // Exactly what the queue pair reserves: 2 send slots and 2 receive slots.
    let cq = CompletionQueue::new(4);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(2)
        .max_recv_wr(2)
        .build()
        .unwrap()
        .attach(la)
        .unwrap();
    let peer_cq = CompletionQueue::new(64);
    let peer = common::attach(&peer_pd, &peer_cq, lb);
    const ROUNDS: u64 = 5;
    for i in 0..2 * ROUNDS {
        peer.post_recv(i, 16).unwrap();
    }
    let mut next = 0u64;
    for round in 0..ROUNDS {
        // Post 20 Sends without polling: the depth is accepted, the rest refused.
        let mut accepted = Vec::new();
        for _ in 0..20 {
            match qp.post_send_inline(next, b"x", SendFlags::default()) {
                Ok(()) => accepted.push(next),
                Err(Error::SendQueueFull { depth: 2 }) => {}
                Err(e) => panic!("round {round}: post {next} refused for another reason: {e}"),
            }
            next += 1;
        }
        assert_eq!(accepted.len(), 2, "round {round}: accepted {accepted:?}");
        // Their completions arrive in the CQ; unpolled, they keep their slots.
        let deadline = Instant::now() + Duration::from_secs(10);
        while cq.len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(cq.len(), 2, "round {round}: the two completions arrive");
        let err = qp
            .post_send_inline(next, b"x", SendFlags::default())
            .expect_err("a slot whose completion is not polled is still taken");
        assert!(matches!(err, Error::SendQueueFull { depth: 2 }), "{err}");
        next += 1;
        assert_eq!(cq.overflows(), 0, "round {round}: completions were lost");
        // Polling gives the slots back.
        let got = cq.poll(8);
        let ids: Vec<u64> = got.iter().map(|w| w.wr_id).collect();
        assert_eq!(ids, accepted, "round {round}");
        assert!(got.iter().all(|w| w.status == WcStatus::Success), "{got:?}");
    }
    assert_eq!(cq.overflows(), 0, "completions were lost");
}
