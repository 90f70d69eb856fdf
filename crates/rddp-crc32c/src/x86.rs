//! The x86_64 kernels.
//!
//! Arithmetic: a CRC32c register state is a polynomial over GF(2) modulo G
//! (0x1EDC6F41 with x^32), kept bit-reflected as the crc32 instruction keeps
//! it. A run of 16 octets can stand for every octet before it if it is
//! congruent to them modulo G ("folding", Intel's white paper "Fast CRC
//! Computation for Generic Polynomials Using PCLMULQDQ", 2009): a 128-bit
//! accumulator A moved d bits forward becomes clmul(A.lo, x^(d+63) mod G) xor
//! clmul(A.hi, x^(d-1) mod G) (the -1: a reflected carry-less product comes
//! out one bit up), then the next 16 octets are xored in. At the end the
//! CRC of the 16 octets left, by the crc32 instruction, is the CRC of all.
//! Two states combine by shifting the first over the second's octets:
//! clmul(s, x^(8m-33) mod G), then one crc32 of the 64-bit product.
//!
//! Invariants for the `unsafe` below:
//! * every `#[target_feature]` function is called only from [`append`], and
//!   only after [`available`] returned true, or is [`small`], called only
//!   after [`small_available`] returned true: the CPU has each feature
//!   enabled;
//! * [`chunk`] reads the CHUNK octets from its pointer on, and is called only
//!   with CHUNK octets of the slice left there; [`fold_all`] reads
//!   `data.len()` octets, and is called only with at least 128.

use core::arch::x86_64::*;

/// CRC32c's generator without its x^32 term, normal bit order.
const G: u32 = 0x1EDC_6F41;

/// x^n mod G, normal bit order (bit i: the coefficient of x^i). Compile time.
const fn xpow_mod(n: u32) -> u32 {
    let mut r: u32 = 1;
    let mut i = 0;
    while i < n {
        let top = r & 0x8000_0000;
        r <<= 1;
        if top != 0 {
            r ^= G;
        }
        i += 1;
    }
    r
}

/// x^n mod G as a clmul operand: reflected into the upper 32 bits of 64.
const fn folding(n: u32) -> u64 {
    (xpow_mod(n).reverse_bits() as u64) << 32
}

/// The two operands that fold an accumulator `d` bits forward (its lower
/// 64 bits hold the earlier octets, the higher powers).
const fn fold_by(d: u32) -> [u64; 2] {
    [folding(d + 63), folding(d - 1)]
}

/// The operand that shifts a state over `m` octets: x^(8m-33) mod G,
/// reflected into the lower 32 bits.
const fn shifting(m: usize) -> u64 {
    xpow_mod((8 * m - 33) as u32).reverse_bits() as u64
}

const FOLD_1024: [u64; 2] = fold_by(1024);
const FOLD_128: [u64; 2] = fold_by(128);

/// 128-octet steps of a chunk's folded part (the first is a plain load).
const STEPS: usize = 65;
/// Octets each of the three crc32 streams takes per step: 15 crc32s a step
/// against 8 vpclmulqdq, which keeps both units busy on Zen 3.
const PER_STEP: usize = 40;
/// The folded part, then three crc32 streams of STREAM octets each.
const FOLDED: usize = 128 * STEPS;
const STREAM: usize = PER_STEP * (STEPS - 1);
const CHUNK: usize = FOLDED + 3 * STREAM;

/// Below this the fused loop's set-up does not pay: [`small`] instead.
const MIN_LEN: usize = 256;

pub(crate) fn worth(len: usize) -> bool {
    len >= MIN_LEN
}

pub(crate) fn small_available() -> bool {
    is_x86_feature_detected!("sse4.2")
}

