//! Counters per queue pair and per device (docs/features.md): what `stats()` returns after
//! real traffic, a refused segment, a bad CRC and a quota refusal.

use crate::common;
use crate::common::raw_peer;

use common::{endpoint, terminate_received, terminate_sent, wait};
use raw_peer::RawPeer;
use rddp::transport::memory_pair;
use rddp::transport::mpa::{self, Listener};
use rddp::{
    Access, CompletionQueue, Device, QpStats, QueuePairBuilder, Quota, SendFlags, TerminateCode,
    WcStatus,
};
use rddp_mpa::MpaOptions;
use std::time::Duration;

/// `f(stats)` becomes true within 5 s (counters of the far side move on its
/// reader thread, after our completion).
fn eventually(what: &str, read: impl Fn() -> QpStats, f: impl Fn(&QpStats) -> bool) -> QpStats {
    for _ in 0..250 {
        let s = read();
        if f(&s) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what}: {:#?}", read());
}

#[test]
fn counters_add_up_on_both_sides_of_a_clean_exchange() {
    let dev = Device::new();
    let (la, lb) = memory_pair(1024);
    let (pa, ca, a) = endpoint(&dev, "a", 32, la);
    let (pb, cb, b) = endpoint(&dev, "b", 32, lb);
    let target = pb
        .register(vec![0; 4096], Access::REMOTE_WRITE | Access::REMOTE_READ)
        .unwrap();
    let src = pa.register(vec![7; 3000], Access::NONE).unwrap();
    let sink = pa.register(vec![0; 500], Access::REMOTE_WRITE).unwrap();
    b.post_recv(1, 64).unwrap();
    // 3000 octets in 1024-octet segments (14-octet tagged header): 3 segments.
    a.post_write(1, &src, 0, 3000, target.remote(), 0).unwrap();
    a.post_read(2, &sink, 0, 500, target.remote(), 0).unwrap();
    a.post_send(3, &src, 0, 33, SendFlags::default()).unwrap();
    let done = wait(&ca, 3);
    assert!(done.iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(wait(&cb, 1)[0].status, WcStatus::Success);

    let sa = a.stats();
    // Write 3000 + Read Request 28 + Send 33 payload octets, in 3 + 1 + 1 segments.
    assert_eq!(
        (sa.octets_sent, sa.segments_sent, sa.messages_sent),
        (3061, 5, 3)
    );
    // The Read Response: 500 octets, one segment, one message.
    assert_eq!(
        (sa.octets_placed, sa.segments_placed, sa.messages_delivered),
        (500, 1, 1)
    );
    assert_eq!(sa.completions.success, 3);
    assert_eq!(sa.completions.total(), 3);
    let sb = eventually(
        "b placed what a sent",
        || b.stats(),
        |s| s.octets_placed == 3061,
    );
    assert_eq!(
        (sb.segments_placed, sb.messages_delivered),
        (5, 3),
        "{sb:#?}"
    );
    assert_eq!((sb.octets_sent, sb.segments_sent), (500, 1));
    assert_eq!(sb.completions.success, 1);
    for s in [&sa, &sb] {
        // In memory there are no system calls to count.
        assert_eq!((s.llp_writes, s.llp_reads), (0, 0));
        assert_eq!(s.segments_refused, 0);
        assert_eq!(s.crc_errors, 0);
        assert_eq!(s.terminates_sent.total() + s.terminates_received.total(), 0);
    }

    let d = dev.stats();
    assert_eq!((d.queue_pairs_attached, d.queue_pairs_closed), (2, 0));
    let mut sum = sa;
    sum.add(&sb);
    assert_eq!(d.totals, sum);
    drop(a);
    drop(b);
    // Closed queue pairs stay in the device's totals; their receives and Reads
    // are all done, so nothing more is flushed.
    let d = dev.stats();
    assert_eq!((d.queue_pairs_attached, d.queue_pairs_closed), (2, 2));
    assert_eq!(d.totals.octets_sent, 3061 + 500);
    assert_eq!(d.totals.completions.success, 4);
}

/// Over MPA each queue pair counts its own system calls: the sender's
/// `sendmsg` calls (one a Send posted alone, with nothing queued), the
/// receiver's reads that returned octets (at least one, at most two an FPDU:
/// a peek and a read, until it reads each lone Send in one).
#[test]
fn each_queue_pair_counts_its_own_llp_system_calls() {
    const SENDS: u64 = 20;
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = std::thread::spawn(move || listener.accept().unwrap());
    let cconn = mpa::connect(addr, &MpaOptions::default()).unwrap();
    let (_pb, cb, b) = endpoint(&dev, "b", 64, accept.join().unwrap());
    let (pa, ca, a) = endpoint(&dev, "a", 64, cconn);
    let src = pa.register(vec![5; 64], Access::NONE).unwrap();
    let (a0, b0) = (a.stats(), b.stats());
    for i in 0..SENDS {
        b.post_recv(i, 64).unwrap();
        a.post_send(i, &src, 0, 64, SendFlags::default()).unwrap();
        assert_eq!(wait(&ca, 1)[0].status, WcStatus::Success);
        assert_eq!(wait(&cb, 1)[0].status, WcStatus::Success);
    }
    let (sa, sb) = (a.stats().since(&a0), b.stats().since(&b0));
    assert_eq!(sa.llp_writes, SENDS, "{sa:#?}");
    assert_eq!(sb.llp_writes, 0, "b sent nothing: {sb:#?}");
    assert!(
        (1..=2 * SENDS).contains(&sb.llp_reads),
        "{} reads returned octets for {SENDS} FPDUs",
        sb.llp_reads
    );
    // The device's totals add them up.
    let mut sum = a.stats();
    sum.add(&b.stats());
    assert_eq!(dev.stats().totals.llp_writes, sum.llp_writes);
}

#[test]
fn a_refused_write_is_counted_as_refused_and_terminated_on_both_sides() {
    let dev = Device::new();
    let (la, lb) = memory_pair(1024);
    let (pa, _ca, a) = endpoint(&dev, "a", 32, la);
    let (pb, _cb, b) = endpoint(&dev, "b", 32, lb);
    let target = pb.register(vec![0; 64], Access::REMOTE_WRITE).unwrap();
    b.post_recv(1, 64).unwrap();
    b.post_recv(2, 64).unwrap();
    let src = pa.register(vec![1; 16], Access::NONE).unwrap();
    // 16 octets at 56 of a 64-octet region: DDP base or bounds violation.
    a.post_write(1, &src, 0, 16, target.remote(), 56).unwrap();
    assert_eq!(terminate_sent(&b), Some(TerminateCode::DDP_BASE_BOUNDS));
    assert_eq!(terminate_received(&a), Some(TerminateCode::DDP_BASE_BOUNDS));
    let sb = eventually(
        "b flushed its receives",
        || b.stats(),
        |s| s.completions.flushed == 2,
    );
    assert_eq!(sb.segments_refused, 1);
    assert_eq!((sb.segments_placed, sb.octets_placed), (0, 0));
    assert_eq!(sb.terminates_sent.ddp_tagged, 1);
    assert_eq!(sb.terminates_sent.total(), 1);
    assert_eq!(sb.terminates_received.total(), 0);
    // The Terminate is one message from b; a places its body into RDMAP's queue.
    assert_eq!(sb.messages_sent, 1);
    let sa = a.stats();
    assert_eq!(sa.terminates_received.ddp_tagged, 1);
    assert_eq!(sa.terminates_received.total(), 1);
    assert_eq!(sa.terminates_sent.total(), 0);
    assert_eq!(sa.segments_refused, 0);
    let totals = dev.stats().totals;
    assert_eq!(totals.terminates_sent.ddp_tagged, 1);
    assert_eq!(totals.terminates_received.ddp_tagged, 1);
}

#[test]
fn a_bad_crc_is_counted_as_a_crc_error_not_as_a_refusal() {
    let dev = Device::new();
    let (mut raw, conn) = RawPeer::accepted_rev1();
    let (_pd, _cq, qp) = endpoint(&dev, "server", 32, conn);
    // A zero-length Write (placed: 0 octets), then a Send whose CRC is wrong.
    raw.send_segment(&[0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let send = [
        0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, b'a', b'b',
    ];
    raw.send_bad_crc(&send, 0xFF);
    assert_eq!(terminate_sent(&qp), Some(TerminateCode::MPA_CRC_ERROR));
    let (term, _) = raw.terminate();
    assert_eq!(term.map(|t| t.code), Some(TerminateCode::MPA_CRC_ERROR));
    let s = qp.stats();
    assert_eq!(s.crc_errors, 1);
    assert_eq!(s.terminates_sent.llp, 1);
    assert_eq!(s.segments_refused, 0);
    assert_eq!((s.segments_placed, s.octets_placed), (1, 0));
}

#[test]
fn quota_refusals_are_counted_by_the_device() {
    let dev = Device::new();
    let quota = Quota {
        receive_buffers: 1,
        ..Quota::default()
    };
    let pd = dev.consumer("small", quota).unwrap().alloc_pd().unwrap();
    let cq = CompletionQueue::new(8);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_recv(1, 16).unwrap();
    assert!(prepared.post_recv(2, 16).is_err());
    assert_eq!(dev.stats().quota_refusals, 1);
    let huge = Quota {
        queue_pairs: u64::MAX / 2,
        ..Quota::default()
    };
    assert!(dev.consumer("huge", huge).is_err());
    assert_eq!(dev.stats().quota_refusals, 2);
}
