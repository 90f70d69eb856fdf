//! RFC 6581 negotiation as a queue pair sees it: against raw MPA
//! peers on loopback, the IRD/ORD and RTR a queue pair ends up with, and that an
//! IRD of 0 on the other side never wedges it.

use crate::common;
use crate::common::raw_peer;

use common::{pd, wait};
use raw_peer::{RawPeer, read_frame};
use rddp::transport::mpa::Listener;
use rddp::{CompletionQueue, Device, Error, QueuePair, QueuePairBuilder, WcOpcode, WcStatus};
use rddp_mpa::MpaOptions;
use rddp_proto::mem::Access;
use rddp_wire::mpa::{EnhancedBlock, FrameKind, MpaFlags, MpaFrame};
use rddp_wire::{DdpHeader, Opcode, RdmapControl, TaggedHeader, TerminateCode};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

fn blk(p2p: bool, ird: u16, write: bool, read: bool, ord: u16) -> EnhancedBlock {
    EnhancedBlock {
        p2p,
        rtr_send: false,
        ird,
        rtr_write: write,
        rtr_read: read,
        ord,
    }
}

/// A raw responder: reads the Request, answers a Rev 2 Reply (C=1) with `reply`,
/// and hands back the socket (in FPDU mode) and the Request.
fn raw_responder(reply: EnhancedBlock) -> (std::net::SocketAddr, thread::JoinHandle<RawPeer>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        let (mut sock, _) = l.accept().unwrap();
        let req = read_frame(&mut sock);
        assert!(req.enhanced.is_some(), "a Rev 2 Request with IRD/ORD");
        let flags = MpaFlags::new(false, true, false, true);
        let rep = MpaFrame::new(FrameKind::Reply, flags, 2, Some(reply), Vec::new());
        std::io::Write::write_all(&mut sock, &rep.to_vec().unwrap()).unwrap();
        RawPeer::from_stream(sock, true)
    });
    (addr, h)
}

fn rdmap_opcode(seg: &[u8]) -> Opcode {
    let rsvd = match DdpHeader::parse(seg).unwrap() {
        DdpHeader::Tagged(h) => h.rsvd_ulp,
        DdpHeader::Untagged(h) => h.rsvd_ulp[0],
    };
    RdmapControl(rsvd).opcode()
}

/// The example: a responder that picks the Read RTR with IRD 0 gave us
/// ORD 0, and the RTR (a Read) and everything posted after it waited forever for
/// an ORD slot. Now setup refuses the Reply with Terminate 2/0/0x06 (insufficient
/// IRD, RFC 6581) and `connect_mpa` fails.
#[test]
fn read_rtr_reply_with_ird_0_fails_connect_mpa() {
    let (addr, peer) = raw_responder(blk(true, 0, false, true, 1));
    let dev = Device::new();
    let pd = pd(&dev, "c");
    let cq = CompletionQueue::new(64);
    let res = QueuePairBuilder::new(&pd, &cq, &cq)
        .build()
        .unwrap()
        .connect_mpa(addr, MpaOptions::default());
    let (term, closed) = peer.join().unwrap().terminate();
    if let Ok(qp) = &res {
        qp.post_send_inline(1, b"first", Default::default())
            .unwrap();
        let got = cq.wait(1, Duration::from_secs(2));
        panic!("connect_mpa succeeded; the first Send then gave {got:?}");
    }
    let e = res.err().unwrap();
    assert!(
        matches!(&e, Error::Mpa(m) if m.terminate_code() == Some(TerminateCode::MPA_INSUFFICIENT_IRD)),
        "{e}"
    );
    assert_eq!(
        term.map(|t| t.code),
        Some(TerminateCode::MPA_INSUFFICIENT_IRD)
    );
    assert!(closed, "the connection stays open");
}

/// RFC 6581: a queue pair that offered no peer-to-peer mode and gets a Reply
/// choosing it (A=1, Write RTR) sends Terminate 2/0/0x07 as its only FPDU, not the
/// zero-length Write RTR it never offered, and `connect_mpa` fails.
#[test]
fn reply_with_p2p_we_did_not_offer_fails_connect_mpa() {
    let (addr, peer) = raw_responder(blk(true, 4, true, false, 4));
    let dev = Device::new();
    let pd = pd(&dev, "c");
    let cq = CompletionQueue::new(64);
    let opts = MpaOptions {
        p2p: false,
        ..MpaOptions::default()
    };
    let res = QueuePairBuilder::new(&pd, &cq, &cq)
        .build()
        .unwrap()
        .connect_mpa(addr, opts);
    let (segs, closed) = peer.join().unwrap().read_all(Duration::from_secs(5));
    let ops: Vec<Opcode> = segs.iter().map(|s| rdmap_opcode(s)).collect();
    assert_eq!(ops, [Opcode::TERMINATE], "only the Terminate, no RTR");
    let term = rddp_wire::Terminate::parse(&segs[0][18..]).unwrap();
    assert_eq!(term.code, TerminateCode::MPA_NO_MATCHING_RTR);
    assert!(closed, "the connection stays open");
    let e = res.map(|_| ()).unwrap_err();
    assert!(
        matches!(&e, Error::Mpa(m) if m.terminate_code() == Some(TerminateCode::MPA_NO_MATCHING_RTR)),
        "{e}"
    );
}

