//! A driver of the sans-IO adaptation over usrsctp (usrsctp-ffi): association setup
//! with the Adaptation Layer Indication (spec §5.2), addressing, and a connection
//! that moves chunks between the socket and [`crate::Adaptation`].
//!
//! Addressing (issue 6): over UDP encapsulation, an endpoint "at ADDR" listens with
//! SCTP port = UDP encapsulation port = ADDR's port; a client takes a free local UDP
//! port for its own encapsulation and sets the remote encapsulation port to ADDR's
//! port. [`Transport::RawIp`] uses IP protocol 132 instead (root).

mod connection;
mod setup;

pub use connection::{ChunkStats, ChunkTap, SctpConnection};
pub use setup::{Listener, connect, connect_conn};

use crate::adaptation::Config;
use std::time::Duration;

/// How SCTP packets travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// SCTP over UDP (RFC 6951): no privileges.
    #[default]
    UdpEncapsulation,
    /// SCTP over IP protocol 132: needs root.
    RawIp,
}

/// Association options.
#[derive(Debug, Clone)]
pub struct Options {
    pub transport: Transport,
    /// Adaptation layer settings; `streams` is both the inbound and outbound count.
    pub config: Config,
    /// Lower the SCTP fragmentation point (`SCTP_MAXSEG`), e.g. to test the 516 floor.
    pub max_seg: Option<u32>,
    /// The Adaptation Indication we announce. Always `Some(1)` for DDP; other values
    /// exist only to test that a peer refuses them.
    pub announce: Option<u32>,
    /// How long association setup and its verification may take.
    pub setup_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            transport: Transport::default(),
            config: Config::default(),
            max_seg: None,
            announce: Some(rddp_wire::sctp::ADAPTATION_DDP),
            setup_timeout: Duration::from_secs(5),
        }
    }
}

/// Why the driver failed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Sctp(#[from] usrsctp_ffi::Error),
    /// Spec §5.2: no DDP/RDMA procedure on this association.
    #[error(
        "peer's Adaptation Layer Indication is {0}: not DDP (0x00000001), so no DDP on this association"
    )]
    NotDdp(String),
    #[error("unequal stream counts: {inbound} inbound, {outbound} outbound (spec §5.1)")]
    UnequalStreams { inbound: u16, outbound: u16 },
    #[error("association failed to come up: {0}")]
    Setup(String),
    #[error(transparent)]
    Association(#[from] crate::adaptation::AssociationError),
    #[error("association closed")]
    Closed,
}
