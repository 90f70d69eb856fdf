//! Target `verbs_ops`: the verbs API (rddp) fed arbitrary operation sequences on
//! two queue pairs joined by the in-memory LLP: Sends (solicited, with
//! Invalidate, fenced, inline), RDMA Writes and Reads to good and bad remote
//! buffers, receives (into buffers and into regions), polls, disconnects,
//! queue pairs and regions dropped and invalidated mid-traffic, small quotas
//! and CQs.
//!
//! Oracles: no panic and no hang (libFuzzer's timeout); no lost completion:
//! once both queue pairs are gone every accepted post has exactly one
//! completion, none is duplicated or foreign, no CQ overflowed; a send-queue
//! slot is held from posting until its completion is polled (rddp_proto::wq):
//! a post is accepted only below the depth and refused as SendQueueFull only
//! at it; the send queue completes in posting order (each send-side
//! completion is the oldest accepted send-queue post not yet completed:
//! ibv_poll_cq(3), `rddp_proto::rdmap::sq_order`); regions the peer may only
//! read never change; quotas back to zero once everything is dropped.

use crate::input::Input;
use rddp::transport::memory_pair;
use rddp::{
    Access, CompletionQueue, Consumer, Device, DeviceLimits, MemoryRegion, QueuePair,
    QueuePairBuilder, Quota, RemoteBuf, SendFlags, Usage,
};
use std::collections::{BTreeMap, BTreeSet};

const MRS: usize = 4;

struct Side {
    consumer: Consumer,
    cq: CompletionQueue,
    qp: Option<QueuePair>,
    /// 0: source (no remote access), 1: remote read+write, 2: remote read only,
    /// 3: Read sink (remote write).
    mrs: Vec<Option<MemoryRegion>>,
    read_only: Vec<u8>,
    /// Accepted posts by wr_id, with the completions seen for each.
    posted: BTreeMap<u64, u32>,
    /// The wr_ids of accepted send-queue posts (Sends, Writes, Reads).
    sends: BTreeSet<u64>,
    /// Those not yet completed, in posting order.
    sends_open: std::collections::VecDeque<u64>,
    /// The send queue's depth (max_send_wr).
    max_send: u32,
    next_id: u64,
}

impl Side {
    fn mr(&self, i: usize) -> Option<&MemoryRegion> {
        self.mrs.get(i % MRS).and_then(Option::as_ref)
    }

    /// Send-queue posts whose completion has not been polled yet: the slots
    /// they hold.
    fn sends_unpolled(&self) -> usize {
        self.sends.iter().filter(|id| self.posted[id] == 0).count()
    }

    fn take_completions(&mut self) {
        let qp_num = self.qp.as_ref().map(QueuePair::qp_num);
        for wc in self.cq.poll(usize::MAX) {
            if let Some(q) = qp_num {
                assert_eq!(wc.qp_num, q, "completion of another queue pair");
            }
            self.seen(&wc);
        }
    }

    /// A completion polled: exactly one per accepted post, and the send
    /// queue's in posting order.
    fn seen(&mut self, wc: &rddp::WorkCompletion) {
        let n = self
            .posted
            .get_mut(&wc.wr_id)
            .unwrap_or_else(|| panic!("completion for wr_id {} never posted: {wc:?}", wc.wr_id));
        *n += 1;
        assert_eq!(*n, 1, "second completion for wr_id {}: {wc:?}", wc.wr_id);
        if self.sends.contains(&wc.wr_id) {
            let oldest = self.sends_open.pop_front();
            assert_eq!(
                oldest,
                Some(wc.wr_id),
                "send queue completed out of posting order: {wc:?}"
            );
        }
        if wc.status == rddp::WcStatus::Success {
            crate::reach::note(|r| r.completed_ok += 1);
        }
    }
}

