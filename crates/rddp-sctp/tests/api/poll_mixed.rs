//! Receives that wait (setup, tests: read whole, NXTINFO kept) and receives
//! that do not (the event loop's: each message taken as usrsctp's mbuf chain)
//! on one association: what SCTP told of the next message with a waiting
//! receive must not outlive a message taken the other way, or a later waiting
//! receive trusts the wrong message's length (it placed 10 octets of a
//! 50-octet Send). Real usrsctp over UDP encapsulation.

use crate::common::*;
use bytes::Bytes;
use rddp_proto::ddp::{Delivery, RecvBuffer};
use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_sctp::Event;
use rddp_sctp::driver::{Listener, Options, connect};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

#[test]
fn a_length_told_with_one_receive_is_not_trusted_after_a_chain_receive() {
    if !own_process(
        module_path!(),
        "a_length_told_with_one_receive_is_not_trusted_after_a_chain_receive",
    ) {
        return;
    }
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, free_port());
    let l = Listener::bind(addr, Options::default()).unwrap();
    let server = std::thread::spawn(move || l.accept(Duration::from_secs(5)).unwrap());
    let mut a = connect(addr, Options::default()).unwrap();
    let mut b = server.join().unwrap();
    let (ma, mb) = (MemoryTable::with_seed(1), MemoryTable::with_seed(2));
    a.adaptation()
        .initiate(0, StreamId(0), PdId(1), b"")
        .unwrap();
    drive(&mut a, &ma, &mut b, &mb, |_, b| {
        b.adaptation().pending_initiates() == 1
    });
    b.adaptation().accept(0, StreamId(1), PdId(1), b"").unwrap();
    for id in 0..3 {
        b.stream(0)
            .unwrap()
            .post_recv(
                0,
                RecvBuffer {
                    id,
                    data: vec![0; 100],
                },
            )
            .unwrap();
    }
    drive(&mut a, &ma, &mut b, &mb, |a, _| {
        matches!(a.poll_event(), Some(Event::Accepted { .. }))
    });
    let send = |a: &mut rddp_sctp::driver::SctpConnection, octet: u8, n: usize| {
        a.stream(0)
            .unwrap()
            .send_untagged(0, [0x43, 0, 0, 0, 0], Bytes::from(vec![octet; n]))
            .unwrap();
        assert!(a.flush().unwrap());
    };
    // Every delivery so far, taken from the stream.
    let mut got: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut take = |b: &mut rddp_sctp::driver::SctpConnection| {
        while let Some(d) = b.stream(0).unwrap().poll_delivery() {
            match d {
                Delivery::Untagged { len, buffer, .. } => {
                    got.push((len, buffer.data[..len as usize].to_vec()));
                }
                d => panic!("{d:?}"),
            }
        }
        got.len()
    };
    // Poll until `n` messages are delivered (a bound, not a pace: a loaded
    // machine takes longer).
    let mut until = |b: &mut rddp_sctp::driver::SctpConnection, n: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while take(b) < n {
            assert!(std::time::Instant::now() < deadline, "{n} messages in 10 s");
            b.poll(&mb, Duration::from_millis(50)).unwrap();
        }
    };
    // Two Sends queue up; a waiting receive reads the first and learns the
    // second's length; the second is taken as a chain. The pause only makes
    // it likely that the second is there when the first is read (it is on an
    // idle machine); nothing waits on it: a loaded machine that reads the
    // first alone sets up less, and the test still passes or fails on what
    // was delivered.
    send(&mut a, b'x', 10);
    send(&mut a, b'y', 10);
    std::thread::sleep(Duration::from_millis(100));
    until(&mut b, 2);
    // A third, longer one, read by a waiting receive: it must not be cut to
    // the length told of the second.
    send(&mut a, b'z', 50);
    until(&mut b, 3);
    assert_eq!(
        got,
        vec![
            (10, vec![b'x'; 10]),
            (10, vec![b'y'; 10]),
            (50, vec![b'z'; 50])
        ]
    );
    assert_eq!(b.stream(0).unwrap().poll_event(), None);
}
