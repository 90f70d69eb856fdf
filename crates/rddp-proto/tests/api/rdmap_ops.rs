//! RDMAP operations between two in-memory RDMAP streams (RFC 5040).

use bytes::Bytes;
use rddp_proto::mem::{Access, PdId, Stag, StagScope, StreamId};
use rddp_proto::rdmap::{
    AsyncEvent, Completion, RdmapConfig, RdmapStream, WcOpcode, WcStatus, WorkRequest,
};
use rddp_wire::TerminateCode as T;

use crate::common::hosts::Hosts;

/// This module's view of the two hosts.
trait Ops {
    /// Side `i`'s completions.
    fn completions(&mut self, i: usize) -> Vec<Completion>;
    /// A region holding `data` at TO 0x4000 on side `i`.
    fn region(&mut self, i: usize, access: Access, data: Vec<u8>) -> Stag;
}

impl Ops for Hosts {
    fn completions(&mut self, i: usize) -> Vec<Completion> {
        std::iter::from_fn(|| self.s[i].poll_completion()).collect()
    }

    fn region(&mut self, i: usize, access: Access, data: Vec<u8>) -> Stag {
        self.mem[i]
            .register(PdId(1), StagScope::Pd, access, 0x4000, data)
            .unwrap()
    }
}

fn rw() -> Access {
    Access::REMOTE_READ | Access::REMOTE_WRITE
}

fn write(wr_id: u64, data: &[u8], stag: Stag, to: u64) -> WorkRequest {
    WorkRequest::Write {
        wr_id,
        payload: Bytes::copy_from_slice(data).into(),
        remote_stag: stag.0,
        remote_to: to,
        fence: false,
    }
}

fn read(
    wr_id: u64,
    local: Stag,
    local_to: u64,
    len: u32,
    remote: Stag,
    remote_to: u64,
) -> WorkRequest {
    WorkRequest::Read {
        wr_id,
        local_stag: local.0,
        local_to,
        len,
        remote_stag: remote.0,
        remote_to,
        fence: false,
    }
}

fn send(wr_id: u64, data: &[u8], solicited: bool, invalidate: Option<u32>) -> WorkRequest {
    WorkRequest::Send {
        wr_id,
        payload: Bytes::copy_from_slice(data).into(),
        solicited,
        invalidate,
        fence: false,
    }
}

fn terminate_received(h: &mut Hosts, i: usize) -> Option<T> {
    h.events(i).into_iter().find_map(|e| match e {
        AsyncEvent::TerminateReceived { code, .. } => code,
        _ => None,
    })
}

fn terminate_sent(h: &mut Hosts, i: usize) -> Option<T> {
    h.events(i).into_iter().find_map(|e| match e {
        AsyncEvent::TerminateSent { code, .. } => Some(code),
        _ => None,
    })
}

#[test]
fn write_then_read_back_then_send() {
    let mut h = Hosts::new(RdmapConfig::default());
    let remote = h.region(1, rw(), vec![0; 64]);
    let local = h.region(0, Access::REMOTE_WRITE, vec![0; 64]);
    h.s[1].post_recv(7, vec![0; 32]).unwrap();
    h.post(0, write(1, b"hello, rdma", remote, 0x4008));
    h.post(0, read(2, local, 0x4010, 11, remote, 0x4008));
    h.post(0, send(3, b"done", false, None));
    h.run();
    assert_eq!(
        &h.mem[1].region(remote).unwrap().data()[8..19],
        b"hello, rdma"
    );
    assert_eq!(
        &h.mem[0].region(local).unwrap().data()[16..27],
        b"hello, rdma"
    );
    let c0 = h.completions(0);
    let ops: Vec<_> = c0
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.status, c.byte_len))
        .collect();
    assert_eq!(
        ops,
        // Posting order: the Send left before the Read's response came, but
        // its completion says all before it are done (`sq_order.rs`).
        vec![
            (1, WcOpcode::RdmaWrite, WcStatus::Success, 11),
            (2, WcOpcode::RdmaRead, WcStatus::Success, 11),
            (3, WcOpcode::Send, WcStatus::Success, 4),
        ]
    );
    let c1 = h.completions(1);
    assert_eq!(
        c1.len(),
        1,
        "the Write gives no completion at the sink: {c1:?}"
    );
    assert_eq!(
        (c1[0].wr_id, c1[0].opcode, c1[0].byte_len),
        (7, WcOpcode::Recv, 4)
    );
    assert_eq!(&c1[0].buffer.as_ref().unwrap()[..4], b"done");
}

