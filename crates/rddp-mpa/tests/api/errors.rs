//! Every error path against a raw TcpStream peer speaking crafted bytes: what our
//! endpoint reports, what arrives on the raw socket (Reply R=1, Terminate code, or
//! nothing), and that the connection closes.

use crate::common::*;
use rddp_mpa::fpdu::ULPDU_LENGTH_CODE;
use rddp_mpa::{MpaError, MpaListener, MpaOptions, listen};
use rddp_proto::mem::MemoryTable;
use rddp_proto::rdmap::{Completion, WcStatus};
use rddp_wire::mpa::frame::{KEY_REP, KEY_REQ};
use rddp_wire::{DdpHeader, FpduEncoder, MpaFrame, Opcode, TaggedHeader, TerminateCode};
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

fn responder(opts: MpaOptions) -> (std::net::SocketAddr, JoinHandle<Result<MpaError, String>>) {
    let l: MpaListener = listen("127.0.0.1:0", opts).unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || match l.accept() {
        Err(e) => Ok(e),
        Ok(mut c) => {
            let mem = MemoryTable::new();
            match c.poll_timeout(&mem, Duration::from_secs(5)) {
                Err(e) => Ok(e),
                Ok(d) => Err(format!("unexpected completion {d:?}")),
            }
        }
    });
    (addr, h)
}

fn fast() -> MpaOptions {
    MpaOptions {
        request_timeout: Duration::from_millis(300),
        reply_timeout: Duration::from_millis(300),
        ..MpaOptions::rev1()
    }
}

/// A raw initiator that completes a Rev 1 handshake (C as given, no Markers).
fn raw_handshake(addr: std::net::SocketAddr, crc: bool) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    write_all(
        &mut s,
        &frame(&KEY_REQ, if crc { 0x40 } else { 0 }, 1, 0, &[]),
    );
    let mut rep = [0u8; 20];
    s.read_exact(&mut rep).unwrap();
    let f = MpaFrame::parse(&rep).unwrap();
    assert!(!f.flags.reject());
    s
}

fn terminate_code(wire: &[u8], crc: bool) -> TerminateCode {
    last_terminate(wire, crc).code
}

#[test]
fn wrong_key_is_closed_without_reply() {
    let (addr, h) = responder(fast());
    let mut s = TcpStream::connect(addr).unwrap();
    write_all(&mut s, &frame(b"MPA ID Rex Frame", 0x40, 1, 0, &[]));
    assert_eq!(read_to_end(&mut s), Vec::<u8>::new());
    let e = h.join().unwrap().unwrap();
    assert!(
        matches!(e, MpaError::Refused(ref b) if matches!(**b, MpaError::BadKey)),
        "{e}"
    );
}

#[test]
fn pd_length_513_gets_reject_reply() {
    let (addr, h) = responder(fast());
    let mut s = TcpStream::connect(addr).unwrap();
    write_all(&mut s, &frame(&KEY_REQ, 0x40, 1, 513, &[0; 513]));
    let got = read_to_end(&mut s);
    let rep = MpaFrame::parse(&got).unwrap();
    assert!(rep.flags.reject());
    assert_eq!((rep.rev, &rep.private_data[..]), (1, &[][..]));
    let e = h.join().unwrap().unwrap();
    assert!(
        matches!(e, MpaError::Refused(ref b) if matches!(**b, MpaError::PrivateDataTooLong(513))),
        "{e}"
    );
}

#[test]
fn rev3_gets_reject_reply_with_our_rev() {
    let (addr, h) = responder(fast());
    let mut s = TcpStream::connect(addr).unwrap();
    write_all(&mut s, &frame(&KEY_REQ, 0x40, 3, 0, &[]));
    let got = read_to_end(&mut s);
    assert_eq!(got, [&KEY_REP[..], &[0x60, 2, 0, 0]].concat());
    let e = h.join().unwrap().unwrap();
    assert!(
        matches!(e, MpaError::Refused(ref b) if matches!(**b, MpaError::UnsupportedRev(3))),
        "{e}"
    );
}

#[test]
fn silent_initiator_times_out() {
    let (addr, h) = responder(fast());
    let mut s = TcpStream::connect(addr).unwrap();
    let t = Instant::now();
    assert_eq!(read_to_end(&mut s), Vec::<u8>::new());
    let e = h.join().unwrap().unwrap();
    assert!(matches!(e, MpaError::Timeout), "{e}");
    assert!(t.elapsed() >= Duration::from_millis(250) && t.elapsed() < Duration::from_secs(4));
}

