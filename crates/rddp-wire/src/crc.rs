//! CRC32c as MPA uses it (RFC 5044 §4.4).
//!
//! CRC-32/ISCSI (Castagnoli, reflected, init and xorout 0xFFFFFFFF). The value is put
//! on the wire least-significant octet first: use [`crc_wire_bytes`].

use crc_fast::{CrcAlgorithm, Digest};

/// Octets in the MPA CRC field.
pub const CRC_LEN: usize = 4;

/// Whether crc-fast has its wide kernels here (AVX-512 VPCLMULQDQ on x86_64,
/// its fusion kernels on other CPUs). Without AVX-512 an x86_64 CPU gets
/// crc-fast's SSE fusion kernel, which rddp-crc32c beats: on an AMD EPYC with
/// AVX2 and VPCLMULQDQ, 36 GB/s at 64 KiB against crc-fast's 18 and the
/// crc32c crate's 23 (rddp-crc32c falls back to the crc32c crate on CPUs
/// without those; docs/journal.md, "On a CPU without AVX-512"). The CRC is a
/// fifth of each side's time in a 1 MiB Write there. (The detection is
/// cached by std: a load and a test.)
fn wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("vpclmulqdq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        true
    }
}

/// One-shot CRC32c of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = Crc32c::new();
    c.update(data);
    c.finalize()
}

/// The four CRC octets as transmitted (RFC 5044 §4.4: LE, like iSCSI digests).
pub fn crc_wire_bytes(crc: u32) -> [u8; CRC_LEN] {
    crc.to_le_bytes()
}

/// The CRC value carried by four wire octets (inverse of [`crc_wire_bytes`]).
pub fn crc_from_wire(b: [u8; CRC_LEN]) -> u32 {
    u32::from_le_bytes(b)
}

/// Pieces at least this long go to crc-fast where it has its wide kernels;
/// shorter ones to rddp-crc32c (the SSE 4.2 instruction a few octets at a
/// time). On a Xeon with AVX-512: 256 octets 9.8 against 7.9 ns, 1 KiB 15.5
/// against 21.1, 64 KiB 0.59 against 1.13 us.
const WIDE_FROM: usize = 512;

/// Incremental CRC32c, for feeding an FPDU as its octets are sent or received.
///
/// Four octets: the finished CRC of what was fed so far, so a copy of the
/// state is cheap and `update` resumes from any value (`crc32c_append` style).
#[derive(Clone, Copy, Debug, Default)]
pub struct Crc32c(u32);

impl Crc32c {
    /// The CRC of nothing (0), ready for the first octets.
    pub fn new() -> Self {
        Self(0)
    }

    /// Feed the next octets; pieces may be cut anywhere.
    pub fn update(&mut self, data: &[u8]) {
        // An FPDU without PAD feeds an empty piece: nothing to dispatch.
        if data.is_empty() {
            return;
        }
        self.0 = if data.len() >= WIDE_FROM && wide() {
            // crc-fast's register is the CRC before its final xor (RFC 3385's
            // CRC32c: init and xorout 0xFFFFFFFF), so a running CRC resumes.
            let mut d = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!self.0));
            d.update(data);
            (d.finalize() & 0xFFFF_FFFF) as u32
        } else {
            rddp_crc32c::append(self.0, data)
        };
    }

    /// The CRC of everything fed since creation or the last reset.
    pub fn finalize(&self) -> u32 {
        self.0
    }

    /// Forget everything fed: back to [`Crc32c::new`]'s state.
    pub fn reset(&mut self) {
        self.0 = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let mut d = Crc32c::new();
        d.update(b"1234");
        d.update(b"56789");
        assert_eq!(d.finalize(), 0xE306_9283);
        d.reset();
        assert_eq!(d.finalize(), crc32c(b""));
    }

    /// Pieces of any lengths, on either side of [`WIDE_FROM`] and mixed,
    /// give crc-fast's one-shot CRC (both kernels resume a running CRC).
    #[test]
    fn pieces_of_any_length_append_alike() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [0, 1, 3, 17, 64, 511, 512, 1000, 4096, 65_536, 70_000] {
            let want = crc_fast::crc32_iscsi(&data[..len]);
            for step in [1, 5, 64, WIDE_FROM - 1, WIDE_FROM, 4096, 70_000] {
                let mut d = Crc32c::new();
                for piece in data[..len].chunks(step) {
                    d.update(piece);
                }
                assert_eq!(d.finalize(), want, "len {len}, pieces of {step}");
                d.reset();
                assert_eq!(d.finalize(), 0);
            }
            // Small and large pieces in turn.
            let mut d = Crc32c::new();
            let (mut at, mut small) = (0, true);
            while at < len {
                let n = if small { 7 } else { 3 * WIDE_FROM };
                let end = (at + n).min(len);
                d.update(&data[at..end]);
                (at, small) = (end, !small);
            }
            assert_eq!(d.finalize(), want, "len {len}, mixed pieces");
            assert_eq!(crc32c(&data[..len]), want);
        }
    }

    #[test]
    fn iscsi_vectors() {
        // RFC 3720 Appendix B.4: value and wire octets.
        let inc: Vec<u8> = (0..32).collect();
        let dec: Vec<u8> = (0..32).rev().collect();
        let cases: [(&[u8], u32, [u8; 4]); 4] = [
            (&[0u8; 32], 0x8A91_36AA, [0xaa, 0x36, 0x91, 0x8a]),
            (&[0xFFu8; 32], 0x62A8_AB43, [0x43, 0xab, 0xa8, 0x62]),
            (&inc, 0x46DD_794E, [0x4e, 0x79, 0xdd, 0x46]),
            (&dec, 0x113F_DB5C, [0x5c, 0xdb, 0x3f, 0x11]),
        ];
        for (data, value, wire) in cases {
            assert_eq!(crc32c(data), value);
            assert_eq!(crc_wire_bytes(value), wire);
            assert_eq!(crc_from_wire(wire), value);
            let mut d = Crc32c::new();
            for b in data.chunks(5) {
                d.update(b);
            }
            assert_eq!(d.finalize(), value);
        }
    }
}
