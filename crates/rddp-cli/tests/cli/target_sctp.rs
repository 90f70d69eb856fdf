//! `rddp target --transport sctp`: a queue pair over DDP/SCTP against the real
//! binary (connected event, advertisement, Write/Read, echo, Terminate).

use crate::common;

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

/// Several sessions on one association: each Initiate goes to the target's ULP,
/// which accepts after --sctp-accept-delay; with --sctp-max-pending 2, of four
/// Initiates sent at once two are accepted and two answered with Terminate.
#[test]
fn initiates_beyond_max_pending_are_answered_with_terminate() {
    use rddp_proto::mem::{MemoryTable, PdId, StreamId};
    use rddp_sctp::{CloseReason, Event};
    if usrsctp_missing() {
        return;
    }
    let mut t = Target::start(&[
        "--transport",
        "sctp",
        "--sctp-max-pending",
        "2",
        "--sctp-accept-delay",
        "300",
    ]);
    let SocketAddr::V4(addr) = t.addr else {
        panic!("IPv4 expected")
    };
    let mut conn = rddp_sctp::driver::connect(addr, rddp_sctp::driver::Options::default()).unwrap();
    for sid in 1..=4u16 {
        conn.adaptation()
            .initiate(sid, StreamId(u32::from(sid)), PdId(1), b"")
            .unwrap();
    }
    let mem = MemoryTable::new();
    let (mut accepted, mut refused) = (0, 0);
    conn.run_until(&mem, Duration::from_secs(15), |c| {
        while let Some(e) = c.poll_event() {
            match e {
                Event::Accepted { .. } => accepted += 1,
                Event::Closed {
                    reason: CloseReason::Refused,
                    ..
                } => refused += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        accepted + refused == 4
    })
    .unwrap();
    assert_eq!((accepted, refused), (2, 2));
    t.expect("connected", json!({ "conn": 1, "transport": "sctp" }));
    t.expect("connected", json!({ "conn": 2, "transport": "sctp" }));
}

#[test]
fn sctp_reject_answers_each_initiate_with_reject() {
    use rddp_proto::mem::{MemoryTable, PdId, StreamId};
    use rddp_sctp::{CloseReason, Event};
    if usrsctp_missing() {
        return;
    }
    let t = Target::start(&["--transport", "sctp", "--sctp-reject"]);
    let SocketAddr::V4(addr) = t.addr else {
        panic!("IPv4 expected")
    };
    let mut conn = rddp_sctp::driver::connect(addr, rddp_sctp::driver::Options::default()).unwrap();
    conn.adaptation()
        .initiate(1, StreamId(1), PdId(1), b"please")
        .unwrap();
    let mem = MemoryTable::new();
    let mut got = None;
    conn.run_until(&mem, Duration::from_secs(10), |c| {
        got = got.take().or_else(|| c.poll_event());
        got.is_some()
    })
    .unwrap();
    assert_eq!(
        got,
        Some(Event::Closed {
            sid: 1,
            reason: CloseReason::Rejected(b"rejected".to_vec())
        })
    );
}
