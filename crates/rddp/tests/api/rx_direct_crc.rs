//! A bad CRC with direct placement, on the product path (docs/data-path.md):
//! real MPA/TCP queue pairs (CRC on) through a small TCP proxy that flips one
//! payload octet of the first large FPDU in one direction. For each payload
//! kind (RDMA Write, Read Response, Send into a posted receive buffer, Send
//! into a shared receive queue's buffer, Send into a receive posted in a
//! registered region) the receiving queue pair sends
//! Terminate 2/0/0x02, the peer sees it (async event), no completion with data
//! is given for that message, and the connection closes.

use crate::common;

use common::wait;
use rddp::transport::mpa::Listener;
use rddp::{
    Access, AsyncEvent, BufferOrdering, CompletionQueue, Device, QueuePair, QueuePairBuilder,
    RemoteBuf, SendFlags, SharedReceiveQueue, SrqMode, TerminateCode, WcOpcode, WcStatus,
    WorkCompletion,
};
use rddp_mpa::MpaOptions;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;
const SEND: usize = 64 * 1024;

/// Copy one direction: the MPA Request or Reply whole, then FPDU by FPDU (no
/// Markers); with `corrupt`, one payload octet of the first FPDU whose ULPDU is
/// over 1000 octets is flipped (its CRC no longer matches).
fn pump(mut from: TcpStream, mut to: TcpStream, corrupt: bool) {
    let mut run = || -> std::io::Result<()> {
        let mut frame = [0u8; 20];
        from.read_exact(&mut frame)?;
        let pd = usize::from(u16::from_be_bytes([frame[18], frame[19]]));
        let mut rest = vec![0u8; pd];
        from.read_exact(&mut rest)?;
        to.write_all(&frame)?;
        to.write_all(&rest)?;
        let mut done = !corrupt;
        loop {
            let mut len = [0u8; 2];
            from.read_exact(&mut len)?;
            let ulpdu = usize::from(u16::from_be_bytes(len));
            let mut body = vec![0u8; ulpdu + (4 - (2 + ulpdu) % 4) % 4 + 4];
            from.read_exact(&mut body)?;
            if !done && ulpdu > 1000 {
                // Past the 14- or 18-octet DDP header: a payload octet.
                body[100] ^= 0x10;
                done = true;
            }
            to.write_all(&len)?;
            to.write_all(&body)?;
        }
    };
    let _ = run();
    let _ = to.shutdown(Shutdown::Write);
}

/// A proxy for one connection to `server`; corrupts client->server (`c2s`) or
/// server->client.
fn proxy(server: SocketAddr, c2s: bool) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (c, _) = l.accept().unwrap();
        let s = TcpStream::connect(server).unwrap();
        let (c2, s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
        let a = std::thread::spawn(move || pump(c, s, c2s));
        let b = std::thread::spawn(move || pump(s2, c2, !c2s));
        let _ = a.join();
        let _ = b.join();
    });
    addr
}

/// Events of `qp` until `done` says enough (5 s at most).
fn events_until(qp: &QueuePair, done: impl Fn(&[AsyncEvent]) -> bool) -> Vec<AsyncEvent> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut all = Vec::new();
    while !done(&all) && Instant::now() < deadline {
        all.extend(qp.async_events());
        std::thread::sleep(Duration::from_millis(10));
    }
    all
}

fn crc_received(ev: &[AsyncEvent]) -> bool {
    ev.iter().any(|e| {
        matches!(e, AsyncEvent::TerminateReceived { code: Some(c), .. }
            if *c == TerminateCode::MPA_CRC_ERROR)
    })
}

fn crc_sent(ev: &[AsyncEvent]) -> bool {
    ev.iter().any(|e| {
        matches!(e, AsyncEvent::TerminateSent { code, .. } if *code == TerminateCode::MPA_CRC_ERROR)
    })
}

fn closed(ev: &[AsyncEvent]) -> bool {
    ev.iter().any(|e| matches!(e, AsyncEvent::Closed { .. }))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Write,
    ReadResponse,
    Send,
    SendSrq,
    SendRegion,
}

/// Completions of `cq` within `d`.
fn drain(cq: &CompletionQueue, d: Duration) -> Vec<WorkCompletion> {
    let deadline = Instant::now() + d;
    let mut got = Vec::new();
    while Instant::now() < deadline {
        got.extend(cq.wait(16, Duration::from_millis(20)));
    }
    got
}

