//! The receive side of a [`Chan`]: receive buffers kept posted (their
//! length, one shared region for large Sends, given-back buffers reused), and
//! receives taken in batches and handed out as control or data messages.

use super::*;

/// Received messages at least this long are read by the thread that waits
/// for them as they arrive ([`Chan::look_for_recv`]): reading one is mostly
/// the kernel's copy of its octets, not a system call.
pub(super) const SPIN_FOR_LEN: u32 = 16 * 1024;

impl Chan {
    /// Length of the receive buffers posted from now on, and how many to keep
    /// posted: `most`, or fewer for large buffers (`RECV_BUDGET` octets in all, but
    /// never fewer than `MIN_RECVS`). Posts up to that count at once.
    /// With `one`, see [`Self::one_buffer`].
    pub(crate) fn set_recv_len(
        &mut self,
        len: usize,
        most: usize,
        one: bool,
    ) -> Result<(), String> {
        self.recv_len = len.max(CTRL_LEN);
        self.target = (RECV_BUDGET / self.recv_len).clamp(MIN_RECVS, most.max(MIN_RECVS));
        self.one_buffer = None;
        if one {
            self.one_buffer()?;
        }
        self.post_recvs(self.target.saturating_sub(self.posted.len()))
    }

    /// Server, Send bandwidth: as perftest does for messages over half its
    /// 4 KiB cycle buffer, every receive posted from now on names the same
    /// `recv_len` octets of one region (`QueuePair::post_recv_mr`), so the
    /// messages land in one warm buffer (not in `target` buffers of their
    /// own, 32 MiB for 512 of 64 KiB); control messages are read from there
    /// when they complete (the client sends nothing after one before it has
    /// the answer). Only where the payloads are not looked at (no --verify)
    /// and above [`ONE_BUFFER_ABOVE`]: below it the receives stay buffers of
    /// their own, which runs of small Sends fill in batches.
    pub(super) fn one_buffer(&mut self) -> Result<(), String> {
        if self.recv_len <= ONE_BUFFER_ABOVE {
            return Ok(());
        }
        let mr = self
            .ep
            .pd
            .register(vec![0; self.recv_len], Access::NONE)
            .map_err(verbs("registering the receive buffer"))?;
        self.one_buffer = Some(Arc::new(mr));
        Ok(())
    }

    /// Give back the buffer of a data message once it is looked at: the next
    /// receive posted reuses it. Only a buffer the message filled: making a
    /// shorter one whole again would write zeros over the rest, and pages of a
    /// posted buffer that no message touched would become resident (RSS would
    /// creep up to every posted octet; the soak's flat-memory rule saw it).
    pub(crate) fn recycle(&mut self, buf: Vec<u8>) {
        if buf.len() == self.recv_len && self.spare.len() < RECV_BATCH {
            self.spare.push(buf);
        }
    }

    /// How many of the posted receives, from the oldest, must be used up before
    /// every remaining one is at least `len` long.
    pub(crate) fn stale_below(&self, len: usize) -> u32 {
        self.posted
            .iter()
            .rposition(|(l, _)| *l < len)
            .map_or(0, |i| i as u32 + 1)
    }

    pub(crate) fn posted_total(&self) -> u64 {
        self.posted_total
    }

    /// Post `n` receives of `recv_len` octets in one call (one lock of the
    /// queue pair), reusing given-back buffers first.
    pub(super) fn post_recvs(&mut self, n: usize) -> Result<(), String> {
        if n == 0 {
            return Ok(());
        }
        let len = self.recv_len;
        if let Some(mr) = &self.one_buffer {
            let wrs: Vec<RecvWr> = (0..n as u64)
                .map(|i| RecvWr {
                    wr_id: self.posted_total + i,
                    mr,
                    offset: 0,
                    len: len as u64,
                })
                .collect();
            let res = self.ep.qp.post_recv_list(&wrs);
            let k = res.as_ref().map_or_else(|e| e.posted, |()| n);
            self.posted
                .extend(std::iter::repeat_n((len, Some(mr.clone())), k));
            self.posted_total += k as u64;
            return res.map_err(|e| verbs("posting a receive")(*e.error));
        }
        // The list's own allocation is kept from call to call (a ping-pong
        // reposts one buffer a round trip: an allocation and a free each).
        let mut bufs = std::mem::take(&mut self.post_list);
        bufs.clear();
        for i in 0..n as u64 {
            let buf = match self.spare.pop() {
                // Filled by its last message (see `recycle`): as long as asked.
                Some(b) if b.len() == len => b,
                _ => vec![0; len],
            };
            bufs.push((self.posted_total + i, buf));
        }
        let res = self.ep.qp.post_recv_buffers(&mut bufs);
        // Those not taken out of `bufs` were not posted (nor the refused one).
        let k = n - bufs.len() - usize::from(res.is_err());
        self.post_list = bufs;
        self.posted.extend(std::iter::repeat_n((len, None), k));
        self.posted_total += k as u64;
        res.map_err(verbs("posting a receive"))
    }

