//! A message is placed whole or refused (RFC 5040 §4, RFC 5041
//! §5-7): a Read Response covers its Read's sink exactly, in FIFO order; one
//! message keeps one opcode and one STag; an untagged message's segments tile it;
//! two messages of one queue do not interleave; no receive buffer is stranded.
//! Every refusal is a Terminate with the code the RFCs assign, and nothing is
//! placed outside the range the refused segment could validly reach.

use crate::common::host::*;
use rddp_proto::mem::{Access, Stag};
use rddp_proto::rdmap::{Completion, RdmapConfig, WcOpcode, WcStatus};
use rddp_wire::{Opcode, TerminateCode as T};

fn in_order() -> RdmapConfig {
    let mut cfg = RdmapConfig::default();
    cfg.ddp.max_reorder = 0;
    cfg
}

fn status_of(c: &[Completion], wr_id: u64) -> Vec<WcStatus> {
    c.iter()
        .filter(|c| c.wr_id == wr_id)
        .map(|c| c.status)
        .collect()
}

/// An in-order host with Read 1 of 8 octets outstanding into a 16-octet sink at
/// `BASE`, whose first Read Response segment (`abcd`, not last) was accepted.
fn read_half_answered() -> (Host, Stag) {
    let mut h = Host::with(in_order());
    let sink = h.region(Access::REMOTE_WRITE, 16);
    h.read(1, sink, BASE, 8);
    assert!(h.feed(&rresp(false, sink, BASE, b"abcd")));
    (h, sink)
}

/// One 8-octet receive buffer for each of `ids`.
fn post_receives(h: &mut Host, ids: &[u64]) {
    for &id in ids {
        h.s.post_recv(id, vec![0; 8]).unwrap();
    }
}

/// After an abort, each receive of `ids` completes once, as Flushed.
fn abort_and_expect_flushed(h: &mut Host, ids: &[u64]) {
    h.s.abort();
    let c = h.completions();
    for &id in ids {
        assert_eq!(status_of(&c, id), vec![WcStatus::Flushed], "{c:?}");
    }
}

/// Today two 4-octet segments both at the sink's first TO completed an 8-octet
/// Read as Success with 4 octets never written.
#[test]
fn read_response_segments_cover_the_sink_each_octet_once() {
    let (mut h, sink) = read_half_answered();
    assert!(!h.feed(&rresp(true, sink, BASE, b"efgh")));
    assert_eq!(h.terminate_sent(), Some(T::DDP_BASE_BOUNDS));
    // The second segment was refused before placement.
    assert_eq!(&h.data(sink)[..8], b"abcd\0\0\0\0");
    assert_eq!(status_of(&h.completions(), 1), vec![WcStatus::Flushed]);

    // A gap (the second segment skips 2 octets) and an overlap are refused too.
    for (to, p) in [(BASE + 6, &b"ef"[..]), (BASE + 2, &b"efghij"[..])] {
        let (mut h, sink) = read_half_answered();
        assert!(!h.feed(&rresp(true, sink, to, p)));
        assert_eq!(h.terminate_sent(), Some(T::DDP_BASE_BOUNDS));
        assert_eq!(&h.data(sink)[..8], b"abcd\0\0\0\0");
        assert_eq!(status_of(&h.completions(), 1), vec![WcStatus::Flushed]);
    }

    // Contiguous segments, a zero-length last one included, complete the Read.
    let (mut h, sink) = read_half_answered();
    assert!(h.feed(&rresp(false, sink, BASE + 4, b"efgh")));
    assert!(h.feed(&rresp(true, sink, BASE + 8, b"")));
    assert_eq!(h.terminate_sent(), None);
    assert_eq!(&h.data(sink)[..8], b"abcdefgh");
    assert_eq!(status_of(&h.completions(), 1), vec![WcStatus::Success]);
}

