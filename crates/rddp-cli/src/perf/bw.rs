//! Bandwidth: keep up to tx-depth Writes, Reads or Sends in flight until the size
//! is done (ib_write_bw, ib_read_bw, ib_send_bw).
//!
//! Backpressure: Sends are held by the server's receive credits, Reads complete
//! when their response is in. Writes complete when the LLP has taken them, so a
//! one-octet Read every half window confirms the Writes before it, and no more
//! than a window of Writes is ever unconfirmed.

use super::chan::{Chan, stall};
use super::opts::{Op, Stop};
use super::pattern::{Key, space};
use super::proto::Msg;
use super::stats::peak_rate;
use rddp::{MemoryRegion, RemoteBuf};
use std::time::{Duration, Instant};

/// Octets of Writes that may be on their way, not yet confirmed, at most.
pub(crate) const UNCONFIRMED_BYTES: u64 = 128 << 20;

/// A stream of Sends is signaled at least every this many.
pub(crate) const SIGNAL_EVERY_MAX: u64 = 64;

/// What the client measured of one size.
pub(crate) struct BwOut {
    /// When the first work request was posted.
    pub start: Instant,
    pub iters: u64,
    pub seconds: f64,
    pub peak_msgs_per_s: f64,
}

/// The buffers a bandwidth run uses.
pub(crate) struct BwBufs<'a> {
    /// Source of Writes and Sends.
    pub src: &'a MemoryRegion,
    /// Sink of Reads; with --verify of Writes, the slots' check words
    /// ([`CHECK_LEN`] octets a slot, from offset 0), which the server writes.
    pub sink: &'a MemoryRegion,
    /// Sink of the one-octet Reads that confirm Writes.
    pub sync: &'a MemoryRegion,
    /// With --verify of Writes: [`NOTE_LEN`] octets a slot, the source of
    /// the slot's `Written`.
    pub notes: Option<&'a MemoryRegion>,
    /// The server's advertised buffer.
    pub remote: RemoteBuf,
}

/// Every message's own octets (`--verify`): message `i` of the size uses slot
/// `i % slots` of the source (Writes, Sends: filled with its keyed pattern just
/// before it is posted) or of the sink (Reads: poisoned before, checked once
/// its Read completed: before the slot is used again, and at the end). At most
/// `slots` work requests are in flight, and completions come in posting order,
/// so a slot is reused only after its message completed. A Write goes to the
/// same slot of the server's buffer and is followed by a `Written`: the server
/// checks the slot and RDMA-writes the count of the connection's Writes it has
/// checked into the slot's check word of the client's buffer (the sink), and
/// the slot takes its next Write only once that word says its last one was
/// checked.
///
/// A word per slot, not one count for all: over DDP/SCTP (RFC 5043, unordered
/// chunks) tagged messages are placed as they arrive, in any order, so of two
/// Writes to the same octets in flight at once the older may land last and
/// stay. A slot's word has at most one Write in flight: the server writes it
/// only after a `Written` of that slot, the client sends that only after it
/// read the word's previous value, and a size's last ones are placed before
/// its Result is delivered (DDP delivers in order).
pub(crate) struct Slots {
    /// The connection's id in the keys.
    pub conn: u64,
    pub slots: usize,
    /// The key sequence of the size's first message (Writes and Sends are
    /// numbered over the connection, as the server counts them).
    pub seq0: u64,
    /// Octets checked, and wrong.
    pub verified: u64,
    pub wrong: u64,
    /// Tests (`--plant-wrong write`): the Write of the size (counted from 0)
    /// whose source gets one wrong octet after its pattern.
    pub plant: Option<u64>,
}

/// Slots of the server's buffer for Write bandwidth with `--verify` whose
/// largest message is `max` (the client uses at most this many).
pub(crate) fn write_slots(max: u32) -> usize {
    (SLOT_OCTETS / u64::from(max.max(1))).max(2) as usize
}

/// Source (Writes, Sends), sink (Reads) or target (Writes) slots of --verify's
/// bandwidth modes: at least 2 messages, more while they fit in this many
/// octets (thousands of queue pairs run with --verify), at most --tx-depth.
pub(crate) const SLOT_OCTETS: u64 = 64 << 10;

/// Octets of a slot's `Written` in [`BwBufs::notes`].
pub(crate) const NOTE_LEN: u64 = 16;

/// Octets of a slot's check word in the client's buffer (u64 BE, see
/// [`Slots`]); slot `s`'s word is at `s * CHECK_LEN`.
pub(crate) const CHECK_LEN: u64 = 8;

/// `remote` from `off` on.
pub(crate) fn remote_at(remote: RemoteBuf, off: u64) -> RemoteBuf {
    RemoteBuf {
        stag: remote.stag,
        to: remote.to.wrapping_add(off),
        len: remote.len.saturating_sub(off),
    }
}

impl Slots {
    fn at(&self, i: u64, size: u32) -> u64 {
        (i % self.slots as u64) * u64::from(size)
    }

