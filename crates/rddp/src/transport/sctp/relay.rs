//! One session's relay between its association's task and its queue pair's
//! task (both on the event loop): received segments in (bounded, for
//! backpressure), segments out, and which of them SCTP took. Segments out are
//! handed to usrsctp by the posting thread itself when the association's
//! connection is free and nothing waits ahead of them (no
//! cross-thread hop per message, docs/event-loop.md); otherwise the association's task sends them.

use super::super::{HoldInner, Inbound};
use rddp_io::TaskHandle;
use rddp_mpa::fpdu::{Sent, summary};
use rddp_proto::ddp::{
    OutSegment, SegmentEndpoint, SenderSeq, SourceError, StreamError, split_segment,
};
use rddp_proto::mem::MemoryTable;
use rddp_sctp::driver::SctpConnection;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// Octets of received segments that may wait for the queue pair's reader. Beyond
/// it the driver stops reading the association, so SCTP's receive window holds the
/// peer back (backpressure) instead of a queue growing without bound.
pub(super) const INBOUND_MAX_OCTETS: usize = 256 * 1024;

/// Posts of every SCTP queue pair in this process whose segments were left to
/// the association's task because another thread held the association's
/// connection at that moment (see [`direct_sends_deferred`]).
static DEFERRED_BUSY: AtomicU64 = AtomicU64::new(0);

/// How many times a posting thread found the association's connection held by
/// another thread (usrsctp's receive thread reading in its upcall, or the
/// association's task) and left its segments to the task instead of handing
/// them to usrsctp itself: those Sends and Writes complete on the loop, one
/// hop later, not on the posting thread.
pub fn direct_sends_deferred() -> u64 {
    DEFERRED_BUSY.load(Ordering::Relaxed)
}

#[derive(Debug, Default)]
struct RelayState {
    inbound: VecDeque<Inbound>,
    /// Octets of the segments in `inbound`.
    inbound_octets: usize,
    outbound: VecDeque<OutSegment>,
    /// Segments the adaptation took from `outbound`, in order, that SCTP has
    /// not accepted yet (the send buffer was full).
    polled: VecDeque<Sent>,
    /// Segments SCTP accepted, not yet reported to the queue pair (its
    /// completions, its budget, its IRD).
    taken: Vec<Sent>,
    /// The queue pair asked to close: gracefully (session Terminate) or not.
    close: Option<bool>,
    /// The association is gone: the queue pair reads a lost connection.
    lost: bool,
    /// The queue pair's task: woken when something arrives or was taken.
    qp: Option<TaskHandle>,
    /// The association's task: woken when output is queued, room is made, or
    /// the queue pair closes.
    assoc: Option<TaskHandle>,
    /// The association's connection (shared with its task), for direct sends
    /// by the posting thread. Weak: the connection's adaptation holds the relay.
    conn: Option<Weak<Mutex<SctpConnection>>>,
    /// A direct send of this relay's queue pair is under way: segments taken
    /// are reported by that thread itself, its task is not woken for them.
    direct: bool,
    /// Places received segments straight into the queue pair (set by its task).
    placer: Option<Arc<dyn Placer>>,
    /// Payload octets copied in user space: received ones on their way into
    /// place, and of region leases on their way out (the queue pair's
    /// `rx_copied_octets` and `tx_copied_octets`, with its engine's own).
    copied: (u64, u64),
}

/// Header-first placement of a session's received segments into its queue
/// pair, called by the association's task as it reads them (docs/data-path.md:
/// the payload goes from usrsctp straight to its region or receive buffer).
pub(crate) trait Placer: Send + Sync {
    /// Place the segment at `seq` (DDP header `head`, `payload_len` octets
    /// that `fill` reads). `None`: not now (the queue pair's reads are held,
    /// or it is gone), `fill` not called: the relay queues the segment.
    fn place(
        &self,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Option<Result<(), StreamError>>;
}

impl std::fmt::Debug for dyn Placer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Placer")
    }
}

/// One session's relay between the association's task and its queue pair
/// (both on the event loop; no thread of their own).
#[derive(Debug, Default)]
pub(crate) struct Relay {
    st: Mutex<RelayState>,
    /// For [`SctpLlp::recv`] (tests, tools without a queue pair).
    cv: Condvar,
}

pub(super) fn wake(h: Option<TaskHandle>) {
    if let Some(h) = h {
        h.wake();
    }
}

