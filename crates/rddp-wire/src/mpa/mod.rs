//! MPA: Marker PDU Aligned framing for TCP (RFC 5044, RFC 6581).
//!
//! * [`frame`]: the MPA Request/Reply frames of connection setup (RFC 5044 §7.1.1; RFC 6581).
//! * [`marker`]: the 4-octet Marker and its 512-octet grid (RFC 5044 §4.2, §4.3).
//! * [`fpdu`]: PAD, MULPDU and the FPDU encoder (RFC 5044 §4).
//! * [`check`]: the receive checks of an FPDU's framing, for every reader.
//! * [`decoder`]: the streaming FPDU decoder (RFC 5044).

pub mod check;
pub mod decoder;
pub mod fpdu;
pub mod frame;
pub mod marker;

pub use decoder::{FpduDecoder, PartialFpdu};
pub use fpdu::{FpduEncoder, encode_fpdu, fpdu_wire_len, mulpdu, pad_len};
pub use frame::{EnhancedBlock, FrameKind, MpaFlags, MpaFrame, frame_len};
pub use marker::Marker;

/// Octets in the ULPDU_Length field.
pub const MPA_HDR_LEN: usize = 2;
/// Octets in the CRC field (always present, RFC 5044 §4.1).
pub const MPA_CRC_LEN: usize = 4;
/// Octets in the fixed part of a Request/Reply frame (key, flags, Rev, PD_Length).
pub const MPA_RR_HDR_LEN: usize = 20;
/// Largest PD_Length a receiver accepts (RFC 5044 §7.1.1).
pub const MPA_MAX_PD: usize = 512;
/// Smallest ULPDU: a tagged DDP header with no payload (RFC 5044).
pub const MIN_ULPDU: usize = crate::ddp::TAGGED_HDR_LEN;
/// Largest ULPDU_Length the 16-bit field can express.
pub const MAX_ULPDU: usize = u16::MAX as usize;
