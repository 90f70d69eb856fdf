//! `rddp perf client --op mixed`: a soak. Every queue pair runs batches of RDMA
//! Writes, RDMA Reads and Sends of random sizes (seeded), and with --verify
//! checks every octet of every message ([`Key`]: each message's octets
//! are keyed by the connection, the message's sequence and the offset):
//!
//! * Each Write and Send of a batch has a source slot of its own, filled with
//!   its own keyed pattern before it is posted and not touched again until the
//!   batch has completed.
//! * Writes go to random offsets of the server's buffer; the client keeps a model
//!   of that buffer, so each Read is compared with what the Writes before it left
//!   there. Every Write is read back before its octets are written again: a
//!   Write drawn over octets not read back since their last Write becomes a Read
//!   of that range instead, and at the end of a connection the whole buffer is
//!   read back.
//! * A Read's sink is filled with a keyed poison before the Read is posted and
//!   compared with the model once the Read has completed; before the sink takes
//!   its next Read (and at the end of the connection) it is compared again, so
//!   an octet placed into a sink after its Read's completion shows (`late`).
//! * Sends: the server checks each at its receive completion against the key of
//!   the connection's n-th Send (Sends arrive in order; its Result says how
//!   many it received and how many octets were wrong).
//! * Within a batch no two operations touch the same octets of the server's
//!   buffer (a Write and a Read of one range are in different batches), so the
//!   check does not depend on how a responder orders a Read after a Write.
//!
//! With `--reconnect SECS` each queue pair ends its connection (Bye, graceful
//! disconnect) about every SECS and connects anew (the server needs
//! `--forever`). One JSON line every [`REPORT_EVERY`] and one at the end; the
//! run fails if any connection failed or any octet was wrong.

use super::args::{ClientArgs, OnOff};
use super::chan::{Chan, Incoming, stall};
use super::endpoint::Endpoint;
use super::link::Transport;
use super::pattern::{Key, Wrong, space};
use super::proto::{CTRL_LEN, Msg};
use crate::llp;
use rddp::{Access, AsyncEvent, Device, MemoryRegion, RemoteBuf};
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a progress line is printed.
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(5);
/// Reads in one batch at most (each has a sink region of its own).
const SINKS: usize = 8;
/// The source slots of a batch's Writes and Sends hold this many of the largest
/// messages (a batch ends early when the next one does not fit).
const SOURCE_MAXES: u32 = 4;
/// Operations in one batch at most.
const BATCH: usize = 64;
/// One step (Begin .. Result with the server) lasts about this long.
const STEP: Duration = Duration::from_secs(2);
/// Error messages kept for the final line.
const KEEP_ERRORS: usize = 8;

/// A small seeded generator (SplitMix64): the run repeats with its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A size in 1..=max, log-uniform: small and large messages alike.
    fn size(&mut self, max: u32) -> u32 {
        let bits = 64 - u64::from(max).leading_zeros();
        let top = 1u64 << self.below(u64::from(bits) + 1);
        (1 + self.below(top)).min(u64::from(max)) as u32
    }
}

/// Totals of the whole run, shared by the queue pairs' tasks.
#[derive(Default)]
struct Totals {
    connections: AtomicU64,
    writes: AtomicU64,
    reads: AtomicU64,
    sends: AtomicU64,
    bytes: AtomicU64,
    verified: AtomicU64,
    /// Octets of Writes checked by reading them back.
    write_verified: AtomicU64,
    /// Octets of sinks compared again before their next Read.
    rechecked: AtomicU64,
    corrupt: AtomicU64,
    wrong_reads: AtomicU64,
    wrong_sends: AtomicU64,
    /// Octets of a sink that changed after its Read had completed and been
    /// checked.
    late: AtomicU64,
    errors: AtomicU64,
    messages: Mutex<Vec<String>>,
}

impl Totals {
    fn json(&self, t: f64) -> serde_json::Value {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        json!({
            "t": (t * 10.0).round() / 10.0,
            "connections": g(&self.connections),
            "writes": g(&self.writes),
            "reads": g(&self.reads),
            "sends": g(&self.sends),
            "bytes": g(&self.bytes),
            "verified_bytes": g(&self.verified),
            "write_verified_bytes": g(&self.write_verified),
            "rechecked_bytes": g(&self.rechecked),
            "corrupt": g(&self.corrupt),
            "wrong_reads": g(&self.wrong_reads),
            "wrong_sends": g(&self.wrong_sends),
            "late": g(&self.late),
            "errors": g(&self.errors),
        })
    }

