//! MPA framing + CRC32c + deframing of 64 KiB FPDUs in memory, against a plain
//! memcpy of the same octets measured in the same run.
//!
//! * `memcpy`: copy the FPDU's octets once.
//! * `encode`: FpduEncoder (copying) with CRC.
//! * `build_vectored`: the send path's slice list with CRC (payload not copied).
//! * `decode`: FpduDecoder with CRC check (gathers the ULPDU: one copy).
//! * `roundtrip`: encode + decode.

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rddp_mpa::fpdu::build_fpdu;
use rddp_wire::{FpduDecoder, FpduEncoder, TaggedHeader};
use std::hint::black_box;
use std::time::Duration;

/// A 64 KiB FPDU: 2 + ULPDU + pad + 4 = 65536 octets.
const ULPDU: usize = 65_530;

fn bench(c: &mut Criterion) {
    let hdr = TaggedHeader::new(true, 0x40, 0x1234, 0).to_bytes();
    let payload = Bytes::from(vec![0xA5u8; ULPDU - hdr.len()]);
    let mut ulpdu = hdr.to_vec();
    ulpdu.extend_from_slice(&payload);
    for markers in [false, true] {
        let name = if markers {
            "fpdu64k_markers"
        } else {
            "fpdu64k"
        };
        let mut g = c.benchmark_group(name);
        g.measurement_time(Duration::from_secs(3));
        g.warm_up_time(Duration::from_secs(1));
        let mut wire = Vec::new();
        FpduEncoder::new(true, markers)
            .encode(&ulpdu, &mut wire)
            .unwrap();
        g.throughput(Throughput::Bytes(wire.len() as u64));
        let mut dst = vec![0u8; wire.len()];
        g.bench_function("memcpy", |b| {
            b.iter(|| {
                dst.copy_from_slice(black_box(&wire));
                black_box(&dst);
            })
        });
        let mut out = Vec::with_capacity(wire.len());
        g.bench_function("encode", |b| {
            b.iter(|| {
                out.clear();
                let mut e = FpduEncoder::new(true, markers);
                e.encode(black_box(&ulpdu), &mut out).unwrap();
                black_box(&out);
            })
        });
        g.bench_function("build_vectored", |b| {
            b.iter(|| {
                let mut e = FpduEncoder::new(true, markers);
                black_box(build_fpdu(&mut e, &hdr, black_box(payload.clone())));
            })
        });
        g.bench_function("decode", |b| {
            b.iter(|| {
                let mut d = FpduDecoder::new(true, markers, 65_535);
                black_box(d.decode(black_box(&wire)).unwrap());
            })
        });
        g.bench_function("roundtrip", |b| {
            b.iter(|| {
                out.clear();
                let mut e = FpduEncoder::new(true, markers);
                e.encode(black_box(&ulpdu), &mut out).unwrap();
                let mut d = FpduDecoder::new(true, markers, 65_535);
                black_box(d.decode(&out).unwrap());
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