impl Relay {
    fn lock(&self) -> MutexGuard<'_, RelayState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub(super) fn push(&self, i: Inbound) {
        let mut st = self.lock();
        if st.lost {
            return; // nobody will read it
        }
        if let Inbound::Segment { bytes, .. } = &i {
            st.inbound_octets += bytes.len();
        }
        let was_empty = st.inbound.is_empty();
        st.inbound.push_back(i);
        let qp = was_empty.then(|| st.qp.clone()).flatten();
        drop(st);
        self.cv.notify_all();
        wake(qp);
    }
    /// Whether the association may read the next message for this relay.
    pub(super) fn has_room(&self) -> bool {
        let st = self.lock();
        st.lost || st.inbound_octets < INBOUND_MAX_OCTETS
    }
    pub(super) fn lose(&self) {
        let mut st = self.lock();
        st.lost = true;
        let (qp, assoc) = (st.qp.clone(), st.assoc.clone());
        drop(st);
        self.cv.notify_all();
        wake(qp);
        wake(assoc);
    }
    pub(super) fn close_requested(&self) -> Option<bool> {
        self.lock().close
    }
    pub(crate) fn outbound_idle(&self) -> bool {
        self.lock().outbound.is_empty()
    }
    pub(super) fn set_assoc(&self, h: TaskHandle) {
        self.lock().assoc = Some(h);
    }
    /// The association's task, once known.
    pub(crate) fn assoc(&self) -> Option<TaskHandle> {
        self.lock().assoc.clone()
    }
    pub(super) fn set_conn(&self, c: &Arc<Mutex<SctpConnection>>) {
        self.lock().conn = Some(Arc::downgrade(c));
    }

    /// The next thing that arrived (`None`: nothing yet). Taking a segment may
    /// make room: the association then reads again.
    pub(crate) fn pop(&self) -> Option<io::Result<Inbound>> {
        let mut st = self.lock();
        match st.inbound.pop_front() {
            Some(i) => {
                let mut assoc = None;
                if let Inbound::Segment { bytes, .. } = &i {
                    let full = st.inbound_octets >= INBOUND_MAX_OCTETS;
                    st.inbound_octets -= bytes.len();
                    if full && st.inbound_octets < INBOUND_MAX_OCTETS {
                        assoc = st.assoc.clone();
                    }
                }
                drop(st);
                wake(assoc);
                Some(Ok(i))
            }
            None if st.lost => Some(Err(io::ErrorKind::ConnectionReset.into())),
            None => None,
        }
    }

    /// Hand segments to the association; `false` if the association is gone.
    /// If nothing of the association waits to be sent and its connection is
    /// free (never waited for: a `try_lock`), this thread hands them to
    /// usrsctp itself, in order behind anything already queued (one adaptation
    /// assigns every DDP-SSN, so order per association and per stream holds).
    /// Whatever usrsctp would not take yet (its send buffer full, the
    /// connection busy, the session not yet accepted) is left to the
    /// association's task, which is woken for it. Segments taken are reported
    /// through [`Self::take_sent`].
    pub(crate) fn send(&self, segs: impl IntoIterator<Item = OutSegment>) -> bool {
        let mut st = self.lock();
        if st.lost {
            return false;
        }
        let before = st.outbound.len();
        st.outbound.extend(segs);
        if st.outbound.len() == before {
            return true;
        }
        let conn = st.conn.as_ref().and_then(Weak::upgrade);
        let assoc = st.assoc.clone();
        drop(st);
        if let Some(conn) = &conn
            && let Ok(mut c) = conn.try_lock()
        {
            if c.is_blocked() {
                // A chunk waits for send space: ours go behind it, by the task.
                drop(c);
                wake(assoc);
                return true;
            }
            self.lock().direct = true;
            let flushed = c.flush();
            drop(c);
            let mut st = self.lock();
            st.direct = false;
            let rest = !st.outbound.is_empty();
            drop(st);
            // Blocked, not yet accepted, or the association failed: the task
            // sends the rest (or reads the loss).
            if !matches!(flushed, Ok(true)) || rest {
                wake(assoc);
            }
            return true;
        }
        if conn.is_some() {
            // Held: never waited for (the posting thread holds the queue
            // pair's lock; the holder may want it: lock order connection,
            // then queue pair).
            DEFERRED_BUSY.fetch_add(1, Ordering::Relaxed);
        }
        wake(assoc);
        true
    }

    /// Segments SCTP accepted since the last call, in order.
    pub(crate) fn take_sent(&self, out: &mut Vec<Sent>) {
        out.append(&mut self.lock().taken);
    }

    pub(crate) fn set_qp(&self, h: TaskHandle) {
        self.lock().qp = Some(h);
    }

    pub(crate) fn set_placer(&self, p: Arc<dyn Placer>) {
        self.lock().placer = Some(p);
    }

    /// Payload octets copied so far in this session's relay and in the
    /// association's driver for it: (received, transmitted).
    pub(crate) fn copied(&self) -> (u64, u64) {
        self.lock().copied
    }

    fn count_copied(&self, rx: usize, tx: usize) {
        let mut st = self.lock();
        st.copied.0 += rx as u64;
        st.copied.1 += tx as u64;
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lock().lost
    }

    /// Close the session: abortive (after a Terminate) or graceful.
    pub(crate) fn close(&self, abortive: bool) {
        let mut st = self.lock();
        if st.close != Some(false) {
            st.close = Some(!abortive);
        }
        let assoc = st.assoc.clone();
        drop(st);
        wake(assoc);
    }
}

