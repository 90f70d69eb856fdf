//! A lone small Send in one system call (the ping-pong row
//! of docs/benchmarks.md; docs/data-path.md, "Receive"), for
//! [`FpduReceiver::drive_buffered`].
//!
//! A batch (`fpdu/rx_direct/batch.rs`) costs a peek and a read; for an FPDU that arrives
//! alone, as in a ping-pong, that is two system calls where a plain TCP
//! receiver makes one. Its payload's place is known only from its header, but
//! a Send's place can be foreseen: on an ordered receive queue (docs/receive-strategies.md,
//! strategy 1) the next Send of the stream fills the buffer posted for the
//! next MSN from its first octet. After Sends of one length came alone
//! [`LONE_RUN`] times in a row, the next is read with one vectored read:
//!
//! 1. ULPDU_Length and an untagged DDP header into scratch, then the expected
//!    payload length and what follows it (PAD, CRC and the next FPDU's head,
//!    [`SAFE_HEAD`] octets) straight into that posted buffer, as far as it
//!    is long, the rest into scratch (a short read shows the socket is
//!    empty, as in `Input::payload`);
//! 2. a hit is a whole FPDU whose DDP control (untagged, last), QN 0, MSN and
//!    MO 0 say it is that Send, whose ULPDU_Length says its payload is the
//!    expected length or shorter (a shorter one lies from the buffer's first
//!    octet too, its PAD and CRC in the buffer behind it), beyond which at most
//!    the next FPDU's head was read ([`SAFE_HEAD`] octets: never payload), and
//!    whose CRC is good (RFC 5044 §4.4) over the octets where they lie;
//! 3. then the engine begins the segment with every check (RFC 5041 §7.1, RDMAP's
//!    too; nothing is delivered before) and must name that very
//!    buffer; [`Placer::finish`] delivers it;
//! 4. that Send but longer (as the data Send after one-octet Pads), with no
//!    octet beyond its payload read: what was read after the head is its
//!    payload, already in place. The engine begins it as in 3, and header
//!    first goes on from there (the CRC checked at its end, as any FPDU's).
//!
//! The buffer's own octets are saved before the read (at most
//! [`SMALL_PAYLOAD`] and a tail, the application's, not payload). A miss
//! (another header, a Send longer than the buffer, an FPDU cut off, a bad
//! CRC) puts every octet read
//! back in stream order as read-ahead and the buffer's octets back as they
//! were: the FPDU is then taken header first, its payload copied from there
//! (counted, as the setup's leftover) and every error found as before. A miss
//! doubles the run of lone Sends needed before the next try, and after
//! [`LONE_MISSES_MAX`] misses a connection never tries again: its payload
//! copies stay bounded (a miss copies at most the octets of its one read,
//! under 1,100), and a connection whose lone FPDUs are not such Sends soon
//! stops trying. A refused hit gets its buffer's octets back too, then the
//! refusal is reported (its CRC passed).
//!
//! What the engine sees is the same as without the one read.

use super::*;
use rddp_wire::ddp::DdpHeader;

/// Lone Sends of one length in a row before the next is read in one read.
const LONE_RUN: u32 = 2;
/// Misses after which a connection no longer tries (the last try needed a
/// run of `LONE_RUN << 11`, 4,096 Sends).
const LONE_MISSES_MAX: u32 = 12;
/// PAD, CRC and the next FPDU's head.
const TAIL_MAX: usize = 3 + MPA_CRC_LEN + SAFE_HEAD;

/// The lone Sends seen lately on one connection.
#[derive(Debug, Default)]
pub(super) struct Lone {
    /// Payload length of the last Send that came alone.
    len: usize,
    /// Sends of `len` octets that came alone in a row.
    run: u32,
    /// Misses so far: each doubles the run needed before the next try.
    misses: u32,
    /// The buffer's octets a read may overwrite, kept to give them back
    /// (reused: a kilobyte zeroed on the stack each read was 80 instructions
    /// and 17 cache lines).
    saved: Vec<u8>,
}

impl Lone {
    /// A batch took one Send of `len` payload octets and emptied the socket
    /// (`Some(len)`), or took anything else (`None`).
    pub(super) fn seen(&mut self, len: Option<usize>) {
        match len {
            Some(l) if l == self.len => self.run = self.run.saturating_add(1),
            Some(l) => (self.len, self.run) = (l, 1),
            None => self.run = 0,
        }
    }

    /// The next lone Send may be read in one read.
    fn ready(&self) -> bool {
        self.misses < LONE_MISSES_MAX && self.len > 0 && self.run >= LONE_RUN << self.misses
    }

