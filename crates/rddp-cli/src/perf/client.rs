//! The client side of a run on one attached queue pair: Hello, then one
//! measurement per size, then Bye.

use super::bw::{self, BwBufs};
use super::chan::{Chan, Incoming};
use super::copies::{Copies, RunCopies};
use super::endpoint::Endpoint;
use super::lat;
use super::opts::{ClientOpts, Op, Stop};
use super::pattern;
use super::proto::{CTRL_LEN, Msg};
use super::report::Measurement;
use rddp::{Access, MemoryRegion, RemoteBuf};
use std::time::{Duration, Instant};

/// Receive buffers the client keeps posted (the server only answers, one at a time).
const CLIENT_RECVS: usize = 8;

/// A connected client, past the exchange of Hello and the advertisement.
pub(crate) struct Client {
    chan: Chan,
    opts: ClientOpts,
    remote: RemoteBuf,
    /// Pattern source of Writes and Sends.
    src: MemoryRegion,
    /// Sink of Reads, target of the server's ping-pong Writes.
    local: MemoryRegion,
    /// Sink of the Reads that confirm Writes.
    sync: MemoryRegion,
    /// Sources of the `Written`s of verified Writes, one a slot.
    notes: Option<MemoryRegion>,
    /// The size whose buffers [`Self::prepare`] filled.
    prepared: Option<u32>,
    /// The size [`Self::begin`] began, and the counters before it.
    begun: Option<(u32, rddp::QpStats, Copies)>,
    /// --verify of bandwidth: the connection's id in the pattern's keys, the
    /// slots of `src` and `local` (one message each), and the Writes and Sends
    /// of the connection so far (the next one's key sequence).
    conn: u64,
    slots: usize,
    writes: u64,
    sends: u64,
}

fn reg(ep: &Endpoint, len: u32, access: Access) -> Result<MemoryRegion, String> {
    ep.pd
        .register(vec![0; len as usize], access)
        .map_err(|e| format!("registering {len} octets: {e}"))
}

impl Client {
    /// Start a run on `ep`: send Hello, take the server's advertisement.
    pub(crate) async fn connect(ep: Endpoint, opts: &ClientOpts) -> Result<Self, String> {
        let max = opts.max_size();
        let recv_len = if opts.op == Op::Send && opts.pingpong {
            max as usize
        } else {
            CTRL_LEN
        };
        let mailbox = reg(&ep, 8, Access::REMOTE_WRITE)?;
        let slots = if opts.verify && !opts.pingpong {
            bw::write_slots(max).min(opts.tx_depth).max(1)
        } else {
            1
        };
        let len = |of: bool| {
            u32::try_from(if of { slots as u64 } else { 1 } * u64::from(max))
                .map_err(|_| format!("{slots} slots of {max} octets"))
        };
        let checked_writes = opts.verify && !opts.pingpong && opts.op == Op::Write;
        // Verified Writes: the server writes the slots' check words (see
        // `bw::Slots`) into its first octets.
        let words = if checked_writes {
            slots as u32 * bw::CHECK_LEN as u32
        } else {
            0
        };
        let local = reg(
            &ep,
            len(opts.op == Op::Read)?.max(words),
            Access::REMOTE_WRITE | Access::REMOTE_READ,
        )?;
        let src = reg(&ep, len(opts.op != Op::Read)?, Access::NONE)?;
        let conn = u64::from(std::process::id()) << 32 | u64::from(ep.qp.qp_num());
        let sync = reg(&ep, 8, Access::REMOTE_WRITE)?;
        let notes = if checked_writes {
            Some(reg(&ep, slots as u32 * bw::NOTE_LEN as u32, Access::NONE)?)
        } else {
            None
        };
        let hello = Msg::Hello {
            op: opts.op,
            pingpong: opts.pingpong,
            verify: opts.verify,
            max_size: max,
            buf: local.remote(),
            mailbox: mailbox.remote(),
            conn,
        };
        let mut chan = Chan::new(ep, recv_len, CLIENT_RECVS)?;
        // A ping-pong has one message in flight each way and the server keeps
        // hundreds of receives posted: no credits (as ib_send_lat), so no
        // grant Writes between the Sends either.
        if !opts.pingpong {
            chan.enable_credits(mailbox);
        }
        chan.log_ctrl();
        chan.send_ctrl(&hello).await?;
        let remote = match chan.recv("the server's buffer advertisement").await? {
            Incoming::Data(b) if b.len() == 16 => RemoteBuf::from_bytes(&b)
                .ok_or("the server's advertisement is malformed".to_string())?,
            Incoming::Data(b) => {
                return Err(format!(
                    "the server's first Send is {} octets, not the 16-octet advertisement",
                    b.len()
                ));
            }
            Incoming::Ctrl(m) => return Err(format!("expected the advertisement, got {m:?}")),
        };
        if remote.len < u64::from(max) {
            return Err(format!(
                "the server's buffer is {} octets, smaller than the largest size {max}",
                remote.len
            ));
        }
        // Verified Writes go to a slot of their own in the server's buffer.
        let targets = if checked_writes { slots as u64 } else { 1 };
        if remote.len < targets * u64::from(max) {
            return Err(format!(
                "the server's buffer is {} octets, too small for {targets} Writes of {max}",
                remote.len
            ));
        }
        Ok(Self {
            chan,
            opts: opts.clone(),
            remote,
            src,
            local,
            sync,
            notes,
            prepared: None,
            begun: None,
            conn,
            slots,
            writes: 0,
            sends: 0,
        })
    }

