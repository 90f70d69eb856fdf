//! Target `ddp_sink`: a DDP stream's data sink (RFC 5041; docs/receive-strategies.md)
//! fed arbitrary segment sequences in arbitrary sender order (in order, ahead,
//! gap-filling, duplicates, anything), interleaved with receive buffers posted
//! (buffers of their own, or spans of a registered region, to a queue or its
//! pool), credits granted, direct placements and teardowns, under every
//! receive strategy.
//!
//! Oracles: no panic; guard octets intact; every region equal to a model in
//! which only accepted tagged segments were placed, and only into writable
//! regions of this stream, inside their bounds (a refused segment places
//! nothing); untagged messages delivered per queue with consecutive MSNs from 1,
//! never longer than their buffer or span; no octet of the receive region
//! outside every span posted changed; reorder state bounded by the window.

use crate::fixture::{PD, Regions, STREAM, segment};
use crate::input::Input;
use rddp_proto::ddp::{
    Begin, BufferOrdering, BufferPool, DdpConfig, DdpStream, Delivery, PoolConfig, RecvBuffer,
    RecvModel, RegionSpan, StreamEvent, Target,
};
use rddp_proto::mem::{Access, MemoryTable, RegionRef, StagScope};
use rddp_wire::{DdpHeader, TaggedHeader};
use std::collections::{BTreeSet, HashMap};

/// Octets of the region that receives posted into a region name (local
/// access only: no tagged segment may write it), and what it holds at first.
const RECV_REGION: usize = 4096;
const RECV_FILL: u8 = 0xEE;

/// Receives posted into the receive region: each one's span by id, and
/// every octet any span ever covered (what may change).
struct RecvSpans {
    region: RegionRef,
    caps: HashMap<u64, usize>,
    covered: Vec<bool>,
}

impl RecvSpans {
    fn new(mem: &MemoryTable) -> Self {
        let stag = mem
            .register(
                PD,
                StagScope::Pd,
                Access::NONE,
                0,
                vec![RECV_FILL; RECV_REGION],
            )
            .expect("receive region registers");
        Self {
            region: mem.region(stag).expect("registered"),
            caps: HashMap::new(),
            covered: vec![false; RECV_REGION],
        }
    }

    /// A span from `input`, sometimes past the region's end (refused).
    fn span(&mut self, input: &mut Input<'_>, id: u64) -> RegionSpan {
        let offset = usize::from(input.u16()) % (RECV_REGION + 64);
        let len = usize::from(input.u8());
        if let Some(end) = offset.checked_add(len).filter(|&e| e <= RECV_REGION) {
            self.caps.insert(id, len);
            self.covered[offset..end].fill(true);
        }
        RegionSpan {
            region: self.region.clone(),
            offset,
            len,
        }
    }

    /// The octets no span covered are as registered.
    fn check(&self) {
        let data = self.region.data();
        for (i, (&b, &c)) in data.iter().zip(&self.covered).enumerate() {
            assert!(
                c || b == RECV_FILL,
                "receive region octet {i} outside every span changed"
            );
        }
    }
}

/// Sender positions handed out so far, to choose the next one from.
#[derive(Default)]
pub(crate) struct Order {
    used: BTreeSet<u64>,
    hi: u64,
}

impl Order {
    /// The next position: in order, ahead (leaving a gap), the oldest gap, a
    /// duplicate, or anything.
    pub(crate) fn pick(&mut self, input: &mut Input<'_>) -> u64 {
        match input.u8() % 10 {
            0..=4 => self.hi,
            5 => self.hi.saturating_add(1 + u64::from(input.u8() % 8)),
            6 | 7 => {
                // The oldest position not yet accepted.
                let mut gap = 0;
                for &u in &self.used {
                    if u != gap {
                        break;
                    }
                    gap += 1;
                }
                gap
            }
            8 => self.used.iter().next_back().copied().unwrap_or(0),
            _ => input.u64(),
        }
    }

