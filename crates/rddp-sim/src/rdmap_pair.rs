//! Two RDMAP hosts joined by a simulated LLP on a virtual clock: over MPA
//! framing (RFC 5044) on a re-chunked byte stream, or whole segments that
//! overtake each other (SCTP-like).

use crate::byte_link::ByteLink;
use crate::pair::{Chunking, SimError};
use crate::rdmap_endpoint::RdmapEndpoint;
use crate::segment_link::SegmentLink;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rddp_mpa::fpdu::{FpduLayout, FpduReceiver, Piece, Progress, RdmapPlacer, RxConfig};
use rddp_mpa::fpdu::{layout_fpdu_into, summary};
use rddp_proto::ddp::DdpConfig;
use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_proto::rdmap::{RdmapConfig, RdmapStream};
use rddp_wire::ddp::UNTAGGED_HDR_LEN;
use rddp_wire::mpa::MAX_ULPDU;
use rddp_wire::{FpduEncoder, mulpdu};
use std::io::Read;

/// Which of the product's FPDU readers takes the octets off the link (the
/// entry points of `rddp_mpa::fpdu::FpduReceiver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// `drive`: every FPDU header first, its payload straight into place.
    HeaderFirst,
    /// `drive_buffered` with a 16 KiB buffer (the product's queue pair
    /// task): runs of small FPDUs in batches.
    Buffered,
    /// `drive_buffered` told that a short read means an empty socket
    /// (`set_stream_source`, the product's busy-polling thread).
    BufferedStream,
}

/// MPA in FPDU mode (RFC 5044 §4-6) as negotiated: both directions alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpaLlp {
    /// CRCs are sent and checked (RFC 5044 §4.4).
    pub crc: bool,
    /// Markers are sent and expected (RFC 5044 §4.3).
    pub markers: bool,
    /// The senders' EMSS: each side's MULPDU follows from it as the
    /// product's follows from TCP's (`rddp_wire::mulpdu`, RFC 5044 §4).
    pub emss: usize,
    /// How the byte stream is cut into the chunks the receiver reads.
    pub chunking: Chunking,
    /// The receiving side's reader.
    pub reader: Reader,
}

/// The simulated LLP between the two hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Llp {
    /// MPA FPDUs over a byte stream, in order, re-chunked.
    Mpa(MpaLlp),
    /// Whole DDP segments, one a message, that may overtake each other: of
    /// the segments due, one of the oldest `window` is handed up next (RFC
    /// 5043: SCTP carries each DDP segment whole; with unordered delivery
    /// they arrive in any order). Handed to RDMAP's whole-segment entry point
    /// (`RdmapStream::on_segment`).
    Segments {
        /// How many of the oldest due segments may be handed up next.
        window: usize,
        /// Both senders' MULPDU.
        mulpdu: usize,
    },
}

/// What an [`RdmapPair`] is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairConfig {
    /// The LLP.
    pub llp: Llp,
    /// Both streams' IRD (Read Requests served at once).
    pub ird: u32,
    /// Both streams' ORD (our Reads outstanding at once).
    pub ord: u32,
    /// Ticks from A sending to B receiving.
    pub delay_ab: u64,
    /// Ticks from B sending to A receiving.
    pub delay_ba: u64,
}

impl PairConfig {
    /// MPA with `crc` and `markers`, EMSS 1460, chunks of 1..=100 octets at
    /// random, header-first reader, IRD = ORD = 16, no delay.
    pub fn mpa(crc: bool, markers: bool) -> Self {
        Self {
            llp: Llp::Mpa(MpaLlp {
                crc,
                markers,
                emss: 1460,
                chunking: Chunking::Random { max: 100 },
                reader: Reader::HeaderFirst,
            }),
            ird: 16,
            ord: 16,
            delay_ab: 0,
            delay_ba: 0,
        }
    }

    /// Whole segments of at most `mulpdu` octets delivered in random order
    /// within `window`, IRD = ORD = 16, no delay.
    pub fn segments(window: usize, mulpdu: usize) -> Self {
        Self {
            llp: Llp::Segments { window, mulpdu },
            ird: 16,
            ord: 16,
            delay_ab: 0,
            delay_ba: 0,
        }
    }
}

/// A direction of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From A to B.
    AtoB,
    /// From B to A.
    BtoA,
}

/// Per direction: the sender's framing, the link, the receiver's reader.
#[derive(Debug)]
enum Wire {
    Mpa {
        /// The sender's FPDU encoder (its stream offset places the Markers).
        enc: FpduEncoder,
        /// Reused layout of the FPDU being framed.
        layout: FpduLayout,
        link: ByteLink,
        /// The receiver: the product's FPDU reader (boxed: it is most of
        /// the variant's size).
        rx: Box<FpduReceiver>,
        /// The receiver stopped placing (a fatal error): what still arrives
        /// is read and dropped, as the product's queue pair task does.
        dead: bool,
    },
    Segments(SegmentLink),
}