/// SCTP may hand segments up out of order; in sender order they must still tile
/// the sink. Today the reversed pair below completed as Success.
#[test]
fn read_response_out_of_order_arrival_still_tiles_in_sender_order() {
    // Good: the second half arrives first.
    let mut h = Host::new();
    let sink = h.region(Access::REMOTE_WRITE, 16);
    h.read(1, sink, BASE, 8);
    assert!(h.feed_at(1, &rresp(true, sink, BASE + 4, b"efgh")));
    assert!(h.completions().is_empty());
    assert!(h.feed_at(0, &rresp(false, sink, BASE, b"abcd")));
    assert_eq!(&h.data(sink)[..8], b"abcdefgh");
    assert_eq!(status_of(&h.completions(), 1), vec![WcStatus::Success]);

    // Bad: both segments at the first TO, the L=1 one first.
    let mut h = Host::new();
    let sink = h.region(Access::REMOTE_WRITE, 16);
    h.read(1, sink, BASE, 8);
    assert!(h.feed_at(1, &rresp(true, sink, BASE, b"efgh")));
    assert!(!h.feed_at(0, &rresp(false, sink, BASE, b"abcd")));
    assert_eq!(h.terminate_sent(), Some(T::DDP_BASE_BOUNDS));
    assert_eq!(status_of(&h.completions(), 1), vec![WcStatus::Flushed]);
    // Placement stayed inside the Read's sink.
    assert_eq!(&h.data(sink)[8..], &[0; 8]);
    assert!(h.mem.all_guards_intact());
}

/// Read Responses are matched first-in first-out (RFC 5040 §5.5):
/// a response aimed at a later Read's sink is refused before placement.
#[test]
fn read_responses_belong_to_the_oldest_read() {
    // Same sink STag, the second Read's TO first: 1/1/0x01, nothing placed there.
    let mut h = Host::with(in_order());
    let sink = h.region(Access::REMOTE_WRITE, 32);
    h.read(1, sink, BASE, 4);
    h.read(2, sink, BASE + 16, 4);
    assert!(!h.feed(&rresp(true, sink, BASE + 16, b"2222")));
    assert_eq!(h.terminate_sent(), Some(T::DDP_BASE_BOUNDS));
    assert_eq!(h.data(sink), vec![0; 32]);
    let c = h.completions();
    assert_eq!(status_of(&c, 1), vec![WcStatus::Flushed]);
    assert_eq!(status_of(&c, 2), vec![WcStatus::Flushed]);

    // In order, each response completes its own Read.
    let mut h = Host::with(in_order());
    let sink = h.region(Access::REMOTE_WRITE, 32);
    h.read(1, sink, BASE, 4);
    h.read(2, sink, BASE + 16, 4);
    assert!(h.feed(&rresp(true, sink, BASE, b"1111")));
    assert!(h.feed(&rresp(true, sink, BASE + 16, b"2222")));
    let c = h.completions();
    assert_eq!(status_of(&c, 1), vec![WcStatus::Success]);
    assert_eq!(status_of(&c, 2), vec![WcStatus::Success]);
}

/// A wrong STag on a Read Response is 1/1/0x00 (invalid STag; siw
/// `siw_rresp_check_ntoh`), also when it names a later Read's sink: today that
/// one was placed into the later sink and then reported as 1/1/0x01.
#[test]
fn a_read_response_to_another_reads_stag_is_invalid_stag() {
    let mut h = Host::with(in_order());
    let a = h.region(Access::REMOTE_WRITE, 8);
    let b = h.region(Access::REMOTE_WRITE, 8);
    h.read(1, a, BASE, 4);
    h.read(2, b, BASE, 4);
    assert!(!h.feed(&rresp(true, b, BASE, b"bbbb")));
    assert_eq!(h.terminate_sent(), Some(T::DDP_INVALID_STAG));
    assert_eq!(h.data(b), vec![0; 8], "nothing placed in the later sink");
    let c = h.completions();
    assert_eq!(status_of(&c, 1), vec![WcStatus::Flushed]);
    assert_eq!(status_of(&c, 2), vec![WcStatus::Flushed]);

    // Out of order (SCTP): the response to the later sink arrives before the
    // segment ahead of it in sender order (a zero-length Write), so it can only
    // be checked against the later Read's sink on arrival; in sender order it is
    // the first response, and its delivery finds the wrong STag: same code.
    let mut h = Host::new();
    let a = h.region(Access::REMOTE_WRITE, 8);
    let b = h.region(Access::REMOTE_WRITE, 8);
    h.read(1, a, BASE, 4);
    h.read(2, b, BASE, 4);
    assert!(h.feed_at(1, &rresp(true, b, BASE, b"bbbb")));
    let _ = h.feed_at(0, &tseg(true, Opcode::RDMA_WRITE, a, 0, b""));
    assert_eq!(h.terminate_sent(), Some(T::DDP_INVALID_STAG));
    assert!(
        h.completions()
            .iter()
            .all(|c| c.status != WcStatus::Success)
    );
}

