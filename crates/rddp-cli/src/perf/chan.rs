//! One queue pair as the perf tool drives it: posts with a bounded number in
//! flight, receives kept posted, control messages, and receive credits.
//!
//! Credits: the client may only Send while the number of its Sends is below the
//! server's cumulative count of posted receives. The server tells that count in
//! its control messages and, during a run, by an RDMA Write of it (u64 BE) into
//! the client's mailbox, which needs no receive buffer and so cannot deadlock.
//! The first Send (Hello) is allowed by convention: the server posts its receives
//! before the client may connect.

use super::endpoint::Endpoint;
use super::exec::Look;
use super::proto::{CTRL_LEN, Msg};
use super::signal::Signaling;
use rddp::{
    Access, AsyncEvent, MemoryRegion, PostWr, RecvWr, RemoteBuf, SendFlags, WcStatus,
    WorkCompletion,
};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const CTRL: u64 = 1 << 63;
const GRANT: u64 = 1 << 62;
/// A one-octet RDMA Read that confirms the Writes posted before it (the low bits
/// say how many data work requests had been posted).
const SYNC: u64 = 1 << 61;
const FLAGS: u64 = CTRL | GRANT | SYNC;

/// Octets of receive buffers a side keeps posted at most (see `set_recv_len`).
pub const RECV_BUDGET: usize = 64 << 20;
/// Messages longer than this go into one buffer ([`Chan::one_buffer`]):
/// half of perftest's default cycle buffer (a page), as perftest decides.
pub const ONE_BUFFER_ABOVE: usize = 2048;
/// Receive buffers kept posted at least.
pub const MIN_RECVS: usize = 16;
/// Receive completions taken from the CQ at once, and given-back buffers kept.
const RECV_BATCH: usize = 64;

/// How long a side waits without any progress before it gives up, in seconds
/// (10; the hidden `--stall-secs` changes it, so tests need not wait that long).
static STALL_SECS: AtomicU64 = AtomicU64::new(10);

/// How long a side waits without any progress before it gives up.
pub fn stall() -> Duration {
    Duration::from_secs(STALL_SECS.load(Ordering::Relaxed))
}

pub fn set_stall(secs: u64) {
    STALL_SECS.store(secs.max(1), Ordering::Relaxed);
}

/// Connections this process drives at once (--qps): a task waiting for a
/// credit looks less often when there are many, so that thousands of waiting
/// tasks leave the workers to the ones with work.
static PARALLEL: AtomicU64 = AtomicU64::new(1);

pub fn set_parallel(n: u64) {
    PARALLEL.store(n.max(1), Ordering::Relaxed);
}

/// Connections this process drives at once (see [`set_parallel`]).
pub fn parallel() -> u64 {
    PARALLEL.load(Ordering::Relaxed)
}

/// The longest sleep between two looks at the credit mailbox: 1 ms, and 1 ms
/// more per 100 connections.
fn credit_poll_max() -> Duration {
    Duration::from_micros(1000 * (1 + PARALLEL.load(Ordering::Relaxed) / 100))
}

/// What a receive brought.
pub enum Incoming {
    Ctrl(Msg),
    /// A data Send, exactly as long as it was.
    Data(Vec<u8>),
}

struct Credits {
    mailbox: MemoryRegion,
    sent: u64,
    granted: u64,
}

struct Grant {
    to: RemoteBuf,
    mr: MemoryRegion,
    advertised: u64,
}

