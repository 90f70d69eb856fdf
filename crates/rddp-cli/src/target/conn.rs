//! One target connection: buffer, receives, advertisement, echo, events. Served
//! without a thread of its own (see `service`).

use super::args::{Rq, TargetArgs};
use super::events::{Events, Streams};
use rddp::transport::Connection;
use rddp::{
    Access, AsyncEvent, BufferOrdering, CompletionQueue, MemoryRegion, ProtectionDomain, QueuePair,
    QueuePairBuilder, SendFlags, SharedReceiveQueue, SrqMode, TerminateCode, WcOpcode, WcStatus,
};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;

/// Send-queue depth of a target connection.
const SEND_DEPTH: u32 = 64;

/// Echoes waiting for room on the send queue before the connection is dropped.
const MAX_BACKLOG: usize = 4096;

/// Where this connection's receive buffers come from.
enum Receives {
    Own,
    Shared(Arc<SharedReceiveQueue>),
    Credits(SharedReceiveQueue),
}

/// One connection being served: its queue pair and what the echo loop keeps.
pub(super) struct Served {
    pub id: u64,
    qp: QueuePair,
    pub cq: CompletionQueue,
    /// This connection's buffer, or the one all connections share.
    buf: Arc<MemoryRegion>,
    receives: Receives,
    args: TargetArgs,
    terminated: Option<&'static str>,
    /// Echoes the send queue had no room for yet, oldest first.
    backlog: VecDeque<Vec<u8>>,
}

/// What connections share: the receive pool (`--rq shared`), the buffer
/// (`--shared-buffer`).
#[derive(Clone, Default)]
pub(super) struct Shared {
    pub srq: Option<Arc<SharedReceiveQueue>>,
    pub buf: Option<Arc<MemoryRegion>>,
}

/// Set up one accepted connection (queue pair, receives, buffer, the
/// advertisement); `Err` if that failed (reported here).
pub(super) fn setup(
    id: u64,
    conn: Connection,
    pd: &ProtectionDomain,
    args: &TargetArgs,
    shared: Shared,
    streams: &Streams,
    ev: &Events,
) -> Option<Served> {
    match build(id, conn, pd, args, shared, streams, ev) {
        Ok(s) => Some(s),
        Err(e) => {
            streams.remove_conn(id);
            ev.emit(
                "closed",
                json!({ "conn": id, "reason": format!("setup failed: {e}") }),
            );
            None
        }
    }
}

fn build(
    id: u64,
    conn: Connection,
    pd: &ProtectionDomain,
    args: &TargetArgs,
    shared: Shared,
    streams: &Streams,
    ev: &Events,
) -> Result<Served, rddp::Error> {
    let Shared {
        srq: shared,
        buf: shared_buf,
    } = shared;
    let credits = args.credits.unwrap_or(args.recv_count as u32);
    let (receives, depth) = match (args.rq, shared) {
        (Rq::Shared, Some(srq)) => (Receives::Shared(srq), args.recv_count as u32),
        (Rq::Pool, _) => {
            let srq = SharedReceiveQueue::new(
                pd,
                SrqMode::Credits,
                BufferOrdering::Arrival,
                args.recv_count,
            );
            (Receives::Credits(srq), credits)
        }
        _ => (Receives::Own, args.recv_count as u32),
    };
    let cq = CompletionQueue::new((SEND_DEPTH + depth.max(args.recv_count as u32)) as usize);
    let mut b = QueuePairBuilder::new(pd, &cq, &cq)
        .max_send_wr(SEND_DEPTH)
        .max_recv_wr(depth);
    match &receives {
        Receives::Shared(s) => b = b.srq(s),
        Receives::Credits(s) => b = b.srq(s),
        Receives::Own => {}
    }
    let mut prepared = b.build()?;
    // Receives and credits are in place before the LLP is read at all: the
    // initiator may Send as soon as its Request is answered.
    match &receives {
        Receives::Own => {
            for i in 0..args.recv_count {
                prepared.post_recv(i as u64, args.recv_size)?;
            }
        }
        Receives::Credits(s) => {
            for i in 0..args.recv_count {
                s.post_recv(i as u64, args.recv_size)?;
            }
            prepared.grant_credits(credits)?;
        }
        Receives::Shared(_) => {}
    }
    streams.insert(prepared.qp_num(), id);
    let info = conn.info.clone();
    let qp = prepared.attach(conn)?;
    let (ird, ord) = qp.ird_ord();
    ev.emit(
        "connected",
        json!({
            "conn": id,
            "peer": info.peer.map(|p| p.to_string()),
            "transport": info.transport,
            "mpa_rev": info.mpa_rev,
            "crc": info.crc,
            "markers_rx": info.markers_rx,
            "markers_tx": info.markers_tx,
            "ird": ird,
            "ord": ord,
        }),
    );
    // One zero-filled buffer, remote read and write, valid on this connection
    // only (or the one all connections share, --shared-buffer).
    let buf = match shared_buf {
        Some(b) => b,
        None => Arc::new(qp.register_bound(
            vec![0; args.buffer_size],
            Access::REMOTE_READ | Access::REMOTE_WRITE,
        )?),
    };
    // The first Send (MSN 1): STag || TO || length. MPA holds it until the
    // initiator's first FPDU or RTR has arrived.
    qp.post_send_inline(0, &buf.remote().to_bytes(), SendFlags::default())?;
    Ok(Served {
        id,
        qp,
        cq,
        buf,
        receives,
        args: args.clone(),
        terminated: None,
        backlog: VecDeque::new(),
    })
}