    fn error(&self, e: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("rddp perf: {e}");
        let mut m = self.messages.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() < KEEP_ERRORS {
            m.push(e);
        }
    }
}

/// What one queue pair's task needs.
struct Plan {
    transport: llp::Transport,
    addr: String,
    crc: bool,
    max: u32,
    verify: bool,
    depth: usize,
    deadline: Instant,
    reconnect: Option<Duration>,
    /// Tests: one wrong octet planted in every connection.
    plant: Option<Plant>,
}

/// Where `--plant-wrong` puts its wrong octet (tests of the checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plant {
    /// The first Write's source, after its pattern went into the model.
    Write,
    /// The first Send's source.
    Send,
    /// The first Read's sink, after its completion and before its check.
    Read,
    /// The first Read's sink, after its check (a late octet).
    Late,
}
pub(crate) fn client_main(a: &ClientArgs) -> Result<(), String> {
    if a.pingpong || a.sweep || a.plot.is_some() || a.iters.is_some() {
        return Err(
            "--op mixed takes --duration SECS, --size (the largest), --qps, --seed, --reconnect, --verify".into(),
        );
    }
    let transport = match a.link.transport {
        Transport::Mpa => llp::Transport::Mpa,
        Transport::Sctp => llp::Transport::Sctp,
        Transport::Mem => return Err("--op mixed runs against a perf server (mpa or sctp)".into()),
    };
    let secs = a.duration.ok_or("--op mixed needs --duration SECS")?;
    let addr = a.connect.clone().ok_or("--connect ADDR is needed")?;
    let plant = match a.plant_wrong.as_deref() {
        None => None,
        Some("write") => Some(Plant::Write),
        Some("send") => Some(Plant::Send),
        Some("read") => Some(Plant::Read),
        Some("late") => Some(Plant::Late),
        Some(p) => return Err(format!("--plant-wrong {p}: write, send, read or late")),
    };
    let plan = Arc::new(Plan {
        transport,
        addr,
        crc: a.link.crc == OnOff::On,
        max: a.size.unwrap_or(65536),
        verify: a.verify,
        depth: (a.tx_depth as usize).clamp(1, BATCH),
        deadline: Instant::now() + Duration::from_secs_f64(secs),
        reconnect: a.reconnect.map(Duration::from_secs_f64),
        plant,
    });
    let start = Instant::now();
    let totals = Arc::new(Totals::default());
    let dev = super::endpoint::device(2 * a.link.qps as usize);
    let done = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..a.link.qps)
        .map(|q| {
            let (plan, totals, dev) = (plan.clone(), totals.clone(), dev.clone());
            let seed = a.seed ^ (u64::from(q) << 32);
            super::exec::runtime().spawn(queue_pair(q, plan, totals, dev, seed))
        })
        .collect();
    let reporter = {
        let (totals, done) = (totals.clone(), done.clone());
        std::thread::spawn(move || {
            let mut next = start + REPORT_EVERY;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if Instant::now() >= next {
                    say!("{}", totals.json(start.elapsed().as_secs_f64()));
                    next += REPORT_EVERY;
                }
            }
        })
    };
    for t in tasks {
        if super::exec::block_on(t).is_err() {
            totals.error("a queue pair's task panicked".into());
        }
    }
    done.store(true, Ordering::Relaxed);
    let _ = reporter.join();
    let mut end = totals.json(start.elapsed().as_secs_f64());
    end["done"] = true.into();
    end["seed"] = a.seed.into();
    end["error_messages"] = totals
        .messages
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .into();
    say!("{end}");
    let (errors, corrupt) = (
        totals.errors.load(Ordering::Relaxed),
        totals.corrupt.load(Ordering::Relaxed),
    );
    if errors > 0 || corrupt > 0 {
        return Err(format!(
            "{errors} connection(s) failed, {corrupt} octet(s) wrong"
        ));
    }
    Ok(())
}