pub struct Chan {
    pub ep: Endpoint,
    ctrl_mr: MemoryRegion,
    recv_len: usize,
    /// How many receives to keep posted.
    target: usize,
    /// Length of each posted receive, oldest first, and the region it names
    /// if it was posted into one ([`Self::one_buffer`]).
    posted: VecDeque<(usize, Option<Arc<MemoryRegion>>)>,
    /// Receives posted from now on name this region's first `recv_len`
    /// octets, all the same ones ([`Self::one_buffer`]).
    one_buffer: Option<Arc<MemoryRegion>>,
    posted_total: u64,
    outstanding: usize,
    /// Data work requests completed so far.
    data_done: u64,
    /// Data work requests known to have reached the peer (see `sync`).
    confirmed: u64,
    next_id: u64,
    credits: Option<Credits>,
    grant: Option<Grant>,
    /// Receive completions taken from the CQ and not yet handed out (taken up
    /// to [`RECV_BATCH`] at a time: one CQ lock and one wait per batch).
    arrived: VecDeque<WorkCompletion>,
    /// Send-side completions just polled (kept: no allocation a poll).
    sent_wcs: Vec<WorkCompletion>,
    /// Buffers of handed-out receives, given back ([`Self::recycle`]) to be
    /// posted again: no allocation and zeroing per message.
    spare: Vec<Vec<u8>>,
    /// The list [`Self::post_recvs`] hands `post_recv_buffers` (its allocation
    /// reused; emptied before each use).
    post_list: Vec<(u64, Vec<u8>)>,
    /// The event that ended the connection, once `check_events` found one
    /// (reported by `--json` on failure: see [`super::failure`]).
    pub ended_by: Option<AsyncEvent>,
    /// When each control message but Pad was sent or received, once
    /// [`Self::log_ctrl`] asked for it (the client: `--json` tells how many
    /// fell inside the timed interval).
    ctrl_log: Option<Vec<Instant>>,
    /// A message went to the peer since the last receive completed: what
    /// comes next is likely its answer, a round trip away
    /// ([`Self::look_for_recv`]).
    answer_due: bool,
    /// Length of the last receive completed.
    last_len: u32,
    /// Which data Sends are signaled, and what a Send's completion covers.
    signals: Signaling,
}

/// Received messages at least this long are read by the thread that waits
/// for them as they arrive ([`Chan::look_for_recv`]): reading one is mostly
/// the kernel's copy of its octets, not a system call.
const SPIN_FOR_LEN: u32 = 16 * 1024;

