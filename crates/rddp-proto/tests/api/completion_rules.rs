//! No completion lost or invented, at the engine: the
//! work-queue slot rules of `wq`, the RFC 6581 Read RTR that never completes to
//! the ULP, and RDMAP's graceful close that lets held-back work finish.

use bytes::Bytes;
use rddp_proto::cq::{CqError, CqLedger, CqSource};
use rddp_proto::ddp::{PoolId, StreamState};
use rddp_proto::mem::{Access, MemoryTable, PdId, Stag, StagScope, StreamId};
use rddp_proto::rdmap::{Completion, INTERNAL_WR_ID, RdmapConfig, WcOpcode, WcStatus, WorkRequest};
use rddp_proto::wq::{QueueFull, RecvPlan, Slots, WorkQueue, WorkQueues};

use crate::common::hosts::Hosts;

/// This module's view of the two hosts.
trait Rules {
    /// Side `i`'s completions as (work request, opcode, status).
    fn completions(&mut self, i: usize) -> Vec<(u64, WcOpcode, WcStatus)>;
    /// A region of `len` octets of 7 at TO 0 on side `i`.
    fn region(&mut self, i: usize, access: Access, len: usize) -> Stag;
}

impl Rules for Hosts {
    fn completions(&mut self, i: usize) -> Vec<(u64, WcOpcode, WcStatus)> {
        std::iter::from_fn(|| self.s[i].poll_completion())
            .map(|c| (c.wr_id, c.opcode, c.status))
            .collect()
    }

    fn region(&mut self, i: usize, access: Access, len: usize) -> Stag {
        self.mem[i]
            .register(PdId(1), StagScope::Pd, access, 0, vec![7; len])
            .unwrap()
    }
}

fn read(wr_id: u64, local: Stag, len: u32, remote: Stag, fence: bool) -> WorkRequest {
    WorkRequest::Read {
        wr_id,
        local_stag: local.0,
        local_to: 0,
        len,
        remote_stag: remote.0,
        remote_to: 0,
        fence,
    }
}

fn send(wr_id: u64, fence: bool) -> WorkRequest {
    WorkRequest::Send {
        wr_id,
        payload: Bytes::from_static(b"hi").into(),
        solicited: false,
        invalidate: None,
        fence,
    }
}

use WcOpcode::{RdmaRead, Send};
use WcStatus::{Flushed, LocalProtection, Success};

// ---- The RFC 6581 Read RTR ----

#[test]
fn an_application_read_failing_at_once_keeps_its_error_and_the_rtr_stays_internal() {
    let mut h = Hosts::new(RdmapConfig::default());
    h.s[0].post_read_rtr().unwrap();
    let no_write = h.region(0, Access::NONE, 8);
    let remote = h.region(1, Access::REMOTE_READ, 8);
    h.post(0, read(5, no_write, 8, remote, false));
    assert_eq!(h.completions(0), vec![(5, RdmaRead, LocalProtection)]);
    let sink = h.region(0, Access::REMOTE_WRITE, 8);
    h.post(0, read(6, sink, 8, remote, false));
    h.run();
    assert_eq!(h.completions(0), vec![(6, RdmaRead, Success)]);
    assert_eq!(h.s[0].reads_outstanding(), 0);
}

#[test]
fn a_flushed_rtr_completes_nothing() {
    let mut h = Hosts::new(RdmapConfig::default());
    h.s[0].post_read_rtr().unwrap();
    let sink = h.region(0, Access::REMOTE_WRITE, 8);
    h.post(0, read(6, sink, 8, Stag(1), false));
    h.s[0].abort();
    assert_eq!(h.completions(0), vec![(6, RdmaRead, Flushed)]);
}

#[test]
fn a_terminate_while_the_rtr_is_oldest_is_not_reported_as_the_rtrs() {
    let mut h = Hosts::new(RdmapConfig::default());
    h.s[0].post_read_rtr().unwrap();
    let sink = h.region(0, Access::REMOTE_WRITE, 8);
    // An STag the peer does not have: its Terminate ends the stream.
    h.post(0, read(6, sink, 8, Stag(0x0bad_0000), false));
    h.run();
    let c = h.completions(0);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].0, 6);
    assert!(c.iter().all(|c| c.0 != INTERNAL_WR_ID));
}

#[test]
fn the_rtr_needs_ord_and_an_empty_send_queue() {
    let mut h = Hosts::new(RdmapConfig {
        ord: 0,
        ..RdmapConfig::default()
    });
    assert!(h.s[0].post_read_rtr().is_err());
    let mut h = Hosts::new(RdmapConfig::default());
    h.post(0, send(1, false));
    h.s[0].post_read_rtr().unwrap();
    h.run();
    assert_eq!(h.completions(0), vec![(1, Send, Success)]);
}

// ---- Graceful close (RFC 5041 §6) ----

