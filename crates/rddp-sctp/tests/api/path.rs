//! The maximum DDP segment follows SCTP's fragmentation point (RFC
//! 5043): max(fragmentation point - 2, 516) is DDP's MULPDU, and no chunk exceeds the
//! fragmentation point. Real usrsctp over an AF_CONN link, SCTP_MAXSEG lowered.

use crate::common::*;
use bytes::Bytes;
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_sctp::driver::{Listener, Options, connect_conn};
use rddp_sctp::{SessionState, max_segment_for};
use std::time::Duration;
use usrsctp_ffi::{Encapsulation, stack};

#[test]
fn segments_fit_a_lowered_fragmentation_point() {
    if !own_process(module_path!(), "segments_fit_a_lowered_fragmentation_point") {
        return;
    }
    stack::init(Encapsulation::Udp(free_port())).unwrap();
    let link = link::Link::new(false);
    let opts = Options {
        max_seg: Some(700),
        ..Options::default()
    };
    let l = Listener::bind_conn(&link.b, 5003, opts.clone()).unwrap();
    let mut a = connect_conn(&link.a, 5003, opts).unwrap();
    let mut b = l.accept(Duration::from_secs(5)).unwrap();
    let fp = a.fragmentation_point();
    // usrsctp derives the fragmentation point from SCTP_MAXSEG (not equal to it).
    assert!((516..1000).contains(&fp), "fragmentation point {fp}");
    let (ma, mb) = (MemoryTable::with_seed(1), MemoryTable::with_seed(2));
    a.adaptation()
        .initiate(0, StreamId(0), PdId(1), b"")
        .unwrap();
    drive(&mut a, &ma, &mut b, &mb, |_, b| {
        b.adaptation().pending_initiates() == 1
    });
    let stag = mb
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            0,
            vec![0; 20_000],
        )
        .unwrap();
    b.adaptation().accept(0, StreamId(1), PdId(1), b"").unwrap();
    drive(&mut a, &ma, &mut b, &mb, |a, _| {
        a.adaptation().session_state(0) == Some(SessionState::Established)
    });
    assert_eq!(a.stream(0).unwrap().mulpdu(), max_segment_for(fp));
    a.record_sent();
    a.stream(0)
        .unwrap()
        .send_tagged(0, stag.0, 0, Bytes::from(pattern(4, 20_000)))
        .unwrap();
    drive(&mut a, &ma, &mut b, &mb, |_, b| {
        b.stream(0).unwrap().poll_delivery().is_some()
    });
    let sent = a.take_recorded();
    assert!(sent.len() >= 20_000 / fp);
    assert!(sent.iter().all(|c| c.len() <= fp), "a chunk above {fp}");
    assert_eq!(mb.region(stag).unwrap().data(), &pattern(4, 20_000)[..]);
    // Every DATA chunk on the link is unordered and unfragmented (U=B=E=1).
    let mut data_chunks = 0;
    for (_, pkt) in link.capture.lock().unwrap().iter() {
        let mut at = 12; // SCTP common header
        while let Some(h) = pkt.get(at..at + 4) {
            let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            if h[0] == 0 {
                assert_eq!(h[1] & 0x07, 0x07, "DATA flags {:#04x}", h[1]);
                data_chunks += 1;
            }
            at += len.max(4).next_multiple_of(4);
        }
    }
    assert!(data_chunks >= sent.len());
    eprintln!(
        "fragmentation point {fp}, MULPDU {}, {} chunks",
        max_segment_for(fp),
        sent.len()
    );
}