/// One message's segments keep one opcode and one STag (RFC 5040 §4.1: the RDMAP
/// control field of every segment of a message is the same; RFC 5041 §5.2: a
/// tagged message is one range of one buffer). Today a Write segment with L=0
/// followed by a Read Response with L=1 merged into one "Write": the Read never
/// completed and nothing was reported.
#[test]
fn a_message_keeps_its_opcode_and_stag() {
    // Write L=0, then a Read Response L=1: 0/2/0x06, the response not placed.
    let mut h = Host::with(in_order());
    let sink = h.region(Access::REMOTE_WRITE, 8);
    let target = h.region(Access::REMOTE_WRITE, 8);
    h.read(1, sink, BASE, 4);
    assert!(h.feed(&tseg(false, Opcode::RDMA_WRITE, target, BASE, b"ww")));
    assert!(!h.feed(&rresp(true, sink, BASE, b"rrrr")));
    assert_eq!(h.terminate_sent(), Some(T::RDMAP_UNEXPECTED_OPCODE));
    assert_eq!(h.data(sink), vec![0; 8]);
    assert_eq!(status_of(&h.completions(), 1), vec![WcStatus::Flushed]);

    // The other way round: the Write is refused before placement.
    let mut h = Host::with(in_order());
    let sink = h.region(Access::REMOTE_WRITE, 8);
    let target = h.region(Access::REMOTE_WRITE, 8);
    h.read(1, sink, BASE, 4);
    assert!(h.feed(&rresp(false, sink, BASE, b"rr")));
    assert!(!h.feed(&tseg(true, Opcode::RDMA_WRITE, target, BASE, b"ww")));
    assert_eq!(h.terminate_sent(), Some(T::RDMAP_UNEXPECTED_OPCODE));
    assert_eq!(h.data(target), vec![0; 8]);
    assert_eq!(status_of(&h.completions(), 1), vec![WcStatus::Flushed]);

    // A Write whose second segment names another region: 1/1/0x00 (siw
    // `siw_write_check_ntoh`), nothing placed there.
    let mut h = Host::with(in_order());
    let a = h.region(Access::REMOTE_WRITE, 8);
    let b = h.region(Access::REMOTE_WRITE, 8);
    assert!(h.feed(&tseg(false, Opcode::RDMA_WRITE, a, BASE, b"aa")));
    assert!(!h.feed(&tseg(true, Opcode::RDMA_WRITE, b, BASE + 2, b"bb")));
    assert_eq!(h.terminate_sent(), Some(T::DDP_INVALID_STAG));
    assert_eq!(h.data(b), vec![0; 8]);

    // A Write that jumps within its region: 1/1/0x01.
    let mut h = Host::with(in_order());
    let a = h.region(Access::REMOTE_WRITE, 8);
    assert!(h.feed(&tseg(false, Opcode::RDMA_WRITE, a, BASE, b"aa")));
    assert!(!h.feed(&tseg(true, Opcode::RDMA_WRITE, a, BASE + 4, b"bb")));
    assert_eq!(h.terminate_sent(), Some(T::DDP_BASE_BOUNDS));
    assert_eq!(h.data(a), b"aa\0\0\0\0\0\0".to_vec());

    // A Send whose last segment is a Send with Solicited Event: 0/2/0x06.
    let mut h = Host::with(in_order());
    h.s.post_recv(1, vec![0; 8]).unwrap();
    assert!(h.feed(&send(false, 1, 0, b"ab")));
    assert!(!h.feed(&useg(true, Opcode::SEND_SE, 0, 0, 1, 2, b"cd")));
    assert_eq!(h.terminate_sent(), Some(T::RDMAP_UNEXPECTED_OPCODE));
    h.s.abort();
    assert_eq!(status_of(&h.completions(), 1), vec![WcStatus::Flushed]);
}