#[test]
fn silent_responder_times_out() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut req = [0u8; 20];
        s.read_exact(&mut req).unwrap();
        read_to_end(&mut s)
    });
    let t = Instant::now();
    let e = connect(addr, fast()).unwrap_err();
    assert!(matches!(e, MpaError::Timeout), "{e}");
    assert!(t.elapsed() >= Duration::from_millis(250));
    assert_eq!(h.join().unwrap(), Vec::<u8>::new(), "the initiator closes");
}

#[test]
fn rtr_in_p2p_must_wait_and_silent_rtr_times_out() {
    // Rev 2 P2P responder; the raw initiator completes the handshake but never
    // sends its RTR: the responder's wait fails with Timeout within its
    // request timeout and the socket closes.
    let (addr, h) = responder(MpaOptions {
        request_timeout: Duration::from_millis(300),
        ..MpaOptions::default()
    });
    let mut s = TcpStream::connect(addr).unwrap();
    write_all(&mut s, &frame(&KEY_REQ, 0x50, 2, 4, &[0x80, 4, 0xC0, 4]));
    let got = read_to_end(&mut s);
    let rep = MpaFrame::parse(&got).unwrap();
    assert!(rep.enhanced.unwrap().rtr_write);
    assert!(matches!(h.join().unwrap().unwrap(), MpaError::Timeout));
}

#[test]
fn reply_with_wrong_key_or_reject() {
    for (reply, want) in [
        (frame(b"MPA ID Req Frame", 0x40, 1, 0, &[]), "key"),
        (frame(&KEY_REP, 0x60, 1, 2, b"no"), "rejected"),
        (frame(&KEY_REP, 0x40, 7, 0, &[]), "rev"),
    ] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = [0u8; 20];
            s.read_exact(&mut req).unwrap();
            write_all(&mut s, &reply);
            read_to_end(&mut s)
        });
        let e = connect(addr, fast()).unwrap_err();
        match want {
            "key" => assert!(matches!(e, MpaError::BadKey), "{e}"),
            "rejected" => assert!(
                matches!(e, MpaError::Rejected { ref private_data } if private_data == b"no"),
                "{e}"
            ),
            _ => assert!(matches!(e, MpaError::UnsupportedRev(7)), "{e}"),
        }
        assert_eq!(h.join().unwrap(), Vec::<u8>::new());
    }
}

/// A raw responder that reads our Rev 2 Request (24 octets: no private data),
/// answers `reply` and returns all we sent after it, up to our close.
fn raw_replier(reply: Vec<u8>) -> (std::net::SocketAddr, JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut req = [0u8; 24];
        s.read_exact(&mut req).unwrap();
        write_all(&mut s, &reply);
        read_to_end(&mut s)
    });
    (addr, h)
}

