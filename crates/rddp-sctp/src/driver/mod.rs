//! A driver of the sans-IO adaptation over usrsctp (usrsctp-ffi): association setup
//! with the Adaptation Layer Indication (RFC 5043), addressing, and a connection
//! that moves chunks between the socket and [`crate::Adaptation`].
//!
//! Addressing: over UDP encapsulation, an endpoint "at ADDR" listens with
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
    /// How SCTP packets travel: over UDP or raw IP.
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
    /// A dead peer or a cut path ends the association within
    /// [`dead_peer_bound`] of this (SCTP's own failure detection,
    /// [`failure_detection`]); every posted work request then completes.
    /// `None` keeps usrsctp's defaults (a 60 s RTO ceiling and 10
    /// retransmissions: minutes). Default 30 s, as MPA's.
    pub dead_peer_timeout: Option<Duration>,
}

/// Default of [`Options::dead_peer_timeout`].
pub const DEAD_PEER_TIMEOUT: Duration = Duration::from_secs(30);

/// Retransmissions (or heartbeats) left unanswered that end an association
/// under [`Options::dead_peer_timeout`]: RFC 4960 §15's Path.Max.Retrans.
const MAX_RETRANS: u16 = 5;

/// SCTP's settings for a dead-peer timeout `t`. An association fails after
/// `MAX_RETRANS + 1` timeouts in a row, of data (RFC 4960 §8.1, §8.2) or of
/// heartbeats on an idle path (§8.3), counted from the first one sent after
/// the peer went away, which may come one period late: at most
/// `MAX_RETRANS + 2` periods. A data timeout lasts at most the RTO's cap; a
/// heartbeat period at most 1.5 RTOs (usrsctp's jitter) plus the heartbeat
/// interval, set to half the cap: two caps. So the cap is
/// `t / (2 (MAX_RETRANS + 2))`. The RTO's floor and first value stay at RFC
/// 4960 §15's 1 s and 3 s where the cap allows.
pub fn failure_detection(t: Duration) -> usrsctp_ffi::FailureDetection {
    let periods = 2 * u32::from(MAX_RETRANS + 2);
    let rto_max = (t / periods).max(Duration::from_millis(10));
    usrsctp_ffi::FailureDetection {
        rto_initial: rto_max.min(Duration::from_secs(3)),
        rto_min: rto_max.min(Duration::from_secs(1)),
        rto_max,
        heartbeat: rto_max / 2,
        max_retrans: MAX_RETRANS,
    }
}

/// How long after a peer's death or a cut link the association has ended, at
/// most, under a dead-peer timeout of `t` (see [`failure_detection`]): `t`,
/// plus one RTO cap for the timers' granularity.
pub fn dead_peer_bound(t: Duration) -> Duration {
    t + failure_detection(t).rto_max
}

impl Default for Options {
    fn default() -> Self {
        Self {
            transport: Transport::default(),
            config: Config::default(),
            max_seg: None,
            announce: Some(rddp_wire::sctp::ADAPTATION_DDP),
            setup_timeout: Duration::from_secs(5),
            dead_peer_timeout: Some(DEAD_PEER_TIMEOUT),
        }
    }
}

/// Why the driver failed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The SCTP library refused a call.
    #[error(transparent)]
    Sctp(#[from] usrsctp_ffi::Error),
    /// RFC 5043: no DDP/RDMA procedure on this association.
    #[error(
        "peer's Adaptation Layer Indication is {0}: not DDP (0x00000001), so no DDP on this association"
    )]
    NotDdp(String),
    #[error("unequal stream counts: {inbound} inbound, {outbound} outbound (RFC 5043)")]
    /// The association's inbound and outbound stream counts differ (RFC 5043: they
    /// must be equal).
    UnequalStreams {
        /// Inbound streams.
        inbound: u16,
        /// Outbound streams.
        outbound: u16,
    },
    /// The association did not come up, or a wait for it timed out.
    #[error("association failed to come up: {0}")]
    Setup(String),
    /// The peer broke the adaptation's rules badly enough to end the association.
    #[error(transparent)]
    Association(#[from] crate::adaptation::AssociationError),
    /// The association is gone (shut down, or communication lost).
    #[error("association closed")]
    Closed,
}
