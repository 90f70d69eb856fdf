//! The side that survives: a verbs-API initiator that keeps Writes, Reads, Sends
//! and receives posted, and accounts for every work request it posted.
#![allow(dead_code)]

use rddp::transport::sctp::{self, SctpOptions};
use rddp::{
    Access, AsyncEvent, CompletionQueue, Consumer, Device, MemoryRegion, ProtectionDomain,
    QueuePair, QueuePairBuilder, Quota, RemoteBuf, SendFlags, Usage, WcOpcode, WcStatus,
};
use rddp_mpa::MpaOptions;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The lower layer a survivor connects over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Llp {
    Mpa,
    Sctp,
}

/// Send-queue and receive-queue depths.
const SQ: u32 = 64;
const RQ: u32 = 32;

/// What to keep in flight when the peer dies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    pub writes: usize,
    pub reads: usize,
    /// Sends (the target echoes each one into one of our receives).
    pub sends: usize,
    /// Octets per Write and Read.
    pub size: u64,
}

/// The quota each survivor's consumer gets.
pub(crate) const QUOTA: Quota = Quota {
    queue_pairs: 1,
    memory_regions: 4,
    registered_bytes: 8 << 20,
    receive_buffers: RQ as u64,
    outstanding_reads: SQ as u64,
};

/// Every posted work request's end, after the peer died.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Work requests posted (send queue and receive queue).
    pub posted: usize,
    /// Completions taken for them, by status.
    pub by_status: BTreeMap<String, usize>,
    /// Posted and never completed (by the deadline).
    pub missing: usize,
    /// Completions for no outstanding work request (invented or doubled).
    pub unexpected: usize,
    /// From the peer's death to the last completion.
    pub elapsed: Duration,
    /// Reads still outstanding when the peer died (a real mid-transfer death).
    pub reads_in_flight_at_death: usize,
    pub events: Vec<AsyncEvent>,
}

impl Outcome {
    pub(crate) fn not_success(&self) -> usize {
        self.by_status
            .iter()
            .filter(|(k, _)| k.as_str() != "Success")
            .map(|(_, v)| v)
            .sum()
    }
}

/// A connected survivor.
pub(crate) struct Survivor {
    pub consumer: Consumer,
    pd: ProtectionDomain,
    cq: CompletionQueue,
    qp: Option<QueuePair>,
    src: Option<MemoryRegion>,
    sink: Option<MemoryRegion>,
    remote: RemoteBuf,
    /// Outstanding work requests: wr_id -> opcode.
    pending: HashMap<u64, WcOpcode>,
    posted: usize,
    by_status: BTreeMap<String, usize>,
    unexpected: usize,
    next_id: u64,
}

impl Survivor {
    /// Connect to the target at `addr` over MPA with `RQ` receives posted;
    /// take its advertisement. `dead_peer`: [`MpaOptions::dead_peer_timeout`].
    pub(crate) fn connect(dev: &Device, addr: SocketAddr, dead_peer: Option<Duration>) -> Self {
        Self::connect_over(dev, addr, Llp::Mpa, dead_peer)
    }

    /// As [`Self::connect`], over `llp` (`dead_peer`: MPA's or SCTP's
    /// `dead_peer_timeout`; `None` keeps the default).
    pub(crate) fn connect_over(
        dev: &Device,
        addr: SocketAddr,
        llp: Llp,
        dead_peer: Option<Duration>,
    ) -> Self {
        let consumer = dev.consumer("survivor", QUOTA).expect("consumer");
        assert_eq!(consumer.usage(), Usage::default());
        let pd = consumer.alloc_pd().unwrap();
        let cq = CompletionQueue::new((SQ + RQ) as usize);
        let mut p = QueuePairBuilder::new(&pd, &cq, &cq)
            .max_send_wr(SQ)
            .max_recv_wr(RQ)
            .build()
            .unwrap();
        let mut pending = HashMap::new();
        for id in 0..u64::from(RQ) {
            p.post_recv(id, 4096).unwrap();
            pending.insert(id, WcOpcode::Recv);
        }
        let qp = match llp {
            Llp::Mpa => {
                let opts = MpaOptions {
                    dead_peer_timeout: dead_peer,
                    ..MpaOptions::default()
                };
                p.connect_mpa(addr, opts).expect("connect to the target")
            }
            Llp::Sctp => {
                let SocketAddr::V4(at) = addr else {
                    panic!("SCTP targets are IPv4: {addr}")
                };
                let defaults = SctpOptions::default();
                let opts = SctpOptions {
                    dead_peer_timeout: dead_peer.or(defaults.dead_peer_timeout),
                    ..defaults
                };
                let conn = sctp::connect(at, opts, &[]).expect("connect to the target");
                p.attach(conn).expect("attach")
            }
        };
        let mut s = Self {
            consumer,
            pd,
            cq,
            qp: Some(qp),
            src: None,
            sink: None,
            remote: RemoteBuf {
                stag: 0,
                to: 0,
                len: 0,
            },
            pending,
            posted: RQ as usize,
            by_status: BTreeMap::new(),
            unexpected: 0,
            next_id: 1000,
        };
        // The target's first Send: STag || TO || length of its buffer.
        let wc = s.next_completion(Duration::from_secs(10)).expect("advert");
        assert_eq!(
            (wc.opcode, wc.status, wc.byte_len),
            (WcOpcode::Recv, WcStatus::Success, 16)
        );
        s.remote = RemoteBuf::from_bytes(&wc.buffer.as_ref().unwrap()[..16]).unwrap();
        s.repost(wc.wr_id);
        s
    }

