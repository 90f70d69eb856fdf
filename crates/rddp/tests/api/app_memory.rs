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