#[derive(Debug)]
struct Way {
    wire: Wire,
    /// The sender closed its side of the LLP.
    closed: bool,
}

/// Two RDMAP hosts, A and B, and a simulated LLP each way, on a virtual
/// clock. Deterministic: every chunking and reordering choice comes from
/// the seed, and nothing reads the system clock or sleeps.
///
/// Each host's [`RdmapStream`] is the product's engine, set up as the
/// product's queue pair sets it up (completions when the LLP took the last
/// segment; over MPA a Read Response holds its IRD slot until written). Over
/// [`Llp::Mpa`] what an engine emits is framed into FPDUs by the product's
/// layout (`rddp_mpa::fpdu::layout_fpdu_into`: ULPDU_Length, PAD, CRC and
/// Markers as configured) and read on the other side by the product's
/// `FpduReceiver` with `RdmapPlacer`, chunk by chunk as the link cuts them.
/// Connection setup (RFC 5044 §7) is not simulated: both sides are in FPDU
/// mode from the start, and neither waits for the other's first FPDU.
///
/// # Time
///
/// The clock counts ticks from 0 ([`Self::now`]). Whatever a host sends at
/// tick `t` arrives at `t` plus its link's delay ([`PairConfig::delay_ab`],
/// [`Self::set_delay`]); a byte stream stays in order whatever the delay.
/// Everything due at the current tick happens in one [`Self::step`]: both
/// hosts send what their engines have, arrivals are read, answers go out,
/// until nothing more happens at that tick; then the clock moves to the
/// next tick at which something arrives.
///
/// # Use
///
/// 1. [`Self::new`]; register regions in [`Self::a_mut`]`.mem` /
///    [`Self::b_mut`]`.mem`, post receives.
/// 2. Post work on either host ([`RdmapEndpoint::post`] and friends).
/// 3. Drive: [`Self::run_until_idle`] (until nothing is on the way), or
///    [`Self::run_until`] a tick, or one [`Self::step`] at a time. Between
///    steps a test may change octets on the way ([`Self::tamper`]) or a
///    link's delay.
/// 4. Observe per host: [`RdmapEndpoint::completions`],
///    [`RdmapEndpoint::events`] (Terminates), [`RdmapEndpoint::segments_sent`],
///    region contents. Post more and drive again at will.
#[derive(Debug)]
pub struct RdmapPair {
    a: RdmapEndpoint,
    b: RdmapEndpoint,
    ab: Way,
    ba: Way,
    cfg: PairConfig,
    now: u64,
    rng: ChaCha8Rng,
    /// The buffered reader's buffer (the product's thread buffer, 16 KiB).
    buf: Vec<u8>,
}

/// The buffered reader's buffer: the product's queue pair task uses 16 KiB.
const READ_AHEAD: usize = 16 * 1024;

/// Rounds of sending and receiving within one tick before the pair gives up
/// (each round moves octets; engines never answer without end).
const MAX_ROUNDS: usize = 1 << 20;

impl RdmapPair {
    /// Hosts A (stream 1) and B (stream 2), both in PD 1, with memory tables
    /// and every random choice drawn from `seed`. Refused (as the engine
    /// refuses it) if the MULPDU leaves no room for a DDP header.
    pub fn new(cfg: PairConfig, seed: u64) -> Result<Self, SimError> {
        let mulpdu = match cfg.llp {
            Llp::Mpa(m) => mulpdu(m.emss, m.markers),
            Llp::Segments { mulpdu, .. } => mulpdu,
        };
        let rcfg = RdmapConfig {
            ddp: DdpConfig {
                mulpdu,
                ..DdpConfig::default()
            },
            ird: cfg.ird,
            ord: cfg.ord,
        };
        let host = |stream: u32, seed: u64| -> Result<RdmapEndpoint, SimError> {
            let mut rdmap = RdmapStream::new(StreamId(stream), PdId(1), rcfg)
                .map_err(|e| SimError::Config(e.to_string()))?;
            // As the product's queue pair (its builder's `attach`).
            if matches!(cfg.llp, Llp::Mpa(_)) {
                rdmap.hold_ird_until_sent();
            }
            rdmap.complete_when_sent();
            Ok(RdmapEndpoint::new(MemoryTable::with_seed(seed), rdmap))
        };
        let way = |delay: u64| Way {
            wire: match cfg.llp {
                Llp::Mpa(m) => Wire::Mpa {
                    enc: FpduEncoder::new(m.crc, m.markers),
                    layout: FpduLayout::default(),
                    link: ByteLink::new(delay),
                    rx: {
                        let mut rx = FpduReceiver::new(
                            RxConfig {
                                crc: m.crc,
                                markers: m.markers,
                                // As the product: what ULPDU_Length can say.
                                max_ulpdu: MAX_ULPDU,
                                expect_rtr: None,
                            },
                            Vec::new(),
                        );
                        rx.set_stream_source(m.reader == Reader::BufferedStream);
                        Box::new(rx)
                    },
                    dead: false,
                },
                Llp::Segments { window, .. } => Wire::Segments(SegmentLink::new(delay, window)),
            },
            closed: false,
        };
        Ok(Self {
            a: host(1, seed)?,
            b: host(2, seed.wrapping_add(1))?,
            ab: way(cfg.delay_ab),
            ba: way(cfg.delay_ba),
            cfg,
            now: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            buf: vec![0; READ_AHEAD],
        })
    }