#[test]
fn send_variants_carry_solicited_and_invalidate() {
    let mut h = Hosts::new(RdmapConfig::default());
    let target = h.region(1, rw() | Access::REMOTE_INVALIDATE, vec![0; 16]);
    for id in 0..3 {
        h.s[1].post_recv(id, vec![0; 8]).unwrap();
    }
    h.post(0, send(1, b"a", true, None));
    h.post(0, send(2, b"b", false, Some(target.0)));
    h.post(0, send(3, b"c", true, None));
    h.run();
    let c = h.completions(1);
    assert_eq!(
        c.iter().map(|c| c.solicited).collect::<Vec<_>>(),
        vec![true, false, true]
    );
    assert_eq!(c[1].invalidated_stag, Some(target.0));
    // A Write with the invalidated STag now fails as Invalid STag, and the writer
    // learns it from the Terminate.
    h.post(0, write(4, b"late", target, 0x4000));
    h.run();
    assert_eq!(h.mem[1].region(target).unwrap().data(), &[0; 16]);
    assert_eq!(terminate_sent(&mut h, 1), Some(T::DDP_INVALID_STAG));
    assert_eq!(terminate_received(&mut h, 0), Some(T::DDP_INVALID_STAG));
    assert!(h.s[1].should_close() && h.s[0].should_close());
}

#[test]
fn send_with_invalidate_of_a_foreign_stag_is_refused() {
    let mut h = Hosts::new(RdmapConfig::default());
    let other = h.mem[1]
        .register(PdId(9), StagScope::Pd, rw(), 0, vec![0; 4])
        .unwrap();
    h.s[1].post_recv(1, vec![0; 8]).unwrap();
    h.post(0, send(1, b"x", false, Some(other.0)));
    h.run();
    assert_eq!(
        terminate_sent(&mut h, 1),
        Some(T::RDMAP_PROT_CANNOT_INVALIDATE)
    );
    assert!(h.mem[1].region(other).unwrap().is_valid());
    let mut h2 = Hosts::new(RdmapConfig::default());
    h2.s[1].post_recv(1, vec![0; 8]).unwrap();
    h2.post(0, send(1, b"x", false, Some(0x0000_0142)));
    h2.run();
    assert_eq!(
        terminate_sent(&mut h2, 1),
        Some(T::RDMAP_OP_CANNOT_INVALIDATE)
    );
}

#[test]
fn read_source_protection_errors_terminate_with_the_read_request_header() {
    for (access, to, len, want) in [
        (Access::REMOTE_WRITE, 0x4000, 4, T::RDMAP_ACCESS_VIOLATION),
        (rw(), 0x4000, 100, T::RDMAP_BASE_BOUNDS),
        (rw(), u64::MAX - 1, 4, T::RDMAP_TO_WRAP),
    ] {
        let mut h = Hosts::new(RdmapConfig::default());
        let remote = h.region(1, access, vec![7; 16]);
        let local = h.region(0, Access::REMOTE_WRITE, vec![0; 128]);
        h.post(0, read(1, local, 0x4000, len, remote, to));
        h.run();
        assert_eq!(terminate_sent(&mut h, 1), Some(want));
        let ev = h.events(0);
        let Some(AsyncEvent::TerminateReceived {
            terminate: Some(t), ..
        }) = ev.first()
        else {
            panic!("{ev:?}")
        };
        assert!(t.m && t.d() && t.r, "M=D=R=1 for a Read Request error");
        assert_eq!(t.rdmap_hdr.unwrap().size, len);
        assert_eq!(h.mem[0].region(local).unwrap().data(), &[0; 128][..]);
        let c = h.completions(0);
        assert_eq!(c[0].status, WcStatus::RemoteAccess, "{c:?}");
    }
}

#[test]
fn more_reads_than_ird_is_a_fatal_stream_error() {
    // The requester is configured with ORD 4, the responder with IRD 2: the
    // requester sends 4 Reads at once, more than the responder's IRD.
    let mut h = Hosts::new(RdmapConfig::default());
    h.s[0] = RdmapStream::new(
        StreamId(1),
        PdId(1),
        RdmapConfig {
            ord: 4,
            ..RdmapConfig::default()
        },
    )
    .unwrap();
    h.s[1] = RdmapStream::new(
        StreamId(2),
        PdId(1),
        RdmapConfig {
            ird: 2,
            ..RdmapConfig::default()
        },
    )
    .unwrap();
    let remote = h.region(1, rw(), vec![1; 16]);
    let local = h.region(0, Access::REMOTE_WRITE, vec![0; 64]);
    for i in 0..4u32 {
        h.post(
            0,
            read(
                u64::from(i),
                local,
                0x4000 + 16 * u64::from(i),
                16,
                remote,
                0x4000,
            ),
        );
    }
    // Deliver all four Read Requests before the responder transmits anything.
    let reqs: Vec<Vec<u8>> = std::iter::from_fn(|| h.s[0].poll_segment())
        .map(|s| s.to_vec())
        .collect();
    assert_eq!(reqs.len(), 4);
    for (seq, r) in reqs.iter().enumerate() {
        let _ = h.s[1].on_segment(&h.mem[1], seq as u64, r);
    }
    assert_eq!(
        terminate_sent(&mut h, 1),
        Some(T::RDMAP_CATASTROPHIC_STREAM)
    );
}