impl Served {
    /// Do what is there to do without waiting: echo what arrived, report
    /// events. `Some(reason)` once the connection has closed.
    pub(super) fn step(&mut self, ev: &Events) -> Option<String> {
        let (id, qp, cq, rx, args) = (self.id, &self.qp, &self.cq, &self.receives, &self.args);
        loop {
            let wcs = cq.poll(32);
            if wcs.is_empty() {
                break;
            }
            for wc in wcs {
                if wc.opcode != WcOpcode::Recv {
                    continue;
                }
                if wc.status != WcStatus::Success {
                    // Flushed receives of a shared pool go back to it (zeroed).
                    if let Receives::Shared(s) = rx {
                        let _ = s.post_recv(wc.wr_id, args.recv_size);
                    }
                    continue;
                }
                let (qn, msn) = wc.qn_msn.unwrap_or((0, 0));
                ev.emit(
                    "completion",
                    json!({ "conn": id, "op": "recv", "bytes": wc.byte_len, "qn": qn, "msn": msn }),
                );
                let data = wc
                    .buffer
                    .as_deref()
                    .map_or(&[][..], |b| b.get(..wc.byte_len as usize).unwrap_or(b));
                // The buffer goes back to the strategy before the echo leaves, so a
                // peer that answers the echo at once finds it (a failure here means
                // the connection is going away; the events below say why).
                let _ = match rx {
                    Receives::Own => qp.post_recv(wc.wr_id, args.recv_size),
                    Receives::Shared(s) => s.post_recv(wc.wr_id, args.recv_size),
                    Receives::Credits(s) => s
                        .post_recv(wc.wr_id, args.recv_size)
                        .and_then(|()| qp.grant_credits(1)),
                };
                self.backlog.push_back(data.to_vec());
            }
        }
        while let Some(echo) = self.backlog.front() {
            match qp.post_send_inline(0, echo, SendFlags::default()) {
                Ok(()) => {
                    self.backlog.pop_front();
                }
                Err(rddp::Error::SendQueueFull { .. }) => break,
                // The connection is going away; the events below say why.
                Err(_) => {
                    self.backlog.clear();
                }
            }
        }
        if self.backlog.len() > MAX_BACKLOG {
            return Some("the peer does not read its echoes".into());
        }
        for e in qp.async_events() {
            match e {
                AsyncEvent::TerminateSent { code, .. } => {
                    self.terminated = Some("terminate sent");
                    ev.emit("terminate", term(id, "sent", code));
                }
                AsyncEvent::TerminateReceived { received, .. } => {
                    self.terminated = Some("terminate received");
                    ev.emit("terminate", super::term_json::received(id, &received));
                }
                AsyncEvent::Closed { graceful } => {
                    return Some(
                        self.terminated
                            .unwrap_or(if graceful {
                                "peer closed"
                            } else {
                                "connection lost"
                            })
                            .to_string(),
                    );
                }
            }
        }
        None
    }

    /// The connection has closed for `reason`: release it and report.
    pub(super) fn finish(self, reason: String, streams: &Streams, ev: &Events) {
        // The stream has closed: its receives are flushed and counted by now.
        let stats = crate::observe::stats_json(&self.qp.stats());
        // Nothing was placed outside the buffer (its guard octets, RFC 5042 §5).
        let guards_intact = self.buf.guards_intact();
        // Gone before it is reported: its resources are released by then.
        drop(self.buf);
        drop(self.qp);
        // Buffers of a shared pool that this connection held (messages it never
        // finished) come back flushed: give fresh, zeroed ones back to the pool, so a
        // peer that dies holding buffers cannot shrink it for the others.
        if let Receives::Shared(srq) = &self.receives {
            for wc in self.cq.poll(usize::MAX) {
                if wc.opcode == WcOpcode::Recv && wc.status == WcStatus::Flushed {
                    let _ = srq.post_recv(wc.wr_id, self.args.recv_size);
                }
            }
        }
        streams.remove_conn(self.id);
        ev.emit(
            "closed",
            json!({ "conn": self.id, "reason": reason, "guards_intact": guards_intact, "stats": stats }),
        );
    }
}

fn term(id: u64, direction: &str, code: TerminateCode) -> Value {
    json!({
        "conn": id,
        "direction": direction,
        "layer": code.layer,
        "etype": code.etype,
        "code": code.code,
    })
}