    /// Fill message `i`'s source slot with its pattern (`kind`: a space).
    fn fill(&self, src: &MemoryRegion, kind: u64, i: u64, size: u32) -> Result<u64, String> {
        let at = self.at(i, size);
        let key = Key::new(self.conn, kind | (self.seq0 + i));
        let mut octets = key.fill(size as usize);
        if kind == space::WRITE && self.plant == Some(i) {
            octets[size as usize / 2] ^= 0x5a;
        }
        src.write(at, &octets).map_err(|e| e.to_string())?;
        Ok(at)
    }

    /// Check the Read that used slot `i % slots` (completed), as the server's
    /// buffer holds it for this size.
    fn check_read(&mut self, sink: &MemoryRegion, i: u64, size: u32) -> Result<(), String> {
        let got = sink
            .read(self.at(i, size), u64::from(size))
            .map_err(|e| e.to_string())?;
        let bad = Key::new(self.conn, space::SERVED | u64::from(size)).check(&got);
        if bad.count > 0 {
            eprintln!(
                "rddp perf: Read {i} of {size} octets: {} octets wrong, from +{} to +{}",
                bad.count, bad.first, bad.last
            );
        }
        self.wrong += bad.count;
        self.verified += u64::from(size);
        Ok(())
    }
}

/// Run one size; returns when every posted work request has completed.
pub(crate) async fn run(
    chan: &mut Chan,
    op: Op,
    bufs: &BwBufs<'_>,
    size: u32,
    stop: Stop,
    (depth, list): (usize, usize),
    mut slots: Option<&mut Slots>,
) -> Result<BwOut, String> {
    let depth = match &slots {
        Some(v) => depth.min(v.slots).max(1),
        None => depth.max(1),
    };
    let list = list.max(1);
    // Sends ask for a completion every half depth (at most every 64, as
    // perftest's cq_mod of 100 at its tx depth of 128) and at the run's last:
    // the depth always holds a signaled one. A timed run does not know its
    // last, so there every Send is signaled.
    if op == Op::Send && matches!(stop, Stop::Iters(_)) {
        chan.signal_every((depth as u64 / 2).clamp(1, SIGNAL_EVERY_MAX));
    }
    let start = Instant::now();
    let base = chan.data_done();
    let id0 = chan.data_posted();
    // Writes not yet confirmed by a Read's response stay below two tx depths and
    // below `UNCONFIRMED_BYTES`; a confirming Read goes out every half window.
    let window = (2 * depth as u64)
        .min(UNCONFIRMED_BYTES / u64::from(size.max(1)))
        .max(2);
    let sync_every = window / 2;
    let unconfirmed = |chan: &Chan| chan.data_posted() - chan.confirmed().max(id0);
    let mut progress = 0u64;
    let mut posted = 0u64;
    let mut done = 0u64;
    let mut marks: Vec<(u64, Duration)> = Vec::new();
    let mut last = start;
    // The server sees nothing of Writes and Reads until End: a Pad every quarter
    // of the stall limit tells it the client is alive, so a size may run longer
    // than that limit.
    let keepalive = stall() / 4;
    let mut last_pad = start;
    let mut last_completion = start;
    let more = |posted: u64| match stop {
        Stop::Iters(n) => posted < n,
        Stop::Duration(d) => start.elapsed() < d,
    };
    loop {
        while chan.outstanding() < depth
            && more(posted)
            && (op != Op::Write || unconfirmed(chan) < window)
        {
            match op {
                Op::Write if let Some(v) = slots.as_deref_mut() => {
                    // The slot's last Write must have been checked.
                    let n = v.slots as u64;
                    if posted >= n {
                        let word = (posted % n) * CHECK_LEN;
                        let want = v.seq0 + posted - n + 1;
                        let what = "the server's check of a Write";
                        chan.wait_count(bufs.sink, word, want, what).await?;
                    }
                    let at = v.fill(bufs.src, space::WRITE, posted, size)?;
                    let to = remote_at(bufs.remote, at);
                    chan.write_from(bufs.src, at, u64::from(size), to)?;
                    let notes = bufs.notes.ok_or("verified Writes need notes")?;
                    let note = (posted % n) * NOTE_LEN;
                    chan.send_ctrl_from(notes, note, &Msg::Written { at })
                        .await?;
                    if (posted + 1).is_multiple_of(sync_every) {
                        chan.sync(bufs.sync, bufs.remote)?;
                    }
                }
                Op::Read if let Some(v) = slots.as_deref_mut() => {
                    if posted >= v.slots as u64 {
                        v.check_read(bufs.sink, posted - v.slots as u64, size)?;
                    }
                    let at = v.at(posted, size);
                    let poison = Key::new(v.conn, space::POISON | posted).fill(size as usize);
                    bufs.sink.write(at, &poison).map_err(|e| e.to_string())?;
                    chan.read_into(bufs.sink, at, size, bufs.remote)?;
                }
                Op::Send if let Some(v) = slots.as_deref_mut() => {
                    // One at a time (each its own slot and key), lists too.
                    let left = match stop {
                        Stop::Iters(n) => (n - posted) as usize,
                        Stop::Duration(_) => list,
                    };
                    let k = list.min(depth - chan.outstanding()).min(left).max(1);
                    let mut offsets = Vec::with_capacity(k);
                    for j in 0..k as u64 {
                        offsets.push(v.fill(bufs.src, space::SEND, posted + j, size)?);
                    }
                    let n = chan
                        .send_data_list_at(bufs.src, &offsets, u64::from(size), k == left)
                        .await?;
                    posted += n as u64 - 1;
                }
                Op::Write => {
                    chan.write(bufs.src, u64::from(size), bufs.remote)?;
                    if (posted + 1).is_multiple_of(sync_every) {
                        chan.sync(bufs.sync, bufs.remote)?;
                    }
                }
                Op::Read => chan.read(bufs.sink, size, bufs.remote)?,
                Op::Send if list > 1 => {
                    // Up to `list` at once, within the depth and what is left.
                    let left = match stop {
                        Stop::Iters(n) => (n - posted) as usize,
                        Stop::Duration(_) => list,
                    };
                    let k = list.min(depth - chan.outstanding()).min(left);
                    let n = chan
                        .send_data_list(bufs.src, u64::from(size), k, k == left)
                        .await?;
                    // One is counted below.
                    posted += n as u64 - 1;
                }
                Op::Send => {
                    let last = matches!(stop, Stop::Iters(n) if posted + 1 == n);
                    chan.send_data_as(bufs.src, u64::from(size), last).await?
                }
                Op::Mixed => return Err("--op mixed runs in perf::mixed".into()),
            }
            posted += 1;
        }
        if op != Op::Send && last_pad.elapsed() >= keepalive {
            chan.send_ctrl(&Msg::Pad).await?;
            last_pad = Instant::now();
        }
        // Completions taken while waiting for credits count too.
        let now_done = chan.data_done() - base;
        if now_done > done {
            done = now_done;
            last = Instant::now();
        }
        // The peak counts Writes once confirmed, the rest once completed.
        let now = match op {
            Op::Write => chan.confirmed().saturating_sub(id0),
            _ => done,
        };
        if now > progress {
            progress = now;
            marks.push((progress, start.elapsed()));
        }
        if done == posted && !more(posted) {
            break;
        }
        if chan.outstanding() > 0 {
            // Waits of at most `keepalive`, so the Pads keep going out; the stall
            // limit counts from the last completion.
            if chan.reap_within(keepalive).await?.is_some() {
                last_completion = Instant::now();
            } else if last_completion.elapsed() > stall() {
                return Err(format!(
                    "no completion for {} s: the peer stopped taking data",
                    stall().as_secs()
                ));
            }
        }
    }
    chan.signal_every(1);
    let seconds = (last - start).as_secs_f64();
    if op == Op::Read
        && let Some(v) = slots
    {
        // The Reads whose slots were not used again.
        for i in posted.saturating_sub(v.slots as u64)..posted {
            v.check_read(bufs.sink, i, size)?;
        }
    }
    // Stretches of a tenth of the run: completions come in bursts, and shorter
    // stretches would report the burst, not the link.
    let stretch = (4 * depth as u64).max(done / 10);
    Ok(BwOut {
        start,
        iters: done,
        seconds,
        peak_msgs_per_s: peak_rate(&marks, stretch),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::endpoint::Endpoint;
    use rddp::transport::memory_pair;
    use rddp::{Access, Device};

    #[test]
    fn a_read_slot_is_checked_against_the_served_key() {
        let dev = Device::new();
        let (a, _b) = memory_pair(4096);
        let ep = Endpoint::attach(&dev, "t", a).unwrap();
        let size = 100u32;
        let sink = ep.pd.register(vec![0; 300], Access::NONE).unwrap();
        let mut v = Slots {
            conn: 9,
            slots: 3,
            seq0: 0,
            verified: 0,
            wrong: 0,
            plant: None,
        };
        let served = Key::new(9, space::SERVED | u64::from(size)).fill(size as usize);
        // Read 4 used slot 1: right octets, then one wrong, then the poison
        // (never placed), then another connection's octets.
        sink.write(100, &served).unwrap();
        v.check_read(&sink, 4, size).unwrap();
        assert_eq!((v.verified, v.wrong), (100, 0));
        let mut one = served.clone();
        one[57] ^= 1;
        sink.write(100, &one).unwrap();
        v.check_read(&sink, 4, size).unwrap();
        assert_eq!(v.wrong, 1);
        for other in [
            Key::new(9, space::POISON | 4),
            Key::new(8, space::SERVED | 100),
        ] {
            let before = v.wrong;
            sink.write(100, &other.fill(size as usize)).unwrap();
            v.check_read(&sink, 4, size).unwrap();
            assert!(v.wrong - before > 90, "{other:?}");
        }
    }
}