    /// A one-read try missed: try again after twice the run, and never after
    /// [`LONE_MISSES_MAX`] misses.
    fn missed(&mut self) {
        self.run = 0;
        self.misses += 1;
    }
}

/// What the one read found. (One on the stack for one read: the size of
/// the CRC state in `Part` costs nothing.)
#[allow(clippy::large_enum_variant)]
enum Found {
    /// The engine has no buffer for it (or one too short): not tried.
    Untried,
    /// The foreseen Send (or a shorter one), whole, its CRC good: `n` octets
    /// read, `len` octets of payload at `at` (the buffer's address, compared
    /// with what the engine begins), then `post`: PAD, CRC and what was read
    /// of the next FPDU's head, in stream order.
    Hit {
        n: usize,
        at: usize,
        len: usize,
        post: [u8; TAIL_MAX],
    },
    /// A longer Send: its head, then `n - HEAD_MAX` octets of its `len`
    /// octets of payload, all in the buffer at `at` from its first octet;
    /// `digest`: the CRC over those so far.
    Part {
        n: usize,
        at: usize,
        len: usize,
        digest: Crc32c,
    },
    /// Anything else: every octet read, in stream order.
    Miss(Vec<u8>),
}

/// The payload length of the one-segment Send to QN 0 with `msn` from MO 0
/// that `head` opens (RFC 5041 §4.4; RFC 5040 §4.2: Sends are QN 0), if it is
/// one.
fn send_len(head: &[u8; HEAD_MAX], msn: u32) -> Option<usize> {
    let len = usize::from(u16::from_be_bytes([head[0], head[1]]));
    match DdpHeader::parse(&head[MPA_HDR_LEN..]) {
        Ok(DdpHeader::Untagged(h))
            if h.ctrl.last() && h.qn == rddp_wire::rdmap::qn::SEND && h.msn == msn && h.mo == 0 =>
        {
            len.checked_sub(UNTAGGED_HDR_LEN)
        }
        _ => None,
    }
}

/// PAD and CRC of an FPDU with `len` octets of Send payload.
fn trailer(len: usize) -> usize {
    pad_len(UNTAGGED_HDR_LEN + len) + MPA_CRC_LEN
}

/// The octets of an FPDU with `len` octets of Send payload.
fn whole(len: usize) -> usize {
    HEAD_MAX + len + trailer(len)
}

impl FpduReceiver {
    /// The next FPDU is likely a lone Send of a known length (see the module
    /// docs), within the receive limit (which `set_max_ulpdu` may have lowered
    /// since: such a Send is refused, as header first finds); called where a
    /// batch may start.
    pub(super) fn lone_ready(&self) -> bool {
        self.lone.ready() && UNTAGGED_HDR_LEN + self.lone.len <= self.cfg.max_ulpdu
    }