    /// Host A.
    pub fn a(&self) -> &RdmapEndpoint {
        &self.a
    }

    /// Host B.
    pub fn b(&self) -> &RdmapEndpoint {
        &self.b
    }

    /// Host A, to post work or register memory.
    pub fn a_mut(&mut self) -> &mut RdmapEndpoint {
        &mut self.a
    }

    /// Host B, to post work or register memory.
    pub fn b_mut(&mut self) -> &mut RdmapEndpoint {
        &mut self.b
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &PairConfig {
        &self.cfg
    }

    /// The current tick.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// From now on, what is sent `dir` arrives `ticks` later (what is on the
    /// way keeps its time; a byte stream stays in order).
    pub fn set_delay(&mut self, dir: Dir, ticks: u64) {
        match &mut self.way_mut(dir).wire {
            Wire::Mpa { link, .. } => link.delay = ticks,
            Wire::Segments(link) => link.delay = ticks,
        }
    }

    /// Change the octets on the way `dir` (sent, not yet arrived): `f` sees
    /// them in sending order as one buffer and may change any octet, not the
    /// length (a damaged wire, e.g. one octet flipped).
    pub fn tamper(&mut self, dir: Dir, f: impl FnOnce(&mut [u8])) {
        match &mut self.way_mut(dir).wire {
            Wire::Mpa { link, .. } => link.tamper_in_flight(f),
            Wire::Segments(link) => link.tamper_in_flight(f),
        }
    }

    /// Whether anything is on the way in either direction.
    pub fn in_flight(&self) -> bool {
        self.next_arrival().is_some()
    }

    /// Do everything due at the current tick, then move the clock to the
    /// next tick at which something arrives. Returns whether anything is
    /// still on the way.
    pub fn step(&mut self) -> Result<bool, SimError> {
        self.settle()?;
        match self.next_arrival() {
            Some(t) => {
                self.now = self.now.max(t);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Step until nothing is on the way; returns the tick it ended at.
    pub fn run_until_idle(&mut self) -> Result<u64, SimError> {
        while self.step()? {}
        Ok(self.now)
    }

    /// Do everything due up to tick `t` (the clock ends at `t`, or where it
    /// was if later); what arrives after `t` stays on the way.
    pub fn run_until(&mut self, t: u64) -> Result<(), SimError> {
        loop {
            self.settle()?;
            match self.next_arrival() {
                Some(next) if next <= t => self.now = self.now.max(next),
                _ => break,
            }
        }
        if self.now < t {
            self.now = t;
            self.settle()?;
        }
        Ok(())
    }

    fn way_mut(&mut self, dir: Dir) -> &mut Way {
        match dir {
            Dir::AtoB => &mut self.ab,
            Dir::BtoA => &mut self.ba,
        }
    }

    fn next_arrival(&self) -> Option<u64> {
        let at = |w: &Way| match &w.wire {
            Wire::Mpa { link, .. } => link.next_arrival(),
            Wire::Segments(link) => link.next_arrival(),
        };
        match (at(&self.ab), at(&self.ba)) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    /// Send and receive at the current tick until nothing more happens.
    fn settle(&mut self) -> Result<(), SimError> {
        for _ in 0..MAX_ROUNDS {
            let mut moved = false;
            for dir in [Dir::AtoB, Dir::BtoA] {
                moved |= self.transmit(dir);
            }
            for dir in [Dir::AtoB, Dir::BtoA] {
                moved |= self.receive(dir)?;
            }
            self.a.collect();
            self.b.collect();
            if !moved {
                return Ok(());
            }
        }
        Err(SimError::NoProgress { tick: self.now })
    }

    /// The sender's engine output onto the link `dir`, framed; then its side
    /// closes if the engine says so. Returns whether anything was sent.
    fn transmit(&mut self, dir: Dir) -> bool {
        let now = self.now;
        let (from, way) = match dir {
            Dir::AtoB => (&mut self.a, &mut self.ab),
            Dir::BtoA => (&mut self.b, &mut self.ba),
        };
        if way.closed {
            return false;
        }
        let mut sent = false;
        let mut octets = Vec::new();
        while let Some(seg) = from.rdmap.poll_segment() {
            sent = true;
            from.sent.push(seg.to_vec());
            match &mut way.wire {
                Wire::Mpa { enc, layout, .. } => {
                    let mut hdr = [0u8; UNTAGGED_HDR_LEN];
                    // The header fits (at most UNTAGGED_HDR_LEN octets).
                    let n = seg.header.emit(&mut hdr).unwrap_or(0);
                    seg.payload.with(|p| {
                        layout_fpdu_into(enc, &hdr[..n], p, layout);
                        for piece in &layout.pieces {
                            match piece {
                                Piece::Own(b) => octets.extend_from_slice(b),
                                Piece::Payload(r) => octets.extend_from_slice(&p[r.clone()]),
                            }
                        }
                    });
                }
                Wire::Segments(link) => link.send(now, seg.to_vec()),
            }
            // The LLP took it whole at once (as the product's writer reports).
            let s = summary(&seg);
            if s.read_response {
                from.rdmap.read_response_sent();
            }
            from.rdmap.segment_sent(s.last);
        }
        if let Wire::Mpa { link, .. } = &mut way.wire {
            let chunking = match self.cfg.llp {
                Llp::Mpa(m) => m.chunking,
                Llp::Segments { .. } => Chunking::Whole,
            };
            link.send(now, &octets, chunking, &mut self.rng);
        }
        // Our Terminate has left, or the peer's arrived; or a graceful close
        // whose work is all done (RFC 5040 §6).
        if from.rdmap.should_close() || from.rdmap.poll_close() {
            way.closed = true;
            match &mut way.wire {
                Wire::Mpa { link, .. } => link.close(now),
                Wire::Segments(link) => link.close(now),
            }
        }
        sent
    }

    /// What arrived on the link `dir` by now, read by the receiving host.
    /// Returns whether anything arrived.
    fn receive(&mut self, dir: Dir) -> Result<bool, SimError> {
        let now = self.now;
        let reader = match self.cfg.llp {
            Llp::Mpa(m) => m.reader,
            Llp::Segments { .. } => Reader::HeaderFirst,
        };
        let (to, way) = match dir {
            Dir::AtoB => (&mut self.b, &mut self.ab),
            Dir::BtoA => (&mut self.a, &mut self.ba),
        };
        let mut arrived = false;
        match &mut way.wire {
            Wire::Mpa { link, rx, dead, .. } => {
                // Chunk by chunk: the reader sees the stream cut as the link
                // cut it, and resumes at any octet.
                while link.arrive_one(now) {
                    arrived = true;
                    if read_fpdus(link, rx, dead, to, reader, &mut self.buf)? {
                        to.rdmap.on_llp_closed(true);
                        to.llp_closed = true;
                    }
                }
            }
            Wire::Segments(link) => {
                while let Some((seq, seg)) = link.arrive_one(now, &mut self.rng) {
                    arrived = true;
                    if !to.rdmap.is_terminated() {
                        // Refusals are the engine's: a Terminate, events.
                        let _ = to.rdmap.on_segment(&to.mem, seq, &seg);
                    }
                }
                if link.arrive_fin(now) {
                    arrived = true;
                    to.rdmap.on_llp_closed(true);
                    to.llp_closed = true;
                }
            }
        }
        Ok(arrived)
    }
}

/// Read what has arrived on `link` with the product's reader into `to`'s
/// engine until the socket is empty. Returns true at end of stream (the
/// peer closed).
fn read_fpdus(
    link: &mut ByteLink,
    rx: &mut FpduReceiver,
    dead: &mut bool,
    to: &mut RdmapEndpoint,
    reader: Reader,
    buf: &mut Vec<u8>,
) -> Result<bool, SimError> {
    let mut sock = link.socket();
    while !*dead {
        let mut p = RdmapPlacer::new(&mut to.rdmap, &to.mem);
        let got = match reader {
            Reader::HeaderFirst => rx.drive(&mut sock, &mut p),
            Reader::Buffered | Reader::BufferedStream => rx.drive_buffered(&mut sock, &mut p, buf),
        };
        match got.map_err(|e| SimError::Llp(e.to_string()))? {
            Progress::WouldBlock => return Ok(false),
            Progress::Eof { .. } => return Ok(true),
            // No budget here: a pause of a live engine reads on.
            Progress::Paused if !to.rdmap.is_terminated() => {}
            // Nothing more is placed: read and drop until the peer closes.
            Progress::Paused | Progress::Stopped => *dead = true,
        }
    }
    let mut drop_buf = [0u8; 4096];
    loop {
        match sock.read(&mut drop_buf) {
            Ok(0) => return Ok(true),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(SimError::Llp(e.to_string())),
        }
    }
}