/// The session's upper layer inside rddp-sctp: a relay to the queue pair.
#[derive(Debug)]
pub(super) struct RelayEndpoint(pub(super) Arc<Relay>);

impl RelayEndpoint {
    /// The queue pair's placer, while the association lives.
    fn placer(&self) -> Option<Arc<dyn Placer>> {
        let st = self.0.lock();
        if st.lost { None } else { st.placer.clone() }
    }
}

impl SegmentEndpoint for RelayEndpoint {
    fn on_segment(
        &mut self,
        _mem: &MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), StreamError> {
        // A message read whole: copied into place at once (one copy, counted),
        // or queued for the queue pair's task (a copy into the queued segment,
        // counted, and the queue pair's placement of it, counted again).
        let (head, payload) = split_segment(seg);
        let mut at = 0;
        let mut copy = |dst: &mut [u8]| match payload.get(at..at + dst.len()) {
            Some(src) => {
                dst.copy_from_slice(src);
                at += dst.len();
                true
            }
            None => false,
        };
        if let Some(p) = self.placer()
            && let Some(r) = p.place(seq, head, payload.len(), &mut copy)
        {
            self.0.count_copied(payload.len(), 0);
            return r;
        }
        self.0.count_copied(payload.len(), 0);
        self.0.push(Inbound::Segment {
            seq,
            bytes: seg.to_vec(),
        });
        Ok(())
    }
    fn place_segment(
        &mut self,
        _mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Result<(), StreamError> {
        // Straight into the queue pair (segments may be placed in any order:
        // DDP over SCTP is unordered; DDP delivers in DDP-SSN order), unless
        // its reads are held.
        if let Some(p) = self.placer()
            && let Some(r) = p.place(seq, head, payload_len, fill)
        {
            return r;
        }
        let mut seg = Vec::with_capacity(head.len() + payload_len);
        seg.extend_from_slice(head);
        seg.resize(head.len() + payload_len, 0);
        if !fill(&mut seg[head.len()..]) {
            return Err(StreamError::Closed);
        }
        self.0.count_copied(payload_len, 0);
        self.0.push(Inbound::Segment { seq, bytes: seg });
        Ok(())
    }
    fn poll_segment(&mut self) -> Option<OutSegment> {
        // Handed to SCTP at once (the adaptation pulls one segment per chunk
        // it sends); the queue pair hears of it once SCTP accepted it.
        let mut st = self.0.lock();
        let seg = st.outbound.pop_front()?;
        st.polled.push_back(summary(&seg));
        Some(seg)
    }
    fn segment_accepted(&mut self) {
        let mut st = self.0.lock();
        let Some(s) = st.polled.pop_front() else {
            return;
        };
        let was_empty = st.taken.is_empty();
        st.taken.push(s);
        // A direct send's thread reports what it handed over itself.
        let qp = (was_empty && !st.direct).then(|| st.qp.clone()).flatten();
        drop(st);
        wake(qp);
    }
    fn drained(&self) -> bool {
        self.0.lock().outbound.is_empty()
    }
    fn set_mulpdu(&mut self, mulpdu: usize) -> Result<(), SourceError> {
        self.0.push(Inbound::Mulpdu(mulpdu));
        Ok(())
    }
    fn close(&mut self) {}
    fn count_copied(&mut self, rx: usize, tx: usize) {
        self.0.count_copied(rx, tx);
    }
    fn on_llp_closed(&mut self, graceful: bool) {
        if graceful {
            self.0.push(Inbound::Closed);
        } else {
            self.0.lose();
        }
    }
}

/// The queue pair's side of one session (`Llp::Sctp`): its relay, driven by
/// the queue pair's task on the event loop.
pub struct SctpLlp {
    pub(crate) relay: Arc<Relay>,
    pub(crate) hold: Option<Arc<HoldInner>>,
}

impl SctpLlp {
    /// Wait up to `timeout` for what the session delivers, without a queue pair
    /// (tests: a reader that does not read holds the peer back). `TimedOut` if
    /// nothing came.
    pub fn recv(&self, timeout: Duration) -> io::Result<Inbound> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.relay.pop() {
                return r;
            }
            let st = self.relay.lock();
            if !st.inbound.is_empty() || st.lost {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            let _ = self.relay.cv.wait_timeout(st, left);
        }
    }
}
