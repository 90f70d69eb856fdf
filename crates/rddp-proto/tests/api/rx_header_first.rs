//! RDMAP's header-first receive entry point (`begin_segment`, `segment_buffers`,
//! `finish_segment`; docs/data-path.md): every refusal is decided from the header
//! and the payload length alone, with the same Terminate as `on_segment`;
//! payloads go where the target says; nothing is delivered before
//! `finish_segment`, and a failed CRC there delivers nothing of any kind.

use crate::common::host::*;

use rddp_proto::ddp::{
    Begin, BufferOrdering, BufferPool, PoolConfig, RecvBuffer, RegionSpan, StreamError, Target,
};
use rddp_proto::mem::Access;
use rddp_proto::rdmap::{WcOpcode, WcStatus};
use rddp_wire::rdmap::qn;
use rddp_wire::{DdpControl, Opcode, TerminateCode as T};

/// Split a whole segment as an LLP reading header-first would.
fn head_of(seg: &[u8]) -> (&[u8], usize) {
    let hl = if DdpControl(seg[0]).tagged() { 14 } else { 18 };
    let hl = hl.min(seg.len());
    (&seg[..hl], seg.len() - hl)
}

/// Hand `seg` up header-first: begin, fill the target from `seg`, finish with
/// `crc_ok`. `Err(())` if begin refused.
fn header_first(h: &mut Host, seg: &[u8], crc_ok: bool) -> Result<Target, ()> {
    let (head, n) = head_of(seg);
    let seq = h.seq;
    h.seq += 1;
    let t =
        h.s.begin_segment(&h.mem, seq, head, n, Begin::Alone)
            .map_err(|_| ())?;
    let payload = &seg[seg.len() - n..];
    match &t {
        Target::Nothing => {}
        Target::Region {
            region,
            offset,
            len,
        } => region.data_mut()[*offset..offset + len].copy_from_slice(payload),
        Target::Buffer { .. } => {
            h.s.segment_buffers(|b| b[0].copy_from_slice(payload))
                .unwrap()
        }
    }
    let _ = h.s.finish_segment(&h.mem, crc_ok);
    Ok(t)
}

/// Segments each refused on a fresh host; the region, receive buffer and an
/// outstanding Read every case may need are set up first.
fn refused_cases() -> Vec<(&'static str, Vec<u8>, T)> {
    // The untagged cases and those that fail before any STag is looked up.
    let stag = rddp_proto::mem::Stag(0x100);
    vec![
        (
            "RDMAP version 0",
            {
                let mut s = tseg(true, Opcode::RDMA_WRITE, stag, BASE, &[1; 8]);
                s[1] &= 0x3F;
                s
            },
            T::RDMAP_INVALID_VERSION,
        ),
        (
            "Send on the Read Request queue",
            useg(true, Opcode::SEND, 0, qn::READ_REQUEST, 1, 0, &[0; 28]),
            T::RDMAP_UNEXPECTED_OPCODE,
        ),
        (
            "Read Request of 20 octets",
            useg(
                true,
                Opcode::READ_REQUEST,
                0,
                qn::READ_REQUEST,
                1,
                0,
                &[0; 20],
            ),
            T::RDMAP_OP_UNSPECIFIED,
        ),
        (
            "Read Response with no Read outstanding",
            rresp(true, stag, BASE, &[0; 8]),
            T::RDMAP_UNEXPECTED_OPCODE,
        ),
        (
            "Send with no receive buffer",
            send(true, 1, 0, &[0; 8]),
            T::DDP_INVALID_MSN_NO_BUFFER,
        ),
        (
            "Send on QN 5",
            useg(true, Opcode::SEND, 0, 5, 1, 0, &[0; 8]),
            T::DDP_INVALID_QN,
        ),
        (
            "DDP version 0",
            {
                let mut s = send(true, 1, 0, &[0; 8]);
                s[0] &= 0xFC;
                s
            },
            T::DDP_UNTAGGED_INVALID_VERSION,
        ),
    ]
}

/// Tagged cases need the host's own STag.
fn tagged_cases(h: &mut Host) -> Vec<(&'static str, Vec<u8>, T)> {
    let rw = h.region(Access::REMOTE_WRITE, 64);
    let ro = h.region(Access::REMOTE_READ, 64);
    vec![
        (
            "Write past the region",
            tseg(true, Opcode::RDMA_WRITE, rw, BASE + 60, &[1; 8]),
            T::DDP_BASE_BOUNDS,
        ),
        (
            "Write to an unknown STag",
            tseg(
                true,
                Opcode::RDMA_WRITE,
                rddp_proto::mem::Stag(rw.0 ^ 0x100),
                BASE,
                &[1; 8],
            ),
            T::DDP_INVALID_STAG,
        ),
        (
            "Write to a read-only region",
            tseg(true, Opcode::RDMA_WRITE, ro, BASE, &[1; 8]),
            T::RDMAP_ACCESS_VIOLATION,
        ),
        (
            "Write whose TO wraps",
            tseg(true, Opcode::RDMA_WRITE, rw, u64::MAX - 3, &[1; 8]),
            T::DDP_TO_WRAP,
        ),
    ]
}

