//! Queue pairs over real loopback TCP with MPA: many Sends under credits,
//! IRD/ORD negotiation, a silent initiator (the exchange of every operation
//! under each MPA setting is in `exchange`).

use crate::common;

use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, SendFlags, WcStatus};
use rddp_mpa::MpaOptions;
use std::time::Duration;

/// Many small Sends and RDMA Writes in flight at once over MPA, the receiver
/// reposting as it goes and returning credits by RDMA Write.
#[test]
fn many_sends_with_credits() {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    const N: u64 = 2000;
    const DEPTH: u64 = 64;
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(512);
        let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq)
            .max_send_wr(128)
            .max_recv_wr(DEPTH as u32)
            .build()
            .unwrap();
        for i in 0..DEPTH {
            prepared.post_recv(i, 64).unwrap();
        }
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        // The client's mailbox arrives in its first Send.
        let mut mailbox = None;
        let mut got = 0u64;
        while got < N + 1 {
            for wc in cq.wait(64, Duration::from_secs(10)) {
                assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
                if wc.opcode != rddp::WcOpcode::Recv {
                    continue;
                }
                if mailbox.is_none() {
                    mailbox = rddp::RemoteBuf::from_bytes(wc.buffer.as_ref().unwrap());
                }
                got += 1;
                qp.post_recv(wc.wr_id, 64).unwrap();
                let credits = (got + DEPTH).to_be_bytes();
                let src = pd.register(credits.to_vec(), Access::NONE).unwrap();
                qp.post_write(0, &src, 0, 8, mailbox.unwrap(), 0).unwrap();
            }
        }
        got
    });
    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(512);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(128)
        .build()
        .unwrap()
        .connect_mpa(addr, MpaOptions::default())
        .unwrap();
    let mailbox = pd.register(vec![0; 8], Access::REMOTE_WRITE).unwrap();
    qp.post_send_inline(0, &mailbox.remote().to_bytes(), SendFlags::default())
        .unwrap();
    let mut sent = 0u64;
    let mut outstanding = 1u64;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while sent < N {
        assert!(std::time::Instant::now() < deadline, "stalled at {sent}");
        let credit = u64::from_be_bytes(mailbox.read(0, 8).unwrap().try_into().unwrap()).max(DEPTH);
        while sent + 1 < credit && sent < N && outstanding < 100 {
            qp.post_send_inline(sent + 1, b"x", SendFlags::default())
                .unwrap();
            sent += 1;
            outstanding += 1;
        }
        outstanding -= cq.poll(64).len() as u64;
        std::thread::yield_now();
    }
    assert_eq!(server.join().unwrap(), N + 1);
}

#[test]
fn ird_ord_are_negotiated() {
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let t = std::thread::spawn(move || listener.accept().map(|c| (c.ird, c.ord)).unwrap());
    let c = rddp::transport::mpa::connect(addr, &MpaOptions::default()).unwrap();
    let (sird, sord) = t.join().unwrap();
    eprintln!(
        "client ird {} ord {}; server ird {sird} ord {sord}",
        c.ird, c.ord
    );
    assert!(c.ord >= 1 && c.ird >= 1 && sird >= 1 && sord >= 1);
}

/// A responder whose initiator never sends its first FPDU holds its Sends at the
/// gate (RFC 5044 §7.1.2); dropping its queue pair still returns promptly.
#[test]
fn dropping_a_responder_whose_peer_never_spoke_returns() {
    use std::io::{Read, Write};
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::rev1()).unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let req = rddp_wire::MpaFrame::new(
            rddp_wire::mpa::FrameKind::Request,
            rddp_wire::MpaFlags::new(false, true, false, false),
            1,
            None,
            Vec::new(),
        );
        s.write_all(&req.to_vec().unwrap()).unwrap();
        let mut reply = [0u8; 20];
        s.read_exact(&mut reply).unwrap();
        // Silent from now on, until the other side closes.
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    let dev = Device::new();
    let pd = common::pd(&dev, "server");
    let cq = CompletionQueue::new(64);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .build()
        .unwrap()
        .attach(listener.accept().unwrap())
        .unwrap();
    qp.post_send_inline(1, b"held at the gate", SendFlags::default())
        .unwrap();
    let start = std::time::Instant::now();
    drop(qp);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "drop took {:?}",
        start.elapsed()
    );
    peer.join().unwrap();
}