#[test]
fn the_local_side_never_exceeds_ord_and_fences_wait_for_reads() {
    let mut h = Hosts::new(RdmapConfig {
        ord: 2,
        ..RdmapConfig::default()
    });
    let remote = h.region(1, rw(), vec![3; 64]);
    let local = h.region(0, Access::REMOTE_WRITE, vec![0; 64]);
    for i in 0..5u64 {
        h.post(0, read(i, local, 0x4000 + 8 * i, 8, remote, 0x4000));
    }
    let mut fenced = write(9, b"after", remote, 0x4000);
    if let WorkRequest::Write { fence, .. } = &mut fenced {
        *fence = true;
    }
    h.post(0, fenced);
    assert_eq!(h.s[0].reads_outstanding(), 2);
    let first: Vec<_> = std::iter::from_fn(|| h.s[0].poll_segment()).collect();
    assert_eq!(first.len(), 2, "only ORD Read Requests leave");
    // Feed them to the responder and bring the responses back, step by step.
    let mut seq_b = 0;
    let mut seq_a = 0;
    let mut pending = first;
    let mut write_seen_with_reads_left = false;
    while !pending.is_empty() {
        for s in pending.drain(..) {
            let _ = h.s[1].on_segment(&h.mem[1], seq_b, &s.to_vec());
            seq_b += 1;
        }
        while let Some(s) = h.s[1].poll_segment() {
            let _ = h.s[0].on_segment(&h.mem[0], seq_a, &s.to_vec());
            seq_a += 1;
        }
        assert!(h.s[0].reads_outstanding() <= 2);
        while let Some(s) = h.s[0].poll_segment() {
            if s.header.rdmap_octet() & 0x0F == 0 && h.s[0].reads_outstanding() > 0 {
                write_seen_with_reads_left = true;
            }
            pending.push(s);
        }
    }
    assert!(
        !write_seen_with_reads_left,
        "the fenced Write left only after every Read completed"
    );
    let ids: Vec<_> = h
        .completions(0)
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(ids.len(), 6);
    assert!(ids.iter().all(|(_, s)| *s == WcStatus::Success));
    assert_eq!(ids.last().unwrap().0, 9);
}