#[test]
fn reply_choosing_an_unoffered_rtr_gets_terminate_0x07() {
    // A=1 with B (zero-length Send), which we never offer.
    let (addr, h) = raw_replier(frame(&KEY_REP, 0x50, 2, 4, &[0xC0, 4, 0x00, 4]));
    let e = connect(
        addr,
        MpaOptions {
            reply_timeout: Duration::from_secs(2),
            ..MpaOptions::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        e.terminate_code(),
        Some(TerminateCode::MPA_NO_MATCHING_RTR),
        "{e}"
    );
    let wire = h.join().unwrap();
    assert_eq!(
        terminate_code(&wire, true),
        TerminateCode::MPA_NO_MATCHING_RTR
    );
}

/// Raw initiator sends `bad` after a clean Rev 1 handshake; returns the Terminate
/// code it receives (before the close) and our responder's error.
fn fpdu_error(opts: MpaOptions, crc: bool, bad: &[u8]) -> (TerminateCode, MpaError) {
    let (addr, h) = responder(opts);
    let mut s = raw_handshake(addr, crc);
    write_all(&mut s, bad);
    let wire = read_to_end(&mut s);
    let code = terminate_code(&wire, crc);
    (code, h.join().unwrap().unwrap())
}

fn zero_write() -> Vec<u8> {
    TaggedHeader::new(true, ctrl(Opcode::RDMA_WRITE), 1, 0)
        .to_bytes()
        .to_vec()
}

#[test]
fn bad_crc_gets_terminate_0x02() {
    let mut enc = FpduEncoder::new(true, false);
    let mut w = Vec::new();
    enc.encode(&zero_write(), &mut w).unwrap();
    let n = w.len();
    w[n - 1] ^= 0x80;
    let (code, e) = fpdu_error(fast(), true, &w);
    assert_eq!(code, TerminateCode::MPA_CRC_ERROR);
    assert_eq!(
        e.terminate_code(),
        Some(TerminateCode::MPA_CRC_ERROR),
        "{e}"
    );
}

#[test]
fn marker_mismatch_gets_terminate_0x03() {
    // Our responder asks for Markers; the first FPDU starts with a Marker whose
    // FPDUPTR must be 0. Send 4 instead (CRC recomputed, so only the Marker is wrong).
    let mut enc = FpduEncoder::new(true, true);
    let mut w = Vec::new();
    enc.encode(&zero_write(), &mut w).unwrap();
    assert_eq!(&w[..4], &[0, 0, 0, 0]);
    w[3] = 4;
    let n = w.len();
    let crc = rddp_wire::crc32c(&w[..n - 4]);
    w[n - 4..].copy_from_slice(&crc.to_le_bytes());
    let (code, e) = fpdu_error(
        MpaOptions {
            markers: true,
            ..fast()
        },
        true,
        &w,
    );
    assert_eq!(code, TerminateCode::MPA_MARKER_MISMATCH);
    assert_eq!(
        e.terminate_code(),
        Some(TerminateCode::MPA_MARKER_MISMATCH),
        "{e}"
    );
}

#[test]
fn too_short_ulpdu_length_gets_layer2_terminate() {
    // ULPDU_Length 13: shorter than any DDP header (the siw underflow case).
    let (code, e) = fpdu_error(
        fast(),
        false,
        &[
            0, 13, 0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
    );
    assert_eq!(code, ULPDU_LENGTH_CODE);
    assert_eq!(code.layer, 2);
    assert!(matches!(e, MpaError::LocalTerminate { .. }), "{e}");
}

#[test]
fn too_long_ulpdu_length_gets_layer2_terminate() {
    // EMSS 1448 -> MULPDU 1442; announce 1443 (only the length is sent).
    let o = MpaOptions {
        emss: Some(1448),
        ..fast()
    };
    let (code, e) = fpdu_error(o, true, &1443u16.to_be_bytes());
    assert_eq!(code, ULPDU_LENGTH_CODE);
    assert_eq!(e.terminate_code(), Some(ULPDU_LENGTH_CODE), "{e}");
}

#[test]
fn ddp_error_gets_terminate_with_header() {
    // A 5-octet RDMA Write to an STag that does not exist: DDP 1/1/0x00, M=D=1.
    let mut seg = TaggedHeader::new(true, ctrl(Opcode::RDMA_WRITE), 0xDEAD_0001, 0x40)
        .to_bytes()
        .to_vec();
    seg.extend_from_slice(b"hello");
    let mut enc = FpduEncoder::new(true, false);
    let mut w = Vec::new();
    enc.encode(&seg, &mut w).unwrap();
    let (addr, h) = responder(fast());
    let mut s = raw_handshake(addr, true);
    write_all(&mut s, &w);
    let t = last_terminate(&read_to_end(&mut s), true);
    assert_eq!(t.code, TerminateCode::DDP_INVALID_STAG);
    assert!(t.m && t.d() && !t.r);
    assert_eq!(t.seg_len, Some(19));
    assert_eq!(t.ddp_hdr, Some(DdpHeader::parse(&seg).unwrap()));
    let e = h.join().unwrap().unwrap();
    assert_eq!(
        e.terminate_code(),
        Some(TerminateCode::DDP_INVALID_STAG),
        "{e}"
    );
}

#[test]
fn peer_terminate_is_reported_and_not_answered() {
    let term = rddp_wire::Terminate::bare(TerminateCode::RDMAP_CATASTROPHIC_GLOBAL);
    let mut enc = FpduEncoder::new(true, false);
    let mut w = Vec::new();
    enc.encode(&term.to_segment().unwrap(), &mut w).unwrap();
    let (addr, h) = responder(fast());
    let mut s = raw_handshake(addr, true);
    write_all(&mut s, &w);
    // Nothing comes back, not even a Terminate; the connection closes.
    assert_eq!(read_to_end(&mut s), Vec::<u8>::new());
    let e = h.join().unwrap().unwrap();
    assert!(
        matches!(e, MpaError::RemoteTerminate(ref t) if t.code == TerminateCode::RDMAP_CATASTROPHIC_GLOBAL),
        "{e}"
    );
}

#[test]
fn responder_sends_nothing_before_the_first_fpdu() {
    let l = listen("127.0.0.1:0", fast()).unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        let mut c = l.accept().unwrap();
        let mem = MemoryTable::new();
        // Posted at once, but held until the initiator's first FPDU arrives;
        // it completes once written.
        c.post(&mem, send(1, b"early".to_vec())).unwrap();
        let d = c.poll_timeout(&mem, Duration::from_secs(5)).unwrap();
        assert!(
            matches!(
                d,
                Some(Completion {
                    wr_id: 1,
                    status: WcStatus::Success,
                    ..
                })
            ),
            "{d:?}"
        );
    });
    let mut s = raw_handshake(addr, true);
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut b = [0u8; 64];
    assert!(
        s.read(&mut b).is_err(),
        "responder sent before our first FPDU"
    );
    let mut enc = FpduEncoder::new(true, false);
    let mut w = Vec::new();
    enc.encode(&zero_write(), &mut w).unwrap();
    write_all(&mut s, &w);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = vec![0u8; 2 + 18 + 5 + 3 + 4];
    s.read_exact(&mut got).unwrap();
    let mut d = rddp_wire::FpduDecoder::new(true, false, 1000);
    let mut out = Vec::new();
    d.feed(&got, &mut out).unwrap();
    let DdpHeader::Untagged(hd) = DdpHeader::parse(&out[0]).unwrap() else {
        panic!()
    };
    assert_eq!((hd.qn, hd.msn, &out[0][18..]), (0, 1, &b"early"[..]));
    h.join().unwrap();
}

