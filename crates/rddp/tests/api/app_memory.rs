//! Queue pairs moving data into and out of memory the application owns
//! (`ProtectionDomain::register_app`, what `ibv_reg_mr` registers): TOs are
//! the addresses, Writes and Read Responses land in that memory, Sends and
//! Read Responses carry it, and a dropped region leaves it alone.

use crate::common;

use common::{terminate_sent, wait};
use rddp::transport::memory_pair;
use rddp::{
    Access, CompletionQueue, Device, ProtectionDomain, QueuePair, QueuePairBuilder, Quota,
    SendFlags, WcOpcode, WcStatus,
};
use rddp_appmem::Leaked;

struct Side {
    pd: ProtectionDomain,
    cq: CompletionQueue,
    qp: QueuePair,
}

fn pair() -> (Side, Side) {
    let dev = Device::new();
    let (ca, cb) = memory_pair(256);
    let side = |name: &str, conn| {
        let pd = dev
            .consumer(name, Quota::default())
            .unwrap()
            .alloc_pd()
            .unwrap();
        let cq = CompletionQueue::new(64);
        let qp = QueuePairBuilder::new(&pd, &cq, &cq)
            .build()
            .unwrap()
            .attach(conn)
            .unwrap();
        Side { pd, cq, qp }
    };
    (side("a", ca), side("b", cb))
}

#[test]
fn write_read_and_send_through_application_memory() {
    let (a, b) = pair();
    let (src_mem, back_mem, target_mem) = (Leaked::new(1000), Leaked::new(1000), Leaked::new(1000));
    let pattern: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    src_mem.mem(true).write(0, &pattern).unwrap();

    let src =
        a.pd.register_app(src_mem.mem(false), Access::NONE, src_mem.addr() as u64)
            .unwrap();
    let back =
        a.pd.register_app(
            back_mem.mem(true),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            back_mem.addr() as u64,
        )
        .unwrap();
    let target =
        b.pd.register_app(
            target_mem.mem(true),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            target_mem.addr() as u64,
        )
        .unwrap();
    assert_eq!(target.remote().to, target_mem.addr() as u64);
    assert_eq!(target.remote().len, 1000);

    b.qp.post_recv(7, 64).unwrap();
    a.qp.post_write(1, &src, 0, 1000, target.remote(), 0)
        .unwrap();
    a.qp.post_read(2, &back, 0, 1000, target.remote(), 0)
        .unwrap();
    a.qp.post_send(3, &src, 10, 5, SendFlags::default())
        .unwrap();
    let c = wait(&a.cq, 3);
    assert!(c.iter().all(|c| c.status == WcStatus::Success), "{c:?}");
    assert_eq!(target_mem.mem(false).to_vec(0, 1000).unwrap(), pattern);
    assert_eq!(back_mem.mem(false).to_vec(0, 1000).unwrap(), pattern);
    assert_eq!(back.read(0, 1000).unwrap(), pattern);
    let r = wait(&b.cq, 1);
    assert_eq!(
        (r[0].wr_id, r[0].opcode, r[0].byte_len),
        (7, WcOpcode::Recv, 5)
    );
    assert_eq!(&r[0].buffer.as_ref().unwrap()[..5], &pattern[10..15]);

    // The application's own write is what the next Read returns.
    target_mem.mem(true).write(0, b"changed").unwrap();
    a.qp.post_read(4, &back, 0, 7, target.remote(), 0).unwrap();
    assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(back.read(0, 7).unwrap(), b"changed");

    // Once deregistered, the memory is the application's alone: a Write to
    // the old STag is refused by the peer (Invalid STag), and nothing lands.
    let old = target.remote();
    drop(target);
    target_mem.mem(true).write(0, &[0; 16]).unwrap();
    a.qp.post_write(5, &src, 0, 16, old, 0).unwrap();
    assert!(
        terminate_sent(&b.qp).is_some(),
        "the Write to the old STag is refused"
    );
    assert_eq!(target_mem.mem(false).to_vec(0, 16).unwrap(), vec![0; 16]);
}