#[test]
fn close_lets_work_held_back_by_ord_and_a_fence_finish() {
    let mut h = Hosts::new(RdmapConfig {
        ord: 1,
        ..RdmapConfig::default()
    });
    let remote = h.region(1, Access::REMOTE_READ, 8);
    let sinks: Vec<_> = (0..3)
        .map(|_| h.region(0, Access::REMOTE_WRITE, 8))
        .collect();
    for (i, &s) in sinks.iter().enumerate() {
        h.post(0, read(i as u64 + 1, s, 8, remote, false));
    }
    h.post(0, send(4, true));
    h.s[1].post_recv(1, vec![0; 8]).unwrap();
    h.s[0].close();
    assert!(h.s[0].is_closing());
    assert!(!h.s[0].poll_close(), "Reads are outstanding");
    // Graceful teardown (RFC 5040 §6): later ULP requests return an error,
    // in posting order behind the work before them (a completion says that
    // all before it are done, ibv_poll_cq(3)).
    h.post(0, send(9, false));
    assert_eq!(h.completions(0), vec![]);
    h.run();
    assert_eq!(
        h.completions(0),
        vec![
            (1, RdmaRead, Success),
            (2, RdmaRead, Success),
            (3, RdmaRead, Success),
            (4, Send, Success),
            (9, Send, Flushed),
        ]
    );
    assert_eq!(h.completions(1), vec![(1, WcOpcode::Recv, Success)]);
    assert!(h.s[0].poll_close());
    assert_eq!(*h.s[0].ddp().state(), StreamState::Closing);
}

#[test]
fn close_is_not_due_until_the_last_read_response_arrived() {
    let mut h = Hosts::new(RdmapConfig::default());
    let remote = h.region(1, Access::REMOTE_READ, 8);
    let sink = h.region(0, Access::REMOTE_WRITE, 8);
    h.post(0, read(1, sink, 8, remote, false));
    h.s[0].close();
    // The Read Request left, its response has not come back.
    while h.s[0].poll_segment().is_some() {}
    assert!(!h.s[0].poll_close());
    assert_eq!(*h.s[0].ddp().state(), StreamState::Open);
}

#[test]
fn a_dead_stream_never_closes_gracefully() {
    let mut h = Hosts::new(RdmapConfig::default());
    h.s[0].close();
    h.s[0].abort();
    assert!(!h.s[0].poll_close());
}

// ---- Work-queue slots ----

#[test]
fn slots_count_to_their_limit_and_name_it() {
    let s = Slots::new(WorkQueue::Recv, 2);
    s.take(2).unwrap();
    let e = s.take(1).unwrap_err();
    assert_eq!(
        e,
        QueueFull {
            queue: WorkQueue::Recv,
            limit: 2
        }
    );
    assert!(e.to_string().contains("maximum of 2"), "{e}");
    s.give_back(1);
    s.take(1).unwrap();
    assert!(s.take(5).is_err(), "all or none");
    assert_eq!(s.used(), 2);
}

fn recv(wr_id: u64, status: WcStatus) -> Completion {
    let mut h = Hosts::new(RdmapConfig::default());
    h.s[0].post_recv(wr_id, vec![]).unwrap();
    h.s[0].abort();
    let mut c = h.s[0].poll_completion().unwrap();
    c.status = status;
    c
}

#[test]
fn a_receive_slot_is_given_back_when_its_completion_is_dropped_from_the_cq() {
    let (scq, rcq) = (CqLedger::new(8), CqLedger::new(2));
    let mut wq =
        WorkQueues::reserve(&scq, &rcq, StreamId(1), 1, 4, RecvPlan::Own { depth: 2 }).unwrap();
    assert_eq!((scq.reserved(), rcq.reserved()), (4, 2));
    wq.post_recv(1).unwrap();
    wq.post_recv(2).unwrap();
    assert!(wq.post_recv(3).is_err());
    let held = wq.completed(&recv(1, Success)).unwrap();
    assert!(wq.post_recv(3).is_err(), "still waiting in the CQ");
    drop(held);
    wq.post_recv(3).unwrap();
    // A receive that is not outstanding is never passed on.
    assert!(wq.completed(&recv(1, Success)).is_none());
    assert!(wq.completed(&recv(77, Flushed)).is_none());
}

#[test]
fn receives_never_returned_are_flushed_once() {
    let (scq, rcq) = (CqLedger::new(8), CqLedger::new(8));
    let mut wq =
        WorkQueues::reserve(&scq, &rcq, StreamId(1), 1, 4, RecvPlan::Own { depth: 4 }).unwrap();
    for id in [1, 2, 2] {
        wq.post_recv(id).unwrap();
    }
    let _h = wq.completed(&recv(2, Success)).unwrap();
    let rest: Vec<_> = wq
        .flush_unreturned()
        .into_iter()
        .map(|(c, _)| (c.wr_id, c.status))
        .collect();
    assert_eq!(rest, vec![(1, Flushed), (2, Flushed)]);
    assert!(wq.flush_unreturned().is_empty());
    assert_eq!(wq.recvs_outstanding(), 0);
}

