//! Posting on a [`Chan`]: control messages, data Sends (one by one or as a
//! list, signaled as asked), RDMA Writes and Reads, and the one-octet Read
//! that confirms what was posted before it.

use super::*;

impl Chan {
    /// Send a control message (with Solicited Event).
    pub(crate) async fn send_ctrl(&mut self, m: &Msg) -> Result<(), String> {
        self.wait_credit().await?;
        let b = m.encode();
        self.ctrl_mr
            .write(0, &b)
            .map_err(verbs("control message"))?;
        let flags = SendFlags {
            solicited: true,
            ..SendFlags::default()
        };
        self.ep
            .qp
            .post_send(CTRL, &self.ctrl_mr, 0, b.len() as u64, flags)
            .map_err(verbs("sending a control message"))?;
        self.signals.posted(true);
        self.outstanding += 1;
        self.answer_due = true;
        // A Pad is a keepalive (one every quarter of the stall limit) or uses up
        // a receive before a size: not part of an exchange.
        if *m != Msg::Pad {
            self.note_ctrl();
        }
        Ok(())
    }

    /// [`Self::send_ctrl`] from the octets at `offset` of `mr`, which the
    /// caller leaves alone until the message has arrived: control messages
    /// that go one after another without waiting for each other
    /// ([`Self::send_ctrl`] reuses one buffer, so it may have one in flight).
    pub(crate) async fn send_ctrl_from(
        &mut self,
        mr: &MemoryRegion,
        offset: u64,
        m: &Msg,
    ) -> Result<(), String> {
        self.wait_credit().await?;
        let b = m.encode();
        mr.write(offset, &b).map_err(verbs("control message"))?;
        let flags = SendFlags {
            solicited: true,
            ..SendFlags::default()
        };
        self.ep
            .qp
            .post_send(CTRL, mr, offset, b.len() as u64, flags)
            .map_err(verbs("sending a control message"))?;
        self.signals.posted(true);
        self.outstanding += 1;
        self.answer_due = true;
        self.note_ctrl();
        Ok(())
    }