/// After the queue pair posted a Read it cannot issue (ORD 0): the Read failed at
/// once with a clear error and a Send posted after it completes; the raw peer
/// sees the Send and never a Read Request.
fn reads_fail_sends_go(qp: &QueuePair, cq: &CompletionQueue, pd: &rddp::ProtectionDomain) {
    assert_eq!(qp.ird_ord().1, 0, "ORD in force");
    let sink = pd.register(vec![0; 64], Access::REMOTE_WRITE).unwrap();
    let remote = sink.remote();
    for wr_id in [1, 2] {
        let e = qp.post_read(wr_id, &sink, 0, 8, remote, 0).unwrap_err();
        assert!(matches!(e, Error::OrdZero), "{e}");
        assert!(e.to_string().contains("ORD 0"), "{e}");
    }
    qp.post_send_inline(3, b"after", Default::default())
        .unwrap();
    let got = wait(cq, 1);
    assert_eq!(
        (got[0].wr_id, got[0].opcode, got[0].status),
        (3, WcOpcode::Send, WcStatus::Success)
    );
    assert!(cq.poll(8).is_empty(), "no completion for the refused Reads");
}

/// RFC 6581: a responder announcing IRD 0 (with the Write RTR, which needs no
/// IRD slot) leaves us ORD 0. Each Read then fails at once; nothing waits.
#[test]
fn ord_0_fails_each_read_at_once_on_the_active_side() {
    let (addr, peer) = raw_responder(blk(true, 0, true, false, 1));
    let dev = Device::new();
    let pd = pd(&dev, "c");
    let cq = CompletionQueue::new(64);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .build()
        .unwrap()
        .connect_mpa(addr, MpaOptions::default())
        .unwrap();
    let mut peer = peer.join().unwrap();
    reads_fail_sends_go(&qp, &cq, &pd);
    let (segs, _) = peer.read_all(Duration::from_millis(500));
    let ops: Vec<Opcode> = segs.iter().map(|s| rdmap_opcode(s)).collect();
    assert_eq!(
        ops,
        [Opcode::RDMA_WRITE, Opcode::SEND],
        "RTR, then the Send"
    );
}

/// The same on the passive side: an initiator announcing IRD 0 leaves our ORD 0.
#[test]
fn ord_0_fails_each_read_at_once_on_the_passive_side() {
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let dev = Device::new();
    let pd = pd(&dev, "s");
    let cq = CompletionQueue::new(64);
    let (p2, c2) = (pd.clone(), cq.clone());
    let server = thread::spawn(move || {
        QueuePairBuilder::new(&p2, &c2, &c2)
            .build()
            .unwrap()
            .accept_mpa(&listener)
            .unwrap()
    });
    let req = MpaFrame::new(
        FrameKind::Request,
        MpaFlags::new(false, true, false, true),
        2,
        Some(blk(true, 0, true, false, 4)),
        Vec::new(),
    );
    let mut peer = RawPeer::connect_with(addr, &req);
    // The agreed Write RTR: our first FPDU, after which the responder may send.
    peer.send_segment(
        &TaggedHeader::new(true, RdmapControl::new(Opcode::RDMA_WRITE).0, 1, 0).to_bytes(),
    );
    let qp = server.join().unwrap();
    reads_fail_sends_go(&qp, &cq, &pd);
    let (segs, _) = peer.read_all(Duration::from_millis(500));
    let ops: Vec<Opcode> = segs.iter().map(|s| rdmap_opcode(s)).collect();
    assert_eq!(ops, [Opcode::SEND], "only the Send");
}

/// The passive MPA side negotiates with the builder's IRD/ORD (RFC 6581:
/// IRD raised to the initiator's ORD up to ours, ORD lowered to its IRD), not
/// with the listener's defaults.
#[test]
fn passive_mpa_side_negotiates_the_builders_ird_ord() {
    // The listener's own options say 16/16; the queue pair's builder 3/5.
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let dev = Device::new();
    let spd = pd(&dev, "s");
    let scq = CompletionQueue::new(64);
    let server = thread::spawn(move || {
        let qp = QueuePairBuilder::new(&spd, &scq, &scq)
            .ird(3)
            .ord(5)
            .build()
            .unwrap()
            .accept_mpa(&listener)
            .unwrap();
        qp.ird_ord()
    });
    let cpd = pd(&dev, "c");
    let ccq = CompletionQueue::new(64);
    let client = QueuePairBuilder::new(&cpd, &ccq, &ccq)
        .ird(16)
        .ord(16)
        .build()
        .unwrap()
        .connect_mpa(addr, MpaOptions::default())
        .unwrap();
    assert_eq!(server.join().unwrap(), (3, 5), "the responder's IRD/ORD");
    // Relaxed mode: our ORD lowered to the responder's IRD 3.
    assert_eq!(client.ird_ord(), (16, 3), "the initiator's IRD/ORD");
}

/// IRD and ORD are 14-bit fields on the wire (RFC 6581): a builder asking for
/// more is refused when it builds, instead of announcing 0x3FFF and using more.
#[test]
fn builder_refuses_ird_ord_above_14_bits() {
    let dev = Device::new();
    let pd = pd(&dev, "c");
    let cq = CompletionQueue::new(64);
    for (ird, ord) in [(0x4000, 16), (16, 0x4000), (u32::MAX, 16)] {
        let e = QueuePairBuilder::new(&pd, &cq, &cq)
            .ird(ird)
            .ord(ord)
            .build()
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(e, Error::IrdOrdTooLarge { value, .. } if value == ird.max(ord)),
            "{ird}/{ord}: {e}"
        );
    }
    // The largest value the field holds is fine.
    assert!(
        QueuePairBuilder::new(&pd, &cq, &cq)
            .ird(0x3FFF)
            .ord(0x3FFF)
            .build()
            .is_ok()
    );
}
