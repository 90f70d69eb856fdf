//! What the TCP driver logs through `tracing` (docs/features.md): each connection's setup
//! and what it agreed, or why it failed. Never per FPDU.

use crate::error::MpaError;
use crate::setup::{Negotiated, Role};
use std::net::SocketAddr;

fn peer(p: Option<SocketAddr>) -> String {
    p.map_or_else(|| "?".into(), |p| p.to_string())
}

fn on(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// Setup is done: what both sides agreed (RFC 5044 §7.1.1; RFC 6581).
pub(super) fn established(p: Option<SocketAddr>, n: &Negotiated) {
    let role = match n.role {
        Role::Initiator => "initiator",
        Role::Responder => "responder",
    };
    let ird_ord = n.ird_ord.map_or_else(String::new, |(i, o)| {
        let (pi, po) = n.peer_ird_ord.unwrap_or((0, 0));
        format!(", IRD {i} ORD {o} (peer announced IRD {pi} ORD {po})")
    });
    let rtr = n.rtr.map_or_else(String::new, |r| format!(", {r:?} RTR"));
    tracing::info!(
        "MPA: connected with {} as {role}: revision {}, CRC {}, Markers rx {} tx {}{ird_ord}{rtr}, {} octets of private data from the peer",
        peer(p),
        n.rev,
        on(n.crc),
        on(n.markers_rx),
        on(n.markers_tx),
        n.peer_private_data.len()
    );
}

/// Setup failed (the socket is being closed). Info, not a warning: the error
/// goes back to the caller, who reports it.
pub(super) fn failed(p: Option<SocketAddr>, e: &MpaError) {
    match e {
        MpaError::Refused(_) | MpaError::Rejected { .. } => {
            tracing::info!("MPA: setup with {}: {e}", peer(p))
        }
        _ => tracing::info!("MPA: setup with {} failed: {e}", peer(p)),
    }
}
