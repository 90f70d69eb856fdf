//! A raw MPA peer that reads nothing until told to, then counts the tagged
//! payload that arrives (transmit tests that fill the socket).
#![allow(dead_code)]

use rddp::{CompletionQueue, Device, ProtectionDomain, QueuePair, QueuePairBuilder, Quota};
use rddp_mpa::MpaOptions;
use rddp_wire::FpduDecoder;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

pub(crate) struct Held {
    go: Sender<()>,
    peer: JoinHandle<(usize, usize)>,
}

/// A peer listening on a free port: after MPA setup it reads nothing until
/// [`Held::go`], then reads until `total` octets of tagged payload came.
pub(crate) fn held_peer(total: usize) -> (SocketAddr, Held) {
    let listener = rddp_mpa::listen("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (go, go_rx) = channel::<()>();
    let peer = std::thread::spawn(move || {
        let (mut sock, _, neg, leftover) = listener.accept_raw(|_| Ok(Vec::new())).unwrap();
        go_rx.recv().unwrap();
        let mut rx = FpduDecoder::new(neg.crc, neg.markers_rx, 65535);
        let (mut payload, mut fpdus) = (0usize, 0usize);
        let mut feed = |b: &[u8], payload: &mut usize, fpdus: &mut usize| {
            let mut out = Vec::new();
            let r = rx.feed(b, &mut out);
            for u in &out {
                // Tagged segments: 14 octets of header.
                *payload += u.len().saturating_sub(14);
                *fpdus += 1;
            }
            r
        };
        feed(&leftover, &mut payload, &mut fpdus).unwrap();
        let mut buf = vec![0; 1 << 16];
        while payload < total {
            let n = sock.read(&mut buf).unwrap();
            assert!(n > 0, "closed after {payload} payload octets");
            if let Err(e) = feed(&buf[..n], &mut payload, &mut fpdus) {
                panic!("FPDU {fpdus}: {e} (after {payload} payload octets)");
            }
        }
        (payload, fpdus)
    });
    (addr, Held { go, peer })
}

impl Held {
    /// Start reading.
    pub(crate) fn go(&self) {
        self.go.send(()).unwrap();
    }

    /// Tagged payload octets and FPDUs read.
    pub(crate) fn join(self) -> (usize, usize) {
        self.peer.join().unwrap()
    }
}

/// The sending side: a PD that may register 1 GiB, a CQ, and a queue pair
/// connected to `addr` (at most `depth` send work requests; None: the
/// builder's default).
pub(crate) fn sender(
    addr: SocketAddr,
    depth: Option<u32>,
) -> (ProtectionDomain, CompletionQueue, QueuePair) {
    let quota = Quota {
        registered_bytes: 1 << 30,
        ..Quota::default()
    };
    let pd = Device::new()
        .consumer("sender", quota)
        .unwrap()
        .alloc_pd()
        .unwrap();
    // Room for every send completion and the default receives.
    let cq = CompletionQueue::new(depth.map_or(64, |d| (d as usize + 16).max(64)));
    let mut b = QueuePairBuilder::new(&pd, &cq, &cq);
    if let Some(d) = depth {
        b = b.max_send_wr(d);
    }
    let qp = b
        .build()
        .unwrap()
        .connect_mpa(addr, MpaOptions::default())
        .unwrap();
    (pd, cq, qp)
}
