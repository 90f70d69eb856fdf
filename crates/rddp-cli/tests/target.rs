//! Runs the real `rddp target` as a process and drives it over loopback MPA/TCP:
//! with the verbs API as a well-behaved initiator, and with a raw TCP peer that
//! speaks MPA by hand for hostile cases.

mod common;

use common::raw_peer::{RawPeer, handshake, untagged};
use common::{Target, run};
use rddp::{
    Access, CompletionQueue, Device, ProtectionDomain, QueuePair, QueuePairBuilder, Quota,
    RemoteBuf, SendFlags, WcOpcode, WcStatus, WorkCompletion,
};
use rddp_mpa::MpaOptions;
use rddp_wire::rdmap::qn;
use rddp_wire::{Opcode, ReadRequestHeader, Terminate, TerminateCode};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;

/// A verbs-API initiator with eight 4 KiB receives posted before connecting.
struct Client {
    qp: QueuePair,
    cq: CompletionQueue,
    pd: ProtectionDomain,
    _dev: Device,
}

impl Client {
    fn connect(addr: SocketAddr, opts: MpaOptions) -> Self {
        let dev = Device::new();
        let pd = dev
            .consumer("client", Quota::default())
            .unwrap()
            .alloc_pd()
            .unwrap();
        let cq = CompletionQueue::new(64);
        let mut p = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        for i in 0..8 {
            p.post_recv(i, 4096).unwrap();
        }
        let qp = p.connect_mpa(addr, opts).unwrap();
        Self {
            qp,
            cq,
            pd,
            _dev: dev,
        }
    }

    /// The next completion of `op` (others are checked for success and skipped).
    fn next(&self, op: WcOpcode) -> WorkCompletion {
        loop {
            let wc = self.cq.wait(1, Duration::from_secs(10));
            let wc = wc.into_iter().next().expect("no completion within 10 s");
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            if wc.opcode == op {
                return wc;
            }
        }
    }

    /// The next message received: (MSN, payload); the buffer is reposted.
    fn recv(&self) -> (u32, Vec<u8>) {
        let wc = self.next(WcOpcode::Recv);
        let (q, msn) = wc.qn_msn.unwrap();
        assert_eq!(q, 0);
        let data = wc.buffer.as_ref().unwrap()[..wc.byte_len as usize].to_vec();
        self.qp.post_recv(wc.wr_id, 4096).unwrap();
        (msn, data)
    }

    fn advert(&self) -> RemoteBuf {
        let (msn, data) = self.recv();
        assert_eq!((msn, data.len()), (1, 16), "the advertisement is MSN 1");
        RemoteBuf::from_bytes(&data).unwrap()
    }

    fn send(&self, data: &[u8]) {
        self.qp
            .post_send_inline(0, data, SendFlags::default())
            .unwrap();
    }

    /// Write `data` at `off` of `remote`, read it back, compare.
    fn write_read(&self, remote: RemoteBuf, off: u64, data: &[u8]) {
        let n = data.len() as u64;
        let src = self.pd.register(data.to_vec(), Access::NONE).unwrap();
        let sink = self
            .pd
            .register(vec![0; data.len()], Access::REMOTE_WRITE)
            .unwrap();
        self.qp.post_write(1, &src, 0, n, remote, off).unwrap();
        self.next(WcOpcode::RdmaWrite);
        self.qp
            .post_read(2, &sink, 0, n as u32, remote, off)
            .unwrap();
        self.next(WcOpcode::RdmaRead);
        assert!(sink.read(0, n).unwrap() == data, "read back differs");
    }
}

