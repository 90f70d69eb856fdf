//! Out-of-order placement for real (seed 001; spec §5.1, §5.3): two usrsctp
//! endpoints in this process joined by an AF_CONN link that swaps every
//! consecutive pair of packets in each direction (a lone packet leaves after 5 ms).
//! DDP segments are placed as they arrive and delivered in DDP-SSN order.

mod common;

use bytes::Bytes;
use common::*;
use rddp_proto::ddp::{Delivery, RecvBuffer};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_sctp::Event;
use rddp_sctp::driver::{Listener, Options, SctpConnection, connect_conn};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use usrsctp_ffi::{ConnAddress, Encapsulation, stack};

/// Deterministic reordering: per direction (keyed by the receiving address), packet
/// 2k is held until packet 2k+1 has been delivered (or 5 ms pass); counts swaps.
fn pump(rx: Receiver<(usize, Vec<u8>)>, stop: Arc<AtomicBool>, swaps: Arc<Mutex<u64>>) {
    let mut held: [Option<(Vec<u8>, Instant)>; 2] = [None, None];
    let mut dir_of = std::collections::HashMap::<usize, usize>::new();
    while !stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(Duration::from_millis(1)) {
            Ok((to, pkt)) => {
                let n = dir_of.len();
                let d = *dir_of.entry(to).or_insert(n) % 2;
                match held[d].take() {
                    None => held[d] = Some((pkt, Instant::now())),
                    Some((first, _)) => {
                        let _ = usrsctp_ffi::stack::conn_input(to, &pkt);
                        let _ = usrsctp_ffi::stack::conn_input(to, &first);
                        *swaps.lock().unwrap() += 1;
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        for (to, &d) in &dir_of {
            if held[d]
                .as_ref()
                .is_some_and(|(_, t)| t.elapsed() > Duration::from_millis(5))
            {
                let (p, _) = held[d].take().unwrap();
                let _ = usrsctp_ffi::stack::conn_input(*to, &p);
            }
        }
    }
}

/// Flush and poll both ends until `done`.
fn drive(
    a: &mut SctpConnection,
    ma: &mut MemoryTable,
    b: &mut SctpConnection,
    mb: &mut MemoryTable,
    mut done: impl FnMut(&mut SctpConnection, &mut SctpConnection) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(a, b) {
        assert!(Instant::now() < deadline, "timed out");
        a.flush().unwrap();
        b.flush().unwrap();
        a.poll(ma, Duration::from_millis(1)).unwrap();
        b.poll(mb, Duration::from_millis(1)).unwrap();
    }
}

#[test]
fn segments_are_placed_out_of_order_through_a_reordering_link() {
    if !library() {
        return;
    }
    stack::init(Encapsulation::Udp(free_port())).unwrap();
    let (tx, rx) = channel::<(usize, Vec<u8>)>();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(Mutex::new(0));
    let peer_of_a = Arc::new(Mutex::new(0usize));
    let peer_of_b = Arc::new(Mutex::new(0usize));
    let (t1, pa) = (tx.clone(), peer_of_a.clone());
    let addr_a = ConnAddress::register(move |p| {
        let _ = t1.send((*pa.lock().unwrap(), p.to_vec()));
    })
    .unwrap();
    let (t2, pb) = (tx, peer_of_b.clone());
    let addr_b = ConnAddress::register(move |p| {
        let _ = t2.send((*pb.lock().unwrap(), p.to_vec()));
    })
    .unwrap();
    *peer_of_a.lock().unwrap() = addr_b.id();
    *peer_of_b.lock().unwrap() = addr_a.id();
    let pump_thread = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        std::thread::spawn(move || pump(rx, stop, swaps))
    };

    let l = Listener::bind_conn(&addr_b, 5001, Options::default()).unwrap();
    let mut a = connect_conn(&addr_a, 5001, Options::default()).unwrap();
    let mut b = l.accept(Duration::from_secs(5)).unwrap();
    let (mut ma, mut mb) = (MemoryTable::with_seed(3), MemoryTable::with_seed(4));

    a.adaptation()
        .initiate(0, StreamId(0), PdId(1), b"")
        .unwrap();
    drive(&mut a, &mut ma, &mut b, &mut mb, |_, b| {
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
    drive(&mut a, &mut ma, &mut b, &mut mb, |a, _| {
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
    drive(&mut a, &mut ma, &mut b, &mut mb, |_, b| {
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
    let swapped = *swaps.lock().unwrap();
    eprintln!(
        "segments placed {}, out of order {}, packet pairs swapped {swapped}",
        st.segments_placed, st.placed_out_of_order
    );
    assert!(st.placed_out_of_order > 0, "{st:?}");

    a.adaptation().terminate(0).unwrap();
    drive(&mut a, &mut ma, &mut b, &mut mb, |a, b| {
        a.adaptation().session_state(0) == Some(rddp_sctp::SessionState::Closed)
            && b.adaptation().session_state(0) == Some(rddp_sctp::SessionState::Closed)
    });
    stop.store(true, Ordering::Relaxed);
    pump_thread.join().unwrap();
    drop((a, b, l));
}
