//! What the verbs layer logs through `tracing` (docs/features.md): queue-pair state
//! changes, Terminates with their decoded code and a reason in words, LLP loss.
//! Nothing here runs per segment: only on attach, on asynchronous events and on
//! teardown.

use crate::stats::QpStats;
use crate::transport::LlpInfo;
use rddp_proto::rdmap::AsyncEvent;
use rddp_wire::{DdpHeader, Terminate};

/// The queue pair runs over its LLP (state: ready to send).
pub(crate) fn attached(qp: u32, info: &LlpInfo, ird: u32, ord: u32, mulpdu: usize) {
    let peer = match (info.peer, info.transport) {
        (Some(p), _) => p.to_string(),
        (None, "memory") => "an in-process peer".to_string(),
        (None, _) => "its peer".to_string(),
    };
    let mpa = match info.mpa_rev {
        Some(rev) => format!(
            ", MPA revision {rev}, CRC {}, Markers rx {} tx {}",
            on(info.crc),
            on(info.markers_rx),
            on(info.markers_tx)
        ),
        None => String::new(),
    };
    tracing::info!(
        "qp {qp}: attached over {} to {peer}{mpa}, IRD {ird} ORD {ord}, MULPDU {mulpdu}; state RTS",
        info.transport
    );
}

fn on(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// An asynchronous event of the engine: a state change of the queue pair.
pub(crate) fn event(qp: u32, e: &AsyncEvent) {
    match e {
        AsyncEvent::TerminateSent { code, detail } => {
            tracing::warn!("qp {qp}: Terminate sent: {code}: {detail}; state ERROR")
        }
        AsyncEvent::TerminateReceived {
            code,
            terminate,
            received,
        } => {
            let what = code.map_or_else(
                || "a malformed Terminate (its code did not parse)".to_string(),
                |c| c.to_string(),
            );
            // How it was read (Linux siw's bitfield layout) or its raw word.
            let note = received
                .note()
                .map(|n| format!(" [{n}]"))
                .unwrap_or_default();
            tracing::warn!(
                "qp {qp}: Terminate received: {what}{}{note}; state ERROR",
                terminate.as_ref().map(offending).unwrap_or_default()
            );
        }
        AsyncEvent::Closed { graceful } => tracing::info!(
            "qp {qp}: stream closed ({}); state CLOSED",
            if *graceful { "graceful" } else { "abortive" }
        ),
    }
}

/// The peer's words on what it refused: the DDP header it echoed, if any.
fn offending(t: &Terminate) -> String {
    match t.ddp_hdr {
        Some(DdpHeader::Tagged(h)) => format!(
            " (for our tagged segment to STag {:#010x} TO {:#x})",
            h.stag, h.to
        ),
        Some(DdpHeader::Untagged(h)) => {
            format!(" (for our message QN {} MSN {} MO {})", h.qn, h.msn, h.mo)
        }
        None => String::new(),
    }
}

/// The LLP failed under the queue pair (not a close by the peer).
pub(crate) fn llp_lost(qp: u32, e: &std::io::Error) {
    tracing::info!("qp {qp}: the LLP connection is lost: {e}");
}

/// The queue pair is gone; its last counters.
pub(crate) fn dropped(qp: u32, s: &QpStats) {
    tracing::debug!(
        "qp {qp}: destroyed after {} segments / {} octets sent, {} segments / {} octets placed, {} messages delivered, {} refused, {} Terminates sent, {} received, {} completions",
        s.segments_sent,
        s.octets_sent,
        s.segments_placed,
        s.octets_placed,
        s.messages_delivered,
        s.segments_refused,
        s.terminates_sent.total(),
        s.terminates_received.total(),
        s.completions.total()
    );
}