#[test]
fn refusals_come_from_the_header_alone_with_on_segment_codes() {
    for tagged in [false, true] {
        let n = if tagged {
            tagged_cases(&mut Host::new()).len()
        } else {
            refused_cases().len()
        };
        for i in 0..n {
            let run = |whole: bool| {
                let mut h = Host::new();
                h.s.post_recv(1, vec![0; 4]).unwrap();
                // The buffer above is MSN 1's; the "no buffer" case uses MSN 2.
                let (what, mut seg, code) = if tagged {
                    tagged_cases(&mut h).swap_remove(i)
                } else {
                    refused_cases().swap_remove(i)
                };
                if code == T::DDP_INVALID_MSN_NO_BUFFER {
                    seg = send(true, 2, 0, &[0; 8]);
                }
                let refused = if whole {
                    !h.feed(&seg)
                } else {
                    // Header-first with the payload octets withheld: begin must
                    // decide without them.
                    let (head, n) = head_of(&seg);
                    let refused = h.s.begin_segment(&h.mem, 0, head, n, Begin::Alone).is_err();
                    // Held until the LLP's check of the segment passed.
                    let _ = h.s.finish_segment(&h.mem, true);
                    refused
                };
                let guards = h.mem.all_guards_intact();
                (
                    what,
                    refused,
                    h.terminate_sent(),
                    h.terminate_on_wire(),
                    guards,
                    code,
                )
            };
            let (what, r1, c1, w1, g1, code) = run(true);
            let (_, r2, c2, w2, g2, _) = run(false);
            assert!(r1 && r2, "{what}: not refused");
            assert_eq!((c1, c2), (Some(code), Some(code)), "{what}");
            assert_eq!(w1, w2, "{what}: a different Terminate on the wire");
            assert!(g1 && g2);
        }
    }
}

#[test]
fn payloads_go_where_the_target_says_and_are_delivered_at_finish() {
    let mut h = Host::new();
    let stag = h.region(Access::REMOTE_WRITE, 100);
    h.s.post_recv(7, vec![0; 50]).unwrap();
    // A Write: a region range, at its offset.
    let seg = tseg(true, Opcode::RDMA_WRITE, stag, BASE + 10, b"abcdef");
    let Ok(Target::Region { offset, len, .. }) = header_first(&mut h, &seg, true) else {
        panic!("not a region target")
    };
    assert_eq!((offset, len), (10, 6));
    assert_eq!(&h.data(stag)[10..16], b"abcdef");
    // A Send in two segments: the receive buffer's range at each MO; its
    // completion only after the last one's finish.
    let seg = send(false, 1, 0, b"hello ");
    let (head, n) = head_of(&seg);
    let seq = h.seq;
    h.seq += 1;
    let t =
        h.s.begin_segment(&h.mem, seq, head, n, Begin::Alone)
            .unwrap();
    assert!(matches!(t, Target::Buffer { len: 6 }));
    h.s.segment_buffers(|b| b[0].copy_from_slice(b"hello "))
        .unwrap();
    h.s.finish_segment(&h.mem, true).unwrap();
    let seg = send(true, 1, 6, b"world");
    let (head, n) = head_of(&seg);
    let seq = h.seq;
    h.seq += 1;
    h.s.begin_segment(&h.mem, seq, head, n, Begin::Alone)
        .unwrap();
    h.s.segment_buffers(|b| b[0].copy_from_slice(b"world"))
        .unwrap();
    assert!(h.completions().is_empty(), "completed before finish");
    h.s.finish_segment(&h.mem, true).unwrap();
    let c = h.completions();
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].wr_id, c[0].byte_len), (7, 11));
    assert_eq!(&c[0].buffer.as_ref().unwrap()[..11], b"hello world");
}

/// Which payload kind a bad CRC hits, on its message's last segment.
fn crc_case(kind: &str) -> Host {
    let mut h = Host::new();
    let stag = h.region(Access::REMOTE_WRITE, 100);
    let seg = match kind {
        "write" => tseg(true, Opcode::RDMA_WRITE, stag, BASE, &[9; 40]),
        "read response" => {
            h.read(3, stag, BASE, 40);
            rresp(true, stag, BASE, &[9; 40])
        }
        "send" => {
            h.s.post_recv(4, vec![0; 64]).unwrap();
            send(true, 1, 0, &[9; 40])
        }
        "pool send" => {
            let pool = BufferPool::new(PoolConfig::shared(BufferOrdering::Arrival, 4, 4));
            h.s.ddp_mut().set_recv_pool(qn::SEND, &pool).unwrap();
            pool.post(RecvBuffer {
                id: 5,
                data: vec![0; 64],
            })
            .unwrap();
            send(true, 1, 0, &[9; 40])
        }
        "pool region send" => {
            let pool = BufferPool::new(PoolConfig::credits(BufferOrdering::Sequential, 4));
            h.s.ddp_mut().set_recv_pool(qn::SEND, &pool).unwrap();
            assert!(h.s.ddp_mut().grant_credits(qn::SEND, 1));
            let stag = h.region(Access::NONE, 64);
            let region = h.mem.region(stag).unwrap();
            let place = RegionSpan {
                region,
                offset: 0,
                len: 64,
            };
            pool.post_in_region(6, place).unwrap();
            send(true, 1, 0, &[9; 40])
        }
        _ => unreachable!(),
    };
    header_first(&mut h, &seg, false).expect("begin refused");
    h
}