#[test]
fn a_reservation_outlives_its_queue_pair_until_its_completions_are_taken() {
    let (scq, rcq) = (CqLedger::new(4), CqLedger::new(4));
    let wq =
        WorkQueues::reserve(&scq, &rcq, StreamId(1), 1, 4, RecvPlan::Own { depth: 4 }).unwrap();
    wq.post_send().unwrap();
    let mut wq = wq;
    let send_done = Completion {
        opcode: WcOpcode::Send,
        ..recv(0, Success)
    };
    let held = wq.completed(&send_done).unwrap();
    drop(wq);
    assert_eq!(scq.reserved(), 4, "one completion still waits");
    assert_eq!(rcq.reserved(), 0);
    assert!(matches!(
        scq.reserve(CqSource::Ulp(2), 1),
        Err(CqError::WouldOverflow { .. })
    ));
    drop(held);
    assert_eq!(scq.reserved(), 0);
}

#[test]
fn a_shared_pool_reserves_once_and_counts_every_buffer_until_polled() {
    let (scq, rcq) = (CqLedger::new(16), CqLedger::new(4));
    let pool = Slots::new(WorkQueue::SharedRecv, 4);
    let plan = || RecvPlan::Pool {
        pool: PoolId(9),
        slots: pool.clone(),
    };
    let mut a = WorkQueues::reserve(&scq, &rcq, StreamId(1), 1, 4, plan()).unwrap();
    let b = WorkQueues::reserve(&scq, &rcq, StreamId(2), 2, 4, plan()).unwrap();
    assert_eq!(rcq.reserved(), 4, "the pool is reserved once on this CQ");
    pool.take(4).unwrap();
    let held = a.completed(&recv(1, Success)).unwrap();
    assert!(pool.take(1).is_err(), "free + held + unpolled = 4");
    drop(a);
    drop(b);
    assert_eq!(
        rcq.reserved(),
        4,
        "the unpolled completion keeps the pool's share"
    );
    drop(held);
    pool.take(1).unwrap();
    assert_eq!(rcq.reserved(), 0);
}

#[test]
fn credits_count_until_the_completion_they_enabled_is_polled() {
    let (scq, rcq) = (CqLedger::new(16), CqLedger::new(2));
    let pool = Slots::new(WorkQueue::SharedRecv, 8);
    let plan = RecvPlan::Credits {
        slots: pool.clone(),
        limit: 2,
    };
    let mut wq = WorkQueues::reserve(&scq, &rcq, StreamId(1), 1, 4, plan).unwrap();
    wq.grant(2).unwrap();
    assert!(wq.grant(1).is_err());
    pool.take(1).unwrap();
    let held = wq.completed(&recv(1, Success)).unwrap();
    assert!(wq.grant(1).is_err(), "its completion is not polled yet");
    drop(held);
    wq.grant(1).unwrap();
    assert_eq!(pool.used(), 0);
}

// ---- Shared pools at the engine ----

fn untagged(last: bool, msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    let rsvd = [
        rddp_wire::RdmapControl::new(rddp_wire::Opcode::SEND).0,
        0,
        0,
        0,
        0,
    ];
    let mut v = rddp_wire::UntaggedHeader::new(last, rsvd, 0, msn, mo)
        .to_bytes()
        .to_vec();
    v.extend_from_slice(payload);
    v
}

/// The CQ is sized for every buffer of the pool (docs/receive-strategies.md). A buffer held by a
/// message not yet delivered still counts, so free plus held never pass the size.
#[test]
fn a_pool_counts_held_buffers_against_its_size() {
    use rddp_proto::ddp::{
        BufferOrdering, BufferPool, DdpConfig, DdpStream, PoolConfig, PoolError, RecvBuffer,
    };
    let pool = BufferPool::new(PoolConfig::shared(BufferOrdering::Arrival, 2, 2));
    let buf = |id| RecvBuffer {
        id,
        data: vec![0; 8],
    };
    let mut s = DdpStream::new(StreamId(1), PdId(1), DdpConfig::default()).unwrap();
    s.set_recv_pool(0, &pool).unwrap();
    let mem = MemoryTable::with_seed(3);
    pool.post(buf(1)).unwrap();
    pool.post(buf(2)).unwrap();
    // MSN 1's first segment takes a buffer; the message is not complete.
    s.on_segment(&mem, 0, &untagged(false, 1, 0, b"ab"))
        .unwrap();
    assert_eq!((pool.free(), pool.held()), (1, 1));
    assert_eq!(pool.post(buf(3)), Err(PoolError::Full(2)));
    s.on_segment(&mem, 1, &untagged(true, 1, 2, b"cd")).unwrap();
    assert!(s.poll_delivery().is_some());
    assert_eq!(pool.held(), 0);
    pool.post(buf(3)).unwrap();
    // A flushed stream gives its held buffers back too.
    s.on_segment(&mem, 2, &untagged(false, 2, 0, b"ef"))
        .unwrap();
    assert_eq!(pool.held(), 1);
    s.abort();
    assert_eq!(pool.held(), 0);
}
