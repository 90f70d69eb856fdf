//! Out-of-order placement for real (RFC 5043): two usrsctp
//! endpoints in this process joined by an AF_CONN link that swaps every
//! consecutive pair of packets in each direction (a lone packet leaves after 5 ms).
//! DDP segments are placed as they arrive and delivered in DDP-SSN order.

use crate::common::*;
use bytes::Bytes;
use rddp_proto::ddp::{Delivery, RecvBuffer};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_sctp::Event;
use rddp_sctp::driver::{Listener, Options, connect_conn};
use std::time::Duration;
use usrsctp_ffi::{Encapsulation, stack};

#[test]
fn segments_are_placed_out_of_order_through_a_reordering_link() {
    if !own_process(
        module_path!(),
        "segments_are_placed_out_of_order_through_a_reordering_link",
    ) {
        return;
    }
    stack::init(Encapsulation::Udp(free_port())).unwrap();
    let link = link::Link::new(true);
    let (addr_a, addr_b) = (&link.a, &link.b);
    let l = Listener::bind_conn(addr_b, 5001, Options::default()).unwrap();
    let mut a = connect_conn(addr_a, 5001, Options::default()).unwrap();
    let mut b = l.accept(Duration::from_secs(5)).unwrap();
    let (ma, mb) = (MemoryTable::with_seed(3), MemoryTable::with_seed(4));

    a.adaptation()
        .initiate(0, StreamId(0), PdId(1), b"")
        .unwrap();
    drive(&mut a, &ma, &mut b, &mb, |_, b| {
        b.adaptation().pending_initiates() == 1
    });
    let len = 200_000;
    let stag = mb
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            0,
            vec![0; len],
        )
        .unwrap();
    b.adaptation().accept(0, StreamId(1), PdId(1), b"").unwrap();
    b.stream(0)
        .unwrap()
        .post_recv(
            0,
            RecvBuffer {
                id: 1,
                data: vec![0; 64],
            },
        )
        .unwrap();
    drive(&mut a, &ma, &mut b, &mb, |a, _| {
        matches!(a.poll_event(), Some(Event::Accepted { .. }))
    });
    a.stream(0)
        .unwrap()
        .send_tagged(0, stag.0, 0, Bytes::from(pattern(9, len)))
        .unwrap();
    a.stream(0)
        .unwrap()
        .send_untagged(0, [0; 5], Bytes::from_static(b"after"))
        .unwrap();
    let mut deliveries = Vec::new();
    drive(&mut a, &ma, &mut b, &mb, |_, b| {
        deliveries.extend(std::iter::from_fn(|| b.stream(0).unwrap().poll_delivery()));
        deliveries.len() == 2
    });
    // Delivered in order: the tagged message, then the send, each once.
    assert!(matches!(
        deliveries[0],
        Delivery::Tagged { len: 200_000, .. }
    ));
    assert!(matches!(&deliveries[1], Delivery::Untagged { len: 5, .. }));
    assert_eq!(mb.region(stag).unwrap().data(), &pattern(9, len)[..]);
    let st = b.stream(0).unwrap().sink_stats();
    let swapped = *link.swaps.lock().unwrap();
    eprintln!(
        "segments placed {}, out of order {}, packet pairs swapped {swapped}",
        st.segments_placed, st.placed_out_of_order
    );
    assert!(st.placed_out_of_order > 0, "{st:?}");

    a.adaptation().terminate(0).unwrap();
    drive(&mut a, &ma, &mut b, &mb, |a, b| {
        a.adaptation().session_state(0) == Some(rddp_sctp::SessionState::Closed)
            && b.adaptation().session_state(0) == Some(rddp_sctp::SessionState::Closed)
    });
    drop((a, b, l));
    drop(link); // stops and joins the pump
}