    fn qp(&self) -> &QueuePair {
        self.qp.as_ref().expect("queue pair")
    }

    fn repost(&mut self, id: u64) {
        self.qp().post_recv(id, 4096).unwrap();
        self.pending.insert(id, WcOpcode::Recv);
        self.posted += 1;
    }

    /// Take one completion and account for it.
    fn next_completion(&mut self, wait: Duration) -> Option<rddp::WorkCompletion> {
        let wc = self.cq.wait(1, wait).pop()?;
        match self.pending.remove(&wc.wr_id) {
            Some(op) if op == wc.opcode => {}
            _ => self.unexpected += 1,
        }
        *self
            .by_status
            .entry(format!("{:?}", wc.status))
            .or_default() += 1;
        Some(wc)
    }

    fn id(&mut self, op: WcOpcode) -> u64 {
        self.next_id += 1;
        self.pending.insert(self.next_id, op);
        self.posted += 1;
        self.next_id
    }

    /// Post `load` and return once its first Read has completed: the transfer is
    /// under way, and the rest is in flight.
    pub(crate) fn start(&mut self, load: Load) {
        let n = load.size;
        let src = self
            .pd
            .register(vec![0x5a; n as usize], Access::NONE)
            .unwrap();
        // Every Read lands on the same octets: what matters is that it completes.
        let sink = self
            .pd
            .register(vec![0; n as usize], Access::REMOTE_WRITE)
            .unwrap();
        let remote = self.remote;
        assert!(remote.len >= n, "the target's buffer is smaller than {n}");
        let most = load.writes.max(load.reads).max(load.sends);
        for i in 0..most {
            if i < load.writes {
                let id = self.id(WcOpcode::RdmaWrite);
                self.qp().post_write(id, &src, 0, n, remote, 0).unwrap();
            }
            if i < load.reads {
                let id = self.id(WcOpcode::RdmaRead);
                self.qp()
                    .post_read(id, &sink, 0, n as u32, remote, 0)
                    .unwrap();
            }
            if i < load.sends {
                let id = self.id(WcOpcode::Send);
                self.qp()
                    .post_send_inline(id, b"are you there?", SendFlags::default())
                    .unwrap();
            }
        }
        self.src = Some(src);
        self.sink = Some(sink);
        if load.reads == 0 {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no Read completed in 20 s");
            if let Some(wc) = self.next_completion(left) {
                assert_eq!(wc.status, WcStatus::Success, "before the death: {wc:?}");
                if wc.opcode == WcOpcode::RdmaRead {
                    return;
                }
            }
        }
    }

    /// Reads outstanding now.
    pub(crate) fn reads_in_flight(&self) -> usize {
        self.pending
            .values()
            .filter(|op| **op == WcOpcode::RdmaRead)
            .count()
    }

    /// Take completions until every posted work request has one or `bound` has
    /// passed since `died`; then check for strays a little longer.
    pub(crate) fn collect(&mut self, died: Instant, bound: Duration, in_flight: usize) -> Outcome {
        let deadline = died + bound;
        let mut last = died;
        while !self.pending.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if self.next_completion(left).is_some() {
                last = Instant::now();
            }
        }
        // Nothing more may come: no completion invented or doubled.
        while self.next_completion(Duration::from_millis(20)).is_some() {}
        Outcome {
            posted: self.posted,
            by_status: self.by_status.clone(),
            missing: self.pending.len(),
            unexpected: self.unexpected,
            elapsed: last.saturating_duration_since(died),
            reads_in_flight_at_death: in_flight,
            events: self.qp().async_events(),
        }
    }

    /// What the consumer holds with the queue pair and regions still alive, and
    /// after they are gone.
    pub(crate) fn close(mut self) -> (Usage, Usage) {
        let live = self.consumer.usage();
        self.qp = None;
        self.src = None;
        self.sink = None;
        (live, self.consumer.usage())
    }
}
