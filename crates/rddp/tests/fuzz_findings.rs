//! Regressions found by the fuzz targets (crates/rddp-fuzz, fuzz/regressions/).

use rddp::transport::memory_pair;
use rddp::{CompletionQueue, Device, QueuePairBuilder, Quota, SendFlags};

#[test]
fn a_send_queue_never_overflows_a_cq_sized_for_it() {
    // Found by verbs_ops: a Send completes when it leaves, which freed its
    // send-queue slot at once, so posting again and again without polling
    // filled the CQ (sized for the send queue) and later completions were lost
    // (counted as overflows). A slot now stays taken until its completion has
    // been polled, as in verbs.
    let dev = Device::new();
    let pd = dev
        .consumer("a", Quota::default())
        .unwrap()
        .alloc_pd()
        .unwrap();
    let peer_pd = dev
        .consumer("b", Quota::default())
        .unwrap()
        .alloc_pd()
        .unwrap();
    let (la, lb) = memory_pair(256);
    let cq = CompletionQueue::new(4);
    let peer_cq = CompletionQueue::new(64);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(2)
        .max_recv_wr(2)
        .build()
        .unwrap()
        .attach(la)
        .unwrap();
    let _peer = QueuePairBuilder::new(&peer_pd, &peer_cq, &peer_cq)
        .build()
        .unwrap()
        .attach(lb)
        .unwrap();
    let mut accepted = 0;
    for i in 0..20 {
        if qp.post_send_inline(i, b"x", SendFlags::default()).is_ok() {
            accepted += 1;
        }
    }
    assert_eq!(cq.overflows(), 0, "completions were lost");
    assert_eq!(
        accepted, 2,
        "only the send-queue depth is accepted before a poll"
    );
    assert_eq!(cq.poll(8).len(), 2);
    // Polling gives the slots back.
    assert!(qp.post_send_inline(100, b"y", SendFlags::default()).is_ok());
}
