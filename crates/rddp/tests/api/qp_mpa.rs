//! Queue pairs over real loopback TCP with MPA: every operation under Rev 1 and
//! Rev 2 (Write and Read RTR), CRC on and off, Markers on.

use crate::common;

use common::wait;
use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, SendFlags, WcStatus};
use rddp_mpa::{MpaOptions, RtrTypes};
use std::time::Duration;

/// Server: accept, register a buffer, post receives, echo one Send back.
/// Client: write a pattern, read it back, send, receive the echo.
fn exchange(server_opts: MpaOptions, client_opts: MpaOptions) {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", server_opts).unwrap();
    let addr = listener.local_addr().unwrap();
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
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

    let pd = common::pd(&dev, "client");
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

/// The peer's MULPDU comes from its EMSS, not ours (RFC 5044 §4: MULPDU is
/// the sender's): a client whose segments are larger than the server's own
/// EMSS allows is served, not refused with 2/0/0x02 (loopback's TCP_MAXSEG is
/// 32,768 right after the handshake and 65,483 later, so two rddp ends can
/// differ so).
#[test]
fn a_peer_with_a_larger_emss_is_not_refused() {
    let small = MpaOptions {
        emss: Some(1460),
        ..MpaOptions::default()
    };
    let large = MpaOptions {
        emss: Some(60_000),
        ..MpaOptions::default()
    };
    exchange(small.clone(), large.clone());
    exchange(large, small);
}

#[test]
fn markers_both_ways() {
    let m = MpaOptions {
        markers: true,
        ..MpaOptions::rev1()
    };
    exchange(m.clone(), m);
}

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
