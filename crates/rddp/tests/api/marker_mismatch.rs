//! Terminate 2/0/0x03: a Marker whose FPDUPTR disagrees with the framing, from a
//! raw peer to a queue pair that asked for Markers (RFC 5044 §4, §8): the
//! Markers its MPA Reply asked for are the ones its receiver expects. (The
//! Terminate itself, without sockets: rddp-sim's RDMAP pair, `rdmap_damage`.)

use crate::common::raw_peer;

use raw_peer::RawPeer;
use rddp::transport::mpa::Listener;
use rddp::{CompletionQueue, Device, QueuePairBuilder, Quota};
use rddp_mpa::MpaOptions;
use rddp_wire::{FpduEncoder, TaggedHeader, TerminateCode};

#[test]
fn a_marker_that_disagrees_with_the_framing_is_2_0_3() {
    // The queue pair's side asks for Markers in what it receives (M=1 in its Reply).
    let opts = MpaOptions {
        markers: true,
        ..MpaOptions::rev1()
    };
    let listener = Listener::bind("127.0.0.1:0", opts).unwrap();
    let addr = listener.local_addr().unwrap();
    let (done, peer_done) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let dev = Device::new();
        let pd = dev
            .consumer("server", Quota::default())
            .unwrap()
            .alloc_pd()
            .unwrap();
        let cq = CompletionQueue::new(64);
        let qp = QueuePairBuilder::new(&pd, &cq, &cq)
            .build()
            .unwrap()
            .attach(listener.accept().unwrap())
            .unwrap();
        // Keep the queue pair until the peer is done (or gone).
        let _ = peer_done.recv();
        drop(qp);
    });
    let mut peer = RawPeer::connect(addr, true);
    // A zero-length Write as the first FPDU, with the leading Marker (at SeqStart,
    // FPDUPTR must be 0) carrying FPDUPTR 8 instead; the CRC is recomputed so only
    // the Marker is wrong.
    let seg = TaggedHeader::new(true, 0x40, 1, 0).to_bytes();
    let mut enc = FpduEncoder::new(true, true);
    let mut fpdu = Vec::new();
    enc.encode(&seg, &mut fpdu).unwrap();
    assert_eq!(&fpdu[..4], &[0, 0, 0, 0], "a leading Marker with FPDUPTR 0");
    fpdu[3] = 8;
    let n = fpdu.len();
    let crc = rddp_wire::crc32c(&fpdu[..n - 4]);
    fpdu[n - 4..].copy_from_slice(&crc.to_le_bytes());
    peer.send_raw(&fpdu);
    let (term, closed) = peer.terminate();
    let term = term.expect("a Terminate");
    assert_eq!(term.code, TerminateCode::MPA_MARKER_MISMATCH);
    assert!(
        !term.m && !term.d() && !term.r,
        "LLP errors carry no headers (RFC 5040 §4.8)"
    );
    assert!(closed, "the connection closes after the Terminate");
    drop(done);
    server.join().unwrap();
}
