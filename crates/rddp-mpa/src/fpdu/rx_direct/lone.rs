//! A lone small Send in one system call (the ping-pong row
//! of docs/benchmarks.md; docs/data-path.md, "Receive"), for
//! [`FpduReceiver::drive_buffered`].
//!
//! A batch (`fpdu/rx_direct/batch.rs`) costs a peek and a read; for an FPDU that arrives
//! alone, as in a ping-pong, that is two system calls where a plain TCP
//! receiver makes one. After Sends of one length came alone [`LONE_RUN`]
//! times in a row, the next FPDU is read with one read into the receiver's
//! own scratch: as many octets as such a Send's FPDU has, and the next FPDU's
//! head ([`SAFE_HEAD`] octets, never payload) behind it.
//!
//! A hit is a whole FPDU in scratch that is a one-segment Send from MO 0 (RFC
//! 5041 §4.4; RFC 5040 §4.2: Sends are QN 0) within the receive limit, with
//! at most the next FPDU's head read behind it, whose CRC is good (RFC 5044
//! §4.4). Only then is the engine asked to begin it, with every check of
//! header first (RFC 5041 §7.1, RDMAP's too); only a segment it accepts is
//! copied from scratch into the place it names (counted, as
//! [`FpduReceiver::copied_octets`]), and [`Placer::finish`] delivers it. A
//! refused one is settled as header first settles it (its CRC passed). No
//! octet reaches an application buffer before the segment's checks passed.
//!
//! A miss (another header, a longer Send, an FPDU cut off, a bad CRC) puts
//! every octet read back in stream order as read-ahead: the FPDU is then taken
//! header first, its payload copied from there (counted, as the setup's
//! leftover) and every error found as before. A miss doubles the run of lone
//! Sends needed before the next try, and after [`LONE_MISSES_MAX`] misses a
//! connection never tries again: its copies stay bounded, and a connection
//! whose lone FPDUs are not such Sends soon stops trying.
//!
//! What the engine sees is the same as without the one read.

use super::*;
use rddp_wire::ddp::DdpHeader;

/// Lone Sends of one length in a row before the next is read in one read.
const LONE_RUN: u32 = 2;
/// Misses after which a connection no longer tries (the last try needed a
/// run of `LONE_RUN << 11`, 4,096 Sends).
const LONE_MISSES_MAX: u32 = 12;

/// The lone Sends seen lately on one connection.
#[derive(Debug, Default)]
pub(super) struct Lone {
    /// Payload length of the last Send that came alone.
    len: usize,
    /// Sends of `len` octets that came alone in a row.
    run: u32,
    /// Misses so far: each doubles the run needed before the next try.
    misses: u32,
    /// What the one read reads into (kept: no allocation a read).
    scratch: Vec<u8>,
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

/// The payload length of the one-segment Send from MO 0 that `head` opens
/// (RFC 5041 §4.4; RFC 5040 §4.2: Sends are QN 0), if it is one.
fn send_len(head: &[u8]) -> Option<usize> {
    let len = usize::from(u16::from_be_bytes([head[0], head[1]]));
    match DdpHeader::parse(&head[MPA_HDR_LEN..HEAD_MAX]) {
        Ok(DdpHeader::Untagged(h))
            if h.ctrl.last() && h.qn == rddp_wire::rdmap::qn::SEND && h.mo == 0 =>
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

    /// The Send whole in `read` (see the module docs): its payload length.
    fn lone_hit(&self, read: &[u8]) -> Option<usize> {
        let n = read.len();
        if n < HEAD_MAX {
            return None;
        }
        check::ulpdu_len([read[0], read[1]], self.cfg.max_ulpdu).ok()?;
        let len = send_len(read).filter(|&l| l >= 1)?;
        let w = whole(len);
        if n < w || n - w > SAFE_HEAD {
            return None;
        }
        if self.cfg.crc {
            let mut d = Crc32c::new();
            d.update(&read[..w - MPA_CRC_LEN]);
            let c = &read[w - MPA_CRC_LEN..w];
            check::crc(true, [c[0], c[1], c[2], c[3]], d.finalize()).ok()?;
        }
        Some(len)
    }

    /// One read of the foreseen Send into scratch (see the module docs).
    pub(super) fn lone(
        &mut self,
        src: &mut (impl Read + Peek),
        engine: &mut impl Placer,
    ) -> Result<(), Halt> {
        self.may_read(engine)?;
        let p = self.lone.len;
        let want = whole(p) + SAFE_HEAD;
        let mut scratch = std::mem::take(&mut self.lone.scratch);
        if scratch.len() < want {
            scratch.resize(want, 0);
        }
        let got = read_src(src, &mut scratch[..want]);
        let res = match got {
            Ok(n) => self.lone_took(engine, &scratch[..n], want),
            Err(h) => Err(h),
        };
        self.lone.scratch = scratch;
        res
    }

    /// The one read brought `read` (of `want` octets asked).
    fn lone_took(
        &mut self,
        engine: &mut impl Placer,
        read: &[u8],
        want: usize,
    ) -> Result<(), Halt> {
        let n = read.len();
        self.input.drained = self.input.stream && n < want;
        let Some(len) = self.lone_hit(read) else {
            self.input.left = read.to_vec();
            self.input.left_at = 0;
            self.lone.missed();
            return Ok(());
        };
        if n >= want {
            // More follows: a stream, where batches do better.
            self.lone.run = 0;
        } else if len == self.lone.len {
            self.lone.run = self.lone.run.saturating_add(1);
        }
        let whole = whole(len);
        self.advance(whole);
        let extra = n - whole;
        self.input.ahead[..extra].copy_from_slice(&read[whole..]);
        (self.input.lo, self.input.hi) = (0, extra);
        self.input.streak = self.input.streak.saturating_add(1);
        self.input.alone = false;
        let seq = self.seq;
        self.seq += 1;
        let payload = &read[HEAD_MAX..HEAD_MAX + len];
        match engine.begin(seq, &read[MPA_HDR_LEN..HEAD_MAX], len, Begin::Alone) {
            Ok(t) => {
                if !place_copy(engine, t, payload) {
                    engine.framing_error(
                        TerminateCode::MPA_LOCAL_CATASTROPHIC,
                        "placement target does not match the lone Send read".into(),
                    );
                    return Err(self.die());
                }
                self.input.copied += len as u64;
                engine.finish(true);
                Ok(())
            }
            Err(r) => {
                if r == Refused::Held {
                    // Reported now: the FPDU's CRC passed.
                    engine.finish(true);
                }
                Err(self.die())
            }
        }
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
