//! Completion when the last octet left (docs/data-path.md): with
//! `complete_when_sent`, a Send or Write completes only when the LLP reports its
//! last segment written, in order; a flush in between keeps later reports
//! matched to their segments.

use bytes::Bytes;
use rddp_proto::ddp::DdpConfig;
use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_proto::rdmap::{RdmapConfig, RdmapStream, WcOpcode, WcStatus, WorkRequest};

fn stream() -> RdmapStream {
    let cfg = RdmapConfig {
        ddp: DdpConfig {
            mulpdu: 1024,
            ..DdpConfig::default()
        },
        ..RdmapConfig::default()
    };
    let mut s = RdmapStream::new(StreamId(1), PdId(1), cfg).unwrap();
    s.complete_when_sent();
    s
}

fn write(wr_id: u64, len: usize) -> WorkRequest {
    WorkRequest::Write {
        wr_id,
        payload: Bytes::from(vec![1; len]).into(),
        remote_stag: 0x100,
        remote_to: 0,
        fence: false,
    }
}

fn send(wr_id: u64, len: usize) -> WorkRequest {
    WorkRequest::Send {
        wr_id,
        payload: Bytes::from(vec![2; len]).into(),
        solicited: false,
        invalidate: None,
        fence: false,
    }
}

#[test]
fn a_write_completes_when_its_last_segment_is_written_not_polled() {
    let mem = MemoryTable::with_seed(1);
    let mut s = stream();
    s.post(&mem, write(7, 3000));
    s.post(&mem, send(8, 10));
    let mut segs = Vec::new();
    while let Some(seg) = s.poll_segment() {
        segs.push(seg);
    }
    assert!(
        segs.len() >= 4,
        "3000 octets at MULPDU 1024 take several segments"
    );
    assert!(s.poll_completion().is_none(), "completed when only polled");
    let mut done = Vec::new();
    for seg in &segs {
        s.segment_sent(seg.header.last());
        while let Some(c) = s.poll_completion() {
            done.push((c.wr_id, c.opcode, c.status, c.byte_len));
        }
        // Nothing completes before the Write's last segment is written.
        if !seg.header.last() {
            assert!(done.is_empty());
        }
    }
    assert_eq!(
        done,
        [
            (7, WcOpcode::RdmaWrite, WcStatus::Success, 3000),
            (8, WcOpcode::Send, WcStatus::Success, 10)
        ]
    );
}

#[test]
fn a_flush_between_poll_and_write_keeps_later_reports_matched() {
    let mem = MemoryTable::with_seed(2);
    let mut s = stream();
    s.post(&mem, send(1, 10));
    let first = s.poll_segment().unwrap();
    // The connection is torn down while that segment is on its way.
    s.abort();
    let c = s.poll_completion().unwrap();
    assert_eq!((c.wr_id, c.status), (1, WcStatus::Flushed));
    // The writer still reports it: no second completion, no panic.
    s.segment_sent(first.header.last());
    assert!(s.poll_completion().is_none());
}

/// A Send or Write posted unsignaled (`post_as(.., false)`) completes
/// unsignaled when its last segment is written; a signaled one after it
/// completes as usual, and one flushed completes signaled (a failure always
/// reaches the ULP).
#[test]
fn an_unsignaled_success_completes_unsignaled_and_a_flush_signaled() {
    let mem = MemoryTable::with_seed(3);
    let mut s = stream();
    s.post_as(&mem, send(1, 10), false);
    s.post_as(&mem, write(2, 10), false);
    s.post(&mem, send(3, 10));
    let mut done = Vec::new();
    while let Some(seg) = s.poll_segment() {
        s.segment_sent(seg.header.last());
        while let Some(c) = s.poll_completion() {
            done.push((c.wr_id, c.status, c.signaled));
        }
    }
    assert_eq!(
        done,
        [
            (1, WcStatus::Success, false),
            (2, WcStatus::Success, false),
            (3, WcStatus::Success, true)
        ]
    );
    // Queued and polled but not written, then the stream is torn down.
    s.post_as(&mem, send(4, 10), false);
    s.post_as(&mem, send(5, 10), false);
    let _on_its_way = s.poll_segment().unwrap();
    s.abort();
    let flushed: Vec<_> = std::iter::from_fn(|| s.poll_completion())
        .map(|c| (c.wr_id, c.status, c.signaled))
        .collect();
    assert_eq!(
        flushed,
        [(4, WcStatus::Flushed, true), (5, WcStatus::Flushed, true)]
    );
}
