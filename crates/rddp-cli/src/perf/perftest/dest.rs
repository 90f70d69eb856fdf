//! perftest's `struct pingpong_dest` as it travels over rdma_cm: 56 octets, every
//! field big-endian (perftest_resources.h; rdma_write_keys/rdma_read_keys).
//!
//! | offset | field |
//! |---|---|
//! | 0 | lid | 4 | out_reads | 8 | qpn | 12 | psn | 16 | rkey | 20 | padding |
//! | 24 | vaddr (be64) | 32 | gid (16) | 48 | srqn | 52 | gid_index |
//!
//! Only rkey and vaddr matter between iWARP peers.

pub(super) const DEST_LEN: usize = 56;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Dest {
    pub out_reads: u32,
    pub qpn: u32,
    pub psn: u32,
    pub rkey: u32,
    pub vaddr: u64,
}

impl Dest {
    pub(super) fn to_bytes(self) -> [u8; DEST_LEN] {
        let mut b = [0; DEST_LEN];
        b[4..8].copy_from_slice(&self.out_reads.to_be_bytes());
        b[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        b[12..16].copy_from_slice(&self.psn.to_be_bytes());
        b[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        b[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        b
    }

    pub(super) fn parse(b: &[u8]) -> Result<Self, String> {
        if b.len() != DEST_LEN {
            return Err(format!(
                "a pingpong_dest has {DEST_LEN} octets, got {} (is the peer using -q 1?)",
                b.len()
            ));
        }
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[24..32]);
        Ok(Self {
            out_reads: u32_at(4),
            qpn: u32_at(8),
            psn: u32_at(12),
            rkey: u32_at(16),
            vaddr: u64::from_be_bytes(v),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let d = Dest {
            out_reads: 128,
            qpn: 3,
            psn: 0x2e1bd4,
            rkey: 0x52bd_8100,
            vaddr: 0x0000_55e9_f48f_0550,
        };
        let b = d.to_bytes();
        assert_eq!(b[16..20], [0x52, 0xbd, 0x81, 0x00]);
        assert_eq!(b[24..32], [0, 0, 0x55, 0xe9, 0xf4, 0x8f, 0x05, 0x50]);
        assert_eq!(b[4..8], [0, 0, 0, 128]);
        assert_eq!(Dest::parse(&b), Ok(d));
        assert!(Dest::parse(&b[..55]).is_err());
    }
}
