//! Queue pairs over real loopback TCP with MPA: every operation under Rev 1 and
//! Rev 2 (Write and Read RTR), CRC on and off, Markers on.

use rddp::transport::mpa::Listener;
use rddp::{
    Access, CompletionQueue, Device, QueuePairBuilder, Quota, SendFlags, WcStatus, WorkCompletion,
};
use rddp_mpa::{MpaOptions, RtrTypes};
use std::time::Duration;

fn wait(cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    while got.len() < n {
        let more = cq.wait(n - got.len(), Duration::from_secs(10));
        assert!(!more.is_empty(), "timed out with {got:?}");
        got.extend(more);
    }
    got
}

/// Server: accept, register a buffer, post receives, echo one Send back.
/// Client: write a pattern, read it back, send, receive the echo.
fn exchange(server_opts: MpaOptions, client_opts: MpaOptions) {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", server_opts).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = sdev
            .consumer("server", Quota::default())
            .unwrap()
            .alloc_pd()
            .unwrap();
        let cq = CompletionQueue::new(64);
        let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        prepared.post_recv(1, 64).unwrap();
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        let info = qp.llp_info().clone();
        let buf = qp
            .register_bound(vec![0; 100_000], Access::REMOTE_READ | Access::REMOTE_WRITE)
            .unwrap();
        // Advertise the buffer; the client's first message (or RTR) opens the way.
        qp.post_send_inline(0, &buf.remote().to_bytes(), SendFlags::default())
            .unwrap();
        qp.post_recv(2, 64).unwrap();
        let got = wait(&cq, 3); // advertisement sent, two receives
        let recvs: Vec<_> = got
            .iter()
            .filter(|w| w.opcode == rddp::WcOpcode::Recv)
            .collect();
        let last = recvs.last().unwrap();
        qp.post_send_inline(
            9,
            &last.buffer.as_ref().unwrap()[..last.byte_len as usize],
            SendFlags::default(),
        )
        .unwrap();
        wait(&cq, 1);
        (info, buf.read(0, 100_000).unwrap())
    });

    let pd = dev
        .consumer("client", Quota::default())
        .unwrap()
        .alloc_pd()
        .unwrap();
    let cq = CompletionQueue::new(64);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_recv(1, 64).unwrap();
    prepared.post_recv(2, 64).unwrap();
    let qp = prepared.connect_mpa(addr, client_opts).unwrap();
    // Rev 1 without RTR: the client speaks first (a zero-length Send).
    qp.post_send_inline(100, b"", SendFlags::default()).unwrap();
    let ad = wait(&cq, 2)
        .into_iter()
        .find(|w| w.opcode == rddp::WcOpcode::Recv)
        .unwrap();
    let remote = rddp::RemoteBuf::from_bytes(ad.buffer.as_ref().unwrap()).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let src = pd.register(data.clone(), Access::NONE).unwrap();
    let back = pd.register(vec![0; 100_000], Access::REMOTE_WRITE).unwrap();
    qp.post_write(1, &src, 0, 100_000, remote, 0).unwrap();
    qp.post_read(2, &back, 0, 100_000, remote, 0).unwrap();
    qp.post_send_inline(3, b"ping", SendFlags::default())
        .unwrap();
    let done = wait(&cq, 4);
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?}"
    );
    let echo = done
        .iter()
        .find(|w| w.opcode == rddp::WcOpcode::Recv)
        .unwrap();
    assert_eq!(&echo.buffer.as_ref().unwrap()[..4], b"ping");
    assert_eq!(back.read(0, 100_000).unwrap(), data);
    let (info, server_view) = server.join().unwrap();
    assert_eq!(server_view, data);
    assert_eq!(info.transport, "mpa");
}

#[test]
fn rev1_crc_on() {
    exchange(MpaOptions::rev1(), MpaOptions::rev1());
}

#[test]
fn rev1_crc_off() {
    let off = MpaOptions {
        crc: false,
        ..MpaOptions::rev1()
    };
    exchange(off.clone(), off);
}

#[test]
fn rev2_write_rtr() {
    let write_only = MpaOptions {
        rtr: RtrTypes {
            write: true,
            read: false,
        },
        ..MpaOptions::default()
    };
    exchange(MpaOptions::default(), write_only);
}

#[test]
fn rev2_read_rtr() {
    let read_only = MpaOptions {
        rtr: RtrTypes {
            write: false,
            read: true,
        },
        ..MpaOptions::default()
    };
    exchange(read_only.clone(), read_only);
}

#[test]
fn markers_both_ways() {
    let m = MpaOptions {
        markers: true,
        ..MpaOptions::rev1()
    };
    exchange(m.clone(), m);
}