/// `crc` finished in and out, for pieces below [`MIN_LEN`] (an FPDU's header,
/// a small payload, its pad): the crc32 instruction on 8 octets at a time
/// from wherever the piece starts (unaligned loads), then 4, 2 and 1. The
/// crc32c crate first aligns octet by octet and sets up its three-stream loop,
/// about 120 instructions a call on the 14- to 64-octet pieces of a 64-octet
/// Send against about 30 here; a ping-pong computes six such pieces a round
/// trip at each end. Only after [`small_available`] (the module's invariants).
#[target_feature(enable = "sse4.2")]
pub(crate) fn small(crc: u32, data: &[u8]) -> u32 {
    let mut c = u64::from(!crc);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        c = _mm_crc32_u64(c, u64::from_le_bytes(b));
    }
    let mut c = c as u32;
    let mut rest = words.remainder();
    if rest.len() >= 4 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&rest[..4]);
        c = _mm_crc32_u32(c, u32::from_le_bytes(b));
        rest = &rest[4..];
    }
    if rest.len() >= 2 {
        c = _mm_crc32_u16(c, u16::from_le_bytes([rest[0], rest[1]]));
        rest = &rest[2..];
    }
    if let [b] = rest {
        c = _mm_crc32_u8(c, *b);
    }
    !c
}

pub(crate) fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("vpclmulqdq")
        && is_x86_feature_detected!("pclmulqdq")
        && is_x86_feature_detected!("sse4.2")
}

/// `crc` finished in and out, as `crc32c::crc32c_append`. Only after
/// [`available`] (the module's invariants).
pub(crate) fn append(crc: u32, data: &[u8]) -> u32 {
    let mut state = !crc;
    let mut at = 0;
    while data.len() - at >= CHUNK {
        // SAFETY: `available()` held (the caller); CHUNK octets are left
        // from `at`, and `chunk` reads exactly those.
        state = unsafe { chunk(state, data[at..at + CHUNK].as_ptr()) };
        at += CHUNK;
    }
    let rest = &data[at..];
    if rest.len() >= 128 {
        // SAFETY: `available()` held; `fold_all` reads within `rest`, which
        // has at least the 128 octets it needs.
        !unsafe { fold_all(state, rest) }
    } else {
        crc32c::crc32c_append(!state, rest)
    }
}

#[target_feature(enable = "pclmulqdq,sse2")]
fn operands(k: [u64; 2]) -> __m128i {
    _mm_set_epi64x(k[1] as i64, k[0] as i64)
}

#[target_feature(enable = "pclmulqdq,sse2")]
fn fold128(acc: __m128i, k: __m128i, next: __m128i) -> __m128i {
    let a = _mm_clmulepi64_si128(acc, k, 0x00);
    let b = _mm_clmulepi64_si128(acc, k, 0x11);
    _mm_xor_si128(_mm_xor_si128(a, b), next)
}

#[target_feature(enable = "avx2,vpclmulqdq")]
fn fold256(acc: __m256i, k: __m256i, next: __m256i) -> __m256i {
    let a = _mm256_clmulepi64_epi128(acc, k, 0x00);
    let b = _mm256_clmulepi64_epi128(acc, k, 0x11);
    _mm256_xor_si256(_mm256_xor_si256(a, b), next)
}

/// The eight 16-octet accumulators of four registers folded into one, at the
/// place of the last.
#[target_feature(enable = "avx2,pclmulqdq")]
fn finish(y: [__m256i; 4]) -> __m128i {
    let k = operands(FOLD_128);
    let mut r = _mm256_castsi256_si128(y[0]);
    r = fold128(r, k, _mm256_extracti128_si256(y[0], 1));
    for v in &y[1..] {
        r = fold128(r, k, _mm256_castsi256_si128(*v));
        r = fold128(r, k, _mm256_extracti128_si256(*v, 1));
    }
    r
}

/// The register state of the 16 octets of `r` (from state 0).
#[target_feature(enable = "sse4.2")]
fn crc_of(r: __m128i) -> u32 {
    let lo = _mm_cvtsi128_si64(r) as u64;
    let hi = _mm_extract_epi64(r, 1) as u64;
    _mm_crc32_u64(_mm_crc32_u64(0, lo), hi) as u32
}

