//! A Read Request beyond IRD is seen while the Read Response before it is still
//! leaving, also towards a peer that takes the response as fast as it is
//! written. More outstanding Read Requests than IRD is a fatal stream error
//! (RFC 5040 §5.5): Terminate 0/2/0x07, as siw sends.
//!
//! The queue pair's task writes at most a run's budget before it reads again
//! (`MpaOut::budget`). Without it, one run wrote the whole 16 MiB response while
//! the peer read along, and the second Read Request was read only after the
//! first response had left: then it was within IRD, answered, and no Terminate
//! came (this test failed 4 runs in 4).

use crate::common;
use crate::common::raw_peer;

use raw_peer::{RawPeer, terminate_in};
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, TerminateCode};
use rddp_mpa::MpaOptions;
use rddp_wire::ReadRequestHeader;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The Read Response's length: several run budgets.
const BIG: u32 = 16 << 20;

/// An untagged Read Request (queue 1) for `BIG` octets of `stag`.
fn read_request(msn: u32, stag: u32) -> Vec<u8> {
    let rr = ReadRequestHeader {
        sink_stag: 0x1234_5600,
        sink_to: 0,
        size: BIG,
        src_stag: stag,
        src_to: 0,
    };
    let mut s = vec![0x41, 0x41, 0, 0, 0, 0];
    for v in [1u32, msn, 0] {
        s.extend_from_slice(&v.to_be_bytes());
    }
    s.extend_from_slice(&rr.to_bytes());
    s
}

#[test]
fn read_request_beyond_ird_is_seen_while_a_response_leaves() {
    let dev = Device::new();
    let pd = common::pd(&dev, "responder");
    let cq = CompletionQueue::new(64);
    let mut opts = MpaOptions::rev1();
    opts.ird = 1;
    let (mut raw, conn) = RawPeer::accepted_with(opts);
    let _qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .build()
        .unwrap()
        .attach(conn)
        .unwrap();
    let big = pd
        .register(vec![0x33; BIG as usize], Access::REMOTE_READ)
        .unwrap();

    // The peer reads everything as it comes, undecoded (as fast as it can),
    // until the responder closes or 10 s pass.
    let got = Arc::new(AtomicUsize::new(0));
    let mut rd = raw.sock.try_clone().unwrap();
    let seen = got.clone();
    let reader = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut all = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        rd.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        while Instant::now() < deadline {
            match rd.read(&mut buf) {
                Ok(0) => return (all, true),
                Ok(n) => {
                    all.extend_from_slice(&buf[..n]);
                    seen.store(all.len(), Ordering::Relaxed);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return (all, true),
            }
        }
        (all, false)
    });

    // The gate (RFC 5044 §7.1.2), the first Read Request; the second once the first
    // response is leaving, in a write of its own.
    raw.send_segment(&[0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    raw.send_segment(&read_request(1, big.stag()));
    let t0 = Instant::now();
    while got.load(Ordering::Relaxed) < 64 << 10 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::yield_now();
    }
    let leaving = got.load(Ordering::Relaxed);
    raw.send_segment(&read_request(2, big.stag()));

    let (all, closed) = reader.join().unwrap();
    let segs = raw.decode(&all).expect("well-framed FPDUs");
    let term = terminate_in(&segs).unwrap_or_else(|| {
        panic!(
            "no Terminate: the peer read {} octets ({leaving} before the second \
             Read Request), closed {closed}",
            all.len()
        )
    });
    assert_eq!(term.code, TerminateCode::RDMAP_CATASTROPHIC_STREAM);
    assert!(closed, "the responder closes after its Terminate");
    // The first response is cut off by the Terminate: less than both went out.
    assert!(all.len() < 2 * BIG as usize, "read {} octets", all.len());
}
