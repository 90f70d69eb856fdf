//! Moving what the engine produced: segments to the LLP (MPA: written under
//! the queue pair's lock; SCTP: handed to the relay; in memory: to the writer
//! thread), completions to the CQs, events to the ULP, and the close.

use super::*;

impl crate::stats::StatsSource for Shared {
    fn stats(&self) -> crate::QpStats {
        lock(&self.state).stats()
    }
}

impl Shared {
    /// Move what the engine produced: segments to the writer, completions to the
    /// CQs (returning quota), events to the ULP; close once a Terminate has left,
    /// or once a graceful disconnect has nothing left to finish.
    pub(super) fn pump(&self, st: &mut State) {
        self.pump_in(st, false);
    }

    /// [`Self::pump`]; `in_task`: called by the loop's own task (which decides
    /// itself what to wait for, so it is not woken).
    pub(super) fn pump_in(&self, st: &mut State, in_task: bool) {
        if st.mpa.is_some() {
            self.pump_mpa(st, in_task);
        } else if st.sctp.is_some() {
            Self::pump_sctp(st);
        } else {
            self.pump_channel(st);
        }
        while let Some(c) = st.rdmap.poll_completion() {
            // A receive that is not outstanding is never passed on (none invented
            // or doubled).
            // An unsignaled success gives its send-queue slot back here and
            // the ULP hears nothing of it. A Read, signaled or not, is no
            // longer outstanding.
            if c.opcode == WcOpcode::RdmaRead {
                self.pd.inner.consumer.refund(Resource::OutstandingReads, 1);
            }
            if let Some(held) = st.wq.completed(&c) {
                self.complete(c, held);
            }
        }
        if *st.rdmap.ddp().state() == StreamState::Closed {
            // Nothing more comes back from a closed stream: a receive still
            // outstanding completes as flushed (none lost).
            for (c, held) in st.wq.flush_unreturned() {
                self.complete(c, held);
            }
        }
        while let Some(e) = st.rdmap.poll_event() {
            crate::trace::event(self.qp_num, &e);
            if let Some(f) = self.event_notify.get() {
                f(&e);
            }
            st.events.push_back(e);
        }
    }

    /// Segments to the writer thread; close once a Terminate has left, or once a
    /// graceful disconnect has nothing left to finish.
    fn pump_channel(&self, st: &mut State) {
        let Some(tx) = &self.tx else {
            return;
        };
        let tx = lock(tx);
        while st.tx_queued < TX_BUDGET
            && let Some(seg) = st.rdmap.poll_segment()
        {
            st.tx_queued += seg.len();
            let _ = tx.send(TxCmd::Segment(seg));
        }
        if st.rdmap.should_close() && !st.close_sent {
            st.close_sent = true;
            let _ = tx.send(TxCmd::Close { abortive: true });
        }
        if st.rdmap.poll_close() && !st.close_sent {
            st.close_sent = true;
            let _ = tx.send(TxCmd::Close { abortive: false });
        }
    }

