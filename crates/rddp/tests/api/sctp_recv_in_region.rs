//! A receive posted into a registered region (`QueuePair::post_recv_mr`, or
//! `SharedReceiveQueue::post_recv_mr` for a queue pair on a shared receive
//! queue) over DDP/SCTP on usrsctp: the Send's payload goes from usrsctp's
//! message straight into the region's octets the receive names, nothing
//! around them changes, and no payload octet is copied in between
//! (`QpStats::rx_copied_octets`).

use crate::common;
use crate::common::sctp_llp as llp;

use common::wait;
use rddp::transport::sctp::{SctpOptions, connect};
use rddp::{
    Access, BufferOrdering, CompletionQueue, Device, QueuePairBuilder, SendFlags,
    SharedReceiveQueue, SrqMode, WcOpcode, WcStatus,
};
use std::time::Duration;

const SPAN: (u64, u64) = (1000, 20_000);

/// One test (one usrsctp stack a process, one listener): a receive posted to
/// the queue pair, then one posted to a shared receive queue.
#[test]
fn a_send_over_sctp_lands_in_the_region_its_receive_names() {
    if !llp::own_process(
        module_path!(),
        "a_send_over_sctp_lands_in_the_region_its_receive_names",
    ) {
        return;
    }
    let Some((addr, listener)) = llp::listening() else {
        return;
    };
    for srq in [false, true] {
        std::thread::scope(|s| land_in_the_span(s, addr, &listener, srq));
    }
}

/// The server's receive is posted to its queue pair, or (`srq`) to the
/// shared receive queue the queue pair draws on.
fn land_in_the_span<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    addr: std::net::SocketAddrV4,
    listener: &'s rddp::transport::sctp::Listener,
    srq: bool,
) {
    let dev = Device::new();
    let sdev = dev.clone();
    let data: Vec<u8> = (0..SPAN.1 as u32)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    let sent = data.clone();
    let (go_taken, has_go) = std::sync::mpsc::channel();
    let (count_from, counting) = std::sync::mpsc::channel();
    let server = s.spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let shared = SharedReceiveQueue::new(
            &pd,
            SrqMode::Shared { soft_limit: 4 },
            BufferOrdering::Arrival,
            4,
        );
        let mut b = QueuePairBuilder::new(&pd, &cq, &cq);
        if srq {
            b = b.srq(&shared);
        }
        let prep = b.build().unwrap();
        let conn = listener.accept(Duration::from_secs(10), b"").unwrap();
        let qp = prep.attach(conn).unwrap();
        let mr = pd.register(vec![0x11; 64 * 1024], Access::NONE).unwrap();
        if srq {
            shared.post_recv_mr(5, &mr, SPAN.0, SPAN.1).unwrap();
        } else {
            qp.post_recv_mr(5, &mr, SPAN.0, SPAN.1).unwrap();
        }
        // The client sends once it has this; the count starts once it has
        // taken it (the counter is the process's, both ends are here).
        qp.post_send_inline(0, b"go", SendFlags::default()).unwrap();
        has_go.recv().unwrap();
        let copied = sdev.stats().totals.rx_copied_octets;
        count_from.send(()).unwrap();
        let got = wait(&cq, 2);
        let wc = got.iter().find(|w| w.opcode == WcOpcode::Recv).unwrap();
        assert_eq!(
            (wc.wr_id, wc.status, wc.byte_len),
            (5, WcStatus::Success, SPAN.1 as u32),
            "{wc:?}"
        );
        assert_eq!(mr.read(SPAN.0, SPAN.1).unwrap(), sent);
        let all = mr.read(0, 64 * 1024).unwrap();
        let outside = all
            .iter()
            .enumerate()
            .filter(|&(i, _)| (i as u64) < SPAN.0 || i as u64 >= SPAN.0 + SPAN.1)
            .all(|(_, &b)| b == 0x11);
        assert!(
            outside && mr.guards_intact(),
            "octets outside the span changed"
        );
        assert_eq!(
            sdev.stats().totals.rx_copied_octets - copied,
            0,
            "payload octets copied"
        );
        qp.post_send_inline(1, b"ok", SendFlags::default()).unwrap();
        wait(&cq, 1);
    });
    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let mut prep = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prep.post_recv(1, 64).unwrap();
    prep.post_recv(2, 64).unwrap();
    let qp = prep
        .attach(connect(addr, SctpOptions::default(), b"").unwrap())
        .unwrap();
    wait(&cq, 1);
    go_taken.send(()).unwrap();
    counting.recv().unwrap();
    let src = pd.register(data, Access::NONE).unwrap();
    qp.post_send(9, &src, 0, SPAN.1, SendFlags::default())
        .unwrap();
    let done = wait(&cq, 2);
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?}"
    );
    server.join().unwrap();
}
