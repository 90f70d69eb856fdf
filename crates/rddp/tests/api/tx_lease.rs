//! Transmit from the region (docs/data-path.md): over MPA a Write, a Send and an
//! RDMA Read's response go from the registered region to the socket with no
//! user-space copy of the payload, shown by the device's lease copy counter
//! (`QpStats::tx_copied_octets` summed over its queue pairs).

use crate::common;

use common::wait;
use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, SendFlags, WcOpcode, WcStatus};
use rddp_mpa::MpaOptions;

const LEN: usize = 64 * 1024;

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn write_send_and_read_response_leave_from_the_region_itself() {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        prepared.post_recv(1, LEN).unwrap();
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        let buf = qp
            .register_bound(pattern(9, LEN), Access::REMOTE_READ | Access::REMOTE_WRITE)
            .unwrap();
        qp.post_send_inline(0, &buf.remote().to_bytes(), SendFlags::default())
            .unwrap();
        qp.post_recv(2, LEN).unwrap();
        let got = wait(&cq, 3);
        // Receive 1 is the 64 KiB Send; receive 2 the client's last word, which
        // comes after its Read of `buf` completed.
        let recv = got
            .iter()
            .find(|w| w.opcode == WcOpcode::Recv && w.wr_id == 1);
        let recv = recv.unwrap();
        recv.buffer.clone().unwrap()[..recv.byte_len as usize].to_vec()
    });

    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_recv(1, 64).unwrap();
    let qp = prepared.connect_mpa(addr, MpaOptions::default()).unwrap();
    let ad = wait(&cq, 1).pop().unwrap();
    let remote = rddp::RemoteBuf::from_bytes(ad.buffer.as_ref().unwrap()).unwrap();
    let src = pd.register(pattern(1, LEN), Access::NONE).unwrap();
    let sink = pd.register(vec![0; LEN], Access::REMOTE_WRITE).unwrap();

    let before = dev.stats().totals.tx_copied_octets;
    qp.post_send(10, &src, 0, LEN as u64, SendFlags::default())
        .unwrap();
    qp.post_read(11, &sink, 0, LEN as u32, remote, 0).unwrap();
    let done = wait(&cq, 2);
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?}"
    );
    let copied = dev.stats().totals.tx_copied_octets - before;
    qp.post_send_inline(12, b"end", SendFlags::default())
        .unwrap();
    wait(&cq, 1);
    let sent = server.join().unwrap();
    assert_eq!(sent, pattern(1, LEN));
    assert_eq!(sink.read(0, LEN as u64).unwrap(), pattern(9, LEN));
    assert_eq!(
        copied, 0,
        "payload octets copied out of regions on the way out"
    );
}
