//! One queue pair's Write, Read and Sends over each LLP, the same body for
//! all: MPA over loopback TCP under Rev 1 and Rev 2 (Write and Read RTR),
//! CRC on and off, Markers on, EMSS either way; DDP over SCTP on usrsctp.

use crate::common;
use crate::common::llp::Llp;
use crate::common::sctp_llp;

use common::wait;
use rddp::{
    Access, CompletionQueue, Device, QueuePairBuilder, RemoteBuf, SendFlags, WcOpcode, WcStatus,
};
use rddp_mpa::{MpaOptions, RtrTypes};

const SERVER_HELLO: &[u8] = b"hello from the passive side";
const CLIENT_HELLO: &[u8] = b"hello from the active side";

/// Server: accept, register a buffer, advertise it, echo the client's last
/// Send back. Client: speak first (a zero-length Send: MPA Rev 1 without an
/// RTR), write a pattern, read it back, send, receive the echo. Both check
/// the other's private data and the LLP the queue pair reports.
fn exchange(llp: Llp) {
    let Some((addr, passive)) = llp.listen(SERVER_HELLO) else {
        return;
    };
    let dev = Device::new();
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        prepared.post_recv(1, 64).unwrap();
        let qp = passive.accept(prepared);
        assert_eq!(qp.peer_private_data(), CLIENT_HELLO);
        let info = qp.llp_info().clone();
        let buf = qp
            .register_bound(vec![0; 100_000], Access::REMOTE_READ | Access::REMOTE_WRITE)
            .unwrap();
        // Advertise the buffer; the client's first message (or RTR) opens the way.
        qp.post_send_inline(0, &buf.remote().to_bytes(), SendFlags::default())
            .unwrap();
        qp.post_recv(2, 64).unwrap();
        let got = wait(&cq, 3); // advertisement sent, two receives
        let recvs: Vec<_> = got.iter().filter(|w| w.opcode == WcOpcode::Recv).collect();
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
    let qp = llp.connect(prepared, addr, CLIENT_HELLO);
    assert_eq!(qp.peer_private_data(), SERVER_HELLO);
    qp.post_send_inline(100, b"", SendFlags::default()).unwrap();
    let ad = wait(&cq, 2)
        .into_iter()
        .find(|w| w.opcode == WcOpcode::Recv)
        .unwrap();
    let remote = RemoteBuf::from_bytes(ad.buffer.as_ref().unwrap()).unwrap();
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
    let echo = done.iter().find(|w| w.opcode == WcOpcode::Recv).unwrap();
    assert_eq!(&echo.buffer.as_ref().unwrap()[..4], b"ping");
    assert_eq!(back.read(0, 100_000).unwrap(), data);
    let (info, server_view) = server.join().unwrap();
    assert_eq!(server_view, data);
    assert_eq!(info.transport, llp.name());
    assert_eq!(qp.llp_info().transport, llp.name());
}

#[test]
fn over_sctp() {
    if sctp_llp::own_process(module_path!(), "over_sctp") {
        exchange(Llp::Sctp);
    }
}

#[test]
fn mpa_rev1_crc_on() {
    exchange(Llp::mpa(MpaOptions::rev1()));
}

#[test]
fn mpa_rev1_crc_off() {
    exchange(Llp::mpa(MpaOptions {
        crc: false,
        ..MpaOptions::rev1()
    }));
}

#[test]
fn mpa_rev2_write_rtr() {
    let write_only = MpaOptions {
        rtr: RtrTypes {
            write: true,
            read: false,
        },
        ..MpaOptions::default()
    };
    exchange(Llp::Mpa {
        server: MpaOptions::default(),
        client: write_only,
    });
}

#[test]
fn mpa_rev2_read_rtr() {
    exchange(Llp::mpa(MpaOptions {
        rtr: RtrTypes {
            write: false,
            read: true,
        },
        ..MpaOptions::default()
    }));
}

/// The peer's MULPDU comes from its EMSS, not ours (RFC 5044 §4: MULPDU is
/// the sender's): a client whose segments are larger than the server's own
/// EMSS allows is served, not refused with 2/0/0x02 (loopback's TCP_MAXSEG is
/// 32,768 right after the handshake and 65,483 later, so two rddp ends can
/// differ so).
#[test]
fn mpa_a_peer_with_a_larger_emss_is_not_refused() {
    let small = MpaOptions {
        emss: Some(1460),
        ..MpaOptions::default()
    };
    let large = MpaOptions {
        emss: Some(60_000),
        ..MpaOptions::default()
    };
    exchange(Llp::Mpa {
        server: small.clone(),
        client: large.clone(),
    });
    exchange(Llp::Mpa {
        server: large,
        client: small,
    });
}

#[test]
fn mpa_markers_both_ways() {
    exchange(Llp::mpa(MpaOptions {
        markers: true,
        ..MpaOptions::rev1()
    }));
}