    /// Fill the buffers for one size: the pattern to send, the sink zeroed.
    /// Before the queue pairs start the size together, so that one queue pair's
    /// filling is not in another's time.
    pub(crate) fn prepare(&mut self, size: u32) -> Result<(), String> {
        if size == 0 || size > self.opts.max_size() {
            return Err(format!(
                "size {size} is outside 1..={}",
                self.opts.max_size()
            ));
        }
        let n = size as usize;
        let e = |e: rddp::Error| e.to_string();
        // Bandwidth with --verify fills each message's slot as it is posted.
        if !self.opts.verify || self.opts.pingpong {
            self.src.write(0, &pattern::fill(size, n)).map_err(e)?;
        }
        self.local.write(0, &vec![0; n]).map_err(e)?;
        self.prepared = Some(size);
        Ok(())
    }

    /// Begin a size (its buffers filled by [`Self::prepare`] unless done):
    /// Begin, the server's Ack, the Pads it asks for. Not timed:
    /// with several queue pairs, every one has begun before any data phase
    /// starts (see `run::measure`).
    pub(crate) async fn begin(&mut self, size: u32) -> Result<(), String> {
        if self.prepared.take() != Some(size) {
            self.prepare(size)?;
            self.prepared = None;
        }
        let before = self.chan.ep.qp.stats();
        let copies = Copies::of(&before);
        self.chan.take_ctrl_log();
        let iters = match self.opts.stop {
            Stop::Iters(i) => i,
            Stop::Duration(_) => 0,
        };
        self.chan.send_ctrl(&Msg::Begin { size, iters }).await?;
        match self.chan.recv_ctrl("the server's Ack").await? {
            Msg::Ack { granted, pad } => {
                self.chan.note_granted(granted);
                for _ in 0..pad {
                    self.chan.send_ctrl(&Msg::Pad).await?;
                }
            }
            m => return Err(format!("expected Ack, got {m:?}")),
        }
        // The Pads must have left before the data phase starts.
        self.chan.drain().await?;
        self.begun = Some((size, before, copies));
        Ok(())
    }

    /// The data phase of the size [`Self::begin`] began, then End and the
    /// server's Result. Timed: from the first data work request to the last
    /// Read's completion (Reads), or to the server's Result (Writes and Sends
    /// complete when the LLP took them; the Result comes after End, which the
    /// server gets only once all earlier data is placed: RFC 5040 §5.5), or the
    /// ping-pong's last round trip.
    pub(crate) async fn data(&mut self, size: u32) -> Result<Measurement, String> {
        let Some((begun, before, copies)) = self.begun.take() else {
            return Err(format!("size {size} was not begun"));
        };
        if begun != size {
            return Err(format!("size {size} runs, but {begun} was begun"));
        }
        let o = self.opts.clone();
        let (mut m, mine) = if o.pingpong {
            self.pingpong(size).await?
        } else {
            self.bandwidth(size).await?
        };
        self.chan.drain().await?;
        self.chan.send_ctrl(&Msg::End { iters: m.iters }).await?;
        match self.chan.recv_ctrl("the server's Result").await? {
            Msg::Result {
                corrupt,
                received,
                granted,
                rx_copied,
                tx_copied,
            } => {
                self.chan.note_granted(granted);
                m.copies = Some(RunCopies {
                    client: Copies::since(Copies::of(&self.chan.ep.qp.stats()), copies),
                    server: Copies {
                        rx: rx_copied,
                        tx: tx_copied,
                    },
                });
                if o.op == Op::Send && received != m.iters {
                    return Err(format!(
                        "the server received {received} of {} Sends of {size} octets",
                        m.iters
                    ));
                }
                m.corrupt = o.verify.then_some(corrupt + mine);
                // A Write or Send completes when the LLP has taken it, not when it
                // has arrived: the time runs until the server has seen it all.
                if !o.pingpong
                    && o.op != Op::Read
                    && let Some(start) = m.data_start
                {
                    let end = Instant::now();
                    m.data_end = Some(end);
                    m.seconds = (end - start).as_secs_f64();
                }
            }
            m => return Err(format!("expected Result, got {m:?}")),
        }
        m.counters = Some(self.chan.ep.qp.stats().since(&before));
        m.ctrl_at = self.chan.take_ctrl_log();
        Ok(m)
    }

