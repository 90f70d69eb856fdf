//! RDMA Read Request header (RFC 5040 §4.4).
//!
//! 28 octets that follow the 18-octet untagged DDP header on QN 1, and that a
//! Terminate may carry as its "terminated RDMAP header" (RFC 5040 §4.8).

use crate::error::{WireError, be32, be64, need};

/// Octets in an RDMA Read Request header (RFC 5040 §4.4).
pub const READ_REQ_HDR_LEN: usize = 28;

/// The RDMA Read Request header. "Sink" is the requester's buffer (where the Read
/// Response lands); "source" is the responder's buffer being read (RFC 5040 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReadRequestHeader {
    /// Data Sink STag: the requester's buffer the Read Response writes.
    pub sink_stag: u32,
    /// Data Sink Tagged Offset: where in it the response's first octet goes.
    pub sink_to: u64,
    /// RDMA Read Message Size in octets.
    pub size: u32,
    /// Data Source STag: the responder's buffer to read.
    pub src_stag: u32,
    /// Data Source Tagged Offset: where in it the read starts.
    pub src_to: u64,
}

impl ReadRequestHeader {
    /// Parse exactly 28 octets. A Read Request carries no payload after the header
    /// (RFC 5040 §4.4), so extra octets are `Trailing`. Never panics.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        need(b, READ_REQ_HDR_LEN, "RDMA Read Request header")?;
        if b.len() > READ_REQ_HDR_LEN {
            return Err(WireError::Trailing {
                what: "RDMA Read Request header",
                extra: b.len() - READ_REQ_HDR_LEN,
            });
        }
        Ok(Self {
            sink_stag: be32(b, 0),
            sink_to: be64(b, 4),
            size: be32(b, 12),
            src_stag: be32(b, 16),
            src_to: be64(b, 20),
        })
    }

    /// Always [`READ_REQ_HDR_LEN`].
    pub fn buffer_len(&self) -> usize {
        READ_REQ_HDR_LEN
    }

    /// Write the 28 octets, big-endian.
    pub fn emit(&self, out: &mut [u8; READ_REQ_HDR_LEN]) {
        out[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        out[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        out[12..16].copy_from_slice(&self.size.to_be_bytes());
        out[16..20].copy_from_slice(&self.src_stag.to_be_bytes());
        out[20..28].copy_from_slice(&self.src_to.to_be_bytes());
    }

    /// The 28 octets [`ReadRequestHeader::emit`] writes.
    pub fn to_bytes(&self) -> [u8; READ_REQ_HDR_LEN] {
        let mut b = [0; READ_REQ_HDR_LEN];
        self.emit(&mut b);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn vector4_body() {
        // RFC 5040 §4.4: sink 0x5678/0x2000, size 5, source 0x1234/0x1000.
        let h = ReadRequestHeader {
            sink_stag: 0x5678,
            sink_to: 0x2000,
            size: 5,
            src_stag: 0x1234,
            src_to: 0x1000,
        };
        let b = h.to_bytes();
        assert_eq!(&b[..8], &[0, 0, 0x56, 0x78, 0, 0, 0, 0]);
        assert_eq!(ReadRequestHeader::parse(&b), Ok(h));
        assert!(ReadRequestHeader::parse(&b[..27]).is_err());
        let mut long = b.to_vec();
        long.push(0);
        assert!(matches!(
            ReadRequestHeader::parse(&long),
            Err(WireError::Trailing { extra: 1, .. })
        ));
    }

    proptest! {
        #[test]
        fn roundtrip(a in any::<u32>(), b in any::<u64>(), c in any::<u32>(),
                     d in any::<u32>(), e in any::<u64>()) {
            let h = ReadRequestHeader { sink_stag: a, sink_to: b, size: c, src_stag: d, src_to: e };
            prop_assert_eq!(ReadRequestHeader::parse(&h.to_bytes()), Ok(h));
        }

        #[test]
        fn bytes_roundtrip(v in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(h) = ReadRequestHeader::parse(&v) {
                prop_assert_eq!(&h.to_bytes()[..], &v[..]);
            }
        }
    }
}
