//! `Socket::recv_chain` against the real library: a message taken as usrsctp's
//! mbuf chain has its length, stream, PPID and order flag before any octet is
//! copied, and copies out whole, at any offset; a notification comes the same
//! way; nothing there is `would_block`.

use crate::common::{T, library, pair, would_block};
use std::time::Instant;
use usrsctp_ffi::{Chain, Notification, Socket};

/// The next chain on `s`, waiting up to `T`.
fn next(s: &Socket) -> Chain {
    let deadline = Instant::now() + T;
    loop {
        match s.recv_chain() {
            Ok(c) => return c,
            Err(e) if would_block(&e) && Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(e) => panic!("recv_chain: {e}"),
        }
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|k| (k as u8).wrapping_mul(31) ^ seed).collect()
}

#[test]
fn a_message_comes_as_its_chain_with_its_length_first() {
    if !library() {
        return;
    }
    let (c, s) = pair(5003);
    if !s.can_recv_chain() {
        eprintln!("SKIPPED: this libusrsctp does not export sctp_sorecvmsg");
        return;
    }
    assert!(usrsctp_ffi::chain_available());
    // The accepted socket's own ASSOC_CHANGE first; then nothing.
    let e = loop {
        match s.recv_chain() {
            Ok(ch) => assert!(ch.notification(), "{ch:?}"),
            Err(e) => break e,
        }
    };
    assert!(would_block(&e), "{e}");
    for (i, (len, sid, ppid, unordered)) in [
        (1usize, 0u16, 16u32, true),
        (1_442, 1, 16, true),
        (60_000, 2, 17, false),
        (20, 3, 16, true),
    ]
    .into_iter()
    .enumerate()
    {
        let msg = pattern(len, i as u8);
        c.send(sid, ppid, unordered, &msg).unwrap();
        let ch = next(&s);
        assert_eq!(ch.len(), len, "message {i}");
        assert!(ch.eor() && !ch.notification(), "message {i}: {ch:?}");
        let info = ch.info();
        assert_eq!(
            (info.sid, info.ppid, info.unordered),
            (sid, ppid, unordered)
        );
        // Whole, and from an offset that falls inside some mbuf.
        let mut all = vec![0u8; len];
        assert!(ch.copy_to(0, &mut all));
        assert_eq!(all, msg, "message {i}");
        assert_eq!(ch.slices().collect::<Vec<_>>().concat(), msg, "message {i}");
        let off = len / 3;
        let mut tail = vec![0u8; len - off];
        assert!(ch.copy_to(off, &mut tail));
        assert_eq!(tail, msg[off..], "message {i}");
        // Past the end: refused.
        assert!(!ch.copy_to(off, &mut vec![0u8; len - off + 1]));
    }
    // The peer goes: a notification, as a chain too.
    drop(c);
    let ch = next(&s);
    assert!(ch.notification(), "{ch:?}");
    let mut buf = vec![0u8; ch.len()];
    assert!(ch.copy_to(0, &mut buf));
    assert!(
        matches!(
            Notification::parse(&buf),
            Some(Notification::AssocChange { .. } | Notification::Shutdown)
        ),
        "{buf:?}"
    );
}

#[test]
fn two_readers_of_one_socket_take_each_message_once() {
    if !library() {
        return;
    }
    let (c, s) = pair(5004);
    if !s.can_recv_chain() {
        return;
    }
    // usrsctp hands a message over with none of its locks held: without the
    // socket's own receive lock both readers could take (and free) one chain.
    const N: u32 = 4000;
    let s = std::sync::Arc::new(s);
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let deadline = Instant::now() + T;
                while Instant::now() < deadline {
                    match s.recv_chain() {
                        Ok(ch) if ch.notification() => {}
                        Ok(ch) => {
                            let mut b = [0u8; 4];
                            assert!(ch.len() == 4 && ch.copy_to(0, &mut b), "{ch:?}");
                            let k = u32::from_be_bytes(b);
                            if k == u32::MAX {
                                break;
                            }
                            got.push(k);
                        }
                        Err(e) if would_block(&e) => std::thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                }
                got
            })
        })
        .collect();
    for k in 0..N {
        c.send_wait(0, 16, false, &k.to_be_bytes(), T).unwrap();
    }
    // One end marker per reader.
    for _ in 0..2 {
        c.send_wait(0, 16, false, &u32::MAX.to_be_bytes(), T)
            .unwrap();
    }
    let mut all: Vec<u32> = readers
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..N).collect::<Vec<_>>());
}