/// An untagged message's segments tile [0, length) exactly before it is
/// delivered: in sender order each segment starts where the previous one ended
/// (RFC 5041 §5.3 asks increasing MO; siw `siw_send_check_ntoh` requires it; an
/// overlap or a gap is 1/2/0x04, Invalid MO). Today an overlapping segment that
/// left a gap of the same size was delivered as a whole message.
#[test]
fn untagged_segments_tile_the_message() {
    // In order (MPA): MO 0 twice, then the last 4 octets at MO 8.
    let mut h = Host::with(in_order());
    h.s.post_recv(1, vec![0; 16]).unwrap();
    assert!(h.feed(&send(false, 1, 0, b"abcd")));
    assert!(!h.feed(&send(false, 1, 0, b"efgh")));
    assert_eq!(h.terminate_sent(), Some(T::DDP_INVALID_MO));
    assert!(!h.feed(&send(true, 1, 8, b"ijkl")));
    h.s.abort();
    let c = h.completions();
    assert_eq!(status_of(&c, 1), vec![WcStatus::Flushed], "{c:?}");
    assert!(
        c[0].buffer
            .as_ref()
            .is_some_and(|b| &b[..8] == b"abcd\0\0\0\0")
    );

    // Out of order (SCTP): the same three segments, the last one first. They
    // are placed inside the buffer as they arrive; in sender order the second
    // overlaps the first and the message is never delivered.
    let mut h = Host::new();
    h.s.post_recv(1, vec![0; 16]).unwrap();
    assert!(h.feed_at(2, &send(true, 1, 8, b"ijkl")));
    assert!(h.feed_at(1, &send(false, 1, 0, b"efgh")));
    assert!(!h.feed_at(0, &send(false, 1, 0, b"abcd")));
    assert_eq!(h.terminate_sent(), Some(T::DDP_INVALID_MO));
    h.s.abort();
    assert_eq!(status_of(&h.completions(), 1), vec![WcStatus::Flushed]);

    // Out of order and tiling: delivered whole.
    let mut h = Host::new();
    h.s.post_recv(1, vec![0; 16]).unwrap();
    assert!(h.feed_at(2, &send(true, 1, 8, b"ijkl")));
    assert!(h.feed_at(0, &send(false, 1, 0, b"abcd")));
    assert!(h.completions().is_empty());
    assert!(h.feed_at(1, &send(false, 1, 4, b"efgh")));
    let c = h.completions();
    assert_eq!(status_of(&c, 1), vec![WcStatus::Success]);
    assert_eq!(c[0].byte_len, 12);
    assert_eq!(&c[0].buffer.as_ref().unwrap()[..12], b"abcdefghijkl");
}