#[test]
fn local_private_data_limits() {
    let e = connect(
        "127.0.0.1:9",
        MpaOptions {
            private_data: vec![0; 513],
            ..MpaOptions::rev1()
        },
    )
    .unwrap_err();
    assert!(matches!(e, MpaError::PrivateDataTooLong(513)), "{e}");
    let e = connect(
        "127.0.0.1:9",
        MpaOptions {
            private_data: vec![0; 509],
            ..MpaOptions::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, MpaError::PrivateDataTooLong(509)), "{e}");
}

/// A Write to a bad STag: refused from its header, nothing placed; the
/// refusal waits for the FPDU's CRC (RFC 5041 §7.1: the LLP's check first),
/// the payload read and dropped, and then its own Terminate goes out.
#[test]
fn direct_placement_refuses_from_the_header_after_the_crc() {
    let l = listen("127.0.0.1:0", fast()).unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        let mut c = l.accept().unwrap();
        let mem = MemoryTable::new();
        c.poll_timeout(&mem, Duration::from_secs(5)).unwrap_err()
    });
    let mut s = raw_handshake(addr, true);
    let mut seg = TaggedHeader::new(true, ctrl(Opcode::RDMA_WRITE), 0xBAD0_0001, 0)
        .to_bytes()
        .to_vec();
    seg.extend_from_slice(&[0x77; 4000]);
    let mut w = Vec::new();
    FpduEncoder::new(true, false).encode(&seg, &mut w).unwrap();
    write_all(&mut s, &w);
    let t = last_terminate(&read_to_end(&mut s), true);
    assert_eq!(t.code, TerminateCode::DDP_INVALID_STAG);
    assert_eq!(t.seg_len, Some(4014));
    assert_eq!(
        h.join().unwrap().terminate_code(),
        Some(TerminateCode::DDP_INVALID_STAG)
    );
}

#[test]
fn ulp_decides_on_the_request_private_data() {
    let l = listen("127.0.0.1:0", fast()).unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        // First Request: refused with a reason; second: accepted, echoing it.
        let e = l
            .accept_with(|r| Err([b"no: ".as_slice(), &r.private_data].concat()))
            .unwrap_err();
        assert!(matches!(e, MpaError::Refused(_)), "{e}");
        let c = l
            .accept_with(|r| Ok([b"ok: ".as_slice(), &r.private_data].concat()))
            .unwrap();
        c.peer_private_data().to_vec()
    });
    let o = |pd: &[u8]| MpaOptions {
        private_data: pd.to_vec(),
        ..fast()
    };
    let e = connect(addr, o(b"first")).unwrap_err();
    assert!(
        matches!(e, MpaError::Rejected { ref private_data } if private_data == b"no: first"),
        "{e}"
    );
    let c = connect(addr, o(b"second")).unwrap();
    assert_eq!(c.peer_private_data(), b"ok: second");
    assert_eq!(h.join().unwrap(), b"second");
}

