//! `rddp target --transport sctp`: a queue pair over DDP/SCTP against the real
//! binary (connected event, advertisement, Write/Read, echo, Terminate).

mod common;

use common::Target;
use rddp::transport::sctp::{SctpOptions, connect};
use rddp::{
    Access, AsyncEvent, CompletionQueue, Device, QueuePairBuilder, Quota, RemoteBuf, SendFlags,
    TerminateCode, WcOpcode,
};
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;

#[test]
fn target_over_sctp() {
    if usrsctp_missing() {
        return;
    }
    let mut t = Target::start(&["--transport", "sctp", "--buffer-size", "4096"]);
    let SocketAddr::V4(addr) = t.addr else {
        panic!("IPv4 expected")
    };
    let dev = Device::new();
    let pd = dev
        .consumer("client", Quota::default())
        .unwrap()
        .alloc_pd()
        .unwrap();
    let cq = CompletionQueue::new(64);
    let mut prep = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    for i in 0..4 {
        prep.post_recv(i, 64).unwrap();
    }
    let qp = prep
        .attach(connect(addr, SctpOptions::default(), &[]).unwrap())
        .unwrap();
    let c = t.expect("connected", json!({ "conn": 1 }));
    assert_eq!(c["transport"], "sctp");
    let wait = |n: usize| {
        let mut got = Vec::new();
        while got.len() < n {
            let more = cq.wait(n - got.len(), Duration::from_secs(10));
            assert!(!more.is_empty(), "timed out with {got:?}");
            got.extend(more);
        }
        got
    };
    let ad = wait(1);
    let remote = RemoteBuf::from_bytes(ad[0].buffer.as_ref().unwrap()).unwrap();
    assert_eq!(remote.len, 4096);
    let src = pd.register(b"over sctp".to_vec(), Access::NONE).unwrap();
    let back = pd.register(vec![0; 9], Access::REMOTE_WRITE).unwrap();
    qp.post_write(1, &src, 0, 9, remote, 100).unwrap();
    qp.post_read(2, &back, 0, 9, remote, 100).unwrap();
    qp.post_send_inline(3, b"echo me", SendFlags::default())
        .unwrap();
    let got = wait(4);
    assert_eq!(back.read(0, 9).unwrap(), b"over sctp");
    let echo = got
        .iter()
        .find(|w| w.opcode == WcOpcode::Recv)
        .expect("the echo");
    assert_eq!(
        &echo.buffer.as_ref().unwrap()[..echo.byte_len as usize],
        b"echo me"
    );
    t.expect(
        "completion",
        json!({ "conn": 1, "op": "recv", "bytes": 7, "qn": 0, "msn": 1 }),
    );
    // A Write past the end: Terminate 1/1/0x01 back to us, and the events.
    qp.post_write(4, &src, 0, 9, remote, 4090).unwrap();
    t.expect(
        "terminate",
        json!({ "conn": 1, "direction": "sent", "layer": 1, "etype": 1, "code": 1 }),
    );
    let mut code = None;
    for _ in 0..250 {
        code = qp.async_events().into_iter().find_map(|e| match e {
            AsyncEvent::TerminateReceived { code, .. } => code,
            _ => None,
        });
        if code.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(code, Some(TerminateCode::DDP_BASE_BOUNDS));
    t.expect("closed", json!({ "conn": 1 }));
}

fn usrsctp_missing() -> bool {
    match rddp::transport::sctp::available() {
        Ok(()) => false,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("*** SKIPPED: SCTP target test needs libusrsctp (CI unset): {e}");
            true
        }
        Err(e) => panic!("CI is set and libusrsctp is missing: {e}"),
    }
}
