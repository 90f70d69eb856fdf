//! FPDU mode (RFC 5044 §4-5): a DDP stream over MPA framing.
//!
//! * `tx`: builds each outgoing FPDU as a list of slices (payload not copied).
//! * `rx_direct`: [`FpduReceiver`], the one receiver: payloads read from the
//!   socket straight into their region or receive buffer; [`RdmapPlacer`], an
//!   `RdmapStream` as its engine (the verbs queue pair's).
//! * `tx_direct`: [`MpaOut`], the transmit side on the socket: FPDUs written
//!   with vectored sends, payloads straight from their region.
//! * `errors`: which Terminate each fatal error sends.

mod errors;
mod rx_direct;
mod tx;
mod tx_direct;

pub use errors::{ULPDU_LENGTH_CODE, terminate_for_ddp, terminate_for_wire};
pub use rx_direct::{
    FpduReceiver, Peek, Placer, Progress, RdmapPlacer, Recorded, Refused, RxConfig, SMALL_PAYLOAD,
    is_rtr,
};
pub use tx::{
    FpduLayout, OutFpdu, Piece, PlainFpdu, SMALL_MAX, Small, build_fpdu, layout_fpdu,
    layout_fpdu_into,
};
pub use tx_direct::{MpaOut, Sent, summary};

use rddp_wire::{FpduEncoder, Opcode, RdmapControl, TaggedHeader, Terminate};

/// STag of the zero-length RDMA Write RTR (siw's; a zero-length message
/// places nothing, so its STag is never validated: RFC 6581).
pub const WRITE_RTR_STAG: u32 = 1;

/// One FPDU carrying `term` (small; built by copying), advancing `enc`.
pub fn terminate_fpdu(term: &Terminate, enc: &mut FpduEncoder) -> Vec<u8> {
    let mut out = Vec::new();
    // A Terminate segment is 22..=70 octets: always a valid ULPDU length.
    if let Ok(seg) = term.to_segment() {
        let _ = enc.encode(&seg, &mut out);
    }
    out
}

/// The initiator's RFC 6581 Write RTR: one FPDU carrying a zero-length RDMA
/// Write, advancing `enc`. It is the first FPDU the initiator sends when the
/// Write RTR was agreed (the Read RTR goes through RDMAP instead:
/// `RdmapStream::post_read_rtr`, so that ORD and the MSNs count it).
pub fn write_rtr_fpdu(enc: &mut FpduEncoder) -> OutFpdu {
    let ctrl = RdmapControl::new(Opcode::RDMA_WRITE).0;
    let hdr = TaggedHeader::new(true, ctrl, WRITE_RTR_STAG, 0).to_bytes();
    build_fpdu(enc, &hdr, bytes::Bytes::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::Rtr;
    use rddp_wire::FpduDecoder;

    /// The Write RTR is one FPDU whose ULPDU the receiver's RTR check takes
    /// as the Write RTR and not as the Read RTR, with CRC and Markers on or off.
    #[test]
    fn write_rtr_fpdu_is_the_write_rtr() {
        for (crc, markers) in [(true, false), (false, false), (true, true)] {
            let wire = write_rtr_fpdu(&mut FpduEncoder::new(crc, markers)).to_vec();
            let mut ulpdus = Vec::new();
            FpduDecoder::new(crc, markers, 65535)
                .feed(&wire, &mut ulpdus)
                .unwrap();
            assert_eq!(ulpdus.len(), 1, "crc {crc} markers {markers}");
            assert!(is_rtr(Rtr::Write, &ulpdus[0]));
            assert!(!is_rtr(Rtr::Read, &ulpdus[0]));
        }
    }
}