fn scenario(kind: Kind) {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let server_addr = listener.local_addr().unwrap();
    let via = proxy(server_addr, kind != Kind::ReadResponse);
    let sdev = dev.clone();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let pool = (kind == Kind::SendSrq).then(|| {
            SharedReceiveQueue::new(
                &pd,
                SrqMode::Shared { soft_limit: 4 },
                BufferOrdering::Arrival,
                4,
            )
        });
        let mut b = QueuePairBuilder::new(&pd, &cq, &cq);
        if let Some(p) = &pool {
            b = b.srq(p);
        }
        let mut prepared = b.build().unwrap();
        match &pool {
            Some(p) => p.post_recv(1, SEND).unwrap(),
            None if kind == Kind::SendRegion => {}
            None => prepared.post_recv(1, SEND).unwrap(),
        }
        let qp = prepared.attach(listener.accept().unwrap()).unwrap();
        // A receive into a region: octets around its span must stay.
        let place = pd.register(vec![0x33; 3 * SEND], Access::NONE).unwrap();
        if kind == Kind::SendRegion {
            qp.post_recv_mr(1, &place, SEND as u64, SEND as u64)
                .unwrap();
        }
        let buf = qp
            .register_bound(vec![0x77; MIB], Access::REMOTE_READ | Access::REMOTE_WRITE)
            .unwrap();
        qp.post_send_inline(0, &buf.remote().to_bytes(), SendFlags::default())
            .unwrap();
        ready_tx.send(()).unwrap();
        let ev = events_until(&qp, |e| (crc_sent(e) || crc_received(e)) && closed(e));
        let recvs: Vec<_> = drain(&cq, Duration::from_millis(300))
            .into_iter()
            .filter(|w| w.opcode == WcOpcode::Recv)
            .collect();
        let around = place.read(0, SEND as u64).unwrap() == vec![0x33; SEND]
            && place.read(2 * SEND as u64, SEND as u64).unwrap() == vec![0x33; SEND]
            && place.guards_intact();
        (ev, recvs, around)
    });

    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_recv(1, 64).unwrap();
    let qp = prepared.connect_mpa(via, MpaOptions::default()).unwrap();
    assert!(qp.llp_info().crc);
    let ad = wait(&cq, 1).pop().unwrap();
    let remote = RemoteBuf::from_bytes(ad.buffer.as_ref().unwrap()).unwrap();
    ready.recv().unwrap();
    let data = pd.register(vec![0x5A; MIB], Access::REMOTE_WRITE).unwrap();
    match kind {
        Kind::Write => qp.post_write(10, &data, 0, MIB as u64, remote, 0).unwrap(),
        Kind::Send | Kind::SendSrq | Kind::SendRegion => qp
            .post_send(11, &data, 0, SEND as u64, SendFlags::default())
            .unwrap(),
        Kind::ReadResponse => qp.post_read(12, &data, 0, MIB as u32, remote, 0).unwrap(),
    }
    let ev = events_until(&qp, |e| (crc_sent(e) || crc_received(e)) && closed(e));
    let (server_ev, server_recvs, around) = server.join().unwrap();
    let client_wc = drain(&cq, Duration::from_millis(100));
    let what = format!("{kind:?}: client {ev:?}, server {server_ev:?}");
    let (receiver, peer) = if kind == Kind::ReadResponse {
        (&ev, &server_ev)
    } else {
        (&server_ev, &ev)
    };
    assert!(crc_sent(receiver), "{what}: no Terminate 2/0/0x02 sent");
    assert!(
        crc_received(peer),
        "{what}: the peer saw no Terminate 2/0/0x02"
    );
    assert!(closed(&ev) && closed(&server_ev), "{what}: not closed");
    // No completion with data for the corrupted message.
    for w in &server_recvs {
        assert_ne!(w.status, WcStatus::Success, "{what}: {w:?}");
    }
    assert!(around, "{what}: octets outside the receive's span changed");
    if kind == Kind::ReadResponse {
        let read = client_wc.iter().find(|w| w.wr_id == 12);
        assert!(
            read.is_none_or(|w| w.status != WcStatus::Success),
            "{what}: the Read completed: {read:?}"
        );
    }
    drop(qp);
}

#[test]
fn a_bad_crc_on_a_write_places_nothing_it_delivers() {
    scenario(Kind::Write);
}

#[test]
fn a_bad_crc_on_a_read_response_completes_no_read() {
    scenario(Kind::ReadResponse);
}

#[test]
fn a_bad_crc_on_a_send_into_a_posted_buffer_delivers_nothing() {
    scenario(Kind::Send);
}

#[test]
fn a_bad_crc_on_a_send_into_a_pool_buffer_delivers_nothing() {
    scenario(Kind::SendSrq);
}

#[test]
fn a_bad_crc_on_a_send_into_a_region_receive_delivers_nothing() {
    scenario(Kind::SendRegion);
}
