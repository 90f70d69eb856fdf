//! `Socket::send_gather` against the real library (UDP encapsulation on
//! 127.0.0.1, as smoke.rs): one message from several buffers arrives as their
//! concatenation, and a send refused for want of room queues none of it.

use crate::common::{T, library, pair, would_block};
use std::time::Duration;
use usrsctp_ffi::{Error, RecvInfo, Socket};

/// The next whole data message on `s` (notifications skipped), read in parts.
fn message(s: &Socket, timeout: Duration) -> Result<(Vec<u8>, RecvInfo), Error> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut msg = Vec::new();
    loop {
        let p = s.recv_part_wait(&mut buf, timeout)?;
        if p.notification {
            assert!(p.eor && msg.is_empty(), "a notification inside a message");
            continue;
        }
        msg.extend_from_slice(&buf[..p.len]);
        if p.eor {
            return Ok((msg, p.info));
        }
    }
}

fn parts(i: u32) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let a = vec![0xa5, i as u8];
    let b: Vec<u8> = (0..18).map(|k| (k as u8) ^ (i as u8)).collect();
    let c: Vec<u8> = (0..60_000u32)
        .map(|k| (k.wrapping_mul(7) ^ i) as u8)
        .collect();
    (a, b, c)
}

#[test]
fn three_parts_arrive_as_one_message() {
    if !library() {
        return;
    }
    let (c, s) = pair(5001);
    eprintln!("gathering: {}", c.can_gather());
    assert_eq!(c.can_gather(), usrsctp_ffi::gather_available());
    let (a, b, p) = parts(1);
    let n = c.send_gather(3, 16, true, &[&a, &b, &p]).unwrap();
    assert_eq!(n, 2 + 18 + 60_000);
    let (got, info) = message(&s, T).unwrap();
    assert_eq!(got, [a, b, p].concat());
    assert_eq!((info.sid, info.ppid, info.unordered), (3, 16, true));
    // Empty parts and an ordered message.
    c.send_gather(1, 17, false, &[&[], b"abc", &[], b"de"])
        .unwrap();
    let (got, info) = message(&s, T).unwrap();
    assert_eq!(got, b"abcde");
    assert_eq!((info.sid, info.ppid, info.unordered), (1, 17, false));
}

#[test]
fn a_refused_gathered_send_queues_nothing() {
    if !library() {
        return;
    }
    let (c, s) = pair(5002);
    // The receiver reads nothing: its window, then the sender's buffer, fill.
    let mut sent = 0u32;
    let refused = loop {
        let (a, b, p) = parts(sent);
        match c.send_gather(2, 16, true, &[&a, &b, &p]) {
            Ok(_) => sent += 1,
            Err(e) if would_block(&e) => break sent,
            Err(e) => panic!("send {sent}: {e}"),
        }
        assert!(sent < 10_000, "the send buffer never filled");
    };
    eprintln!("{sent} messages accepted before a refusal");
    assert!(sent > 0);
    // Every accepted message arrives whole and in its own order of parts.
    for i in 0..sent {
        let (got, info) = message(&s, T).unwrap();
        let (a, b, p) = parts(i);
        assert_eq!(got.len(), 60_020, "message {i}");
        assert!(got == [a, b, p].concat(), "message {i} differs");
        assert_eq!((info.sid, info.ppid), (2, 16));
    }
    // Nothing of the refused one: no further data comes.
    match message(&s, Duration::from_millis(300)) {
        Err(Error::Timeout(_)) => {}
        other => panic!("after {sent} messages: {other:?}"),
    }
    // Sent again once there is room, it arrives whole.
    let (a, b, p) = parts(refused);
    let deadline = std::time::Instant::now() + T;
    loop {
        match c.send_gather(2, 16, true, &[&a, &b, &p]) {
            Ok(_) => break,
            Err(e) if would_block(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("resend: {e}"),
        }
    }
    let (got, _) = message(&s, T).unwrap();
    assert!(got == [a, b, p].concat());
}