    /// Over MPA on the loop: segments into the connection's queue (bounded by
    /// TX_BUDGET), written now as far as the socket takes them (by this thread:
    /// no hop to another); what it refuses waits for the task's WRITABLE.
    fn pump_mpa(&self, st: &mut State, in_task: bool) {
        let State {
            rdmap,
            tx_queued,
            close_sent,
            mpa,
            ..
        } = st;
        let Some(io) = mpa else {
            return;
        };
        loop {
            // The engine had nothing more (not stopped by the budget).
            let mut exhausted = false;
            while *tx_queued < TX_BUDGET {
                let Some(seg) = rdmap.poll_segment() else {
                    exhausted = true;
                    break;
                };
                // MULPDU follows TCP's EMSS (RFC 5044 §4) from the next segment
                // on; segments are cut as they are taken here, so this covers
                // Read Responses too.
                if let Some(w) = &mut io.emss
                    && let Some(n) = w.on_segment(&io.sock)
                {
                    let _ = rdmap.ddp_mut().set_mulpdu(n);
                }
                *tx_queued += seg.len();
                io.out.push(seg);
            }
            if rdmap.should_close() && !*close_sent {
                *close_sent = true;
                io.out.close = Some(true);
            }
            if rdmap.poll_close() && !*close_sent {
                *close_sent = true;
                io.out.close = Some(false);
            }
            let before = *tx_queued;
            io.out.flush(&mut |s: Sent| {
                *tx_queued = tx_queued.saturating_sub(s.len);
                if s.read_response {
                    rdmap.read_response_sent();
                }
                rdmap.segment_sent(s.last);
            });
            // Written up to the budget: the engine may have more now.
            if *tx_queued == before || io.out.failed.is_some() || io.out.wants_writable() {
                break;
            }
            // What was written gives the engine no new segment (it only
            // completes work): look again only if the budget stopped it, or
            // if a close may be due now (our Terminate left, a graceful close
            // whose last work went). Saves a round of empty polls and an empty
            // flush per post.
            if exhausted && !rdmap.should_close() && !rdmap.is_closing() && !rdmap.is_terminated() {
                break;
            }
        }
        let wake = io.out.wants_writable() || io.out.failed.is_some() || io.out.shut.is_some();
        if !in_task
            && wake
            && !io.armed
            && let Some(h) = &io.handle
        {
            io.armed = true;
            h.wake();
        }
    }

    /// Over SCTP on the loop: what the association handed to SCTP is reported
    /// (completions, budget, IRD), then segments to the relay (bounded by
    /// TX_BUDGET), which hands them to usrsctp from this thread when nothing
    /// waits ahead of them (else the association's task sends them), and
    /// again while usrsctp takes them; then a close.
    fn pump_sctp(st: &mut State) {
        let State {
            rdmap,
            tx_queued,
            close_sent,
            sctp,
            ..
        } = st;
        let Some(io) = sctp else {
            return;
        };
        let mut sent = Vec::new();
        let mut segs = Vec::new();
        loop {
            io.relay.take_sent(&mut sent);
            for s in sent.drain(..) {
                *tx_queued = tx_queued.saturating_sub(s.len);
                rdmap.segment_sent(s.last);
            }
            // A Read Response's IRD slot is freed as the engine hands out its
            // last segment (no hold_ird_until_sent over SCTP, see attach).
            while *tx_queued < TX_BUDGET
                && let Some(seg) = rdmap.poll_segment()
            {
                *tx_queued += seg.len();
                segs.push(seg);
            }
            if segs.is_empty() {
                break;
            }
            // A lost association: the task reads the loss and the engine
            // flushes the work.
            if !io.relay.send(segs.drain(..)) {
                break;
            }
            io.relay.take_sent(&mut sent);
            // Nothing taken (left to the association's task): stop here.
            if sent.is_empty() {
                break;
            }
        }
        if rdmap.should_close() && !*close_sent {
            *close_sent = true;
            io.relay.close(true);
        }
        if rdmap.poll_close() && !*close_sent {
            *close_sent = true;
            io.relay.close(false);
        }
    }

    pub(super) fn send_cmd(&self, cmd: TxCmd) {
        if let Some(tx) = &self.tx {
            let _ = lock(tx).send(cmd);
        }
    }

    fn complete(&self, c: Completion, held: Held) {
        let consumer = &self.pd.inner.consumer;
        let cq = match c.opcode {
            WcOpcode::Recv => {
                consumer.refund(Resource::ReceiveBuffers, 1);
                &self.recv_cq
            }
            WcOpcode::Send | WcOpcode::RdmaWrite | WcOpcode::RdmaRead => &self.send_cq,
        };
        cq.push(
            WorkCompletion {
                qp_num: self.qp_num,
                c,
            },
            held,
        );
    }
}