fn side(
    dev: &Device,
    name: &str,
    input: &mut Input<'_>,
) -> Option<(Side, rddp::PreparedQueuePair)> {
    let quota = Quota {
        receive_buffers: u64::from(input.u8() % 24),
        outstanding_reads: u64::from(input.u8() % 8),
        memory_regions: 2 + u64::from(input.u8() % 4),
        ..Quota::default()
    };
    let consumer = dev.consumer(name, quota).ok()?;
    let pd = consumer.alloc_pd().ok()?;
    let cq = CompletionQueue::new(8 + input.below(128));
    let access = [
        Access::NONE,
        Access::REMOTE_READ | Access::REMOTE_WRITE,
        Access::REMOTE_READ,
        Access::REMOTE_WRITE,
    ];
    let mut mrs = Vec::new();
    let mut read_only = Vec::new();
    for (i, a) in access.into_iter().enumerate() {
        let len = 1 + usize::from(input.u16() % 4096);
        let data: Vec<u8> = (0..len).map(|k| (k as u8) ^ (i as u8 * 17)).collect();
        if i == 2 {
            read_only = data.clone();
        }
        mrs.push(pd.register(data, a).ok());
    }
    let max_send = 1 + u32::from(input.u8() % 16);
    let prep = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(max_send)
        .max_recv_wr(1 + u32::from(input.u8() % 16))
        .ird(u32::from(input.u8() % 5))
        .ord(u32::from(input.u8() % 5))
        .build()
        .ok()?;
    Some((
        Side {
            consumer,
            cq,
            qp: None,
            mrs,
            read_only,
            posted: BTreeMap::new(),
            sends: BTreeSet::new(),
            sends_open: std::collections::VecDeque::new(),
            max_send,
            next_id: 1,
        },
        prep,
    ))
}

/// A remote buffer: one the peer advertised (mostly), a corrupted one, or anything.
fn remote(peer: &Side, input: &mut Input<'_>) -> RemoteBuf {
    let pick = input.u8();
    let good = peer.mr(usize::from(pick)).map(MemoryRegion::remote);
    match (pick >> 4, good) {
        (0..=11, Some(r)) => r,
        (12 | 13, Some(r)) => RemoteBuf {
            stag: r.stag ^ 1,
            ..r
        },
        _ => RemoteBuf {
            stag: input.u32(),
            to: input.u64(),
            len: u64::from(input.u32()),
        },
    }
}

