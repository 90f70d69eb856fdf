//! Segments validated and placed per second through the DDP sink alone, against a
//! plain memcpy of the same octets measured in the same run (issue: DDP engine,
//! point 8). Target: 16 KiB >= 0.8 of memcpy.

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rddp_proto::ddp::{DdpConfig, DdpSink};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_proto::rdmap::{RdmapConfig, RdmapStream, WorkRequest};
use rddp_wire::TaggedHeader;
use std::hint::black_box;

/// Region size: large enough that the segments walk through memory like a real
/// write, small enough to stay in cache the same way for both contenders.
const REGION: usize = 1 << 20;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sink_place");
    for &size in &[64usize, 1024, 16 * 1024] {
        g.throughput(Throughput::Bytes(size as u64));
        let slots = REGION / size;

        // DDP: parse, validate (STag, PD, rights, wrap, bounds) and place.
        let mem = MemoryTable::with_seed(1);
        let stag = mem
            .register(
                PdId(1),
                StagScope::Pd,
                Access::REMOTE_WRITE,
                0,
                vec![0; REGION],
            )
            .unwrap();
        let segs: Vec<Vec<u8>> = (0..slots)
            .map(|k| {
                let mut v = TaggedHeader::new(false, 0x40, stag.0, (k * size) as u64)
                    .to_bytes()
                    .to_vec();
                v.extend(std::iter::repeat_n(0x5Au8, size));
                v
            })
            .collect();
        // Baseline: copy the same payload octets (from the same segment buffers, so
        // both contenders read the same memory) into the region at the same offsets.
        let mut dst = vec![0u8; REGION];
        let mut i = 0;
        g.bench_with_input(BenchmarkId::new("memcpy", size), &size, |b, _| {
            b.iter(|| {
                let k = i % slots;
                let at = k * size;
                dst[at..at + size].copy_from_slice(black_box(&segs[k][14..]));
                i += 1;
            })
        });

        let cfg = DdpConfig::default();
        let mut sink = DdpSink::new(StreamId(1), PdId(1), &cfg);
        let mut seq = 0u64;
        g.bench_with_input(BenchmarkId::new("ddp_sink", size), &size, |b, _| {
            b.iter(|| {
                let seg = &segs[seq as usize % slots];
                sink.on_segment(&mem, seq, black_box(seg)).unwrap();
                seq += 1;
            })
        });

        // The same segments through a whole RDMAP stream (its checks before
        // placement, the sink, delivery and the stream's counters).
        let mut rdmap = RdmapStream::new(StreamId(2), PdId(1), RdmapConfig::default()).unwrap();
        let mut seq = 0u64;
        g.bench_with_input(BenchmarkId::new("rdmap_rx", size), &size, |b, _| {
            b.iter(|| {
                let seg = &segs[seq as usize % slots];
                rdmap.on_segment(&mem, seq, black_box(seg)).unwrap();
                seq += 1;
            })
        });

        // The sending side: one RDMA Write of `size` octets posted, its one
        // segment handed out and its completion taken.
        let cfg = RdmapConfig {
            ddp: DdpConfig {
                mulpdu: 1 << 20,
                ..DdpConfig::default()
            },
            ..RdmapConfig::default()
        };
        let mut tx = RdmapStream::new(StreamId(3), PdId(1), cfg).unwrap();
        let payload = Bytes::from(vec![0x5Au8; size]);
        g.bench_with_input(BenchmarkId::new("rdmap_tx", size), &size, |b, _| {
            b.iter(|| {
                let wr = WorkRequest::Write {
                    wr_id: 1,
                    payload: payload.clone().into(),
                    remote_stag: stag.0,
                    remote_to: 0,
                    fence: false,
                };
                tx.post(&mem, wr);
                black_box(tx.poll_segment());
                black_box(tx.poll_completion());
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