/// `s` shifted over `k`'s octets of zeros ([`shifting`]).
#[target_feature(enable = "pclmulqdq,sse4.2")]
fn shift(s: u32, k: u64) -> u32 {
    let p = _mm_clmulepi64_si128(
        _mm_cvtsi32_si128(s as i32),
        _mm_cvtsi64_si128(k as i64),
        0x00,
    );
    _mm_crc32_u64(0, _mm_cvtsi128_si64(p) as u64) as u32
}

/// Four registers of the 128 octets at `p`, `state` xored into the first
/// four (a state is the same as those octets xored with it).
///
/// # Safety
/// 128 octets are readable from `p`.
#[target_feature(enable = "avx2")]
unsafe fn load4(p: *const u8, state: u32) -> [__m256i; 4] {
    // SAFETY: the caller's 128 octets; loadu takes any alignment.
    let ld = |o: usize| unsafe { _mm256_loadu_si256(p.add(o).cast()) };
    let first = _mm256_zextsi128_si256(_mm_cvtsi32_si128(state as i32));
    [_mm256_xor_si256(ld(0), first), ld(32), ld(64), ld(96)]
}

/// From register state `state`, the state after CHUNK octets at `p`: the
/// first FOLDED by folding, the three streams after it by crc32s in the same
/// loop, then combined.
///
/// # Safety
/// CHUNK octets are readable from `p`; the CPU has the features enabled.
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn chunk(state: u32, p: *const u8) -> u32 {
    // SAFETY: every offset below is under CHUNK (the loop's bounds).
    let ld = |o: usize| unsafe { _mm256_loadu_si256(p.add(o).cast()) };
    // SAFETY: as above; read_unaligned takes any alignment.
    let rd = |o: usize| unsafe { p.add(o).cast::<u64>().read_unaligned() };
    // SAFETY: the first 128 of the CHUNK octets.
    let mut y = unsafe { load4(p, state) };
    let k = _mm256_broadcastsi128_si256(operands(FOLD_1024));
    let mut c = [0u64; 3];
    let mut at = 128;
    let mut s = FOLDED;
    while at < FOLDED {
        for (i, v) in y.iter_mut().enumerate() {
            *v = fold256(*v, k, ld(at + 32 * i));
        }
        let mut o = 0;
        while o < PER_STEP {
            for (j, cj) in c.iter_mut().enumerate() {
                *cj = _mm_crc32_u64(*cj, rd(s + j * STREAM + o));
            }
            o += 8;
        }
        s += PER_STEP;
        at += 128;
    }
    let r = finish(y);
    const BY_3: u64 = shifting(3 * STREAM);
    const BY_2: u64 = shifting(2 * STREAM);
    const BY_1: u64 = shifting(STREAM);
    shift(crc_of(r), BY_3) ^ shift(c[0] as u32, BY_2) ^ shift(c[1] as u32, BY_1) ^ c[2] as u32
}

/// From register state `state`, the state after `data` (at least 128
/// octets) by folding alone.
///
/// # Safety
/// `data.len() >= 128`; the CPU has the features enabled.
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn fold_all(state: u32, data: &[u8]) -> u32 {
    let p = data.as_ptr();
    // SAFETY: the caller's at least 128 octets.
    let mut y = unsafe { load4(p, state) };
    let k = _mm256_broadcastsi128_si256(operands(FOLD_1024));
    let mut at = 128;
    while at + 128 <= data.len() {
        for (i, v) in y.iter_mut().enumerate() {
            // SAFETY: at + 128 <= len: the 32 octets at at + 32 i are in `data`.
            *v = fold256(*v, k, unsafe {
                _mm256_loadu_si256(p.add(at + 32 * i).cast())
            });
        }
        at += 128;
    }
    let mut r = finish(y);
    let k = operands(FOLD_128);
    while at + 16 <= data.len() {
        // SAFETY: at + 16 <= len.
        r = fold128(r, k, unsafe { _mm_loadu_si128(p.add(at).cast()) });
        at += 16;
    }
    let mut s = crc_of(r);
    for &b in &data[at..] {
        s = _mm_crc32_u8(s, b);
    }
    s
}
