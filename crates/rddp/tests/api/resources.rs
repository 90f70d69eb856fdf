//! The resource manager: quotas are clear errors, shares are guaranteed.

use rddp::{Access, Device, DeviceLimits, Error, Quota};

fn small() -> Quota {
    Quota {
        queue_pairs: 1,
        memory_regions: 2,
        registered_bytes: 100,
        receive_buffers: 4,
        outstanding_reads: 2,
    }
}

#[test]
fn exceeding_a_quota_is_a_clear_error_and_dropping_returns_it() {
    let dev = Device::new();
    let c = dev.consumer("tenant-a", small()).unwrap();
    let pd = c.alloc_pd().unwrap();
    let a = pd.register(vec![0; 60], Access::REMOTE_WRITE).unwrap();
    let err = pd
        .register(vec![0; 41], Access::REMOTE_WRITE)
        .err()
        .unwrap();
    assert!(matches!(err, Error::Quota { limit: 100, .. }), "{err}");
    assert!(err.to_string().contains("tenant-a"), "{err}");
    let b = pd.register(vec![0; 40], Access::REMOTE_WRITE).unwrap();
    assert!(matches!(
        pd.register(vec![], Access::NONE),
        Err(Error::Quota { limit: 2, .. })
    ));
    assert_eq!(c.usage().memory_regions, 2);
    assert_eq!(c.usage().registered_bytes, 100);
    drop(a);
    drop(b);
    assert_eq!(c.usage().registered_bytes, 0);
    pd.register(vec![0; 100], Access::REMOTE_WRITE).unwrap();
}

#[test]
fn one_consumer_cannot_use_up_another_share() {
    let mut cap = DeviceLimits::default().capacity;
    cap.registered_bytes = 150;
    cap.memory_regions = 10;
    let dev = Device::with_limits(DeviceLimits { capacity: cap });
    let a = dev.consumer("a", small()).unwrap();
    // The device cannot promise a second 100-octet share out of 150.
    assert!(matches!(
        dev.consumer("b", small()),
        Err(Error::DeviceFull { left: 50, .. })
    ));
    let b = dev
        .consumer(
            "b",
            Quota {
                registered_bytes: 50,
                ..small()
            },
        )
        .unwrap();
    // A uses all it may; B's 50 octets are still there.
    let pd_a = a.alloc_pd().unwrap();
    let _m = pd_a.register(vec![0; 100], Access::NONE).unwrap();
    assert!(pd_a.register(vec![0; 1], Access::NONE).is_err());
    let pd_b = b.alloc_pd().unwrap();
    pd_b.register(vec![0; 50], Access::NONE).unwrap();
    // Dropping a consumer gives its reservation back.
    drop(_m);
    drop(pd_a);
    drop(a);
    dev.consumer("c", small()).unwrap();
}

#[test]
fn regions_are_local_memory_with_bounds() {
    let dev = Device::new();
    let pd = dev
        .consumer("x", Quota::default())
        .unwrap()
        .alloc_pd()
        .unwrap();
    let mr = pd.register(vec![1, 2, 3, 4], Access::REMOTE_READ).unwrap();
    assert!(matches!(mr.read(2, 3), Err(Error::OutOfRange { .. })));
    assert!(matches!(
        mr.write(u64::MAX, b"x"),
        Err(Error::OutOfRange { .. })
    ));
    mr.write(1, b"ab").unwrap();
    assert_eq!(mr.read(0, 4).unwrap(), vec![1, b'a', b'b', 4]);
    assert!(mr.is_valid());
    mr.invalidate().unwrap();
    assert!(!mr.is_valid());
    assert_eq!(mr.read(0, 1).unwrap(), vec![1]);
    let ad = mr.remote();
    assert_eq!(rddp::RemoteBuf::from_bytes(&ad.to_bytes()), Some(ad));
}

#[test]
fn a_consumer_whose_queue_pair_was_attached_gives_its_share_back() {
    // Found by fuzzing (verbs_ops, LeakSanitizer): attach forgot the prepared
    // queue pair, leaking its PD and CQ handles, so the consumer (and the whole
    // device) was never freed and its reserved share never returned.
    let limits = DeviceLimits { capacity: small() };
    let dev = Device::with_limits(limits);
    for round in 0..3 {
        let c = dev
            .consumer("tenant", small())
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let pd = c.alloc_pd().unwrap();
        let cq = rddp::CompletionQueue::new(64);
        let (l1, _l2) = rddp::transport::memory_pair(256);
        let qp = rddp::QueuePairBuilder::new(&pd, &cq, &cq)
            .build()
            .unwrap()
            .attach(l1)
            .unwrap();
        drop(qp);
    }
}
