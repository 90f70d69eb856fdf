//! Association setup through loss: the first INIT and the first COOKIE ECHO
//! lost, each is sent again when its T1 timer expires (RFC 4960 §5.1), after
//! the initial RTO (2.14 s under the default dead-peer timeout: its cap,
//! `failure_detection`, so no backoff beyond it). Two such losses take 4.3 s
//! of the default 5 s setup timeout (docs/reliability.md, the SCTP soak).
//! The session's Initiate and Accept lost, each costs the RTO's floor, 1 s.

use crate::common::*;
use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_sctp::SessionState;
use rddp_sctp::driver::{DEAD_PEER_TIMEOUT, Listener, Options, connect_conn, failure_detection};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use usrsctp_ffi::{Encapsulation, stack};

/// SCTP chunk types (RFC 4960 §3.2) of the first chunk of a packet.
const INIT: u8 = 1;
const COOKIE_ECHO: u8 = 10;

#[test]
fn an_association_comes_up_after_a_lost_init_and_a_lost_cookie_echo() {
    if !own_process(
        module_path!(),
        "an_association_comes_up_after_a_lost_init_and_a_lost_cookie_echo",
    ) {
        return;
    }
    stack::init(Encapsulation::Udp(free_port())).unwrap();
    // The first packet of each kind is lost; the retransmissions pass.
    let lost: Arc<Mutex<Vec<u8>>> = Arc::default();
    let seen = lost.clone();
    let link = link::Link::dropping(
        false,
        Box::new(move |p: &[u8]| {
            let kind = p.get(12).copied();
            let mut seen = seen.lock().unwrap();
            match kind {
                Some(k @ (INIT | COOKIE_ECHO)) if !seen.contains(&k) => {
                    seen.push(k);
                    true
                }
                _ => false,
            }
        }),
    );
    // Room for the retransmissions on a loaded machine: the test is about
    // when they go, not about the default timeout.
    let opts = Options {
        setup_timeout: Duration::from_secs(20),
        ..Options::default()
    };
    let l = Listener::bind_conn(&link.b, 5007, opts.clone()).unwrap();
    let t0 = Instant::now();
    let a = connect_conn(&link.a, 5007, opts);
    let took = t0.elapsed();
    assert_eq!(*lost.lock().unwrap(), [INIT, COOKIE_ECHO], "what was lost");
    let a = a.unwrap_or_else(|e| panic!("setup failed after {took:?}: {e}"));
    let b = l.accept(Duration::from_secs(5)).unwrap();
    // Two T1 timeouts at the initial RTO, not doubled (it is the cap).
    let t1 = failure_detection(DEAD_PEER_TIMEOUT).rto_initial;
    assert_eq!(t1, failure_detection(DEAD_PEER_TIMEOUT).rto_max);
    assert!(
        took >= 2 * t1,
        "up after {took:?}, before two T1 timeouts of {t1:?}"
    );
    eprintln!("association up after {took:?} (two T1 timeouts of {t1:?})");
    drop((a, b));
}

/// The session's Initiate and its Accept (RFC 5043 §6: DATA chunks), the
/// first copy of each lost: each is sent again when its T3-rtx timer expires,
/// at the RTO of an association without an RTT measurement yet.
#[test]
fn a_session_comes_up_after_a_lost_initiate_and_a_lost_accept() {
    if !own_process(
        module_path!(),
        "a_session_comes_up_after_a_lost_initiate_and_a_lost_accept",
    ) {
        return;
    }
    stack::init(Encapsulation::Udp(free_port())).unwrap();
    const PORT: u16 = 5008;
    // Lost: the first DATA each way (by destination port).
    let lost: Arc<Mutex<Vec<u16>>> = Arc::default();
    let seen = lost.clone();
    let link = link::Link::dropping(
        false,
        Box::new(move |p: &[u8]| {
            let to = u16::from_be_bytes([p[2], p[3]]);
            let mut seen = seen.lock().unwrap();
            if p.get(12) == Some(&0) && !seen.contains(&to) {
                seen.push(to);
                true
            } else {
                false
            }
        }),
    );
    let l = Listener::bind_conn(&link.b, PORT, Options::default()).unwrap();
    let mut a = connect_conn(&link.a, PORT, Options::default()).unwrap();
    let mut b = l.accept(Duration::from_secs(5)).unwrap();
    let (ma, mb) = (MemoryTable::with_seed(1), MemoryTable::with_seed(2));
    let t0 = Instant::now();
    a.adaptation()
        .initiate(0, StreamId(0), PdId(1), b"")
        .unwrap();
    drive(&mut a, &ma, &mut b, &mb, |_, b| {
        b.adaptation().pending_initiates() == 1
    });
    let initiated = t0.elapsed();
    b.adaptation().accept(0, StreamId(1), PdId(1), b"").unwrap();
    drive(&mut a, &ma, &mut b, &mb, |a, _| {
        a.adaptation().session_state(0) == Some(SessionState::Established)
    });
    let took = t0.elapsed();
    assert_eq!(lost.lock().unwrap().len(), 2, "one DATA lost each way");
    // Each lost one waited for its timer (1 s: the RTO's floor, the
    // handshake measured the round trip).
    let floor = failure_detection(DEAD_PEER_TIMEOUT).rto_min;
    assert!(
        initiated >= floor && took >= 2 * floor,
        "{initiated:?}, {took:?}"
    );
    eprintln!("Initiate in after {initiated:?}, session up after {took:?}");
}
