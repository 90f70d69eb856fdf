//! MPA connection setup (RFC 5044 §7, RFC 6581), sans-IO.
//!
//! Both machines take octets in ([`Initiator::on_bytes`], [`Responder::on_bytes`]),
//! hand octets out (`poll_transmit`), and take `now` for their deadline. When setup
//! ends they hand over a [`Negotiated`] for FPDU mode, or an error; any
//! octets after the frame belong to FPDU mode and are left to the caller.

mod initiator;
mod negotiate;
mod reader;
mod responder;

pub use initiator::Initiator;
pub(crate) use initiator::check_ird_ord;
pub use negotiate::{choose_rtr, crc_in_use};
pub use responder::{Accept, PeerRequest, Responder};

/// Which end of the TCP connection we are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Active opener: sends the Request, and the first FPDU.
    Initiator,
    /// Passive opener: sends the Reply; sends no FPDU before the initiator's first.
    Responder,
}

/// The RTR message chosen by the responder (RFC 6581).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rtr {
    /// C: a zero-length RDMA Write.
    Write,
    /// D: a zero-length RDMA Read Request, answered by a zero-length Read Response.
    Read,
}

/// Where a setup machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupStatus {
    /// Waiting for the peer's frame.
    Pending,
    /// Responder: the Request arrived; the ULP must accept or reject it.
    Requested,
    /// Setup done: take the [`Negotiated`] settings and switch to FPDU mode.
    Established,
    /// Setup failed: take the error, send what `poll_transmit` still has, close.
    Failed,
}

/// Everything FPDU mode needs from setup (RFC 5044 §7.1.1; RFC 6581).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Which side of setup this end was.
    pub role: Role,
    /// Revision in use (the Reply's Rev).
    pub rev: u8,
    /// CRC in both directions: Request C OR Reply C.
    pub crc: bool,
    /// Markers in the FPDUs we send (the peer's M bit).
    pub markers_tx: bool,
    /// Markers in the FPDUs we receive (our M bit).
    pub markers_rx: bool,
    /// The RTR exchanged in peer-to-peer mode, if any.
    pub rtr: Option<Rtr>,
    /// Our IRD and ORD after negotiation (Rev 2 with the enhanced block).
    pub ird_ord: Option<(u16, u16)>,
    /// The peer's announced IRD and ORD.
    pub peer_ird_ord: Option<(u16, u16)>,
    /// The peer ULP's private data (the enhanced block removed).
    pub peer_private_data: Vec<u8>,
}
