//! The receive half of an MPA queue pair on the event loop: rddp-mpa's
//! header-first [`FpduReceiver`] (CRC, Markers, the RFC 6581 RTR check) over the
//! non-blocking socket, RDMAP deciding from each DDP header where the payload
//! goes, so the payload is read from the socket straight into its region or
//! receive buffer (`crate::qp`'s task drives it; docs/data-path.md, "Receive").
//!
//! Memory: the receiver itself is a few hundred octets; the buffer for batches
//! of small FPDUs is the I/O thread's, shared by its connections, so an
//! idle connection holds no buffer at all.

use rddp_mpa::Rtr;
use rddp_mpa::fpdu::{FpduReceiver, RxConfig};
use rddp_mpa::pcap::TcpEndpoint;

pub(crate) struct MpaIn {
    pub rx: FpduReceiver,
    /// The gate is still closed (a responder before the initiator's first FPDU,
    /// RFC 5044 §7.1.2): nothing may be sent yet. Open from the start for
    /// an initiator, or a responder told so
    /// ([`super::Connection::send_before_first_fpdu`]).
    pub gate_closed: bool,
    /// This connection in the process's capture (`--pcap`).
    pub wire: Option<TcpEndpoint>,
}

impl MpaIn {
    /// At the start of FPDU mode; `leftover`: octets setup read past the
    /// Reply (the first FPDU octets), `expect_rtr`: a responder's agreed RTR.
    pub(crate) fn new(
        crc: bool,
        markers: bool,
        max_ulpdu: usize,
        leftover: Vec<u8>,
        expect_rtr: Option<Rtr>,
        gate_closed: bool,
        wire: Option<TcpEndpoint>,
    ) -> Self {
        let cfg = RxConfig {
            crc,
            markers,
            max_ulpdu,
            expect_rtr,
        };
        Self {
            rx: FpduReceiver::new(cfg, leftover),
            gate_closed,
            wire,
        }
    }
}
