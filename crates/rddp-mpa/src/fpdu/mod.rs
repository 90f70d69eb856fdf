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

use rddp_wire::{FpduEncoder, Terminate};

/// One FPDU carrying `term` (small; built by copying), advancing `enc`.
pub fn terminate_fpdu(term: &Terminate, enc: &mut FpduEncoder) -> Vec<u8> {
    let mut out = Vec::new();
    // A Terminate segment is 22..=70 octets: always a valid ULPDU length.
    if let Ok(seg) = term.to_segment() {
        let _ = enc.encode(&seg, &mut out);
    }
    out
}