#[test]
fn strict_ird_gets_terminate_0x06() {
    // IRD 2 < the initiator's ORD 8; Write RTR chosen.
    let (addr, h) = raw_replier(frame(&KEY_REP, 0x50, 2, 4, &[0x80, 2, 0x80, 2]));
    let o = MpaOptions {
        strict_ird: true,
        ord: 8,
        reply_timeout: Duration::from_secs(2),
        ..MpaOptions::default()
    };
    let e = connect(addr, o).unwrap_err();
    assert_eq!(
        e.terminate_code(),
        Some(TerminateCode::MPA_INSUFFICIENT_IRD),
        "{e}"
    );
    assert_eq!(
        terminate_code(&h.join().unwrap(), true),
        TerminateCode::MPA_INSUFFICIENT_IRD
    );
}

/// Our connect to a raw responder answering `reply`: returns our connect error
/// and every FPDU we then sent.
fn refused_reply(opts: MpaOptions, reply: Vec<u8>) -> (MpaError, Vec<Vec<u8>>) {
    let (addr, h) = raw_replier(reply);
    let e = connect(addr, opts).map(|_| ()).unwrap_err();
    let wire = h.join().unwrap();
    let mut fpdus = Vec::new();
    rddp_wire::FpduDecoder::new(true, false, 65535)
        .feed(&wire, &mut fpdus)
        .unwrap();
    (e, fpdus)
}

/// The refusal names `code`, and a Terminate with `code` is the only FPDU the
/// peer sent (no RTR) before it closed.
fn assert_only_terminate(e: &MpaError, fpdus: &[Vec<u8>], code: TerminateCode) {
    assert_eq!(e.terminate_code(), Some(code), "{e}");
    assert_eq!(fpdus.len(), 1, "only the Terminate, no RTR: {fpdus:?}");
    assert_eq!(
        rddp_wire::Terminate::parse(&fpdus[0][18..]).unwrap().code,
        code
    );
}

/// RFC 6581: we offered no peer-to-peer mode (A=0, no RTR type), the Reply says
/// A=1 with the Write RTR: Terminate 2/0/0x07 is the only FPDU (no RTR), then close.
#[test]
fn reply_with_p2p_we_did_not_offer_gets_terminate_0x07() {
    let o = MpaOptions {
        p2p: false,
        reply_timeout: Duration::from_secs(2),
        ..MpaOptions::default()
    };
    let (e, fpdus) = refused_reply(o, frame(&KEY_REP, 0x50, 2, 4, &[0x80, 4, 0x80, 4]));
    assert_only_terminate(&e, &fpdus, TerminateCode::MPA_NO_MATCHING_RTR);
}

/// RFC 6581: a Reply picking the Read RTR with IRD 0 leaves no slot for it:
/// Terminate 2/0/0x06 (insufficient IRD) as the only FPDU, then close, instead of
/// a connection whose ORD is 0 and whose RTR can never be sent.
#[test]
fn read_rtr_reply_with_ird_0_gets_terminate_0x06() {
    let o = MpaOptions {
        reply_timeout: Duration::from_secs(2),
        ..MpaOptions::default()
    };
    // A=1, IRD 0; D (Read RTR), ORD 1.
    let (e, fpdus) = refused_reply(o, frame(&KEY_REP, 0x50, 2, 4, &[0x80, 0, 0x40, 1]));
    assert_only_terminate(&e, &fpdus, TerminateCode::MPA_INSUFFICIENT_IRD);
}

/// A listener whose IRD or ORD no Reply could carry (above the 14-bit field) is
/// refused when it is made, not when the first peer comes.
#[test]
fn listen_refuses_ird_ord_above_14_bits() {
    for (ird, ord) in [(0x4000, 1), (1, 0x4000)] {
        let o = MpaOptions {
            ird,
            ord,
            ..MpaOptions::default()
        };
        let e = listen("127.0.0.1:0", o).unwrap_err();
        assert!(matches!(e, MpaError::Options(_)), "{e}");
    }
}
