//! The fused kernel against the crc32c crate (the reference): every length
//! around the kernel's boundaries (its 16- and 128-octet steps, its chunk),
//! any start offset (alignment), appended in any pieces, any initial CRC.

use proptest::prelude::*;

fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u8
        })
        .collect()
}

#[test]
fn the_check_value() {
    assert_eq!(rddp_crc32c::crc32c(b"123456789"), 0xE306_9283);
}

#[test]
fn every_length_to_a_few_chunks() {
    // scripts/test.sh runs Miri with the kernels' features enabled: there
    // the fused kernel must be what runs.
    if cfg!(all(
        miri,
        target_feature = "avx2",
        target_feature = "vpclmulqdq"
    )) {
        assert!(rddp_crc32c::fused_available());
    }
    if !rddp_crc32c::fused_available() {
        eprintln!("no AVX2 + VPCLMULQDQ here: the fallback alone is tested");
    }
    let d = data(70_000, 7);
    // All lengths to 4 KiB, then steps that cross each chunk boundary
    // (16,000 octets) and 64 KiB. Under Miri (scripts/test.sh), which checks
    // every load of the kernels against the slice, the lengths at the
    // kernels' boundaries alone: Miri runs the loop some 10,000 times slower.
    let lens: Vec<usize> = if cfg!(miri) {
        vec![
            0, 1, 7, 8, 15, 16, 17, 127, 128, 129, 143, 255, 256, 257, 383, 1_000, 15_999, 16_000,
            16_001, 16_145, 32_005,
        ]
    } else {
        (0..4096)
            .chain((4096..70_000).step_by(61))
            .chain([
                15_999, 16_000, 16_001, 32_000, 48_000, 64_000, 65_535, 65_536, 65_537,
            ])
            .collect()
    };
    for len in lens {
        for start in [0, 1, 5] {
            let Some(s) = d.get(start..start + len) else {
                continue;
            };
            assert_eq!(
                rddp_crc32c::append(0x5EED_1234, s),
                crc32c::crc32c_append(0x5EED_1234, s),
                "len {len} start {start}"
            );
        }
    }
}

proptest! {
    // Too slow under Miri, whose run of the test above covers the loads.
    #[cfg_attr(miri, ignore)]
    #[test]
    fn any_pieces_append_alike(
        len in 0usize..70_000,
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        seed in any::<u64>(),
        init in any::<u32>(),
    ) {
        let d = data(len, seed);
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(len + 1)).collect();
        at.sort_unstable();
        let (mut crc, mut from) = (init, 0);
        for &to in at.iter().chain([len].iter()) {
            crc = rddp_crc32c::append(crc, &d[from..to]);
            from = to;
        }
        prop_assert_eq!(crc, crc32c::crc32c_append(init, &d));
    }
}
