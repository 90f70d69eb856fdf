//! Queue pairs over DDP/SCTP (RFC 5043) on usrsctp: Write, Read, Send/Recv in one
//! process (one usrsctp stack, UDP encapsulation on 127.0.0.1).

use crate::common;
use crate::common::sctp_llp as llp;

use common::wait;
use rddp::transport::sctp::{SctpOptions, connect};
use rddp::{
    Access, CompletionQueue, Device, QueuePairBuilder, RemoteBuf, SendFlags, WcOpcode, WcStatus,
};
use std::time::Duration;

#[test]
fn write_read_send_over_sctp() {
    if !llp::own_process(module_path!(), "write_read_send_over_sctp") {
        return;
    }
    let Some((addr, listener)) = llp::listening() else {
        return;
    };
    let dev = Device::new();
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let mut prep = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        prep.post_recv(1, 64).unwrap();
        let conn = listener
            .accept(Duration::from_secs(10), b"hello from the passive side")
            .unwrap();
        assert_eq!(conn.peer_private_data, b"hello from the active side");
        let qp = prep.attach(conn).unwrap();
        assert_eq!(qp.llp_info().transport, "sctp");
        let buf = qp
            .register_bound(vec![0; 100_000], Access::REMOTE_READ | Access::REMOTE_WRITE)
            .unwrap();
        qp.post_send_inline(0, &buf.remote().to_bytes(), SendFlags::default())
            .unwrap();
        let got = wait(&cq, 2);
        let ping = got.iter().find(|w| w.opcode == WcOpcode::Recv).unwrap();
        assert_eq!(
            &ping.buffer.as_ref().unwrap()[..ping.byte_len as usize],
            b"done"
        );
        qp.post_recv(2, 64).unwrap();
        qp.post_send_inline(9, b"bye", SendFlags::default())
            .unwrap();
        // The client's last word: it has everything it needs.
        let last = wait(&cq, 2);
        assert!(last.iter().any(|w| w.opcode == WcOpcode::Recv), "{last:?}");
        buf.read(0, 100_000).unwrap()
    });
    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let mut prep = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prep.post_recv(1, 64).unwrap();
    prep.post_recv(2, 64).unwrap();
    let conn = connect(addr, SctpOptions::default(), b"hello from the active side").unwrap();
    assert_eq!(conn.peer_private_data, b"hello from the passive side");
    let qp = prep.attach(conn).unwrap();
    let ad = wait(&cq, 1);
    let remote = RemoteBuf::from_bytes(ad[0].buffer.as_ref().unwrap()).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 13 + i / 97) as u8).collect();
    let src = pd.register(data.clone(), Access::NONE).unwrap();
    let back = pd.register(vec![0; 100_000], Access::REMOTE_WRITE).unwrap();
    qp.post_write(1, &src, 0, 100_000, remote, 0).unwrap();
    qp.post_read(2, &back, 0, 100_000, remote, 0).unwrap();
    qp.post_send_inline(3, b"done", SendFlags::default())
        .unwrap();
    let done = wait(&cq, 4);
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?}"
    );
    assert_eq!(back.read(0, 100_000).unwrap(), data);
    assert!(
        done.iter()
            .any(|w| w.opcode == WcOpcode::Recv && w.byte_len == 3),
        "the server's bye"
    );
    qp.post_send_inline(4, b"ok", SendFlags::default()).unwrap();
    assert_eq!(server.join().unwrap(), data);
}