    /// Send `bytes` as a data message (no Solicited Event), e.g. the advertisement.
    pub(crate) async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.wait_credit().await?;
        self.ctrl_mr.write(0, bytes).map_err(verbs("raw message"))?;
        self.ep
            .qp
            .post_send(
                CTRL,
                &self.ctrl_mr,
                0,
                bytes.len() as u64,
                SendFlags::default(),
            )
            .map_err(verbs("sending a message"))?;
        self.signals.posted(true);
        self.outstanding += 1;
        self.answer_due = true;
        Ok(())
    }

    pub(super) fn data_id(&mut self) -> u64 {
        self.outstanding += 1;
        self.next_id += 1;
        self.next_id & !FLAGS
    }

    /// Send `len` octets of `mr` as data (no Solicited Event).
    pub(crate) async fn send_data(&mut self, mr: &MemoryRegion, len: u64) -> Result<(), String> {
        self.send_data_as(mr, len, false).await
    }

    /// [`Self::send_data`], signaled as [`Self::signal_every`] says; `last`
    /// (the last of a run, whose completion the run waits for): signaled.
    pub(crate) async fn send_data_as(
        &mut self,
        mr: &MemoryRegion,
        len: u64,
        last: bool,
    ) -> Result<(), String> {
        self.send_data_from(mr, 0, len, last).await
    }

    /// [`Self::send_data_as`] of the `len` octets at `offset` of `mr`.
    pub(crate) async fn send_data_from(
        &mut self,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
        last: bool,
    ) -> Result<(), String> {
        self.wait_credit().await?;
        let id = self.data_id();
        self.answer_due = true;
        let signaled = self.signals.decide(last);
        let flags = SendFlags {
            unsignaled: !signaled,
            ..SendFlags::default()
        };
        self.ep
            .qp
            .post_send(id, mr, offset, len, flags)
            .map_err(verbs("posting a Send"))?;
        self.signals.posted(signaled);
        Ok(())
    }

    /// From now on a data Send is signaled at least every `n` (1, the
    /// default: every one); a Send's completion covers the unsignaled ones
    /// posted before it ([`crate::perf::signal`]).
    pub(crate) fn signal_every(&mut self, n: u64) {
        self.signals.set_every(n);
    }

    /// [`Self::send_data_list`] with one Send for each of `offsets` (the
    /// `len` octets at that offset of `mr`), as many as credits allow; returns
    /// how many (the first ones of `offsets`).
    pub(crate) async fn send_data_list_at(
        &mut self,
        mr: &MemoryRegion,
        offsets: &[u64],
        len: u64,
        last: bool,
    ) -> Result<usize, String> {
        self.send_list(mr, Some(offsets), len, offsets.len(), last)
            .await
    }

    /// Send `len` octets of `mr` as data, up to `k` (at least one) Sends posted
    /// as one list (`QueuePair::post_list`: one gathered sendmsg): waits for the
    /// first credit, takes the others only if granted already. Returns how many.
    pub(crate) async fn send_data_list(
        &mut self,
        mr: &MemoryRegion,
        len: u64,
        k: usize,
        last: bool,
    ) -> Result<usize, String> {
        self.send_list(mr, None, len, k, last).await
    }

    async fn send_list(
        &mut self,
        mr: &MemoryRegion,
        offsets: Option<&[u64]>,
        len: u64,
        k: usize,
        last: bool,
    ) -> Result<usize, String> {
        self.wait_credit().await?;
        let mut n = 1;
        if let Some(c) = &mut self.credits {
            let more = (c.granted - c.sent).min(k.max(1) as u64 - 1);
            c.sent += more;
            n += more as usize;
        } else {
            n = k.max(1);
        }
        // Every one of the list signaled or not as posted one by one.
        let mut wrs: Vec<PostWr<'_>> = Vec::with_capacity(n);
        for i in 0..n {
            let signaled = self.signals.decide(last && i + 1 == n);
            self.signals.posted(signaled);
            wrs.push(PostWr::Send {
                wr_id: self.data_id(),
                mr,
                offset: offsets.map_or(0, |o| o[i]),
                len,
                flags: SendFlags {
                    unsignaled: !signaled,
                    ..SendFlags::default()
                },
            });
        }
        self.ep.qp.post_list(&wrs).map_err(|e| {
            // Those not posted are not outstanding.
            self.outstanding -= n - e.posted;
            format!("posting Sends: {e}")
        })?;
        // As for one Send: what comes next may be the peer's answer.
        self.answer_due = true;
        Ok(n)
    }

    /// RDMA Write `len` octets of `mr` to `remote`.
    pub(crate) fn write(
        &mut self,
        mr: &MemoryRegion,
        len: u64,
        remote: RemoteBuf,
    ) -> Result<(), String> {
        self.write_from(mr, 0, len, remote)
    }

    /// RDMA Write the `len` octets at `offset` of `mr` to `remote`.
    pub(crate) fn write_from(
        &mut self,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
        remote: RemoteBuf,
    ) -> Result<(), String> {
        let id = self.data_id();
        self.ep
            .qp
            .post_write(id, mr, offset, len, remote, 0)
            .map_err(verbs("posting an RDMA Write"))
    }

    /// RDMA Read `len` octets of `remote` into `mr`.
    pub(crate) fn read(
        &mut self,
        mr: &MemoryRegion,
        len: u32,
        remote: RemoteBuf,
    ) -> Result<(), String> {
        self.read_into(mr, 0, len, remote)
    }

    /// RDMA Read `len` octets of `remote` into `mr` at `offset`.
    pub(crate) fn read_into(
        &mut self,
        mr: &MemoryRegion,
        offset: u64,
        len: u32,
        remote: RemoteBuf,
    ) -> Result<(), String> {
        let id = self.data_id();
        self.ep
            .qp
            .post_read(id, mr, offset, len, remote, 0)
            .map_err(verbs("posting an RDMA Read"))
    }

    /// Data work requests posted so far.
    pub(crate) fn data_posted(&self) -> u64 {
        self.next_id
    }

    /// How many of the data work requests posted so far have certainly reached
    /// the peer: those posted before the last completed `sync`.
    pub(crate) fn confirmed(&self) -> u64 {
        self.confirmed
    }

    /// Post a one-octet RDMA Read of `remote` into `mr`. Its response comes after
    /// every earlier message has been taken by the peer, so its completion
    /// confirms them. (A Write completes when the LLP has taken it, and the LLP
    /// queues without bound, so Writes alone have no backpressure.)
    pub(crate) fn sync(&mut self, mr: &MemoryRegion, remote: RemoteBuf) -> Result<(), String> {
        self.ep
            .qp
            .post_read(SYNC | self.next_id, mr, 0, 1, remote, 0)
            .map_err(verbs("posting a confirming RDMA Read"))?;
        self.outstanding += 1;
        Ok(())
    }
}
