//! Send-side completions of a [`Chan`]: taken without waiting, by busy
//! polling, or waiting up to a bound; what they confirm is counted.

use super::*;

impl Chan {
    /// Work requests posted and not yet completed.
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Data work requests (Writes, Reads, data Sends) completed so far.
    pub(crate) fn data_done(&self) -> u64 {
        self.data_done
    }

    /// Take the send-side completions already there, without waiting; returns
    /// how many were data work requests (also counted in `data_done`).
    pub(crate) fn reap_ready(&mut self) -> Result<u64, String> {
        if self.outstanding as u64 == self.signals.quiet() {
            // Nothing signaled outstanding: no completion to look for (an
            // unsignaled Send that fails completes; the next reap finds it).
            return Ok(0);
        }
        let mut got = std::mem::take(&mut self.sent_wcs);
        self.ep.send_cq.poll_into(256, &mut got);
        self.take(got)
    }

    /// [`Self::reap_ready`], and with few connections read the socket on this
    /// thread for them (busy polling: what a ping-pong of Writes waits on
    /// comes without a completion); [`Self::end_busy`] when done.
    pub(crate) fn reap_busy(&mut self) -> Result<u64, String> {
        let mut got = std::mem::take(&mut self.sent_wcs);
        crate::perf::exec::poll_cq(&self.ep.send_cq, 256, &mut got);
        self.take(got)
    }

    /// The I/O threads read the socket again (after [`Self::reap_busy`]).
    pub(crate) fn end_busy(&self) {
        self.ep.send_cq.end_busy();
    }

    /// Take send-side completions, waiting up to `stall()` for one; returns how
    /// many were data work requests (also counted in `data_done`).
    pub(crate) async fn reap(&mut self) -> Result<u64, String> {
        self.reap_within(stall()).await?.ok_or_else(|| {
            format!(
                "no completion for {} s: the peer stopped taking data",
                stall().as_secs()
            )
        })
    }

    /// Take send-side completions, waiting up to `limit` for one; `None` if none
    /// came (not an error: the caller keeps its own stall limit).
    pub(crate) async fn reap_within(&mut self, limit: Duration) -> Result<Option<u64>, String> {
        let start = Instant::now();
        loop {
            let mut got = std::mem::take(&mut self.sent_wcs);
            crate::perf::exec::wait_cq(
                &self.ep.send_cq,
                256,
                Duration::from_millis(100),
                Look::Spin,
                &mut got,
            )
            .await;
            if !got.is_empty() {
                return self.take(got).map(Some);
            }
            self.sent_wcs = got;
            self.check_events("completions")?;
            if start.elapsed() > limit {
                return Ok(None);
            }
        }
    }

    /// Account for the send-side completions `got` (then kept, empty, for
    /// the next poll).
    pub(super) fn take(&mut self, mut got: Vec<WorkCompletion>) -> Result<u64, String> {
        let mut data = 0;
        for wc in got.drain(..) {
            check_status(&wc)?;
            // A Send's completion covers the unsignaled Sends before it (all
            // of them data).
            let covered = if wc.opcode == rddp::WcOpcode::Send {
                self.signals.send_completed()
            } else {
                0
            };
            self.outstanding = self.outstanding.saturating_sub(1 + covered as usize);
            data += covered;
            if wc.wr_id & SYNC != 0 {
                self.confirmed = self.confirmed.max(wc.wr_id & !FLAGS);
            } else if wc.wr_id & FLAGS == 0 {
                data += 1;
            }
        }
        self.sent_wcs = got;
        self.data_done += data;
        Ok(data)
    }

    /// Wait until nothing is in flight.
    pub(crate) async fn drain(&mut self) -> Result<(), String> {
        while self.outstanding > 0 {
            self.reap().await?;
        }
        Ok(())
    }
}