    fn measurement(&self, size: u32) -> Measurement {
        Measurement {
            op: self.opts.op,
            size,
            iters: 0,
            qps: 1,
            seconds: 0.0,
            peak_msgs_per_s: 0.0,
            corrupt: None,
            samples_us: Vec::new(),
            pingpong: self.opts.pingpong,
            counters: None,
            data_start: None,
            data_end: None,
            ctrl_at: Vec::new(),
            ctrl_timed: 0,
            copies: None,
            qp_seconds_max: 0.0,
        }
    }

    /// Returns the measurement (its data phase from the first work request to
    /// the last completion) and the corrupt octets the client found.
    async fn bandwidth(&mut self, size: u32) -> Result<(Measurement, u64), String> {
        let o = &self.opts;
        let depth = if o.op == Op::Read {
            o.tx_depth.min(self.chan.ep.qp.ird_ord().1 as usize)
        } else {
            o.tx_depth
        };
        let bufs = BwBufs {
            src: &self.src,
            sink: &self.local,
            sync: &self.sync,
            notes: self.notes.as_ref(),
            remote: self.remote,
        };
        let mut slots = o.verify.then_some(bw::Slots {
            conn: self.conn,
            slots: self.slots,
            seq0: match o.op {
                Op::Write => self.writes,
                Op::Send => self.sends,
                _ => 0,
            },
            verified: 0,
            wrong: 0,
            // In the middle: not the last Write, which lands last.
            plant: o.plant_write.then_some(match o.stop {
                Stop::Iters(n) => n / 2,
                Stop::Duration(_) => 1,
            }),
        });
        let out = bw::run(
            &mut self.chan,
            o.op,
            &bufs,
            size,
            o.stop,
            (depth, o.post_list),
            slots.as_mut(),
        )
        .await?;
        match o.op {
            Op::Write => self.writes += out.iters,
            Op::Send => self.sends += out.iters,
            _ => {}
        }
        // Reads were checked one by one (the server checks Writes and Sends).
        let mine = slots.map_or(0, |v| v.wrong);
        let mut m = self.measurement(size);
        m.iters = out.iters;
        m.seconds = out.seconds;
        m.peak_msgs_per_s = out.peak_msgs_per_s;
        m.data_start = Some(out.start);
        m.data_end = Some(out.start + Duration::from_secs_f64(out.seconds));
        Ok((m, mine))
    }

    async fn pingpong(&mut self, size: u32) -> Result<(Measurement, u64), String> {
        let (op, stop, verify) = (self.opts.op, self.opts.stop, self.opts.verify);
        // The client waits for every Send's completion before its End: the
        // last is signaled, which a timed run does not know in advance.
        if matches!(stop, Stop::Iters(_)) {
            self.chan.signal_every(lat::SIGNAL_EVERY);
        }
        let start = Instant::now();
        let mut samples = Vec::new();
        let mut bad = 0;
        let mut i = 0u64;
        while match stop {
            Stop::Iters(n) => i < n,
            Stop::Duration(d) => start.elapsed() < d,
        } {
            match op {
                Op::Write => samples.push(
                    lat::client_write(&mut self.chan, &self.src, &self.local, self.remote, size, i)
                        .await?,
                ),
                Op::Send => {
                    let last = matches!(stop, Stop::Iters(n) if i + 1 == n);
                    let (us, b) =
                        lat::client_send(&mut self.chan, &self.src, size, verify, last).await?;
                    samples.push(us);
                    bad += b;
                }
                Op::Read | Op::Mixed => return Err("--pingpong measures write or send".into()),
            }
            i += 1;
        }
        let end = Instant::now();
        self.chan.signal_every(1);
        self.chan.end_busy();
        let seconds = (end - start).as_secs_f64();
        if verify && op == Op::Write {
            // The last octet is the marker; the rest is the server's pattern.
            let got = self
                .local
                .read(0, u64::from(size) - 1)
                .map_err(|e| e.to_string())?;
            bad += pattern::corrupt(size, &got);
        }
        let mut m = self.measurement(size);
        m.iters = i;
        m.seconds = seconds;
        m.peak_msgs_per_s = samples
            .iter()
            .copied()
            .reduce(f64::min)
            .map_or(0.0, |us| 1e6 / (2.0 * us));
        m.samples_us = samples;
        m.data_start = Some(start);
        m.data_end = Some(end);
        Ok((m, bad))
    }

    /// What ended the connection, after a failure (see [`Chan::end_event`]).
    pub(crate) fn end_event(&mut self) -> Option<rddp::AsyncEvent> {
        self.chan.end_event()
    }

    /// End the run: Bye, then wait for the server to close (it does once it has
    /// taken Bye), then close too. Closing first would let the queue pair's drop
    /// cut off a Bye still in flight (over SCTP under loss, it did).
    pub(crate) async fn finish(&mut self) -> Result<(), String> {
        self.chan.send_ctrl(&Msg::Bye).await?;
        self.chan.drain().await?;
        let closed = self.chan.wait_peer_close(super::chan::stall()).await;
        self.chan.ep.qp.disconnect();
        closed.map_err(|e| format!("after Bye: {e}"))
    }
}
