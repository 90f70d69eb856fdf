//! Runs the real `rddp target` as a process and drives it over loopback MPA/TCP
//! as a well-behaved initiator (the verbs API) and a raw MPA peer: connection
//! setup and its event, the advertisement, Write and Read back, echo, errors.

use crate::common;

use common::client::{Client, opts, pattern};
use common::raw_peer::{RawPeer, handshake, untagged};
use common::{Target, check_terminate, connected, int, raw, run};
use rddp_wire::rdmap::qn;
use rddp_wire::{Opcode, TerminateCode};
use serde_json::json;
use std::time::Duration;

#[test]
fn verbs_client_rev2_advert_write_read_and_echo() {
    let mut t = Target::start(&["--buffer-size", "65536"]);
    let c = Client::connect(t.addr, opts(2, true, false));
    let v = connected(&mut t, 1);
    assert_eq!(int(&v, "mpa_rev"), 2);
    assert_eq!(v["crc"], true);
    assert_eq!(
        (v["markers_rx"].clone(), v["markers_tx"].clone()),
        (json!(false), json!(false))
    );
    assert!(int(&v, "ird") >= 1 && int(&v, "ord") >= 1, "{v}");

    let remote = c.advert();
    assert_eq!(remote.len, 65536);
    c.write_read(remote, 0, &pattern(65536));
    c.write_read(remote, 65536 - 10, b"last ten!!");

    for (i, msg) in [&b"hello"[..], b"", &pattern(4096)].iter().enumerate() {
        c.send(msg);
        let (msn, echo) = c.recv();
        assert_eq!(msn, i as u32 + 2);
        assert!(echo == *msg, "echo differs");
        let want = json!({ "conn": 1, "op": "recv", "bytes": msg.len(), "qn": 0, "msn": i + 1 });
        let ev = t.expect("completion", want);
        for k in ["conn", "bytes", "qn", "msn"] {
            int(&ev, k);
        }
    }
}

#[test]
fn rev1_without_crc_and_with_markers() {
    let mut t = Target::start(&["--buffer-size", "4096"]);
    // Rev 1, C=0 under --crc optional: no CRC. Rev 1 has no RTR: we speak first.
    let c = Client::connect(t.addr, opts(1, false, false));
    c.send(b"");
    let v = connected(&mut t, 1);
    assert_eq!((int(&v, "mpa_rev"), v["crc"].clone()), (1, json!(false)));
    let remote = c.advert();
    assert_eq!(remote.len, 4096);
    assert_eq!(c.recv(), (2, Vec::new()));
    c.write_read(remote, 100, b"no crc here");
    // Rev 2 with M=1: the target puts Markers in what it sends us.
    let c2 = Client::connect(t.addr, opts(2, true, true));
    let v = connected(&mut t, 2);
    assert_eq!(
        (v["markers_tx"].clone(), v["markers_rx"].clone()),
        (json!(true), json!(false))
    );
    let remote2 = c2.advert();
    c2.write_read(remote2, 0, &pattern(4096));
    c2.send(b"marked");
    assert_eq!(c2.recv(), (2, b"marked".to_vec()));
    // Rev 2 offering only the Read RTR: the target serves that zero-length Read.
    let mut o = opts(2, true, false);
    o.rtr = rddp_mpa::RtrTypes {
        write: false,
        read: true,
    };
    let c3 = Client::connect(t.addr, o);
    let v = connected(&mut t, 3);
    assert!(int(&v, "ird") >= 1, "{v}");
    let remote3 = c3.advert();
    c3.write_read(remote3, 8, b"after a Read RTR");
}

#[test]
fn crc_required_and_a_bad_crc() {
    let mut t = Target::start(&["--crc", "required"]);
    let mut p = RawPeer::connect(t.addr, false);
    assert!(p.reply.flags.crc(), "--crc required answers C=0 with C=1");
    let v = connected(&mut t, 1);
    assert_eq!(v["crc"], true);
    // The very first FPDU is corrupt: the Terminate still goes out.
    let mut fpdu = p.encode(&untagged(Opcode::SEND, qn::SEND, 1, true, b"x"));
    *fpdu.last_mut().unwrap() ^= 0xFF;
    p.send_raw(&fpdu);
    let term = p.terminate().expect("no Terminate on the wire");
    assert_eq!(term.code, TerminateCode::MPA_CRC_ERROR);
    check_terminate(&mut t, 1, "sent", TerminateCode::MPA_CRC_ERROR);
}

#[test]
fn crc_optional_answers_c0_with_c0() {
    let mut t = Target::start(&[]);
    let mut p = RawPeer::connect(t.addr, false);
    assert!(!p.reply.flags.crc());
    assert_eq!(p.reply.rev, 1);
    connected(&mut t, 1);
    p.send(1, b"", true);
    p.advert();
    assert_eq!(p.next_untagged(), (0, 2, Vec::new()), "zero-length echo");
    t.expect("completion", json!({ "conn": 1, "bytes": 0, "msn": 1 }));
}

#[test]
fn markers_refuse_rejects_m1() {
    let mut t = Target::start(&["--markers", "refuse"]);
    let (_, reply) = handshake(t.addr, true, true);
    assert!(reply.flags.reject(), "M=1 was not refused: {reply:?}");
    // M=0 is still welcome.
    let (_, ad) = raw(&t);
    assert_eq!(ad.2, 1_048_576);
    t.expect("connected", json!({ "markers_tx": false }));
}

fn one_line_error(args: &[&str], needle: &str) {
    let (code, stdout, stderr) = run(args);
    assert!(code.is_some_and(|c| c != 0), "{args:?}: exit {code:?}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("rddp: ") && stderr.contains(needle),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
}

#[test]
fn bad_listen_addresses_give_one_line() {
    one_line_error(&["target", "--listen", "256.0.0.1:1"], "e.g. 127.0.0.1:0");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    one_line_error(&["target", "--listen", &addr], "port is in use");
    one_line_error(&["target", "--listen", "nonsense"], "nonsense");
    one_line_error(
        &["target", "--listen", "192.0.2.1:0"],
        "not on this machine",
    );
    one_line_error(
        &["target", "--listen", "[::1]:0", "--transport", "sctp"],
        "needs an IPv4 address",
    );
}

#[test]
fn a_silent_connection_does_not_hold_up_others() {
    let mut t = Target::start(&[]);
    // TCP connected, no MPA Request: the target waits for it (5 s) on its own time.
    // Its handshake completed first, so it is ahead of the next one in the
    // listener's queue: an acceptor that blocked on it would hold the next up.
    let _silent = std::net::TcpStream::connect(t.addr).unwrap();
    let start = std::time::Instant::now();
    let (mut p, _) = raw(&t);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    p.send(2, b"ok", true);
    assert_eq!(p.next_untagged(), (0, 3, b"ok".to_vec()));
    t.expect("connected", json!({ "conn": 1 }));
}

#[test]
fn every_echo_arrives_when_the_peer_reads_late() {
    let t = Target::start(&["--recv-count", "1500"]);
    let mut p = RawPeer::connect(t.addr, true);
    // 6 MB of Sends (one per posted receive) before reading a single octet: the
    // echoes back up in TCP and on the target's send queue, and must all come
    // out, in order.
    let n = 1500u32;
    for msn in 1..=n {
        p.send(msn, &[msn as u8; 4000], true);
    }
    p.advert();
    for msn in 1..=n {
        let (q, m, data) = p.next_untagged();
        assert_eq!((q, m, data.len()), (0, msn + 1, 4000));
        assert!(data.iter().all(|b| *b == msn as u8), "echo {msn} differs");
    }
}