    /// A receive if one has completed (its buffer is reposted, in a batch).
    pub(crate) fn try_recv(&mut self) -> Result<Option<Incoming>, String> {
        if self.arrived.is_empty() {
            self.ep.recv_cq.poll_into(RECV_BATCH, &mut self.arrived);
        }
        match self.arrived.pop_front() {
            Some(wc) => self.on_recv(wc).map(Some),
            None => Ok(None),
        }
    }

    /// Wait for the next receive (`what` names it in the error if none comes).
    pub(crate) async fn recv(&mut self, what: &str) -> Result<Incoming, String> {
        if let Some(wc) = self.arrived.pop_front() {
            // Already taken from the CQ: no clock read, no wait.
            return self.on_recv(wc);
        }
        // The clock is read once a wait came back empty (not per message).
        let mut start = None;
        loop {
            if self.arrived.is_empty() {
                let (cq, limit) = (&self.ep.recv_cq, Duration::from_millis(100));
                let look = self.look_for_recv();
                crate::perf::exec::wait_cq(cq, RECV_BATCH, limit, look, &mut self.arrived).await;
            }
            if let Some(wc) = self.arrived.pop_front() {
                return self.on_recv(wc);
            }
            let start = *start.get_or_insert_with(Instant::now);
            self.reap_ready()?;
            self.check_events(what)?;
            if start.elapsed() > stall() {
                return Err(format!(
                    "waited {} s for {what}: the peer stopped answering",
                    stall().as_secs()
                ));
            }
        }
    }

    /// How a wait for a receive uses its thread: when an answer is due (a
    /// message went to the peer since the last receive: a ping-pong, a
    /// control exchange) it busy-polls and takes the socket over
    /// ([`Look::Answer`]); after a large message it busy-polls
    /// ([`Look::Spin`]); otherwise it sleeps ([`Look::Sleep`]). A stream of
    /// small messages is better left to the I/O thread, which reads them in
    /// batches: a waiting thread that reads each one as it comes makes a read,
    /// a peek and a `sched_yield` a message and makes the sender's `sendmsg`
    /// dearer too (64 B Sends: 369k against 453k messages/s, docs/journal.md,
    /// "Small Sends in a stream").
    pub(crate) fn look_for_recv(&self) -> Look {
        if self.answer_due {
            Look::Answer
        } else if self.last_len >= SPIN_FOR_LEN {
            Look::Spin
        } else {
            Look::Sleep
        }
    }

    /// Wait for the next control message.
    pub(crate) async fn recv_ctrl(&mut self, what: &str) -> Result<Msg, String> {
        match self.recv(what).await? {
            Incoming::Ctrl(m) => Ok(m),
            Incoming::Data(d) => Err(format!(
                "expected {what}, got a data message of {} octets",
                d.len()
            )),
        }
    }

    fn on_recv(&mut self, wc: WorkCompletion) -> Result<Incoming, String> {
        self.answer_due = false;
        self.last_len = wc.byte_len;
        check_status(&wc)?;
        let (len, solicited) = (wc.byte_len as usize, wc.solicited);
        let mut buf = wc.c.buffer.unwrap_or_default();
        buf.truncate(len);
        // Receives complete in the order they were posted (an ordered queue).
        if let Some((_, Some(mr))) = self.posted.pop_front()
            && solicited
        {
            buf = mr
                .read(0, len as u64)
                .map_err(verbs("reading a control message"))?;
        }
        let got = if solicited {
            self.note_ctrl();
            let m = Msg::decode(&buf)?;
            self.recycle(buf);
            Incoming::Ctrl(m)
        } else {
            Incoming::Data(buf)
        };
        // After Bye the peer may already have closed: nothing more comes.
        if !matches!(got, Incoming::Ctrl(Msg::Bye)) {
            // Reposted in batches (one lock of the queue pair each): an eighth
            // of the target at a time. Still at least a batch is posted when
            // the client has used every credit, so it gets granted below. The
            // client's few (its peer answers one message at a time): half.
            let missing = self.target.saturating_sub(self.posted.len());
            let batch = if self.target < MIN_RECVS {
                self.target / 2
            } else {
                self.target / 8
            };
            if missing >= batch.max(1) {
                self.post_recvs(missing)?;
            }
            // Checked on every receive, reposted or not: once the client has used
            // every credit, what is still posted (at least the target, which is at
            // least the batch) gets granted, so the client cannot wait forever.
            let batch = (self.target as u64 / 4).max(1);
            if let Some(g) = &self.grant
                && self.posted_total - g.advertised >= batch
            {
                self.grant_now()?;
            }
        }
        self.reap_ready()?;
        Ok(got)
    }
}
