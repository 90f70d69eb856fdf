//! `append` against the crc32c crate in the same run: the three pieces a
//! 64-octet Send's FPDU feeds the CRC (the MPA length and DDP/RDMAP header,
//! the payload, the pad), and one 64 KiB piece.
//!
//! `cargo bench -p rddp-crc32c`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

/// What the wire layer hands over for a 64-octet untagged FPDU: 2 octets of
/// MPA length and 18 of DDP/RDMAP header, the payload, then 2 of pad.
const SMALL_FPDU: [usize; 3] = [20, 64, 2];

fn bench(c: &mut Criterion) {
    let data: Vec<u8> = (0..64 * 1024).map(|i| (i * 7 + 3) as u8).collect();
    let mut g = c.benchmark_group("small FPDU (3 pieces)");
    g.throughput(Throughput::Elements(1));
    let pieces = |f: fn(u32, &[u8]) -> u32| {
        let data = &data;
        move || {
            let mut at = 1;
            let mut crc = 0;
            for n in SMALL_FPDU {
                crc = f(crc, black_box(&data[at..at + n]));
                at += n;
            }
            crc
        }
    };
    g.bench_function("rddp_crc32c::append", |b| {
        b.iter(pieces(rddp_crc32c::append))
    });
    g.bench_function("crc32c::crc32c_append", |b| {
        b.iter(pieces(crc32c::crc32c_append))
    });
    g.finish();
    let mut g = c.benchmark_group("64 KiB");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("rddp_crc32c::append", |b| {
        b.iter(|| rddp_crc32c::append(0, black_box(&data)))
    });
    g.bench_function("crc32c::crc32c_append", |b| {
        b.iter(|| crc32c::crc32c_append(0, black_box(&data)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
