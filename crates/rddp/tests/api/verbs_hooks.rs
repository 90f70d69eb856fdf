//! What rddp offers a verbs layer for completions it decides itself and for
//! Writes of octets that are in no region: `CompletionQueue::push_local`
//! (it wakes an armed notify as a pushed completion does) and
//! `QueuePair::post_write_inline` (copied at posting).

use crate::common::{self, wait};
use rddp::transport::memory_pair;
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, WcOpcode, WcStatus, WriteFlags};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn push_local_completes_and_wakes_an_armed_queue() {
    let cq = CompletionQueue::new(4);
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    cq.set_notify(move || {
        f.fetch_add(1, Ordering::SeqCst);
    });
    // A solicited-only arm is ended by an unsuccessful completion.
    cq.arm_solicited();
    cq.push_local(7, 42, WcOpcode::Send, WcStatus::LocalProtection);
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    let got = cq.poll(4);
    assert_eq!(got.len(), 1);
    let wc = &got[0];
    assert_eq!((wc.qp_num, wc.wr_id), (7, 42));
    assert_eq!(
        (wc.opcode, wc.status, wc.byte_len),
        (WcOpcode::Send, WcStatus::LocalProtection, 0)
    );
    // Not armed: no notify; it holds no slot, so the reservation is intact.
    cq.push_local(7, 43, WcOpcode::Recv, WcStatus::Flushed);
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert_eq!(cq.poll(4).len(), 1);
    assert_eq!(cq.reserved(), 0);
}

#[test]
fn post_write_inline_copies_at_posting() {
    let dev = Device::new();
    let pd_a = common::pd(&dev, "a");
    let pd_b = common::pd(&dev, "b");
    let (cq_a, cq_b) = (CompletionQueue::new(64), CompletionQueue::new(64));
    let (la, lb) = memory_pair(1024);
    let a = QueuePairBuilder::new(&pd_a, &cq_a, &cq_a).build().unwrap();
    let b = QueuePairBuilder::new(&pd_b, &cq_b, &cq_b).build().unwrap();
    let b = b.attach(lb).unwrap();
    let a = a.attach(la).unwrap();
    let sink = pd_b
        .register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let mut data = *b"copied at posting";
    a.post_write_inline(1, &data, sink.remote(), 8, WriteFlags::default())
        .unwrap();
    data.fill(0);
    let wc = wait(&cq_a, 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::Success));
    assert_eq!(wc[0].byte_len, 17);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while sink.read(8, 17).unwrap() != b"copied at posting" {
        assert!(std::time::Instant::now() < deadline, "not placed");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    drop(b);
}