    /// One vectored read of the foreseen Send (see the module docs); a batch
    /// where the engine has no buffer for it.
    pub(super) fn lone(
        &mut self,
        src: &mut (impl Read + Peek),
        engine: &mut impl Placer,
    ) -> Result<(), Halt> {
        self.may_read(engine)?;
        let p = self.lone.len;
        let tail_len = trailer(p) + SAFE_HEAD;
        let want = HEAD_MAX + p + tail_len;
        let crc = self.cfg.crc;
        let mut head = [0u8; HEAD_MAX];
        let mut tail = [0u8; TAIL_MAX];
        let saved = &mut self.lone.saved;
        // Octets of the buffer the read fills (its PAD, CRC and next head too,
        // where the buffer is that long): a longer Send lies there as well.
        let mut k = 0;
        let mut found = Found::Untried;
        let mut f = |msn: u32, buf: &mut [u8]| -> io::Result<usize> {
            if buf.len() < p {
                return Ok(0);
            }
            k = buf.len().min(p + tail_len);
            let (dst, t) = (&mut buf[..k], &mut tail[..p + tail_len - k]);
            saved.clear();
            saved.extend_from_slice(dst);
            let mut iov = [
                IoSliceMut::new(&mut head),
                IoSliceMut::new(dst),
                IoSliceMut::new(t),
            ];
            let n = loop {
                match src.read_vectored(&mut iov) {
                    Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            };
            // What was read after the head, in stream order: the buffer's
            // first `k` octets, then `tail`.
            let r = n.saturating_sub(HEAD_MAX);
            let at = buf.as_ptr() as usize;
            let send = send_len(&head, msn).filter(|&len| len >= 1 && len <= buf.len());
            found = match send {
                // The whole FPDU, at most the next head behind it (never
                // payload), within what the read put in the buffer: the
                // Send's payload from the buffer's first octet, then `post`.
                Some(len) if len <= k && n >= whole(len) && n - whole(len) <= SAFE_HEAD => {
                    let pad = pad_len(UNTAGGED_HDR_LEN + len);
                    let m = r - len;
                    let mut post = [0u8; TAIL_MAX];
                    for (j, o) in post[..m].iter_mut().enumerate() {
                        *o = read_octet(buf, &tail, k, len + j);
                    }
                    let mut d = Crc32c::new();
                    d.update(&head);
                    d.update(&buf[..len]);
                    d.update(&post[..pad]);
                    let c = &post[pad..pad + MPA_CRC_LEN];
                    let good = check::crc(crc, [c[0], c[1], c[2], c[3]], d.finalize());
                    if good.is_ok() {
                        // Behind a shorter Send the buffer gets its own octets back.
                        buf[len..k].copy_from_slice(&saved[len..k]);
                        Found::Hit { n, at, len, post }
                    } else {
                        Found::Miss(Vec::new())
                    }
                }
                // A longer Send (the data after a run of one-octet Sends):
                // everything read after the head is its payload, in place.
                // Header first goes on from there; nothing is delivered
                // before its CRC passed.
                Some(len) if len > p && r >= 1 && r <= len && r <= k => {
                    let mut d = Crc32c::new();
                    d.update(&head);
                    d.update(&buf[..r]);
                    Found::Part {
                        n,
                        at,
                        len,
                        digest: d,
                    }
                }
                _ => Found::Miss(Vec::new()),
            };
            if let Found::Miss(read) = &mut found {
                let h = n.min(HEAD_MAX);
                read.reserve(n);
                read.extend_from_slice(&head[..h]);
                read.extend((0..r).map(|i| read_octet(buf, &tail, k, i)));
                let back = r.min(k);
                buf[..back].copy_from_slice(&saved[..back]);
            }
            Ok(n)
        };
        if let Some(Err(e)) = engine.with_next_send_buffer(&mut f) {
            return Err(io_to_halt(e));
        }
        // A short read shows the socket empty; one that stopped at the end of
        // an iovec says nothing (a source whose `read_vectored` fills one).
        let drained = |n: usize| n < want && n != HEAD_MAX && n != HEAD_MAX + k;
        let (n, at, len, post) = match found {
            Found::Untried => {
                self.lone.run = 0;
                return self.batch(src, engine);
            }
            Found::Miss(read) => {
                self.input.drained = self.input.stream && drained(read.len());
                self.input.left = read;
                self.input.left_at = 0;
                self.lone.missed();
                return Ok(());
            }
            Found::Hit { n, at, len, post } => (n, at, len, post),
            Found::Part { n, at, len, digest } => {
                self.input.drained = self.input.stream && drained(n);
                // (A longer Send: rare; its buffer's kept octets copied out.)
                let kept = self.lone.saved[..k].to_vec();
                return self.lone_part(engine, &head, n, at, len, digest, &kept);
            }
        };
        self.input.drained = self.input.stream && drained(n);
        if n >= want {
            // More follows: a stream, where batches do better.
            self.lone.run = 0;
        } else if len == p {
            self.lone.run = self.lone.run.saturating_add(1);
        }
        let whole = whole(len);
        self.advance(whole);
        let extra = n - whole;
        let next = &post[trailer(len)..trailer(len) + extra];
        self.input.ahead[..extra].copy_from_slice(next);
        (self.input.lo, self.input.hi) = (0, extra);
        self.input.streak = self.input.streak.saturating_add(1);
        self.input.alone = false;
        let seq = self.seq;
        self.seq += 1;
        match engine.begin(seq, &head[MPA_HDR_LEN..], len) {
            Some(Target::Buffer { len: l }) if l == len => {
                let mut same =
                    |b: &mut [u8]| Ok(usize::from(b.as_ptr() as usize == at && b.len() == len));
                if !matches!(engine.with_buffer(&mut same), Some(Ok(1))) {
                    // An engine bug: the payload is not where it was begun.
                    engine.framing_error(
                        TerminateCode::MPA_LOCAL_CATASTROPHIC,
                        "a lone Send was begun into another buffer than it was read into".into(),
                    );
                    return Err(self.die());
                }
                self.placed += len as u64;
                engine.finish(true);
                Ok(())
            }
            Some(_) => {
                engine.framing_error(
                    TerminateCode::MPA_LOCAL_CATASTROPHIC,
                    "placement target does not match the lone Send read".into(),
                );
                Err(self.die())
            }
            None => {
                // Refused: the buffer gets its own octets back, and the
                // refusal is reported now (the FPDU's CRC passed). The RDMAP
                // placer holds a header refusal until `settle`, so the buffer
                // is still there; an engine that ended the stream at once would
                // flush it with the peer's octets in it (undefined, as after a
                // failed CRC).
                give_back(engine, at, &self.lone.saved[..k]);
                if engine.refusal_held() {
                    engine.settle(true);
                }
                Err(self.die())
            }
        }
    }
}

/// Octet `i` of what a lone read put after the head: the buffer's first
/// `k` octets, then `tail`.
fn read_octet(buf: &[u8], tail: &[u8], k: usize, i: usize) -> u8 {
    if i < k { buf[i] } else { tail[i - k] }
}

/// The buffer at `at` (still the next Send's: a refusal is held) gets its
/// own octets back.
fn give_back(engine: &mut impl Placer, at: usize, saved: &[u8]) {
    let mut back = |_: u32, b: &mut [u8]| {
        if let Some(d) = b
            .get_mut(..saved.len())
            .filter(|d| d.as_ptr() as usize == at)
        {
            d.copy_from_slice(saved);
        }
        Ok(saved.len())
    };
    let _ = engine.with_next_send_buffer(&mut back);
}

impl FpduReceiver {
    /// A longer Send than foreseen (`Found::Part`): its head and the first
    /// `n - HEAD_MAX` octets of its payload were read, the payload straight
    /// into the buffer at `at`. Begin it as header first would (every check
    /// of the engine), make sure it is placed where it was read, and go on
    /// header first from there; its CRC is checked at its end as any FPDU's.
    /// A refused header gives the buffer its octets back (`saved`) and the
    /// rest is read and dropped, as header first does.
    #[allow(clippy::too_many_arguments)]
    fn lone_part(
        &mut self,
        engine: &mut impl Placer,
        head: &[u8; HEAD_MAX],
        n: usize,
        at: usize,
        len: usize,
        digest: Crc32c,
        saved: &[u8],
    ) -> Result<(), Halt> {
        // Not the Send foreseen, but no miss: nothing was copied.
        self.lone.run = 0;
        self.input.alone = false;
        // Where `read_head` leaves a header read in full.
        self.len_off = self.off;
        self.in_fpdu = true;
        self.head = *head;
        self.have = HEAD_MAX;
        self.head_want = HEAD_MAX;
        self.ulpdu_len = UNTAGGED_HDR_LEN + len;
        self.advance(HEAD_MAX);
        if let Err(h) = self.start_payload(engine) {
            give_back(engine, at, saved);
            return Err(h);
        }
        let placed = match &self.sink {
            Sink::Engine(Target::Buffer { len: l }) if *l == len => {
                let mut same =
                    |b: &mut [u8]| Ok(usize::from(b.as_ptr() as usize == at && b.len() == len));
                if !matches!(engine.with_buffer(&mut same), Some(Ok(1))) {
                    engine.framing_error(
                        TerminateCode::MPA_LOCAL_CATASTROPHIC,
                        "a longer lone Send was begun into another buffer than it was read into"
                            .into(),
                    );
                    return Err(self.die());
                }
                true
            }
            Sink::Discard { refused: true, .. } => {
                give_back(engine, at, saved);
                false
            }
            _ => {
                engine.framing_error(
                    TerminateCode::MPA_LOCAL_CATASTROPHIC,
                    "placement target does not match the lone Send read".into(),
                );
                return Err(self.die());
            }
        };
        let done = n - HEAD_MAX;
        self.digest = digest;
        self.done = done;
        self.advance(done);
        if placed {
            self.placing += done as u64;
        }
        if done == self.payload_len {
            self.st = self.after_payload_state();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_stops_trying_after_its_last_allowed_miss() {
        let mut l = Lone::default();
        l.seen(Some(64));
        assert!(!l.ready(), "after one lone Send");
        l.seen(Some(64));
        assert!(l.ready(), "after two");
        for i in 1..=LONE_MISSES_MAX {
            l.missed();
            assert!(!l.ready(), "right after miss {i}");
            for _ in 0..(LONE_RUN << i) {
                l.seen(Some(64));
            }
            assert_eq!(l.ready(), i < LONE_MISSES_MAX, "after miss {i} and its run");
        }
        for _ in 0..100_000 {
            l.seen(Some(64));
        }
        assert!(!l.ready(), "tried again after {LONE_MISSES_MAX} misses");
    }
}