fn op(sides: &mut [Side; 2], input: &mut Input<'_>) {
    let me = input.below(2);
    let code = input.u8();
    let (a, b) = sides.split_at_mut(1);
    let (s, peer) = if me == 0 {
        (&mut a[0], &b[0])
    } else {
        (&mut b[0], &a[0])
    };
    let id = s.next_id;
    let off = u64::from(input.u16() % 4200);
    let len = u64::from(input.u16() % 4200);
    let held = s.sends_unpolled();
    let send_side = matches!(code % 14, 0..=6);
    let res = match (code % 14, s.qp.as_ref()) {
        (0 | 1, Some(qp)) => {
            let flags = SendFlags {
                solicited: input.bool(),
                invalidate: input.bool().then(|| remote(peer, input).stag),
                fence: input.u8().is_multiple_of(4),
                // Every Send completes: the model counts each one back.
                unsignaled: false,
            };
            match s.mr(0) {
                Some(mr) => qp.post_send(id, mr, off, len, flags),
                None => return,
            }
        }
        (2, Some(qp)) => qp.post_send_inline(id, &vec![0xAB; len as usize], SendFlags::default()),
        (3 | 4, Some(qp)) => {
            let r = remote(peer, input);
            let roff = u64::from(input.u16() % 4200);
            match s.mr(usize::from(input.u8())) {
                Some(mr) => qp.post_write(id, mr, off, len, r, roff),
                None => return,
            }
        }
        (5 | 6, Some(qp)) => {
            let r = remote(peer, input);
            let roff = u64::from(input.u16() % 4200);
            match s.mr(3 + usize::from(input.u8() % 2) * 2) {
                Some(mr) => qp.post_read(id, mr, off, len as u32, r, roff),
                None => return,
            }
        }
        (7, Some(qp)) => qp.post_recv(id, len as usize),
        // A receive into a region the peer may write or read into (never
        // the read-only one, which must not change).
        (8, Some(qp)) => match s.mr(1 + usize::from(input.u8() % 2) * 2) {
            Some(mr) => qp.post_recv_mr(id, mr, off, len),
            None => return,
        },
        (9 | 13, _) => {
            let max = input.below(8);
            let got = if code % 14 == 9 {
                s.cq.poll(max)
            } else if s.posted.values().any(|n| *n == 0) {
                // Something is outstanding: give the queue pair threads a moment.
                s.cq.wait(max, std::time::Duration::from_millis(20))
            } else {
                Vec::new()
            };
            for wc in &got {
                s.seen(wc);
            }
            return;
        }
        (10, Some(qp)) => {
            crate::trace!("side {me} disconnect");
            qp.disconnect();
            return;
        }
        (11, _) => {
            // Dropping a queue pair flushes everything posted on it.
            crate::trace!("side {me} drop qp");
            s.qp = None;
            return;
        }
        (12, _) => {
            let i = input.below(MRS);
            if input.bool() {
                if let Some(mr) = s.mr(i) {
                    let _ = mr.invalidate();
                }
            } else if i != 2 {
                s.mrs[i] = None;
            }
            return;
        }
        _ => return,
    };
    s.next_id += 1;
    crate::trace!("side {me} code {} id {id} -> {res:?}", code % 14);
    if send_side {
        match &res {
            Ok(()) => assert!(
                held < s.max_send as usize,
                "send post accepted with {held} slots held, depth {}",
                s.max_send
            ),
            Err(rddp::Error::SendQueueFull { depth }) => {
                assert_eq!(*depth, s.max_send);
                assert_eq!(held, s.max_send as usize, "SendQueueFull below the depth");
            }
            Err(_) => {}
        }
        if res.is_ok() {
            s.sends.insert(id);
            s.sends_open.push_back(id);
        }
    }
    if res.is_ok() {
        s.posted.insert(id, 0);
    }
}

/// The `verbs_ops` target: two verbs queue pairs over the in-memory LLP running any sequence of verbs; panics when an oracle fails
/// (docs/reliability.md lists them).
pub fn verbs_ops(data: &[u8]) {
    let mut input = Input::new(data);
    let dev = Device::new();
    let mulpdu = 19 + usize::from(input.u16() % 2048);
    let Some((a, pa)) = side(&dev, "a", &mut input) else {
        return;
    };
    let Some((b, pb)) = side(&dev, "b", &mut input) else {
        return;
    };
    let (ca, cb) = memory_pair(mulpdu);
    let mut sides = [a, b];
    match (pa.attach(ca), pb.attach(cb)) {
        (Ok(qa), Ok(qb)) => {
            sides[0].qp = Some(qa);
            sides[1].qp = Some(qb);
        }
        _ => return,
    }
    let mut ops = 0;
    while !input.is_empty() && ops < 256 {
        ops += 1;
        op(&mut sides, &mut input);
    }
    // Teardown: both queue pairs gone, so every completion is in its CQ.
    for s in &mut sides {
        s.qp = None;
    }
    for s in &mut sides {
        s.take_completions();
        assert_eq!(s.cq.overflows(), 0, "a completion queue overflowed");
        for (id, n) in &s.posted {
            assert_eq!(*n, 1, "wr_id {id} completed {n} times (lost completion)");
        }
        if let Some(ro) = s.mr(2) {
            let got = ro.read(0, ro.len()).expect("local read");
            assert_eq!(got, s.read_only, "a remote-read-only region changed");
        }
        s.mrs.clear();
    }
    for s in &sides {
        assert_eq!(
            s.consumer.usage(),
            Usage::default(),
            "quota not back to zero"
        );
    }
    // Once every handle is gone the consumers' shares are back in the device.
    drop(sides);
    if let Err(e) = dev.consumer("everything", DeviceLimits::default().capacity) {
        panic!("the device did not get its consumers' shares back: {e}");
    }
}