fn verbs(what: &str) -> impl Fn(rddp::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Chan {
    /// Take over `ep`, post `recvs` receive buffers of `recv_len` octets, then let
    /// the LLP's segments in (see [`Endpoint::open`]).
    pub fn new(ep: Endpoint, recv_len: usize, recvs: usize) -> Result<Self, String> {
        let ctrl_mr = ep
            .pd
            .register(vec![0; CTRL_LEN], Access::NONE)
            .map_err(verbs("registering the control buffer"))?;
        let mut c = Self {
            ep,
            ctrl_mr,
            recv_len: recv_len.max(CTRL_LEN),
            target: recvs,
            posted: VecDeque::new(),
            one_buffer: None,
            posted_total: 0,
            outstanding: 0,
            data_done: 0,
            confirmed: 0,
            next_id: 0,
            credits: None,
            grant: None,
            arrived: VecDeque::new(),
            sent_wcs: Vec::new(),
            spare: Vec::new(),
            post_list: Vec::new(),
            ended_by: None,
            ctrl_log: None,
            answer_due: false,
            last_len: 0,
            signals: Signaling::default(),
        };
        c.post_recvs(recvs)?;
        c.ep.open();
        Ok(c)
    }

    /// Length of the receive buffers posted from now on, and how many to keep
    /// posted: `most`, or fewer for large buffers (`RECV_BUDGET` octets in all, but
    /// never fewer than `MIN_RECVS`). Posts up to that count at once.
    /// With `one`, see [`Self::one_buffer`].
    pub fn set_recv_len(&mut self, len: usize, most: usize, one: bool) -> Result<(), String> {
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
    fn one_buffer(&mut self) -> Result<(), String> {
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
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if buf.len() == self.recv_len && self.spare.len() < RECV_BATCH {
            self.spare.push(buf);
        }
    }

    /// How many of the posted receives, from the oldest, must be used up before
    /// every remaining one is at least `len` long.
    pub fn stale_below(&self, len: usize) -> u32 {
        self.posted
            .iter()
            .rposition(|(l, _)| *l < len)
            .map_or(0, |i| i as u32 + 1)
    }

    pub fn posted_total(&self) -> u64 {
        self.posted_total
    }

    /// Post `n` receives of `recv_len` octets in one call (one lock of the
    /// queue pair), reusing given-back buffers first.
    fn post_recvs(&mut self, n: usize) -> Result<(), String> {
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

    /// Note from now on when each control message is sent or received.
    pub fn log_ctrl(&mut self) {
        self.ctrl_log.get_or_insert_with(Vec::new);
    }

    /// The instants noted since the last call (see [`Self::log_ctrl`]).
    pub fn take_ctrl_log(&mut self) -> Vec<Instant> {
        self.ctrl_log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn note_ctrl(&mut self) {
        if let Some(l) = &mut self.ctrl_log {
            l.push(Instant::now());
        }
    }

    /// Client: Sends are limited by the server's grants, read from `mailbox`.
    pub fn enable_credits(&mut self, mailbox: MemoryRegion) {
        self.credits = Some(Credits {
            mailbox,
            sent: 0,
            granted: 1,
        });
    }

    /// Client: a grant carried in a control message.
    pub fn note_granted(&mut self, granted: u64) {
        if let Some(c) = &mut self.credits {
            c.granted = c.granted.max(granted);
        }
    }

    /// Server: tell the client of reposted receives by writing into `to`.
    /// Grants go out whenever a quarter of the receive target has been reposted.
    pub fn enable_grants(&mut self, to: RemoteBuf) -> Result<(), String> {
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
    pub fn grant_now(&mut self) -> Result<(), String> {
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

    async fn wait_credit(&mut self) -> Result<(), String> {
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
            if spins < 16 {
                super::exec::yield_now().await;
            } else {
                // The I/O thread reads while this task sleeps.
                self.end_busy();
                let d = Duration::from_micros(25u64 << (spins - 16).min(12));
                super::exec::pause(d.min(credit_poll_max())).await;
            }
        }
    }

    /// Send a control message (with Solicited Event).
    pub async fn send_ctrl(&mut self, m: &Msg) -> Result<(), String> {
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

    /// Send `bytes` as a data message (no Solicited Event), e.g. the advertisement.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), String> {
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

    fn data_id(&mut self) -> u64 {
        self.outstanding += 1;
        self.next_id += 1;
        self.next_id & !FLAGS
    }

    /// Send `len` octets of `mr` as data (no Solicited Event).
    pub async fn send_data(&mut self, mr: &MemoryRegion, len: u64) -> Result<(), String> {
        self.send_data_as(mr, len, false).await
    }

    /// [`Self::send_data`], signaled as [`Self::signal_every`] says; `last`
    /// (the last of a run, whose completion the run waits for): signaled.
    pub async fn send_data_as(
        &mut self,
        mr: &MemoryRegion,
        len: u64,
        last: bool,
    ) -> Result<(), String> {
        self.send_data_from(mr, 0, len, last).await
    }

    /// [`Self::send_data_as`] of the `len` octets at `offset` of `mr`.
    pub async fn send_data_from(
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
    /// posted before it ([`super::signal`]).
    pub fn signal_every(&mut self, n: u64) {
        self.signals.set_every(n);
    }

    /// [`Self::send_data_list`] with one Send for each of `offsets` (the
    /// `len` octets at that offset of `mr`), as many as credits allow; returns
    /// how many (the first ones of `offsets`).
    pub async fn send_data_list_at(
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
    pub async fn send_data_list(
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
    pub fn write(&mut self, mr: &MemoryRegion, len: u64, remote: RemoteBuf) -> Result<(), String> {
        self.write_from(mr, 0, len, remote)
    }

    /// RDMA Write the `len` octets at `offset` of `mr` to `remote`.
    pub fn write_from(
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
    pub fn read(&mut self, mr: &MemoryRegion, len: u32, remote: RemoteBuf) -> Result<(), String> {
        self.read_into(mr, 0, len, remote)
    }

    /// RDMA Read `len` octets of `remote` into `mr` at `offset`.
    pub fn read_into(
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
    pub fn data_posted(&self) -> u64 {
        self.next_id
    }

    /// How many of the data work requests posted so far have certainly reached
    /// the peer: those posted before the last completed `sync`.
    pub fn confirmed(&self) -> u64 {
        self.confirmed
    }

    /// Post a one-octet RDMA Read of `remote` into `mr`. Its response comes after
    /// every earlier message has been taken by the peer, so its completion
    /// confirms them. (A Write completes when the LLP has taken it, and the LLP
    /// queues without bound, so Writes alone have no backpressure.)
    pub fn sync(&mut self, mr: &MemoryRegion, remote: RemoteBuf) -> Result<(), String> {
        self.ep
            .qp
            .post_read(SYNC | self.next_id, mr, 0, 1, remote, 0)
            .map_err(verbs("posting a confirming RDMA Read"))?;
        self.outstanding += 1;
        Ok(())
    }

    /// Work requests posted and not yet completed.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Data work requests (Writes, Reads, data Sends) completed so far.
    pub fn data_done(&self) -> u64 {
        self.data_done
    }

    /// Take the send-side completions already there, without waiting; returns
    /// how many were data work requests (also counted in `data_done`).
    pub fn reap_ready(&mut self) -> Result<u64, String> {
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
    pub fn reap_busy(&mut self) -> Result<u64, String> {
        let mut got = std::mem::take(&mut self.sent_wcs);
        super::exec::poll_cq(&self.ep.send_cq, 256, &mut got);
        self.take(got)
    }

    /// The I/O threads read the socket again (after [`Self::reap_busy`]).
    pub fn end_busy(&self) {
        self.ep.send_cq.end_busy();
    }

    /// Take send-side completions, waiting up to `stall()` for one; returns how
    /// many were data work requests (also counted in `data_done`).
    pub async fn reap(&mut self) -> Result<u64, String> {
        self.reap_within(stall()).await?.ok_or_else(|| {
            format!(
                "no completion for {} s: the peer stopped taking data",
                stall().as_secs()
            )
        })
    }

    /// Take send-side completions, waiting up to `limit` for one; `None` if none
    /// came (not an error: the caller keeps its own stall limit).
    pub async fn reap_within(&mut self, limit: Duration) -> Result<Option<u64>, String> {
        let start = Instant::now();
        loop {
            let mut got = std::mem::take(&mut self.sent_wcs);
            super::exec::wait_cq(
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
    fn take(&mut self, mut got: Vec<WorkCompletion>) -> Result<u64, String> {
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
    pub async fn drain(&mut self) -> Result<(), String> {
        while self.outstanding > 0 {
            self.reap().await?;
        }
        Ok(())
    }

    /// A receive if one has completed (its buffer is reposted, in a batch).
    pub fn try_recv(&mut self) -> Result<Option<Incoming>, String> {
        if self.arrived.is_empty() {
            self.ep.recv_cq.poll_into(RECV_BATCH, &mut self.arrived);
        }
        match self.arrived.pop_front() {
            Some(wc) => self.on_recv(wc).map(Some),
            None => Ok(None),
        }
    }

    /// Wait for the next receive (`what` names it in the error if none comes).
    pub async fn recv(&mut self, what: &str) -> Result<Incoming, String> {
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
                super::exec::wait_cq(cq, RECV_BATCH, limit, look, &mut self.arrived).await;
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
    /// dearer too (64 B Sends: 369k against 453k messages/s, docs/perf.md,
    /// "Small Sends in a stream").
    pub fn look_for_recv(&self) -> Look {
        if self.answer_due {
            Look::Answer
        } else if self.last_len >= SPIN_FOR_LEN {
            Look::Spin
        } else {
            Look::Sleep
        }
    }

    /// Wait for the next control message.
    pub async fn recv_ctrl(&mut self, what: &str) -> Result<Msg, String> {
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

    /// Wait up to `limit` for the peer to close the connection (a Closed event),
    /// so that this side's last messages are known to have arrived before it
    /// drops its queue pair. Dropping aborts the LLP; over SCTP (usrsctp lives
    /// in this process) a message still being retransmitted then never arrives.
    pub async fn wait_peer_close(&mut self, limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        let mut nap = Duration::from_millis(5);
        loop {
            // The first event decides. Lost is an end too: the peer dropped
            // its queue pair.
            match self.ep.qp.async_events().into_iter().next() {
                Some(AsyncEvent::Closed { .. }) => return Ok(()),
                Some(e) => {
                    self.ended_by.get_or_insert(e.clone());
                    return Err(format!(
                        "the connection ended with {e:?} instead of a close"
                    ));
                }
                None => {}
            }
            if start.elapsed() > limit {
                return Err(format!(
                    "the peer did not close the connection within {} s",
                    limit.as_secs()
                ));
            }
            // Looks every 5 ms at first, less often the longer it waits, so
            // that thousands of connections waiting at once cost little.
            tokio::time::sleep(nap).await;
            nap = (nap * 2).min(Duration::from_millis(100));
        }
    }

    /// What ended the connection: the event `check_events` turned into an error,
    /// or else the first one queued (a flushed completion may have been the
    /// error seen first).
    pub fn end_event(&mut self) -> Option<AsyncEvent> {
        self.ended_by
            .take()
            .or_else(|| self.ep.qp.async_events().into_iter().next())
    }

    /// Turn a Terminate or a close of the connection into an error.
    pub fn check_events(&mut self, what: &str) -> Result<(), String> {
        // The first event says what happened; the rest follow from it.
        if let Some(e) = self.ep.qp.async_events().into_iter().next() {
            self.ended_by.get_or_insert(e.clone());
            let why = match e {
                AsyncEvent::TerminateSent { code, detail } => {
                    format!("this side sent Terminate {code}: {detail}")
                }
                AsyncEvent::TerminateReceived { code, .. } => match code {
                    Some(c) => format!("the peer sent Terminate {c}"),
                    None => "the peer sent a malformed Terminate".into(),
                },
                AsyncEvent::Closed { graceful: true } => "the peer closed the connection".into(),
                AsyncEvent::Closed { graceful: false } => "the connection was lost".into(),
            };
            return Err(format!("{why} (while waiting for {what})"));
        }
        Ok(())
    }
}

fn check_status(wc: &WorkCompletion) -> Result<(), String> {
    if wc.status == WcStatus::Success {
        Ok(())
    } else {
        Err(format!(
            "{:?} work request completed with {:?}",
            wc.opcode, wc.status
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::exec;
    use rddp::Device;
    use rddp::transport::memory_pair;

    /// (client, server) channels over the in-memory LLP.
    fn pair(dev: &Device) -> (Chan, Chan) {
        let (a, b) = memory_pair(4096);
        let c = Endpoint::attach(dev, "client", a).unwrap();
        let s = Endpoint::attach(dev, "server", b).unwrap();
        (
            Chan::new(c, CTRL_LEN, 4).unwrap(),
            Chan::new(s, CTRL_LEN, 4).unwrap(),
        )
    }

    /// Regions that the posted receives name, each once.
    fn regions(c: &Chan) -> Vec<Arc<MemoryRegion>> {
        let mut out: Vec<Arc<MemoryRegion>> = Vec::new();
        for r in c.posted.iter().filter_map(|(_, r)| r.as_ref()) {
            if !out.iter().any(|o| Arc::ptr_eq(o, r)) {
                out.push(r.clone());
            }
        }
        out
    }

    #[test]
    fn large_sends_go_into_one_buffer_and_control_messages_are_read_from_it() {
        let dev = Device::new();
        let (mut client, mut server) = pair(&dev);
        let size = 64 * 1024;
        server.set_recv_len(size, 512, true).unwrap();
        // Every receive posted for the size names the same octets of one region.
        let named = regions(&server);
        assert_eq!(named.len(), 1);
        let in_region = server.posted.iter().filter(|(_, r)| r.is_some()).count();
        assert_eq!(in_region, server.target - 4, "the four earlier ones stay");
        // The four earlier (control-sized) receives: used up by Pads first.
        let src = client.ep.pd.register(vec![7; size], Access::NONE).unwrap();
        // (Each sent before the next reuses the client's control buffer.)
        for _ in 0..4 {
            exec::block_on(client.send_ctrl(&Msg::Pad)).unwrap();
            exec::block_on(client.drain()).unwrap();
        }
        exec::block_on(client.send_data(&src, size as u64)).unwrap();
        exec::block_on(client.drain()).unwrap();
        for _ in 0..4 {
            assert!(matches!(
                exec::block_on(server.recv("Pad")).unwrap(),
                Incoming::Ctrl(Msg::Pad)
            ));
        }
        assert!(matches!(
            exec::block_on(server.recv("data")).unwrap(),
            Incoming::Data(_)
        ));
        assert_eq!(named[0].read(0, size as u64).unwrap(), vec![7; size]);
        // The End lands on the same octets and is read from there.
        exec::block_on(client.send_ctrl(&Msg::End { iters: 1 })).unwrap();
        exec::block_on(client.drain()).unwrap();
        assert!(matches!(
            exec::block_on(server.recv("End")).unwrap(),
            Incoming::Ctrl(Msg::End { iters: 1 })
        ));
    }

    #[test]
    fn a_stream_of_sends_asks_for_a_completion_every_so_often_and_counts_all() {
        let dev = Device::new();
        let (mut client, mut server) = pair(&dev);
        server.set_recv_len(64, 16, false).unwrap();
        let src = client.ep.pd.register(vec![3; 64], Access::NONE).unwrap();
        client.signal_every(4);
        for i in 0..10 {
            exec::block_on(client.send_data_as(&src, 64, i == 9)).unwrap();
        }
        for _ in 0..10 {
            assert!(matches!(
                exec::block_on(server.recv("data")).unwrap(),
                Incoming::Data(_)
            ));
        }
        // The 4th, the 8th and the last asked for one; nothing else came.
        std::thread::sleep(Duration::from_millis(20));
        let got = client.ep.send_cq.poll(64);
        assert_eq!(
            got.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
            [4, 8, 10],
            "signaled Sends' completions"
        );
        assert_eq!(client.take(got).unwrap(), 10, "each covers those before it");
        assert_eq!((client.outstanding(), client.data_done()), (0, 10));
    }

    #[test]
    fn a_wait_for_a_receive_spins_when_an_answer_is_due_or_messages_are_large() {
        let dev = Device::new();
        let (mut client, mut server) = pair(&dev);
        server
            .set_recv_len(SPIN_FOR_LEN as usize, 8, false)
            .unwrap();
        let big = vec![1; SPIN_FOR_LEN as usize];
        let src = client.ep.pd.register(big.clone(), Access::NONE).unwrap();
        let answer = server.ep.pd.register(big, Access::NONE).unwrap();
        assert_eq!(
            server.look_for_recv(),
            Look::Sleep,
            "nothing sent, nothing received"
        );
        // A small message: the next wait leaves the stream to the I/O thread.
        exec::block_on(client.send_data(&src, 64)).unwrap();
        assert_eq!(
            client.look_for_recv(),
            Look::Answer,
            "the client awaits an answer"
        );
        exec::block_on(server.recv("small")).unwrap();
        assert_eq!(server.look_for_recv(), Look::Sleep);
        // The server answers: its next wait spins (a ping-pong).
        exec::block_on(server.send_data(&answer, 64)).unwrap();
        assert_eq!(server.look_for_recv(), Look::Answer);
        exec::block_on(client.recv("answer")).unwrap();
        assert_eq!(client.look_for_recv(), Look::Sleep, "the answer came");
        // Answered by a list of Sends (here one): as after one Send.
        exec::block_on(client.send_data(&src, 64)).unwrap();
        exec::block_on(server.recv("small")).unwrap();
        assert_eq!(server.look_for_recv(), Look::Sleep);
        exec::block_on(server.send_data_list(&answer, 64, 1, true)).unwrap();
        assert_eq!(server.look_for_recv(), Look::Answer, "after a posted list");
        exec::block_on(client.recv("listed")).unwrap();
        // Two more small ones use up the server's control-sized receives.
        for _ in 0..2 {
            exec::block_on(client.send_data(&src, 64)).unwrap();
            exec::block_on(client.drain()).unwrap();
            exec::block_on(server.recv("small")).unwrap();
            assert_eq!(server.look_for_recv(), Look::Sleep);
        }
        // A large message: the next wait spins, reading is the copy's work.
        exec::block_on(client.send_data(&src, u64::from(SPIN_FOR_LEN))).unwrap();
        exec::block_on(client.drain()).unwrap();
        match exec::block_on(server.recv("large")).unwrap() {
            Incoming::Data(d) => assert_eq!(d.len(), SPIN_FOR_LEN as usize),
            Incoming::Ctrl(m) => panic!("expected the large message, got {m:?}"),
        }
        assert_eq!(server.look_for_recv(), Look::Spin, "after a large message");
        exec::block_on(client.send_data(&src, 64)).unwrap();
        exec::block_on(server.recv("small")).unwrap();
        assert_eq!(
            server.look_for_recv(),
            Look::Sleep,
            "after a small one again"
        );
    }

    #[test]
    fn small_sends_and_verified_runs_keep_buffers_of_their_own() {
        let dev = Device::new();
        let (_client, mut server) = pair(&dev);
        server.set_recv_len(ONE_BUFFER_ABOVE, 512, true).unwrap();
        assert!(regions(&server).is_empty());
        server.set_recv_len(64 * 1024, 512, false).unwrap();
        assert!(regions(&server).is_empty());
    }
}
