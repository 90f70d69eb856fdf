//! The in-memory LLP's two threads: a writer writing what the engine
//! produced, reporting segments written in batches, and a reader feeding the
//! engine what arrives.

use super::*;

pub(super) fn write_loop(w: Box<dyn SegmentWriter>, rx: Receiver<TxCmd>, shared: &Shared) {
    write_all(w, rx, shared);
    lock(&shared.state).writer_gone = true;
    shared.written.notify_all();
}

/// Segments written before the writer reports them (one QP lock for all).
const REPORT_EVERY: usize = 64;

fn write_all(mut w: Box<dyn SegmentWriter>, rx: Receiver<TxCmd>, shared: &Shared) {
    // Segments written and not yet reported: (octets, L flag), in order.
    let mut written: Vec<(usize, bool)> = Vec::new();
    let mut next = None;
    loop {
        let cmd = match next.take() {
            Some(c) => c,
            None => match rx.recv() {
                Ok(c) => c,
                Err(_) => break,
            },
        };
        match cmd {
            TxCmd::Segment(seg) => {
                // A Read Response frees its IRD slot as its last segment goes out
                // (before the write, so a peer answering at once finds it free).
                if let DdpHeader::Tagged(h) = seg.header
                    && h.ctrl.last()
                    && RdmapControl(h.rsvd_ulp).opcode() == Opcode::READ_RESPONSE
                {
                    lock(&shared.state).rdmap.read_response_sent();
                }
                if w.write_segment(&seg).is_err() {
                    report(shared, &mut written);
                    w.close(true);
                    return;
                }
                written.push((seg.len(), seg.header.last()));
                // More already queued: write it before reporting, so a stream of
                // small messages takes the QP lock once per batch, not per segment.
                if let Ok(c) = rx.try_recv() {
                    next = Some(c);
                    if written.len() < REPORT_EVERY {
                        continue;
                    }
                }
                report(shared, &mut written);
            }
            TxCmd::Close { abortive } => {
                report(shared, &mut written);
                w.close(abortive);
                return;
            }
        }
    }
    report(shared, &mut written);
    w.close(true);
}

/// The LLP took these segments whole: the Sends and Writes they end complete,
/// and the budget they used lets the next segments through.
fn report(shared: &Shared, written: &mut Vec<(usize, bool)>) {
    if written.is_empty() {
        return;
    }
    let mut st = lock(&shared.state);
    for (len, last) in written.drain(..) {
        st.tx_queued = st.tx_queued.saturating_sub(len);
        st.rdmap.segment_sent(last);
    }
    shared.pump(&mut st);
    drop(st);
    shared.written.notify_all();
}

/// How long a closed LLP's reader waits for the writer to report what it was
/// writing, so that work whose octets the LLP accepted completes as sent.
const WRITER_SETTLE: Duration = Duration::from_secs(1);

pub(super) fn read_loop(mut r: Box<dyn SegmentReader>, shared: &Shared) {
    loop {
        let got = r.read();
        let mut st = lock(&shared.state);
        if matches!(got, Ok(Inbound::Closed) | Err(_)) {
            // The writer may have handed the last segments to the LLP and not yet
            // said so: let it, before the close flushes what is still in flight.
            let deadline = std::time::Instant::now() + WRITER_SETTLE;
            while st.tx_queued > 0 && !st.writer_gone {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                st = shared
                    .written
                    .wait_timeout(st, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        let done = match got {
            Ok(Inbound::Segment { seq, bytes }) => {
                // Refusals are handled inside the engine (Terminate, events). The
                // placement locks only the region it writes.
                let mem = shared.pd.inner.consumer.device().mem();
                let _ = st.rdmap.on_segment(mem, seq, &bytes);
                false
            }
            Ok(Inbound::Mulpdu(n)) => {
                let _ = st.rdmap.ddp_mut().set_mulpdu(n);
                false
            }
            Ok(Inbound::Error { code, detail }) => {
                st.rdmap.llp_error(code, detail);
                false
            }
            Ok(Inbound::Closed) => {
                st.rdmap.on_llp_closed(true);
                true
            }
            Err(e) => {
                crate::trace::llp_lost(shared.qp_num, &e);
                st.rdmap.on_llp_closed(false);
                true
            }
        };
        shared.pump(&mut st);
        if done {
            // The LLP is gone or the peer closed: close our side too.
            if !st.close_sent {
                st.close_sent = true;
                shared.send_cmd(TxCmd::Close { abortive: false });
            }
            return;
        }
    }
}
