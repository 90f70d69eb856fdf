//! Receive credits (see the module doc of [`super`]): the client's Sends
//! wait for the server's grants, read from its mailbox; the server writes
//! the count of receives it posted into that mailbox as it reposts.

use super::*;

pub(super) struct Credits {
    pub(super) mailbox: MemoryRegion,
    pub(super) sent: u64,
    pub(super) granted: u64,
}

pub(super) struct Grant {
    pub(super) to: RemoteBuf,
    pub(super) mr: MemoryRegion,
    pub(super) advertised: u64,
}

/// The longest sleep between two looks at the credit mailbox: 1 ms, and 1 ms
/// more per 100 connections.
fn credit_poll_max() -> Duration {
    Duration::from_micros(1000 * (1 + PARALLEL.load(Ordering::Relaxed) / 100))
}

impl Chan {
    /// Client: Sends are limited by the server's grants, read from `mailbox`.
    pub(crate) fn enable_credits(&mut self, mailbox: MemoryRegion) {
        self.credits = Some(Credits {
            mailbox,
            sent: 0,
            granted: 1,
        });
    }

    /// Client: a grant carried in a control message.
    pub(crate) fn note_granted(&mut self, granted: u64) {
        if let Some(c) = &mut self.credits {
            c.granted = c.granted.max(granted);
        }
    }

    /// Server: tell the client of reposted receives by writing into `to`.
    /// Grants go out whenever a quarter of the receive target has been reposted.
    pub(crate) fn enable_grants(&mut self, to: RemoteBuf) -> Result<(), String> {
        if to.len < 8 {
            return Err(format!(
                "the client's credit mailbox is {} octets; 8 are needed",
                to.len
            ));
        }
        let mr = self
            .ep
            .pd
            .register(vec![0; 8], Access::NONE)
            .map_err(verbs("registering the grant buffer"))?;
        self.grant = Some(Grant {
            to,
            mr,
            advertised: 0,
        });
        self.grant_now()
    }

    /// Server: write the cumulative posted count into the client's mailbox.
    pub(crate) fn grant_now(&mut self) -> Result<(), String> {
        let Some(g) = &mut self.grant else {
            return Ok(());
        };
        g.mr.write(0, &self.posted_total.to_be_bytes())
            .map_err(verbs("grant"))?;
        self.ep
            .qp
            .post_write(GRANT, &g.mr, 0, 8, g.to, 0)
            .map_err(verbs("writing a credit grant"))?;
        g.advertised = self.posted_total;
        self.outstanding += 1;
        Ok(())
    }

    /// Write `value` (u64 BE, through the 8-octet `mr`) to `to`: a count the
    /// peer reads from its memory, as it reads grants (not a data work request).
    /// A Write sends the octets `mr` holds when it goes out, maybe a later
    /// count: counts only grow and each is true when written, so that one is
    /// true too.
    pub(crate) fn write_count(
        &mut self,
        mr: &MemoryRegion,
        value: u64,
        to: RemoteBuf,
    ) -> Result<(), String> {
        mr.write(0, &value.to_be_bytes()).map_err(verbs("count"))?;
        self.ep
            .qp
            .post_write(GRANT, mr, 0, 8, to, 0)
            .map_err(verbs("writing a count"))?;
        self.outstanding += 1;
        Ok(())
    }

    /// Wait until the count the peer writes into the 8 octets at `offset` of
    /// `mr` ([`Self::write_count`]) is at least `want`; returns it. `what`
    /// names the count in the error after `stall()` without it.
    pub(crate) async fn wait_count(
        &mut self,
        mr: &MemoryRegion,
        offset: u64,
        want: u64,
        what: &str,
    ) -> Result<u64, String> {
        let mut start = None;
        let mut spins = 0u32;
        loop {
            let m = mr.read(offset, 8).map_err(verbs("reading a count"))?;
            let got = u64::from_be_bytes(m.try_into().unwrap_or([0; 8]));
            if got >= want {
                return Ok(got);
            }
            // As for a grant (below): an RDMA Write, no completion here.
            self.reap_busy()?;
            self.check_events(what)?;
            if start.get_or_insert_with(Instant::now).elapsed() > stall() {
                return Err(format!(
                    "waited {} s for {what}: {got} of {want}",
                    stall().as_secs()
                ));
            }
            spins += 1;
            self.look_again(spins).await;
        }
    }

    /// Between two looks at a mailbox: yield at first, then sleep longer
    /// and longer (up to [`credit_poll_max`]) while the I/O thread reads.
    async fn look_again(&mut self, spins: u32) {
        if spins < 16 {
            crate::perf::exec::yield_now().await;
        } else {
            self.end_busy();
            let d = Duration::from_micros(25u64 << (spins - 16).min(12));
            crate::perf::exec::pause(d.min(credit_poll_max())).await;
        }
    }

    pub(super) async fn wait_credit(&mut self) -> Result<(), String> {
        // The clock is read only once no credit is left (not per message).
        let mut start = None;
        let mut spins = 0u32;
        loop {
            let Some(c) = &mut self.credits else {
                return Ok(());
            };
            if c.sent < c.granted {
                c.sent += 1;
                return Ok(());
            }
            let m = c.mailbox.read(0, 8).map_err(verbs("reading the mailbox"))?;
            let g = u64::from_be_bytes(m.try_into().unwrap_or([0; 8]));
            c.granted = c.granted.max(g);
            if c.sent < c.granted {
                continue;
            }
            // The grant comes as an RDMA Write: with few connections this
            // thread reads the socket for it (a busy poll of the send CQ may
            // have taken the socket from the I/O thread).
            self.reap_busy()?;
            self.check_events("receive credits from the server")?;
            if start.get_or_insert_with(Instant::now).elapsed() > stall() {
                return Err(format!(
                    "no receive credits from the server for {} s: it stopped reposting receives",
                    stall().as_secs()
                ));
            }
            // The grant is an RDMA Write into the mailbox (no completion here):
            // look again soon, but with thousands of connections (--qps) this
            // task must not keep a worker busy.
            spins += 1;
            self.look_again(spins).await;
        }
    }
}