/// One queue pair: connections one after the other until the deadline, at
/// least one.
async fn queue_pair(q: u32, plan: Arc<Plan>, totals: Arc<Totals>, dev: Device, seed: u64) {
    let (plan, totals, dev) = (&*plan, &*totals, &dev);
    let mut rng = Rng(seed);
    let mut k = 0u64;
    while k == 0 || Instant::now() < plan.deadline {
        // The first connection lasts a random share of the period, so the queue
        // pairs do not all reconnect at once.
        let until = match plan.reconnect {
            Some(p) if k == 0 => {
                Instant::now() + p.mul_f64(0.2 + 0.8 * rng.below(1000) as f64 / 1000.0)
            }
            Some(p) => Instant::now() + p,
            None => plan.deadline,
        }
        .min(plan.deadline);
        totals.connections.fetch_add(1, Ordering::Relaxed);
        let name = format!("qp{q}-{k}");
        let conn = u64::from(q) << 32 | (k & 0xffff_ffff);
        if let Err(e) = connection(plan, totals, dev, &mut rng, until, &name, conn).await {
            totals.error(format!("queue pair {q}, connection {k}: {e}"));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        k += 1;
    }
}

/// The regions of one connection, and what the checks know.
struct Bufs {
    /// The connection's id in the pattern's keys.
    conn: u64,
    /// The source slots of a batch's Writes and Sends.
    src: MemoryRegion,
    src_len: u64,
    sinks: Vec<MemoryRegion>,
    /// What each sink held when its Read was checked (from offset 0).
    held: Vec<Option<Vec<u8>>>,
    sync: MemoryRegion,
    remote: RemoteBuf,
    /// What the server's buffer holds, as far as this client's Writes go.
    model: Vec<u8>,
    /// Octets of the server's buffer written and not read back since.
    unread: Vec<bool>,
    /// The connection's Writes, Sends and Reads so far (their keys' sequences).
    writes: u64,
    sends: u64,
    reads: u64,
    /// Whether `--plant-wrong` has planted its octet in this connection.
    planted: bool,
}

fn reg(ep: &Endpoint, len: u32, access: Access) -> Result<MemoryRegion, String> {
    ep.pd
        .register(vec![0; len as usize], access)
        .map_err(|e| format!("registering {len} octets: {e}"))
}

async fn connection(
    plan: &Plan,
    totals: &Totals,
    dev: &Device,
    rng: &mut Rng,
    until: Instant,
    name: &str,
    conn: u64,
) -> Result<(), String> {
    // MPA or SCTP setup blocks: on the runtime's blocking pool, not a worker.
    let (t, addr, crc) = (plan.transport, plan.addr.clone(), plan.crc);
    let llp_conn = tokio::task::spawn_blocking(move || llp::connect(t, &addr, crc, None))
        .await
        .map_err(|e| format!("connection setup: {e}"))??;
    let ep = Endpoint::attach(dev, name, llp_conn)?;
    let max = plan.max;
    let mailbox = reg(&ep, 8, Access::REMOTE_WRITE)?;
    let src_len = max.saturating_mul(SOURCE_MAXES);
    let src = reg(&ep, src_len, Access::NONE)?;
    let sinks = (0..SINKS)
        .map(|_| reg(&ep, max, Access::REMOTE_WRITE))
        .collect::<Result<Vec<_>, _>>()?;
    let sync = reg(&ep, 8, Access::REMOTE_WRITE)?;
    let hello = Msg::Hello {
        op: super::opts::Op::Mixed,
        pingpong: false,
        verify: plan.verify,
        max_size: max,
        buf: sinks[0].remote(),
        mailbox: mailbox.remote(),
        conn,
    };
    let mut chan = Chan::new(ep, CTRL_LEN, 8)?;
    chan.enable_credits(mailbox);
    chan.send_ctrl(&hello).await?;
    let remote = match chan.recv("the server's buffer advertisement").await? {
        Incoming::Data(b) if b.len() == 16 => {
            RemoteBuf::from_bytes(&b).ok_or("malformed advertisement")?
        }
        _ => return Err("the server's first Send is not its advertisement".into()),
    };
    if remote.len < u64::from(max) {
        return Err(format!("the server's buffer is only {} octets", remote.len));
    }
    let mut b = Bufs {
        conn,
        src,
        src_len: u64::from(src_len),
        held: vec![None; sinks.len()],
        sinks,
        sync,
        remote,
        // The server registers a zeroed buffer for each connection.
        model: vec![0; max as usize],
        unread: vec![false; max as usize],
        writes: 0,
        sends: 0,
        reads: 0,
        planted: false,
    };
    loop {
        let last = Instant::now() + STEP >= until;
        step(&mut chan, &mut b, plan, totals, rng, until, last).await?;
        if last {
            break;
        }
    }
    // The sinks once more: nothing may land in them after their Reads.
    for k in 0..b.sinks.len() {
        recheck(&mut b, k, totals)?;
    }
    finish(&mut chan).await
}

/// Bye, then wait for the server to close (it does once it has taken Bye), then
/// close too. Closing first lets the queue pair's drop reset the connection
/// while Bye still waits unread at the server, which then sees the connection
/// lost (the soak's first run: 34 of 684 connections).
async fn finish(chan: &mut Chan) -> Result<(), String> {
    chan.send_ctrl(&Msg::Bye).await?;
    chan.drain().await?;
    let start = Instant::now();
    let closed = loop {
        let ev = chan.ep.qp.async_events();
        if ev
            .iter()
            .any(|e| matches!(e, AsyncEvent::Closed { graceful: true }))
        {
            break Ok(());
        }
        if let Some(e) = ev.first() {
            break Err(format!("after Bye: {e:?}"));
        }
        if start.elapsed() > stall() {
            break Err(format!(
                "the server did not close within {} s of Bye",
                stall().as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    chan.ep.qp.disconnect();
    closed
}

/// One step with the server: Begin, batches for about [`STEP`], End, Result.
/// The last step of a connection reads the whole buffer back first.
async fn step(
    chan: &mut Chan,
    b: &mut Bufs,
    plan: &Plan,
    totals: &Totals,
    rng: &mut Rng,
    until: Instant,
    last: bool,
) -> Result<(), String> {
    let max = plan.max;
    chan.send_ctrl(&Msg::Begin {
        size: max,
        iters: 0,
    })
    .await?;
    match chan.recv_ctrl("the server's Ack").await? {
        Msg::Ack { granted, pad } => {
            chan.note_granted(granted);
            for _ in 0..pad {
                chan.send_ctrl(&Msg::Pad).await?;
            }
        }
        m => return Err(format!("expected Ack, got {m:?}")),
    }
    let end = (Instant::now() + STEP).min(until);
    let (mut sends, mut send_bytes) = (0u64, 0u64);
    // With `--plant-wrong`, batches go on past the end until the octet is
    // planted: a connection set up after its run's end (a short run on a
    // loaded machine) would otherwise send nothing and plant nothing.
    while Instant::now() < end || (plan.plant.is_some() && !b.planted) {
        let (n, bytes) = batch(chan, b, plan, totals, rng).await?;
        sends += n;
        send_bytes += bytes;
    }
    if last {
        read_back(chan, b, plan, totals).await?;
    }
    chan.drain().await?;
    chan.send_ctrl(&Msg::End { iters: sends }).await?;
    match chan.recv_ctrl("the server's Result").await? {
        Msg::Result {
            corrupt,
            received,
            granted,
            ..
        } => {
            chan.note_granted(granted);
            totals.corrupt.fetch_add(corrupt, Ordering::Relaxed);
            totals.wrong_sends.fetch_add(corrupt, Ordering::Relaxed);
            if received != sends {
                return Err(format!("the server received {received} of {sends} Sends"));
            }
            if plan.verify {
                // The server compared every octet of them.
                totals.verified.fetch_add(send_bytes, Ordering::Relaxed);
            }
            Ok(())
        }
        m => Err(format!("expected Result, got {m:?}")),
    }
}

fn at(remote: RemoteBuf, off: u64) -> RemoteBuf {
    RemoteBuf {
        stag: remote.stag,
        to: remote.to.wrapping_add(off),
        len: remote.len - off,
    }
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Post one batch of random operations, wait for all of them (and a one-octet
/// Read that confirms the Writes arrived), check the Reads. Returns the Sends
/// and their octets.
async fn batch(
    chan: &mut Chan,
    b: &mut Bufs,
    plan: &Plan,
    totals: &Totals,
    rng: &mut Rng,
) -> Result<(u64, u64), String> {
    let max = plan.max;
    let n = 1 + rng.below(plan.depth as u64) as usize;
    // Ranges of the server's buffer this batch writes and reads.
    let mut written: Vec<(u64, u64)> = Vec::new();
    let mut read: Vec<(u64, u64)> = Vec::new();
    // (sink, offset, expected octets) of each Read.
    let mut expect: Vec<(usize, u64, Vec<u8>)> = Vec::new();
    let (mut w, mut r, mut s, mut bytes, mut send_bytes) = (0u64, 0u64, 0u64, 0u64, 0u64);
    // Source slots used so far: each Write and Send its own.
    let mut used = 0u64;
    let e = |e: rddp::Error| e.to_string();
    for _ in 0..n {
        let len = rng.size(max);
        let off = rng.below(u64::from(max - len) + 1);
        let range = (off, off + u64::from(len));
        let (lo, hi) = (off as usize, range.1 as usize);
        let fits = used + u64::from(len) <= b.src_len;
        let clash = |v: &[(u64, u64)]| v.iter().any(|x| overlaps(*x, range));
        let kind = rng.below(3);
        if kind == 0
            && fits
            && !clash(&written)
            && !clash(&read)
            && !b.unread[lo..hi].contains(&true)
        {
            let mut data = Key::new(b.conn, space::WRITE | b.writes).fill(len as usize);
            b.writes += 1;
            b.model[lo..hi].copy_from_slice(&data);
            b.unread[lo..hi].fill(true);
            if plan.plant == Some(Plant::Write) && !b.planted {
                data[len as usize / 2] ^= 0x40;
                b.planted = true;
            }
            b.src.write(used, &data).map_err(e)?;
            chan.write_from(&b.src, used, u64::from(len), at(b.remote, off))?;
            used += u64::from(len);
            written.push(range);
            w += 1;
        } else if kind <= 1 && expect.len() < SINKS && !clash(&written) {
            // A Write drawn over octets not read back yet comes here too: it
            // becomes a Read of its range.
            let k = expect.len();
            recheck(b, k, totals)?;
            if plan.verify {
                let poison = Key::new(b.conn, space::POISON | b.reads).fill(len as usize);
                b.sinks[k].write(0, &poison).map_err(e)?;
            }
            b.reads += 1;
            chan.read_into(&b.sinks[k], 0, len, at(b.remote, off))?;
            expect.push((k, off, b.model[lo..hi].to_vec()));
            read.push(range);
            r += 1;
        } else if fits {
            let mut data = Key::new(b.conn, space::SEND | b.sends).fill(len as usize);
            b.sends += 1;
            if plan.plant == Some(Plant::Send) && !b.planted {
                data[len as usize / 2] ^= 0x40;
                b.planted = true;
            }
            b.src.write(used, &data).map_err(e)?;
            chan.send_data_from(&b.src, used, u64::from(len), false)
                .await?;
            used += u64::from(len);
            s += 1;
            send_bytes += u64::from(len);
        } else {
            // The source slots are full: the batch ends here.
            break;
        }
        bytes += u64::from(len);
    }
    if w > 0 {
        chan.sync(&b.sync, b.remote)?;
    }
    chan.drain().await?;
    for (k, off, want) in expect {
        check(b, k, off, want, plan, totals)?;
    }
    totals.writes.fetch_add(w, Ordering::Relaxed);
    totals.reads.fetch_add(r, Ordering::Relaxed);
    totals.sends.fetch_add(s, Ordering::Relaxed);
    totals.bytes.fetch_add(bytes, Ordering::Relaxed);
    Ok((s, send_bytes))
}

/// Compare sink `k` with `want`, read from `off` of the server's buffer (with
/// --verify), once its Read has completed. Wrong octets are counted and the
/// first one described; the octets of Writes it covers count as read back.
fn check(
    b: &mut Bufs,
    k: usize,
    off: u64,
    want: Vec<u8>,
    plan: &Plan,
    totals: &Totals,
) -> Result<(), String> {
    if !plan.verify {
        return Ok(());
    }
    let (lo, hi) = (off as usize, off as usize + want.len());
    if plan.plant == Some(Plant::Read) && !b.planted && !want.is_empty() {
        let got = b.sinks[k].read(0, 1).map_err(|e| e.to_string())?;
        b.sinks[k]
            .write(0, &[got[0] ^ 0x40])
            .map_err(|e| e.to_string())?;
        b.planted = true;
    }
    let got = b.sinks[k]
        .read(0, want.len() as u64)
        .map_err(|e| e.to_string())?;
    let bad = Wrong::between(&got, &want);
    if bad.count > 0 {
        let i = bad.first;
        eprintln!(
            "rddp perf: connection {:#x}: a Read of {} octets at offset {off}: {} octets wrong, \
             from +{i} to +{} (first: got {:#04x}, want {:#04x})",
            b.conn,
            want.len(),
            bad.count,
            bad.last,
            got[i],
            want[i]
        );
    }
    let writes = b.unread[lo..hi].iter().filter(|&&u| u).count() as u64;
    b.unread[lo..hi].fill(false);
    totals.corrupt.fetch_add(bad.count, Ordering::Relaxed);
    totals.wrong_reads.fetch_add(bad.count, Ordering::Relaxed);
    totals
        .verified
        .fetch_add(want.len() as u64, Ordering::Relaxed);
    totals.write_verified.fetch_add(writes, Ordering::Relaxed);
    if plan.plant == Some(Plant::Late) && !b.planted && !want.is_empty() {
        b.sinks[k]
            .write(0, &[got[0] ^ 0x40])
            .map_err(|e| e.to_string())?;
        b.planted = true;
    }
    // What the sink holds now, wrong octets and all: the recheck looks for
    // changes after this.
    b.held[k] = Some(got);
    Ok(())
}

/// Before sink `k` takes another Read (and at the end of a connection): it
/// must still hold what it held when its last Read was checked, or octets
/// landed in it after that Read's completion.
fn recheck(b: &mut Bufs, k: usize, totals: &Totals) -> Result<(), String> {
    let Some(want) = b.held[k].take() else {
        return Ok(());
    };
    let got = b.sinks[k]
        .read(0, want.len() as u64)
        .map_err(|e| e.to_string())?;
    let bad = Wrong::between(&got, &want);
    if bad.count > 0 {
        eprintln!(
            "rddp perf: connection {:#x}: sink {k} changed after its Read of {} octets \
             completed and was checked: {} octets, from +{} to +{}",
            b.conn,
            want.len(),
            bad.count,
            bad.first,
            bad.last
        );
    }
    totals.corrupt.fetch_add(bad.count, Ordering::Relaxed);
    totals.late.fetch_add(bad.count, Ordering::Relaxed);
    totals
        .rechecked
        .fetch_add(want.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// Read the whole server buffer back and compare it with the model: every Write
/// of the connection not read back yet is checked here.
async fn read_back(
    chan: &mut Chan,
    b: &mut Bufs,
    plan: &Plan,
    totals: &Totals,
) -> Result<(), String> {
    let max = plan.max;
    recheck(b, 0, totals)?;
    if plan.verify {
        let poison = Key::new(b.conn, space::POISON | b.reads).fill(max as usize);
        b.sinks[0].write(0, &poison).map_err(|e| e.to_string())?;
    }
    b.reads += 1;
    chan.read(&b.sinks[0], max, b.remote)?;
    chan.drain().await?;
    let want = b.model.clone();
    check(b, 0, 0, want, plan, totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_span_one_octet_to_the_largest_and_repeat_with_the_seed() {
        let mut r = Rng(7);
        let sizes: Vec<u32> = (0..20_000).map(|_| r.size(32768)).collect();
        assert!(sizes.iter().all(|&s| (1..=32768).contains(&s)));
        assert!(sizes.iter().any(|&s| s < 64), "small ones");
        assert!(sizes.iter().any(|&s| s > 16384), "large ones");
        let mut again = Rng(7);
        assert!(sizes.iter().all(|&s| s == again.size(32768)));
        assert_ne!(Rng(8).next(), Rng(7).next());
    }

    #[test]
    fn ranges_overlap_only_when_they_share_an_octet() {
        assert!(overlaps((0, 10), (9, 12)));
        assert!(overlaps((5, 6), (0, 100)));
        assert!(!overlaps((0, 10), (10, 12)));
        assert!(!overlaps((10, 12), (0, 10)));
    }
}
