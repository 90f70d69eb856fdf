//! User-space copies of payload over DDP/SCTP (docs/data-path.md), read
//! from the device's copy counters (`QpStats::rx_copied_octets` and
//! `tx_copied_octets`, summed over its queue pairs) as over MPA.
//!
//! Receive: usrsctp's upcall takes each message as it arrives, as the mbuf
//! chain usrsctp holds (`Socket::recv_chain`, through `sctp_sorecvmsg`), so
//! its length is known before any octet is copied (DDP over SCTP carries
//! none, and `usrsctp_recvv` tells none before it copies). RDMAP decides from
//! the header and that length where the payload goes, and it is copied from
//! the chain straight there, the one copy any read out of usrsctp makes:
//! `rx_copied_octets` stays 0. A libusrsctp without that symbol reads a
//! message that arrived alone whole into the association's buffer and copies
//! it into place once, counted: then at most one copy of every octet.
//!
//! Transmit: each segment's DDP-SSN and header and its payload, read in place
//! from the registered region, are handed to usrsctp as one message of
//! several buffers (`Socket::send_gather`, through `sctp_lower_sosend`), which
//! usrsctp copies into its own: no user-space copy, `tx_copied_octets`
//! stays 0. A libusrsctp without that symbol sends with `usrsctp_sendv`,
//! which takes one buffer: then one copy of every leased payload octet,
//! checked as exactly that.

use crate::common;
use crate::common::sctp_llp as llp;

use common::wait;
use llp::{free_addr, library};
use rddp::transport::sctp::{Listener, SctpOptions, connect};
use rddp::{
    Access, CompletionQueue, Device, QueuePairBuilder, RemoteBuf, SendFlags, WcOpcode, WcStatus,
};
use std::time::Duration;

const MIB: usize = 1 << 20;
const WRITES: usize = 8;
const SENDS: usize = 8;
const SEND_LEN: usize = 60_000;

#[test]
fn writes_and_sends_over_sctp_are_not_copied() {
    if !llp::own_process(module_path!(), "writes_and_sends_over_sctp_are_not_copied") {
        return;
    }
    if !library() {
        return;
    }
    copies();
}

/// The fallbacks, with only usrsctp.h's API (`RDDP_USRSCTP_API_ONLY`): this
/// test runs itself again as a child process with it set (the library is
/// loaded once per process).
#[test]
fn with_usrsctp_api_only_each_octet_is_copied_at_most_once_each_way() {
    // The test's name as the harness knows it: its path in this binary.
    const NAME: &str =
        "sctp_copies::with_usrsctp_api_only_each_octet_is_copied_at_most_once_each_way";
    if std::env::var_os(usrsctp_ffi::API_ONLY_ENV).is_some() {
        assert!(!usrsctp_ffi::gather_available() && !usrsctp_ffi::chain_available());
        copies();
        return;
    }
    if !library() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--nocapture", "--test-threads", "1"])
        .env(usrsctp_ffi::API_ONLY_ENV, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // It ran (not filtered away) and took the fallbacks.
    assert!(
        text.contains("copied: receive") && text.contains("1 passed"),
        "{text}"
    );
}

/// Writes and Sends one way, a Send back; checks the copy counters.
fn copies() {
    let addr = free_addr();
    let listener = Listener::bind(addr, SctpOptions::default()).unwrap();
    let dev = Device::new();
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let mut prep = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        for i in 0..SENDS as u64 {
            prep.post_recv(i, SEND_LEN).unwrap();
        }
        let conn = listener.accept(Duration::from_secs(10), b"").unwrap();
        let qp = prep.attach(conn).unwrap();
        let sink = qp
            .register_bound(vec![0; MIB], Access::REMOTE_WRITE)
            .unwrap();
        qp.post_send_inline(100, &sink.remote().to_bytes(), SendFlags::default())
            .unwrap();
        // The Sends, the last one after the Writes.
        let got = wait(&cq, SENDS + 1);
        let recvs: Vec<_> = got.iter().filter(|w| w.opcode == WcOpcode::Recv).collect();
        assert_eq!(recvs.len(), SENDS, "{got:?}");
        for (i, w) in recvs.iter().enumerate() {
            assert_eq!(
                (w.status, w.byte_len as usize),
                (WcStatus::Success, SEND_LEN)
            );
            let b = w.buffer.as_ref().unwrap();
            assert!(b.iter().all(|&x| x == i as u8), "Send {i}'s octets");
        }
        let data = sink.read(0, MIB as u64).unwrap();
        qp.post_send_inline(101, b"bye", SendFlags::default())
            .unwrap();
        wait(&cq, 1);
        data
    });
    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let mut prep = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prep.post_recv(1, 64).unwrap();
    prep.post_recv(2, 64).unwrap();
    let conn = connect(addr, SctpOptions::default(), b"").unwrap();
    let qp = prep.attach(conn).unwrap();
    let ad = wait(&cq, 1);
    let remote = RemoteBuf::from_bytes(ad[0].buffer.as_ref().unwrap()).unwrap();
    let data: Vec<u8> = (0..MIB as u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let src = pd.register(data.clone(), Access::NONE).unwrap();
    let sends: Vec<_> = (0..SENDS)
        .map(|i| pd.register(vec![i as u8; SEND_LEN], Access::NONE).unwrap())
        .collect();
    let (rx0, tx0) = (
        dev.stats().totals.rx_copied_octets,
        dev.stats().totals.tx_copied_octets,
    );
    for (i, s) in sends.iter().enumerate().take(SENDS - 1) {
        qp.post_send(i as u64, s, 0, SEND_LEN as u64, SendFlags::default())
            .unwrap();
    }
    for i in 0..WRITES {
        qp.post_write(10 + i as u64, &src, 0, MIB as u64, remote, 0)
            .unwrap();
        // At most two in flight: the send queue stays short.
        if i % 2 == 1 {
            let w = wait(&cq, 2);
            assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
        }
    }
    qp.post_send(
        7,
        &sends[SENDS - 1],
        0,
        SEND_LEN as u64,
        SendFlags::default(),
    )
    .unwrap();
    let done = wait(&cq, SENDS + 1);
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?}"
    );
    assert!(
        done.iter()
            .any(|w| w.opcode == WcOpcode::Recv && w.byte_len == 3)
    );
    assert_eq!(server.join().unwrap(), data);
    let rx = dev.stats().totals.rx_copied_octets - rx0;
    let tx = dev.stats().totals.tx_copied_octets - tx0;
    let octets = WRITES * MIB + SENDS * SEND_LEN;
    eprintln!("payload {octets} octets each way; copied: receive {rx}, transmit {tx}");
    if usrsctp_ffi::gather_available() {
        // Transmit: gathered from the regions, no user-space copy.
        assert_eq!(tx, 0, "transmit copies");
    } else {
        // Transmit: one user-space copy of every leased octet (no gather).
        assert_eq!(tx as usize, octets, "transmit copies");
    }
    // Receive: the client also took the server's 3-octet "bye".
    let received = octets + 3;
    if usrsctp_ffi::chain_available() {
        // From usrsctp's chains straight into place: no user-space copy.
        assert_eq!(
            rx, 0,
            "receive copies of {received} received payload octets"
        );
    } else {
        // Each octet is copied at most once.
        assert!(
            (rx as usize) <= received,
            "{rx} copies of {received} received payload octets"
        );
    }
}
