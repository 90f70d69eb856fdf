//! Real SCTP (usrsctp over UDP encapsulation on 127.0.0.1) between two processes:
//! this test binary spawns itself as the passive peer. rping-like flow without
//! RDMAP: session, a tagged write to an STag the peer advertised in its Accept's
//! private data, untagged messages, Terminate both ways (RFC 5043).

use crate::common::*;
use bytes::Bytes;
use rddp_proto::ddp::{Delivery, RecvBuffer};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_sctp::Event;
use rddp_sctp::driver::{Listener, Options, connect};
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SID: u16 = 3;
const WRITE_LEN: usize = 100_000;
const SENDS: [usize; 3] = [0, 100, 5000];

/// Kills the peer process if the test fails before it exits.
struct Peer(Child);
impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn two_process_session_with_tagged_and_untagged_messages() {
    if !own_process(
        module_path!(),
        "two_process_session_with_tagged_and_untagged_messages",
    ) {
        return;
    }
    let port = free_port();
    let mut peer = Peer(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "two_processes::passive_peer",
                "--ignored",
                "--nocapture",
            ])
            .env("RDDP_SCTP_PEER_AT", format!("127.0.0.1:{port}"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(peer.0.stdout.take().unwrap()).lines();
    let mut next_peer_line = move || loop {
        let l = lines.next().expect("peer exited").unwrap();
        if let Some(rest) = l.strip_prefix("PEER ") {
            return rest.to_string();
        }
    };
    assert_eq!(next_peer_line(), "READY");

    let mem = MemoryTable::with_seed(1);
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let mut c = connect(addr, Options::default()).unwrap();
    assert!(c.fragmentation_point() >= 516);
    c.adaptation()
        .initiate(SID, StreamId(1), PdId(1), b"rping")
        .unwrap();
    let e = wait_event(&mut c, &mem, |e| matches!(e, Event::Accepted { .. }));
    let Event::Accepted {
        private_data: pd, ..
    } = e
    else {
        unreachable!()
    };
    let stag = u32::from_be_bytes(pd[..4].try_into().unwrap());
    let to = u64::from_be_bytes(pd[4..12].try_into().unwrap());

    let s = c.stream(SID).unwrap();
    s.send_tagged(0, stag, to, Bytes::from(pattern(1, WRITE_LEN)))
        .unwrap();
    for (i, n) in SENDS.iter().enumerate() {
        s.send_untagged(0, [0; 5], Bytes::from(pattern(i as u8 + 2, *n)))
            .unwrap();
    }
    // The peer answers each message with an untagged "ack" carrying its length.
    for i in 0..4 {
        c.stream(SID)
            .unwrap()
            .post_recv(
                0,
                RecvBuffer {
                    id: i,
                    data: vec![0; 16],
                },
            )
            .unwrap();
    }
    let mut acks = Vec::new();
    c.run_until(&mem, Duration::from_secs(20), |c| {
        while let Some(Delivery::Untagged { buffer, len, .. }) =
            c.stream(SID).unwrap().poll_delivery()
        {
            acks.push(String::from_utf8_lossy(&buffer.data[..len as usize]).to_string());
        }
        acks.len() == 4
    })
    .unwrap();
    assert_eq!(
        acks,
        [
            "tagged 100000",
            "untagged 0",
            "untagged 100",
            "untagged 5000"
        ]
    );
    c.adaptation().terminate(SID).unwrap();
    wait_event(&mut c, &mem, |e| is_closed(e, SID));
    let last = next_peer_line();
    assert!(last.starts_with("OK placed_out_of_order="), "{last}");
    eprintln!("peer: {last}");
    for _ in 0..100 {
        if let Some(st) = peer.0.try_wait().unwrap() {
            assert!(st.success(), "peer failed: {st}");
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("peer did not exit");
}

/// The passive side, run only as the child of the test above.
#[test]
#[ignore = "the passive peer process of two_process_session_*"]
fn passive_peer() {
    let Ok(at) = std::env::var("RDDP_SCTP_PEER_AT") else {
        return;
    };
    let addr: SocketAddrV4 = at.parse().unwrap();
    let l = Listener::bind(addr, Options::default()).unwrap();
    println!("PEER READY");
    let mut c = l.accept(Duration::from_secs(20)).unwrap();
    let mem = MemoryTable::with_seed(2);
    let e = wait_event(&mut c, &mem, |e| matches!(e, Event::InitiateRequest { .. }));
    let Event::InitiateRequest { sid, private_data } = e else {
        unreachable!()
    };
    assert_eq!(private_data, b"rping");
    let to = 0x7000_0000u64;
    let stag = mem
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            to,
            vec![0; WRITE_LEN],
        )
        .unwrap();
    let mut pd = stag.0.to_be_bytes().to_vec();
    pd.extend_from_slice(&to.to_be_bytes());
    c.adaptation()
        .accept(sid, StreamId(7), PdId(1), &pd)
        .unwrap();
    for i in 0..SENDS.len() {
        c.stream(sid)
            .unwrap()
            .post_recv(
                0,
                RecvBuffer {
                    id: i as u64,
                    data: vec![0; 8192],
                },
            )
            .unwrap();
    }
    let mut got = 0;
    c.run_until(&mem, Duration::from_secs(20), |c| {
        while let Some(d) = c.stream(sid).unwrap().poll_delivery() {
            let ack = match d {
                Delivery::Tagged { len, .. } => format!("tagged {len}"),
                Delivery::Untagged { len, buffer, .. } => {
                    assert_eq!(
                        &buffer.data[..len as usize],
                        &pattern(buffer.id as u8 + 2, SENDS[buffer.id as usize])[..]
                    );
                    format!("untagged {len}")
                }
            };
            c.stream(sid)
                .unwrap()
                .send_untagged(0, [0; 5], Bytes::from(ack))
                .unwrap();
            got += 1;
        }
        got == 4
    })
    .unwrap();
    assert_eq!(mem.region(stag).unwrap().data(), &pattern(1, WRITE_LEN)[..]);
    let ooo = c.stream(sid).unwrap().sink_stats().placed_out_of_order;
    wait_event(&mut c, &mem, |e| is_closed(e, sid));
    println!("PEER OK placed_out_of_order={ooo}");
}