    pub(crate) fn accepted(&mut self, seq: u64) {
        if self.used.len() < 4096 {
            self.used.insert(seq);
        }
        self.hi = self.hi.max(seq.saturating_add(1));
    }
}

struct Sink {
    s: DdpStream,
    cfg: DdpConfig,
    next_msn: Vec<u32>,
    order: Order,
    pool: Option<BufferPool>,
}

fn new_sink(cfg: DdpConfig, model: u8, pool_size: usize) -> Sink {
    let mut s = DdpStream::new(STREAM, PD, cfg).expect("valid config");
    let pool = match model % 5 {
        0 => None,
        1 => {
            let _ = s.set_recv_model(0, RecvModel::Credits);
            None
        }
        m => {
            let ordering = if m == 2 {
                BufferOrdering::Sequential
            } else {
                BufferOrdering::Arrival
            };
            let pc = if m == 4 {
                PoolConfig::credits(ordering, pool_size)
            } else {
                PoolConfig::shared(ordering, pool_size, 2)
            };
            let p = BufferPool::new(pc);
            let _ = s.set_recv_pool(0, &p);
            Some(p)
        }
    };
    Sink {
        s,
        cfg,
        next_msn: vec![1; cfg.num_qns as usize],
        order: Order::default(),
        pool,
    }
}

impl Sink {
    fn drain(&mut self, caps: &HashMap<u64, usize>) {
        while let Some(d) = self.s.poll_delivery() {
            crate::reach::note(|r| r.delivered += 1);
            if let Delivery::Untagged {
                qn,
                msn,
                len,
                buffer,
                ..
            } = d
            {
                let q = qn as usize;
                assert!(q < self.next_msn.len(), "delivery on QN {qn}");
                assert_eq!(msn, self.next_msn[q], "QN {qn} delivered out of order");
                self.next_msn[q] = msn.wrapping_add(1);
                let cap = caps.get(&buffer.id).copied().unwrap_or(buffer.data.len());
                assert!(len as usize <= cap, "message longer than its buffer");
                if len > 0 && caps.contains_key(&buffer.id) {
                    crate::reach::note(|r| r.into_region += 1);
                }
            }
        }
        while let Some(e) = self.s.poll_event() {
            if let StreamEvent::Error(e) = e {
                assert!(e.code.layer <= 1, "DDP error with code {}", e.code);
            }
        }
        if let Some(p) = &self.pool {
            while p.poll_event().is_some() {}
        }
        let w = self.s.sink().reorder_waiting();
        assert!(
            w <= self.cfg.max_reorder,
            "{w} segments wait, window {}",
            self.cfg.max_reorder
        );
    }
}