#[test]
fn a_write_right_needs_writable_memory() {
    let (a, _b) = pair();
    let m = Leaked::new(8);
    assert!(
        a.pd.register_app(m.mem(false), Access::REMOTE_WRITE, m.addr() as u64)
            .is_err()
    );
    let mr =
        a.pd.register_app(m.mem(false), Access::REMOTE_READ, m.addr() as u64)
            .unwrap();
    assert!(mr.write(0, b"x").is_err());
}

/// Over MPA, Sends and Writes from a large region over application memory
/// copy out of it only the octets they carry (the transmit path once copied
/// the whole region for every segment): 16 MiB registered, small Sends and
/// a Write from here and there in it; the region's count of octets read is
/// exactly their payload, and so is the queue pair's `tx_copied_octets`.
#[test]
fn a_transmit_from_application_memory_copies_only_its_octets() {
    use rddp::transport::mpa::Listener;
    use rddp_mpa::MpaOptions;
    const BIG: usize = 16 << 20;
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        for i in 0..4 {
            prepared.post_recv(i, 64).unwrap();
        }
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        let sink = qp
            .register_bound(vec![0; 4096], Access::REMOTE_WRITE)
            .unwrap();
        qp.post_send_inline(9, &sink.remote().to_bytes(), SendFlags::default())
            .unwrap();
        qp.post_recv(4, 64).unwrap();
        let got = wait(&cq, 6);
        let mut recvs: Vec<_> = got
            .iter()
            .filter(|w| w.opcode == WcOpcode::Recv)
            .map(|w| {
                (
                    w.wr_id,
                    w.buffer.clone().unwrap()[..w.byte_len as usize].to_vec(),
                )
            })
            .collect();
        recvs.sort();
        (recvs, sink.read(0, 4096).unwrap())
    });

    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_recv(1, 64).unwrap();
    let qp = prepared.connect_mpa(addr, MpaOptions::default()).unwrap();
    let ad = wait(&cq, 1).pop().unwrap();
    let remote = rddp::RemoteBuf::from_bytes(ad.buffer.as_ref().unwrap()).unwrap();
    let mem = Leaked::new(BIG);
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 13) as u8).collect();
    for at in [0, BIG / 2, BIG - 4096] {
        mem.mem(true).write(at, &pattern).unwrap();
    }
    let src = pd
        .register_app(mem.mem(false), Access::NONE, mem.addr() as u64)
        .unwrap();
    let before = qp.stats().tx_copied_octets;
    assert_eq!(src.app_octets_read(), 0);
    for (i, at) in [0, BIG / 2, BIG - 64, 100].into_iter().enumerate() {
        qp.post_send(i as u64, &src, at as u64, 64, SendFlags::default())
            .unwrap();
    }
    qp.post_write(10, &src, (BIG - 4096) as u64, 4096, remote, 0)
        .unwrap();
    let done = wait(&cq, 5);
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?}"
    );
    qp.post_send_inline(11, b"end", SendFlags::default())
        .unwrap();
    wait(&cq, 1);
    let (recvs, written) = server.join().unwrap();
    assert_eq!(written, pattern);
    assert_eq!(recvs[0], (0, pattern[..64].to_vec()));
    assert_eq!(recvs[1], (1, pattern[..64].to_vec()));
    assert_eq!(recvs[2], (2, pattern[4096 - 64..].to_vec()));
    assert_eq!(recvs[3], (3, pattern[100..164].to_vec()));
    assert_eq!(recvs[4], (4, b"end".to_vec()));
    let payload = 4 * 64 + 4096;
    assert_eq!(
        src.app_octets_read(),
        payload,
        "octets read out of the region"
    );
    assert_eq!(qp.stats().tx_copied_octets - before, payload);
}
