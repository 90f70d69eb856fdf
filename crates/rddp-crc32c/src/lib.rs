//! CRC32c (Castagnoli, reflected; init and xorout 0xFFFFFFFF) for CPUs that
//! have AVX2 and VPCLMULQDQ but no AVX-512: AMD Zen 3 and the like.
//!
//! Why our own: crc-fast has wide kernels only for AVX-512 and an SSE fusion
//! kernel otherwise; the crc32c crate runs the crc32 instruction alone. On an
//! AMD EPYC (Zen 3) both give 18 to 24 GB/s at 64 KiB, and the CRC is a fifth
//! of each side's CPU in a 1 MiB RDMA Write (docs/perf.md). There the crc32
//! instruction (one a cycle) and 256-bit carry-less multiplies (one every
//! other cycle) run on different units, so this crate runs both in one loop
//! over different parts of the data and combines them: 36 GB/s at 64 KiB,
//! 21 GB/s at 1 KiB (the crc32c crate: 23 and 15).
//!
//! [`append`] takes and returns finished CRC values, as `crc32c::crc32c_append`;
//! without the CPU features (or off x86_64) it is that function. Pieces
//! below 256 octets (the headers, small payloads and pads of small FPDUs) go
//! to a plain crc32-instruction loop with no set-up, on any CPU with SSE 4.2:
//! the crc32c crate's alignment and set-up took 33 ns for the three pieces
//! of a 64-octet Send's FPDU, this loop 12 (benches/pieces.rs).
//!
//! `unsafe` here: the kernels are `#[target_feature]` functions, called only
//! after [`fused_available`] (or, for the small-piece loop, SSE 4.2's own
//! check) saw every feature they enable at run time, and
//! they read the data with unaligned vector loads at offsets they check
//! against the slice's length (invariants in `x86.rs`). `scripts/test.sh`
//! runs the reference test under Miri with those features enabled, so every
//! load is checked against the slice it came from.

#![warn(missing_docs)]

#[cfg(target_arch = "x86_64")]
mod x86;

/// Whether [`append`] runs the fused kernel here (AVX2, VPCLMULQDQ, PCLMULQDQ
/// and SSE 4.2, detected at run time; std caches the answer).
pub fn fused_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        x86::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The CRC32c of what `crc` was the CRC of, followed by `data` (0 for none).
pub fn append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if !x86::worth(data.len()) {
        if x86::small_available() {
            // SAFETY: SSE 4.2, the one feature `small` enables, is there.
            return unsafe { x86::small(crc, data) };
        }
    } else if x86::available() {
        return x86::append(crc, data);
    }
    crc32c::crc32c_append(crc, data)
}

/// The CRC32c of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    append(0, data)
}