fn opts(rev: u8, crc: bool, markers: bool) -> MpaOptions {
    MpaOptions {
        rev,
        crc,
        markers,
        ..MpaOptions::default()
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn int(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} is not a JSON integer in {v}"))
}

/// The connected event of `conn`, with every field of the contract and its type.
fn connected(t: &mut Target, conn: u64) -> Value {
    let v = t.expect("connected", json!({ "conn": conn }));
    let peer: SocketAddr = v["peer"].as_str().unwrap().parse().unwrap();
    assert_eq!(peer.ip().to_string(), "127.0.0.1");
    assert_eq!(v["transport"], "mpa");
    for k in ["crc", "markers_rx", "markers_tx"] {
        assert!(v[k].is_boolean(), "{k} not boolean: {v}");
    }
    for k in ["mpa_rev", "ird", "ord"] {
        int(&v, k);
    }
    v
}

fn check_terminate(t: &mut Target, conn: u64, dir: &str, code: TerminateCode) {
    let (l, e, c) = (code.layer, code.etype, code.code);
    let want = json!({ "conn": conn, "direction": dir, "layer": l, "etype": e, "code": c });
    t.expect("terminate", want);
    t.expect("closed", json!({ "conn": conn }));
}

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

/// A raw connection that has spoken first and read its advertisement.
fn raw(t: &Target) -> (RawPeer, (u32, u64, u32)) {
    let mut p = RawPeer::connect(t.addr, true);
    p.send(1, b"hi", true);
    let ad = p.advert();
    assert_eq!(p.next_untagged(), (0, 2, b"hi".to_vec()));
    (p, ad)
}

#[test]
fn placement_errors_terminate_one_connection_only() {
    let mut t = Target::start(&["--buffer-size", "4096"]);
    let (mut a, (a_stag, a_to, a_len)) = raw(&t);
    let good = Client::connect(t.addr, opts(2, true, false));
    let good_buf = good.advert();
    let (mut c, _) = raw(&t);
    assert_eq!(a_len, 4096);
    // C uses A's STag: valid, but not on C's connection.
    c.write(a_stag, a_to, b"not yours");
    let term = c.terminate().expect("no Terminate for a foreign STag");
    assert_eq!(term.code, TerminateCode::DDP_STAG_NOT_ASSOCIATED);
    check_terminate(&mut t, 3, "sent", TerminateCode::DDP_STAG_NOT_ASSOCIATED);
    // A writes across the end of its own buffer.
    a.write(a_stag, a_to + 4092, b"12345678");
    let term: Terminate = a.terminate().expect("no Terminate for base/bounds");
    assert_eq!(term.code, TerminateCode::DDP_BASE_BOUNDS);
    assert!(
        term.ddp_hdr.is_some(),
        "the offending DDP header is carried"
    );
    check_terminate(&mut t, 1, "sent", TerminateCode::DDP_BASE_BOUNDS);
    // A TO whose TO + length wraps 2^64.
    let (mut d, (d_stag, _, _)) = raw(&t);
    d.write(d_stag, u64::MAX - 3, b"12345678");
    let term = d.terminate().expect("no Terminate for a wrapping TO");
    assert_eq!(term.code, TerminateCode::DDP_TO_WRAP);
    check_terminate(&mut t, 4, "sent", TerminateCode::DDP_TO_WRAP);
    // The well-behaved connection carries on.
    good.write_read(good_buf, 0, &pattern(4096));
    good.send(b"still here");
    assert_eq!(good.recv(), (2, b"still here".to_vec()));
}

#[test]
fn received_terminate_is_reported_not_answered() {
    let mut t = Target::start(&[]);
    let (mut p, _) = raw(&t);
    let code = TerminateCode::RDMAP_CATASTROPHIC_STREAM;
    p.send_segment(&Terminate::bare(code).to_segment().unwrap());
    check_terminate(&mut t, 1, "received", code);
    assert!(p.terminate().is_none(), "a Terminate was answered");
    t.drain_for(Duration::from_millis(200));
    let sent = t.seen.iter().any(|v| v["direction"] == "sent");
    assert!(!sent, "{:?}", t.seen);
}

#[test]
fn shared_rq_soft_limit_event() {
    let mut t = Target::start(&["--rq", "shared", "--recv-count", "8", "--soft-limit", "2"]);
    let (mut p, _) = raw(&t);
    // Three first segments (L=0) that never finish: three buffers held.
    for msn in 2..5 {
        p.send(msn, b"part", false);
    }
    let v = t.expect("async", json!({ "conn": 1, "kind": "srq_limit_reached" }));
    int(&v, "conn");
    // Nothing is wrong with that: once the messages finish they are delivered
    // in order, and echoed.
    for msn in 2..5 {
        p.send_at(msn, 4, b"!", true);
    }
    p.send(5, b"whole", true);
    for msn in 2..5 {
        t.expect("completion", json!({ "conn": 1, "msn": msn, "bytes": 5 }));
        assert_eq!(p.next_untagged(), (0, msn + 1, b"part!".to_vec()));
    }
    t.expect("completion", json!({ "conn": 1, "msn": 5, "bytes": 5 }));
}

#[test]
fn pool_send_beyond_credits_is_terminated() {
    let mut t = Target::start(&["--rq", "pool", "--recv-count", "4", "--credits", "2"]);
    let mut p = RawPeer::connect(t.addr, true);
    p.send(1, b"part", false);
    p.send(2, b"part", false);
    p.send(3, b"part", false);
    let term = p.terminate().expect("no Terminate beyond the credits");
    assert_eq!(term.code, TerminateCode::DDP_INVALID_MSN_RANGE);
    check_terminate(&mut t, 1, "sent", TerminateCode::DDP_INVALID_MSN_RANGE);
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
    one_line_error(&["target", "--listen", "256.0.0.1:1"], "256.0.0.1:1");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    one_line_error(&["target", "--listen", &addr], &addr);
    one_line_error(&["target", "--listen", "nonsense"], "nonsense");
    one_line_error(
        &["target", "--listen", "127.0.0.1:0", "--transport", "sctp"],
        "not wired",
    );
}

#[test]
fn a_silent_connection_does_not_hold_up_others() {
    let mut t = Target::start(&[]);
    // TCP connected, no MPA Request: the target waits for it (5 s) on its own time.
    let _silent = std::net::TcpStream::connect(t.addr).unwrap();
    std::thread::sleep(Duration::from_millis(100));
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
fn read_request_outside_the_buffer_is_terminated_with_its_header() {
    let mut t = Target::start(&["--buffer-size", "4096"]);
    let (mut p, (stag, to, _)) = raw(&t);
    let rr = ReadRequestHeader {
        sink_stag: 0x99,
        sink_to: 0,
        size: 16,
        src_stag: stag,
        src_to: to + 4090,
    };
    p.send_segment(&untagged(
        Opcode::READ_REQUEST,
        qn::READ_REQUEST,
        1,
        true,
        &rr.to_bytes(),
    ));
    let term = p
        .terminate()
        .expect("no Terminate for a Read Request out of bounds");
    assert_eq!(term.code, TerminateCode::RDMAP_BASE_BOUNDS);
    assert_eq!(
        term.rdmap_hdr,
        Some(rr),
        "the Read Request header is carried"
    );
    check_terminate(&mut t, 1, "sent", TerminateCode::RDMAP_BASE_BOUNDS);
}

#[test]
fn ordered_send_without_a_buffer_is_terminated() {
    let mut t = Target::start(&["--recv-count", "2"]);
    let mut p = RawPeer::connect(t.addr, true);
    p.send(1, b"part", false);
    p.send(2, b"part", false);
    p.send(3, b"part", false);
    let term = p
        .terminate()
        .expect("no Terminate for a Send beyond the buffers");
    assert_eq!(term.code, TerminateCode::DDP_INVALID_MSN_NO_BUFFER);
    check_terminate(&mut t, 1, "sent", TerminateCode::DDP_INVALID_MSN_NO_BUFFER);
}

/// Ignored: a shared-pool buffer held by a connection that dies (a message never
/// finished) is dropped with the queue, not returned (rddp-proto's UntaggedQueue
/// drop), so the pool shrinks for good.
#[test]
#[ignore = "rddp-proto drops a dead stream's held pool buffers"]
fn shared_buffers_held_by_a_dead_connection_are_not_lost() {
    let mut t = Target::start(&["--rq", "shared", "--recv-count", "4", "--soft-limit", "2"]);
    let (mut a, _) = raw(&t);
    for msn in 2..5 {
        a.send(msn, b"part", false);
    }
    t.expect("async", json!({ "conn": 1, "kind": "srq_limit_reached" }));
    drop(a);
    t.expect("closed", json!({ "conn": 1 }));
    // All four buffers at once for the next connection.
    let (mut b, _) = raw(&t);
    for msn in 2..6 {
        b.send(msn, b"part", false);
    }
    for msn in 2..6 {
        b.send_at(msn, 4, b"!", true);
        assert_eq!(b.next_untagged(), (0, msn + 1, b"part!".to_vec()));
    }
}

#[test]
fn shared_buffers_held_by_a_dead_connection_come_back() {
    let mut t = Target::start(&["--rq", "shared", "--recv-count", "4", "--soft-limit", "2"]);
    let (mut a, _) = raw(&t);
    for msn in 2..5 {
        a.send(msn, b"part", false);
    }
    t.expect("async", json!({ "conn": 1, "kind": "srq_limit_reached" }));
    drop(a);
    t.expect("closed", json!({ "conn": 1 }));
    // All four buffers serve the next connection again, over and over.
    let (mut b, _) = raw(&t);
    for msn in 2..12 {
        b.send(msn, b"whole", true);
        assert_eq!(b.next_untagged(), (0, msn + 1, b"whole".to_vec()));
    }
}