/// Two messages of one untagged queue interleaved in sender order (MSN 2 starts
/// before MSN 1's last segment) are refused with 1/2/0x03, Invalid MSN - range
/// not valid, as siw does (`siw_send_check_ntoh`: the MSN of every segment must
/// be the one in progress). RFC 5041 §5.3: the Data Source MUST transmit DDP
/// Messages in the order they were submitted. Messages of different queues may
/// interleave (nothing is ambiguous); a new message of the same queue may not.
#[test]
fn interleaved_messages_of_one_queue_are_refused() {
    let mut h = Host::with(in_order());
    post_receives(&mut h, &[1, 2, 3]);
    assert!(h.feed(&send(false, 1, 0, b"1a")));
    assert!(!h.feed(&send(true, 2, 0, b"22")));
    assert_eq!(h.terminate_sent(), Some(T::DDP_INVALID_MSN_RANGE));
    abort_and_expect_flushed(&mut h, &[1, 2, 3]);

    // The batch on MPA: MSN 1 is a Send with Invalidate of an STag that
    // cannot be invalidated. Today MSN 2 completed first, MSN 1's L=1 released
    // both in one batch, the invalidation failed and MSN 2's buffer was never
    // returned. Now MSN 2's first segment is refused: every buffer comes back.
    let mut h = Host::with(in_order());
    post_receives(&mut h, &[1, 2, 3]);
    let inval = |last, mo, p: &[u8]| useg(last, Opcode::SEND_INVALIDATE, 0x0BAD_0101, 0, 1, mo, p);
    assert!(h.feed(&inval(false, 0, b"1a")));
    assert!(!h.feed(&send(true, 2, 0, b"22")));
    assert!(!h.feed(&inval(true, 2, b"1b")));
    assert_eq!(h.terminate_sent(), Some(T::DDP_INVALID_MSN_RANGE));
    abort_and_expect_flushed(&mut h, &[1, 2, 3]);

    // Different queues may interleave: a Read Request between a Send's segments.
    let mut h = Host::with(in_order());
    let src = h.region(Access::REMOTE_READ, 8);
    h.s.post_recv(1, vec![0; 8]).unwrap();
    assert!(h.feed(&send(false, 1, 0, b"ab")));
    let rr = rddp_wire::ReadRequestHeader {
        sink_stag: 0x1234_5600,
        sink_to: 0,
        size: 4,
        src_stag: src.0,
        src_to: BASE,
    };
    assert!(h.feed(&useg(
        true,
        Opcode::READ_REQUEST,
        0,
        1,
        1,
        0,
        &rr.to_bytes()
    )));
    assert!(h.feed(&send(true, 1, 2, b"cd")));
    assert_eq!(h.terminate_sent(), None);
    let c = h.completions();
    assert_eq!(status_of(&c, 1), vec![WcStatus::Success]);
}

/// In no case is a receive buffer stranded: a Send with Invalidate that fails in
/// the middle of a batch of deliveries (SCTP hands up MSN 2 before MSN 1, so MSN
/// 1's arrival releases both) still returns the later message's buffer, as
/// Flushed. Today RDMAP stopped polling deliveries after the error and teardown
/// flushed only the queue's slots: buffer 2 (and its quota) never came back.
#[test]
fn a_failing_send_with_invalidate_in_a_batch_strands_no_buffer() {
    let mut h = Host::new();
    post_receives(&mut h, &[1, 2, 3]);
    assert!(h.feed_at(1, &send(true, 2, 0, b"two")));
    let bad = useg(true, Opcode::SEND_INVALIDATE, 0x0BAD_0101, 0, 1, 0, b"one");
    let _ = h.feed_at(0, &bad);
    assert_eq!(h.terminate_sent(), Some(T::RDMAP_OP_CANNOT_INVALIDATE));
    h.s.abort();
    let c: Vec<_> = h
        .completions()
        .into_iter()
        .filter(|c| c.opcode == WcOpcode::Recv)
        .collect();
    assert_eq!(status_of(&c, 1), vec![WcStatus::LocalProtection], "{c:?}");
    assert_eq!(status_of(&c, 2), vec![WcStatus::Flushed], "{c:?}");
    assert_eq!(status_of(&c, 3), vec![WcStatus::Flushed], "{c:?}");
    assert_eq!(c.len(), 3);
    assert!(
        c.iter().all(|c| c.buffer.is_some()),
        "every buffer handed back"
    );
    // Completions keep posting order.
    assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), vec![1, 2, 3]);
}
