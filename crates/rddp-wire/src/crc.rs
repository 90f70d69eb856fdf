//! CRC32c as MPA uses it (RFC 5044 §4.3; spec §4.3).
//!
//! CRC-32/ISCSI (Castagnoli, reflected, init and xorout 0xFFFFFFFF). The value is put
//! on the wire least-significant octet first: use [`crc_wire_bytes`].

use crc_fast::{CrcAlgorithm, Digest};

/// Octets in the MPA CRC field.
pub const CRC_LEN: usize = 4;

/// One-shot CRC32c of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// The four CRC octets as transmitted (spec §4.3: LE, like iSCSI digests).
pub fn crc_wire_bytes(crc: u32) -> [u8; CRC_LEN] {
    crc.to_le_bytes()
}

/// The CRC value carried by four wire octets (inverse of [`crc_wire_bytes`]).
pub fn crc_from_wire(b: [u8; CRC_LEN]) -> u32 {
    u32::from_le_bytes(b)
}

/// Incremental CRC32c, for feeding an FPDU as its octets are sent or received.
#[derive(Clone, Copy, Debug)]
pub struct Crc32c(Digest);

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32c {
    pub fn new() -> Self {
        Self(Digest::new(CrcAlgorithm::Crc32Iscsi))
    }

    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The CRC of everything fed since creation or the last reset.
    pub fn finalize(&self) -> u32 {
        // CRC-32 results fit in 32 bits; the crate widens every width to u64.
        (self.0.finalize() & 0xFFFF_FFFF) as u32
    }

    pub fn reset(&mut self) {
        self.0.reset();
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

    #[test]
    fn iscsi_vectors() {
        // spec §7.1 (RFC 3720 Appendix B.4): value and wire octets.
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