#[test]
fn a_failed_crc_delivers_nothing_for_every_payload_kind() {
    for kind in [
        "write",
        "read response",
        "send",
        "pool send",
        "pool region send",
    ] {
        let mut h = crc_case(kind);
        assert_eq!(h.terminate_sent(), Some(T::MPA_CRC_ERROR), "{kind}");
        let term = h.terminate_on_wire().expect("no Terminate");
        assert_eq!(term.code, T::MPA_CRC_ERROR);
        assert!(
            !term.m && !term.r,
            "{kind}: a CRC Terminate carries no header"
        );
        for c in h.completions() {
            assert_eq!(
                (c.status, c.byte_len),
                (WcStatus::Flushed, 0),
                "{kind}: {c:?}"
            );
            assert!(c.opcode == WcOpcode::Recv || c.opcode == WcOpcode::RdmaRead);
        }
        assert!(h.s.is_terminated(), "{kind}");
        // Later segments are refused, unplaced.
        let stag = h.region(Access::REMOTE_WRITE, 10);
        let seg = tseg(true, Opcode::RDMA_WRITE, stag, BASE, &[1; 4]);
        let (head, n) = head_of(&seg);
        assert!(
            h.s.begin_segment(&h.mem, 1, head, n, Begin::Alone).is_err(),
            "{kind}"
        );
        assert_eq!(h.data(stag), vec![0; 10]);
        assert!(h.mem.all_guards_intact());
    }
}

/// `Begin::Ahead` (a batch, `rdmap/rx.rs`) takes only whole
/// one-segment Writes and Sends that pass every check: a Read Request (RDMAP's
/// own), a Send with Invalidate (it changes an STag a later check reads) and
/// a Write outside its region are not begun ahead, and nothing changes (no
/// refusal held, no event). The Send behind them joins; the batch delivers
/// in order; the Write taken alone afterwards is refused as in order.
#[test]
fn only_writes_and_sends_that_pass_are_begun_ahead() {
    let mut h = Host::new();
    let stag = h.region(Access::REMOTE_WRITE, 64);
    h.s.post_recv(1, vec![0; 16]).unwrap();
    h.s.post_recv(2, vec![0; 16]).unwrap();
    let first = send(true, 1, 0, b"one");
    let (head, n) = head_of(&first);
    let t = h.s.begin_segment(&h.mem, 0, head, n, Begin::Alone).unwrap();
    assert!(matches!(t, Target::Buffer { len: 3 }), "{t:?}");
    let out_of_bounds = tseg(true, Opcode::RDMA_WRITE, stag, BASE + 60, &[7; 8]);
    for (kind, seg) in [
        (
            "Read Request",
            useg(
                true,
                Opcode::READ_REQUEST,
                0,
                qn::READ_REQUEST,
                1,
                0,
                &[0; 28],
            ),
        ),
        (
            "Send with Invalidate",
            useg(true, Opcode::SEND_INVALIDATE, stag.0, qn::SEND, 2, 0, b"x"),
        ),
        ("Write out of bounds", out_of_bounds.clone()),
    ] {
        let (head, n) = head_of(&seg);
        let got =
            h.s.begin_segment(&h.mem, 1, head, n, Begin::Ahead(&mut |_| true));
        assert!(matches!(got, Err(StreamError::NotAhead)), "{kind}: {got:?}");
    }
    assert!(h.events().is_empty(), "a segment not begun raised an event");
    let second = send(true, 2, 0, b"two");
    let (head, n) = head_of(&second);
    let t =
        h.s.begin_segment(&h.mem, 1, head, n, Begin::Ahead(&mut |_| true));
    assert!(matches!(t, Ok(Target::Buffer { len: 3 })), "{t:?}");
    h.s.segment_buffers(|b| {
        b[0].copy_from_slice(b"one");
        b[1].copy_from_slice(b"two");
    })
    .unwrap();
    h.s.finish_segment(&h.mem, true).unwrap();
    h.s.finish_segment(&h.mem, true).unwrap();
    let c = h.completions();
    let got: Vec<(u64, u32, WcStatus)> =
        c.iter().map(|c| (c.wr_id, c.byte_len, c.status)).collect();
    assert_eq!(got, [(1, 3, WcStatus::Success), (2, 3, WcStatus::Success)]);
    let (head, n) = head_of(&out_of_bounds);
    assert!(h.s.begin_segment(&h.mem, 2, head, n, Begin::Alone).is_err());
    // Held until the LLP's check passed.
    let _ = h.s.finish_segment(&h.mem, true);
    assert_eq!(h.terminate_sent(), Some(T::DDP_BASE_BOUNDS));
}
