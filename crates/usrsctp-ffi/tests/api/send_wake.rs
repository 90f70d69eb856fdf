//! A sender that usrsctp refused for want of send space is woken once half of
//! what SCTP held at the refusal has left, not at the first SACK after it
//! (each frees about two messages): otherwise an event-driven sender hands
//! over a few messages a wake and meets usrsctp's receive thread on the
//! association's lock at each. Measured in a process of its own, the stack's
//! threads serving this one association.

use crate::common::*;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use usrsctp_ffi::Received;

const MSG: usize = 1_400;
const TOTAL: usize = MSG * 12_000;

#[test]
fn a_refused_sender_is_woken_when_half_has_left() {
    if !own_process(
        module_path!(),
        "a_refused_sender_is_woken_when_half_has_left",
    ) {
        return;
    }
    let (c, s) = pair(5003);
    let wakes = Arc::new((Mutex::new(0u64), Condvar::new()));
    let w = wakes.clone();
    c.set_wake(Some(Arc::new(move || {
        *w.0.lock().unwrap() += 1;
        w.1.notify_all();
    })));
    let reader = thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        while got < TOTAL {
            match s.recv(&mut buf, T) {
                Ok(Received::Data { len, .. }) => got += len,
                Ok(_) => {}
                Err(e) => panic!("after {got} octets: {e}"),
            }
        }
        got
    });
    let msg = vec![0x5a; MSG];
    let (mut sent, mut refusals, mut woken) = (0usize, 0u32, 0u32);
    while sent < TOTAL {
        let seen = *wakes.0.lock().unwrap();
        match c.send(1, 16, true, &msg) {
            Ok(_) => {
                sent += MSG;
                continue;
            }
            Err(e) if would_block(&e) => refusals += 1,
            Err(e) => panic!("send after {sent} octets: {e}"),
        }
        // Refused: the socket's wake must come, and no timer tries again.
        let g = wakes.0.lock().unwrap();
        let (g, to) = wakes.1.wait_timeout_while(g, T, |n| *n == seen).unwrap();
        assert!(
            !to.timed_out(),
            "no wake within {T:?} of refusal {refusals} ({sent} octets sent)"
        );
        drop(g);
        woken += 1;
    }
    assert_eq!(reader.join().unwrap(), TOTAL);
    let per_wake = 12_000.0 / f64::from(woken.max(1));
    eprintln!("{refusals} refusals, {woken} wakes, {per_wake:.1} messages a wake");
    assert!(refusals > 0, "the send buffer never filled");
    // Measured on the project's machine: about 140 messages a wake (half of
    // what usrsctp holds when it refuses one); a wake at every writable
    // upcall was 12 to 27.
    assert!(
        per_wake >= 60.0,
        "{per_wake:.1} messages handed over a wake ({woken} wakes)"
    );
}
