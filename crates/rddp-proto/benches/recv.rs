//! Untagged receive under each strategy of docs/receive-strategies.md:
//!
//! * memory per idle stream: the heap the streams themselves take, counted by an
//!   instrumented global allocator, beyond the pool's buffers (printed once; target:
//!   10,000 idle streams on one SRQ of 1,024 buffers under 64 MiB);
//! * receive throughput: one-segment Sends spread round-robin over 1, 100 and
//!   10,000 streams sharing one pool; each delivered buffer goes straight back to
//!   the pool (and, under credits, the stream gets one more credit).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rddp_proto::ddp::{
    BufferOrdering, BufferPool, DdpConfig, DdpStream, Delivery, PoolConfig, RecvBuffer,
};
use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_wire::UntaggedHeader;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;
use std::hint::black_box;
use std::time::Duration;

// Counting allocator from a library: no `unsafe` in this workspace.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const BUFFERS: usize = 1024;
const BUF_LEN: usize = 4096;
const PAYLOAD: usize = 256;

#[derive(Debug, Clone, Copy)]
enum Strategy {
    /// Strategy 1: per-stream buffers (no sharing possible); the baseline.
    Ordered,
    Shared(BufferOrdering),
    Credits(BufferOrdering),
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Strategy::Ordered => "ordered",
            Strategy::Shared(BufferOrdering::Sequential) => "srq_seq",
            Strategy::Shared(BufferOrdering::Arrival) => "srq_arrival",
            Strategy::Credits(BufferOrdering::Sequential) => "credits_seq",
            Strategy::Credits(BufferOrdering::Arrival) => "credits_arrival",
        }
    }
}

const ALL: [Strategy; 5] = [
    Strategy::Ordered,
    Strategy::Shared(BufferOrdering::Sequential),
    Strategy::Shared(BufferOrdering::Arrival),
    Strategy::Credits(BufferOrdering::Sequential),
    Strategy::Credits(BufferOrdering::Arrival),
];

fn buf(id: u64) -> RecvBuffer {
    RecvBuffer {
        id,
        data: vec![0; BUF_LEN],
    }
}

fn pool_for(s: Strategy) -> Option<BufferPool> {
    let p = match s {
        Strategy::Ordered => return None,
        Strategy::Shared(o) => BufferPool::new(PoolConfig::shared(o, BUFFERS, 16)),
        Strategy::Credits(o) => BufferPool::new(PoolConfig::credits(o, BUFFERS)),
    };
    for id in 0..BUFFERS as u64 {
        p.post(buf(id)).unwrap();
    }
    Some(p)
}

/// `n` idle streams with queue 0 on `pool` (strategy 3: one credit each).
fn streams(s: Strategy, pool: Option<&BufferPool>, n: usize) -> Vec<DdpStream> {
    (0..n)
        .map(|i| {
            let mut st = DdpStream::new(StreamId(i as u32), PdId(1), DdpConfig::default()).unwrap();
            if let Some(p) = pool {
                st.set_recv_pool(0, p).unwrap();
            }
            if let Strategy::Credits(_) = s {
                st.grant_credits(0, 1);
            }
            st
        })
        .collect()
}

fn net(r: &Region<'_, System>) -> isize {
    let c = r.change();
    c.bytes_allocated as isize - c.bytes_deallocated as isize + c.bytes_reallocated
}

/// Printed, not timed: heap per idle stream beyond the buffers.
fn memory_report() {
    eprintln!("\nmemory of idle streams (heap beyond the buffers):");
    for s in ALL {
        for n in [1usize, 100, 10_000] {
            let r = Region::new(GLOBAL);
            let pool = pool_for(s);
            let buffers = net(&r);
            let r = Region::new(GLOBAL);
            let v = streams(s, pool.as_ref(), n);
            let bytes = net(&r);
            eprintln!(
                "  {:<16} {:>6} streams: {:>11} B total, {:>6} B/stream ({:.2} MiB); pool buffers {:.2} MiB",
                s.name(),
                n,
                bytes,
                bytes / n as isize,
                bytes as f64 / (1 << 20) as f64,
                buffers as f64 / (1 << 20) as f64
            );
            drop(black_box(v));
        }
    }
}

fn throughput(c: &mut Criterion) {
    memory_report();
    let mut g = c.benchmark_group("recv");
    g.throughput(Throughput::Elements(1))
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    let payload = vec![0x5Au8; PAYLOAD];
    for s in ALL {
        for n in [1usize, 100, 10_000] {
            let pool = pool_for(s);
            let mut v = streams(s, pool.as_ref(), n);
            if pool.is_none() {
                // Strategy 1: the same 1,024 buffers, spread over the streams
                // (at least one each).
                for (k, st) in v.iter_mut().enumerate() {
                    for j in 0..(BUFFERS / n).max(1) {
                        st.post_recv(0, buf((k * BUFFERS + j) as u64)).unwrap();
                    }
                }
            }
            let mem = MemoryTable::with_seed(1);
            let mut seq = vec![0u64; n];
            let mut seg = Vec::with_capacity(18 + PAYLOAD);
            let mut k = 0usize;
            g.bench_with_input(BenchmarkId::new(s.name(), n), &n, |b, _| {
                b.iter(|| {
                    let i = k % n;
                    k += 1;
                    let st = &mut v[i];
                    let msn = st.sink().expected_msn(0).unwrap_or(1);
                    seg.clear();
                    seg.extend_from_slice(&UntaggedHeader::new(true, [0; 5], 0, msn, 0).to_bytes());
                    seg.extend_from_slice(&payload);
                    st.on_segment(&mem, seq[i], black_box(&seg)).unwrap();
                    seq[i] += 1;
                    if let Some(Delivery::Untagged { buffer, .. }) = st.poll_delivery() {
                        match &pool {
                            Some(p) => {
                                p.post(buffer).unwrap();
                                st.grant_credits(0, 1);
                            }
                            None => st.post_recv(0, buffer).unwrap(),
                        }
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, throughput);
criterion_main!(benches);