/// The `ddp_sink` target: a DDP stream fed arbitrary segments in arbitrary sender order; panics when an oracle fails
/// (docs/reliability.md lists them).
pub fn ddp_sink(data: &[u8]) {
    let mut input = Input::new(data);
    let cfg = DdpConfig {
        num_qns: 1 + input.below(4) as u32,
        max_reorder: match input.u8() {
            0..=200 => usize::from(input.u8() % 16),
            _ => 4096,
        },
        mulpdu: 1454,
    };
    let model_sel = input.u8();
    let pool_size = input.below(16);
    let mem = MemoryTable::with_seed(11);
    let regions = Regions::new(&mem, &mut input, STREAM);
    let mut model = regions.model();
    let mut sink = new_sink(cfg, model_sel, pool_size);
    let mut spans = RecvSpans::new(&mem);
    let mut ids = 0u64;
    let mut ops = 0;
    while !input.is_empty() && ops < 512 {
        ops += 1;
        match input.u8() % 12 {
            0..=5 => {
                let seq = sink.order.pick(&mut input);
                let seg = segment(&mut input, &regions);
                let placed_before = sink.s.sink_stats().segments_placed;
                let res = sink.s.on_segment(&mem, seq, &seg);
                // A refused segment was still placed (on arrival, legally) when
                // the refusal is about a later-sent segment that arrived earlier,
                // whose in-order checks ran once this one filled the gap before
                // it: the sink counts the placement then. If it counted one it
                // did not make (or made one it did not count), the model differs.
                let placed = res.is_ok() || sink.s.sink_stats().segments_placed > placed_before;
                let tagged = match DdpHeader::parse(&seg) {
                    Ok(DdpHeader::Tagged(h)) if seg.len() > 14 => Some(h),
                    _ => None,
                };
                if res.is_ok() {
                    crate::reach::note(|r| r.placed += 1);
                    sink.order.accepted(seq);
                }
                if let Some(h) = tagged.filter(|_| placed) {
                    regions.apply(&mut model, h.stag, h.to, &seg[14..]);
                }
            }
            6 => {
                let qn = input.below(cfg.num_qns as usize + 1) as u32;
                let buf = RecvBuffer {
                    id: ids,
                    data: vec![0; usize::from(input.u8())],
                };
                ids += 1;
                match &sink.pool {
                    Some(p) if qn == 0 => {
                        let _ = p.post(buf);
                    }
                    _ => {
                        let _ = sink.s.post_recv(qn, buf);
                    }
                }
            }
            7 => {
                let _ = sink
                    .s
                    .grant_credits(input.below(2) as u32, u32::from(input.u8() % 8));
            }
            8 => {
                // Direct placement as MPA does it: validate from the header, the
                // LLP writes the payload, then (CRC good) account for it.
                let seq = sink.order.pick(&mut input);
                let stag = regions.stag(&mut input);
                let to = regions.to(&mut input, stag);
                let h = TaggedHeader::new(input.bool(), 0x40, stag, to);
                let len = usize::from(input.u8() % 96);
                let crc_ok = input.u8() != 0;
                let body = crate::fixture::payload(&mut input, len);
                match sink
                    .s
                    .begin_segment(&mem, seq, &h.to_bytes(), len, Begin::Alone)
                {
                    Ok(Target::Region {
                        region,
                        offset,
                        len: n,
                    }) => {
                        assert_eq!(n, len);
                        {
                            let mut data = region.data_mut();
                            assert!(offset + len <= data.len(), "direct target past the region");
                            data[offset..offset + len].copy_from_slice(&body);
                        }
                        // Placed octets are in the region whatever the CRC says.
                        regions.apply(&mut model, stag, to, &body);
                        if crc_ok && sink.s.finish_segment(true).is_ok() {
                            sink.order.accepted(seq);
                        } else if !crc_ok {
                            let _ = sink.s.finish_segment(false);
                            sink.s.abort();
                        }
                    }
                    Ok(Target::Nothing) => {
                        assert_eq!(len, 0);
                        if sink.s.finish_segment(true).is_ok() {
                            sink.order.accepted(seq);
                        }
                    }
                    Ok(Target::Buffer { .. }) => panic!("a tagged segment got a receive buffer"),
                    // Refused from the header: reported once the LLP's check
                    // passed (as header first from MPA reports it).
                    Err(_) => {
                        let _ = sink.s.finish_segment(true);
                    }
                }
            }
            9 => match input.u8() % 4 {
                0 => sink.s.abort(),
                1 => sink.s.close(),
                2 => sink.s.on_llp_closed(input.bool()),
                _ => {}
            },
            10 => {
                // The attacker opens a new stream after this one failed or closed.
                sink.drain(&spans.caps);
                sink = new_sink(cfg, model_sel, pool_size);
            }
            11 => {
                // A receive into a span of the receive region, on a queue or
                // into its pool.
                let qn = input.below(cfg.num_qns as usize + 1) as u32;
                let place = spans.span(&mut input, ids);
                match &sink.pool {
                    Some(p) if qn == 0 => {
                        let _ = p.post_in_region(ids, place);
                    }
                    _ => {
                        let _ = sink.s.post_recv_in_region(qn, ids, place);
                    }
                }
                ids += 1;
            }
            _ => {}
        }
        sink.drain(&spans.caps);
    }
    sink.s.abort();
    sink.drain(&spans.caps);
    regions.check(&mem, Some(&model));
    spans.check();
}