#[test]
fn zero_length_read_and_write() {
    let mut h = Hosts::new(RdmapConfig::default());
    let local = h.region(0, Access::REMOTE_WRITE, vec![0; 4]);
    // Neither checks the remote STag: zero length places nothing (RFC 5041).
    h.post(0, write(1, b"", Stag(0xdead_beef), 0));
    h.post(0, read(2, local, 0x4000, 0, Stag(0x1234_5678), 0));
    h.run();
    let c: Vec<_> = h
        .completions(0)
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(c, vec![(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert!(h.events(1).is_empty());
}

#[test]
fn a_received_terminate_is_never_answered_and_flushes_work() {
    let mut h = Hosts::new(RdmapConfig::default());
    let remote = h.region(1, rw(), vec![0; 8]);
    h.s[0].post_recv(5, vec![0; 8]).unwrap();
    // A Write outside the region provokes B's Terminate.
    h.post(0, write(1, b"0123456789", remote, 0x4000));
    h.run();
    assert_eq!(terminate_sent(&mut h, 1), Some(T::DDP_BASE_BOUNDS));
    assert_eq!(terminate_received(&mut h, 0), Some(T::DDP_BASE_BOUNDS));
    assert!(h.events(0).is_empty(), "A sent no Terminate back");
    assert!(h.s[0].poll_segment().is_none());
    // Work posted after the error completes as flushed.
    h.post(0, send(2, b"late", false, None));
    h.s[0].post_recv(6, vec![]).unwrap();
    let c = h.completions(0);
    assert!(
        c.iter()
            .any(|c| c.wr_id == 2 && c.status == WcStatus::Flushed),
        "{c:?}"
    );
    assert!(
        c.iter()
            .any(|c| c.wr_id == 6 && c.status == WcStatus::Flushed),
        "{c:?}"
    );
    h.s[0].abort();
    let c = h.completions(0);
    assert!(
        c.iter()
            .any(|c| c.wr_id == 5 && c.status == WcStatus::Flushed),
        "{c:?}"
    );
}

#[test]
fn a_message_too_long_for_the_buffer_is_a_local_length_error() {
    let mut h = Hosts::new(RdmapConfig::default());
    h.s[1].post_recv(1, vec![0; 4]).unwrap();
    h.s[1].post_recv(2, vec![0; 4]).unwrap();
    h.post(0, send(1, b"too long", false, None));
    h.run();
    assert_eq!(terminate_sent(&mut h, 1), Some(T::DDP_MSG_TOO_LONG));
    h.s[1].abort();
    let c: Vec<_> = h
        .completions(1)
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(c, vec![(1, WcStatus::LocalLength), (2, WcStatus::Flushed)]);
}

/// Crafted segments from a hostile peer straight into stream 0.
fn crafted(h: &mut Hosts, seg: &[u8]) -> Option<T> {
    let seq = h.seq[0];
    h.seq[0] += 1;
    let _ = h.s[0].on_segment(&h.mem[0], seq, seg);
    terminate_sent(h, 0)
}

fn tagged(ctrl: u8, rdmap: u8, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![ctrl, rdmap];
    v.extend_from_slice(&stag.to_be_bytes());
    v.extend_from_slice(&to.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

#[test]
fn read_responses_are_never_placed_past_the_requested_sink() {
    // No Read outstanding at all.
    let mut h = Hosts::new(RdmapConfig::default());
    let local = h.region(0, Access::REMOTE_WRITE, vec![0; 64]);
    assert_eq!(
        crafted(&mut h, &tagged(0xC1, 0x42, local.0, 0x4000, b"x")),
        Some(T::RDMAP_UNEXPECTED_OPCODE)
    );
    assert_eq!(h.mem[0].region(local).unwrap().data(), &[0; 64][..]);

    // One Read of 8 octets at 0x4000: a longer response, or one beyond the sink,
    // is refused before placement even though the region itself is larger.
    for (to, payload, want) in [
        (0x4000, &b"0123456789"[..], T::DDP_BASE_BOUNDS),
        (0x4006, &b"abc"[..], T::DDP_BASE_BOUNDS),
        (0x4000, &b"ok"[..], T::DDP_INVALID_STAG),
    ] {
        let mut h = Hosts::new(RdmapConfig::default());
        let local = h.region(0, Access::REMOTE_WRITE, vec![0; 64]);
        h.post(0, read(1, local, 0x4000, 8, Stag(0x99), 0));
        while h.s[0].poll_segment().is_some() {}
        let stag = if want == T::DDP_INVALID_STAG {
            local.0 ^ 0x100
        } else {
            local.0
        };
        assert_eq!(
            crafted(&mut h, &tagged(0xC1, 0x42, stag, to, payload)),
            Some(want)
        );
        assert_eq!(h.mem[0].region(local).unwrap().data(), &[0; 64][..]);
        assert!(h.mem[0].all_guards_intact());
        let c = h.completions(0);
        assert_eq!((c[0].wr_id, c[0].status), (1, WcStatus::Flushed));
    }

    // A response shorter than requested is placed (it is inside the sink) but the
    // Read does not complete as success: its length does not match.
    let mut h = Hosts::new(RdmapConfig::default());
    let local = h.region(0, Access::REMOTE_WRITE, vec![0; 64]);
    h.post(0, read(1, local, 0x4000, 8, Stag(0x99), 0));
    while h.s[0].poll_segment().is_some() {}
    assert_eq!(
        crafted(&mut h, &tagged(0xC1, 0x42, local.0, 0x4000, b"abc")),
        Some(T::DDP_BASE_BOUNDS)
    );
    assert!(
        h.completions(0)
            .iter()
            .all(|c| c.status != WcStatus::Success)
    );
}

#[test]
fn rdmap_version_and_opcode_errors() {
    let mut h = Hosts::new(RdmapConfig::default());
    // RV = 2.
    assert_eq!(
        crafted(&mut h, &tagged(0xC1, 0x80, 1, 0, b"")),
        Some(T::RDMAP_INVALID_VERSION)
    );
    // A Send opcode on the tagged model.
    let mut h = Hosts::new(RdmapConfig::default());
    assert_eq!(
        crafted(&mut h, &tagged(0xC1, 0x43, 1, 0, b"")),
        Some(T::RDMAP_UNEXPECTED_OPCODE)
    );
    // Reserved opcode 0x8.
    let mut h = Hosts::new(RdmapConfig::default());
    assert_eq!(
        crafted(&mut h, &tagged(0xC1, 0x48, 1, 0, b"")),
        Some(T::RDMAP_UNEXPECTED_OPCODE)
    );
    // A Send on the Read Request queue.
    let mut h = Hosts::new(RdmapConfig::default());
    let mut seg = vec![0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0];
    seg.extend_from_slice(b"hi");
    assert_eq!(crafted(&mut h, &seg), Some(T::RDMAP_UNEXPECTED_OPCODE));
    // A Read Request with payload after its 28-octet header.
    let mut h = Hosts::new(RdmapConfig::default());
    let mut seg = vec![0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0];
    seg.extend_from_slice(&[0; 30]);
    assert_eq!(crafted(&mut h, &seg), Some(T::RDMAP_OP_UNSPECIFIED));
}
