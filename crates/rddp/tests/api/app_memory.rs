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
/// copy out of it only the octets they carry, and Read Responses placed
/// into one only the octets they bring (the transmit and receive paths
/// once copied the whole region for every segment or read): 16 MiB
/// registered on each side of that, small Sends and a Write from here and
/// there in one, a 64 KiB and a 100-octet Read into the other. The
/// regions' counts of octets read out of application memory: exactly the
/// payload sent (so is `tx_copied_octets`), none for the payload received.
#[test]
fn transfers_with_application_memory_copy_only_their_octets() {
    use rddp::transport::mpa::Listener;
    use rddp_mpa::MpaOptions;
    const BIG: usize = 16 << 20;
    const SINK: usize = 64 << 10;
    let other: Vec<u8> = (0..SINK as u32).map(|i| (i * 7 + 3) as u8).collect();
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    let sink_init = other.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        for i in 0..4 {
            prepared.post_recv(i, 64).unwrap();
        }
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        let sink = qp
            .register_bound(sink_init, Access::REMOTE_WRITE | Access::REMOTE_READ)
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
    let (mem, back_mem) = (Leaked::new(BIG), Leaked::new(BIG));
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 13) as u8).collect();
    for at in [0, BIG / 2, BIG - 4096] {
        mem.mem(true).write(at, &pattern).unwrap();
    }
    let src = pd
        .register_app(mem.mem(false), Access::NONE, mem.addr() as u64)
        .unwrap();
    let back = pd
        .register_app(
            back_mem.mem(true),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            back_mem.addr() as u64,
        )
        .unwrap();
    let (before, rx_before) = (qp.stats().tx_copied_octets, qp.stats().rx_copied_octets);
    assert_eq!(src.app_octets_read(), 0);
    for (i, at) in [0, BIG / 2, BIG - 64, 100].into_iter().enumerate() {
        qp.post_send(i as u64, &src, at as u64, 64, SendFlags::default())
            .unwrap();
    }
    qp.post_write(10, &src, (BIG - 4096) as u64, 4096, remote, 0)
        .unwrap();
    // Read after the Write: it returns what the Write left.
    qp.post_read(11, &back, (BIG / 2) as u64, SINK as u32, remote, 0)
        .unwrap();
    qp.post_read(12, &back, 10, 100, remote, 0).unwrap();
    let done = wait(&cq, 7);
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?}"
    );
    qp.post_send_inline(13, b"end", SendFlags::default())
        .unwrap();
    wait(&cq, 1);
    let (recvs, written) = server.join().unwrap();
    assert_eq!(written, pattern);
    assert_eq!(recvs[0], (0, pattern[..64].to_vec()));
    assert_eq!(recvs[1], (1, pattern[..64].to_vec()));
    assert_eq!(recvs[2], (2, pattern[4096 - 64..].to_vec()));
    assert_eq!(recvs[3], (3, pattern[100..164].to_vec()));
    assert_eq!(recvs[4], (4, b"end".to_vec()));
    let mut expected = pattern.clone();
    expected.extend_from_slice(&other[4096..]);
    let got = back_mem.mem(false).to_vec(BIG / 2, SINK).unwrap();
    assert!(got == expected, "the 64 KiB Read");
    assert_eq!(back_mem.mem(false).to_vec(10, 100).unwrap(), pattern[..100]);
    let payload = 4 * 64 + 4096;
    assert_eq!(
        src.app_octets_read(),
        payload,
        "octets read out of the source"
    );
    assert_eq!(qp.stats().tx_copied_octets - before, payload);
    // Placed by stores alone: nothing read out of the Reads' sink.
    assert_eq!(
        back.app_octets_read(),
        0,
        "octets read out of the Reads' sink"
    );
    // Read from the socket straight into it: no octet copied in user space.
    assert_eq!(
        qp.stats().rx_copied_octets - rx_before,
        0,
        "octets of the Read Responses copied"
    );
}

/// Over MPA, Writes of 1 MiB into memory registered as the application's
/// are read from the socket straight into it (`readv(2)` there), with the
/// CRC checked over the octets where they landed: no payload octet is copied
/// in user space on the receiving side (`rx_copied_octets` stays 0; it
/// counts the copy through scratch the receiver otherwise makes), and every
/// octet arrives where it was sent.
#[test]
fn megabyte_writes_into_application_memory_are_not_copied() {
    use rddp::transport::mpa::Listener;
    use rddp_mpa::MpaOptions;
    const SIZE: usize = 1 << 20;
    const WRITES: usize = 4;
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let mem = Leaked::new(SIZE + 64);
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        prepared.post_recv(1, 64).unwrap();
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        let sink = pd
            .register_app(
                mem.mem(true),
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
                mem.addr() as u64,
            )
            .unwrap();
        qp.post_send_inline(9, &sink.remote().to_bytes(), SendFlags::default())
            .unwrap();
        // Its own Send and the client's last Send, which follows the Writes
        // on the one stream.
        let done = wait(&cq, 2);
        assert!(
            done.iter().all(|w| w.status == WcStatus::Success),
            "{done:?}"
        );
        let copied = qp.stats().rx_copied_octets;
        (copied, mem.mem(false).to_vec(0, SIZE + 64).unwrap())
    });

    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_recv(1, 64).unwrap();
    let qp = prepared.connect_mpa(addr, MpaOptions::default()).unwrap();
    let ad = wait(&cq, 1).pop().unwrap();
    let remote = rddp::RemoteBuf::from_bytes(ad.buffer.as_ref().unwrap()).unwrap();
    let mut expected = vec![0u8; SIZE + 64];
    for w in 0..WRITES {
        let data: Vec<u8> = (0..SIZE as u32)
            .map(|i| (i.wrapping_mul(7) ^ (w as u32 * 131)) as u8)
            .collect();
        let at = 13 * w;
        expected[at..at + SIZE].copy_from_slice(&data);
        let src = pd.register(data, Access::NONE).unwrap();
        qp.post_write(w as u64, &src, 0, SIZE as u64, remote, at as u64)
            .unwrap();
        let c = wait(&cq, 1);
        assert_eq!(c[0].status, WcStatus::Success, "{c:?}");
    }
    qp.post_send_inline(99, b"end", SendFlags::default())
        .unwrap();
    assert_eq!(wait(&cq, 1)[0].status, WcStatus::Success);
    let (copied, got) = server.join().unwrap();
    assert!(got == expected, "the Writes' octets");
    assert_eq!(copied, 0, "payload octets copied in user space");
}
