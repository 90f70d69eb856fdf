//! Two endpoints and the simulated links between them.

use crate::deframe::{Deframer, FrameError, frame};
use crate::endpoint::Endpoint;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rddp_proto::ddp::{DdpConfig, StreamError};
use rddp_proto::mem::{PdId, StreamId};

/// How the byte-stream link cuts its bytes into the chunks the receiver reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunking {
    /// Everything sent in one pump arrives as one chunk.
    Whole,
    /// Chunks of exactly this many octets (the last may be shorter).
    Fixed(usize),
    /// Chunks of 1..=max octets, drawn at random.
    Random {
        /// The largest chunk.
        max: usize,
    },
    /// One split exactly at this offset of the pump's bytes (for "every offset").
    SplitAt(usize),
}

/// The kind of simulated LLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    /// In-order byte stream, re-chunked.
    Stream(Chunking),
    /// Whole segments, delivered in random order: each step hands up one of the
    /// oldest `window` segments in flight.
    Reorder {
        /// How many of the oldest segments in flight may be handed up next.
        window: usize,
    },
}

/// Something the harness could not carry (not a DDP error: those are events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    /// The simulated byte stream could not be deframed.
    Frame(FrameError),
    /// The engine refused the pair's settings (e.g. a MULPDU with no room
    /// for a DDP header).
    Config(String),
    /// The product's reader reported an I/O error from the simulated socket
    /// (which never fails: a harness bug).
    Llp(String),
    /// Within one tick the hosts kept sending without end.
    NoProgress {
        /// The tick.
        tick: u64,
    },
}

struct Link {
    deframer: Deframer,
    /// Reorder mode: segments in flight with their sender order.
    in_flight: Vec<(u64, Vec<u8>)>,
    /// Stream mode: receive-side count of segments, i.e. their sender order.
    rx_seq: u64,
}

/// Two endpoints, A and B, and a link each way.
pub struct Pair {
    /// Host A.
    pub a: Endpoint,
    /// Host B.
    pub b: Endpoint,
    mode: LinkMode,
    rng: ChaCha8Rng,
    ab: Link,
    ba: Link,
}

impl Pair {
    /// Both endpoints in PD 1, streams 1 (A) and 2 (B), with `cfg`.
    pub fn new(seed: u64, mode: LinkMode, cfg: DdpConfig) -> Self {
        let link = || Link {
            deframer: Deframer::new(cfg.mulpdu.max(1 << 16)),
            in_flight: Vec::new(),
            rx_seq: 0,
        };
        Self {
            a: Endpoint::new(seed, StreamId(1), PdId(1), cfg),
            b: Endpoint::new(seed.wrapping_add(1), StreamId(2), PdId(1), cfg),
            mode,
            rng: ChaCha8Rng::seed_from_u64(seed),
            ab: link(),
            ba: link(),
        }
    }

    /// Move every pending segment both ways until nothing is left in flight.
    pub fn run(&mut self) -> Result<(), SimError> {
        loop {
            let moved = self.pump(true)? | self.pump(false)?;
            if !moved {
                return Ok(());
            }
        }
    }

    /// Move what A (if `a_to_b`) or B has to send; returns whether anything moved.
    pub fn pump(&mut self, a_to_b: bool) -> Result<bool, SimError> {
        let (from, to, link) = if a_to_b {
            (&mut self.a, &mut self.b, &mut self.ab)
        } else {
            (&mut self.b, &mut self.a, &mut self.ba)
        };
        let mut moved = false;
        match self.mode {
            LinkMode::Stream(chunking) => {
                let mut bytes = Vec::new();
                while let Some(seg) = from.stream.poll_segment() {
                    frame(&seg.to_vec(), &mut bytes);
                    from.tx_seq += 1;
                }
                moved = !bytes.is_empty();
                for chunk in cut(&bytes, chunking, &mut self.rng) {
                    let Link {
                        deframer, rx_seq, ..
                    } = link;
                    deframer
                        .feed(chunk, |seg| {
                            deliver(to, *rx_seq, seg);
                            *rx_seq += 1;
                        })
                        .map_err(SimError::Frame)?;
                }
            }
            LinkMode::Reorder { window } => {
                while let Some(seg) = from.stream.poll_segment() {
                    link.in_flight.push((from.tx_seq, seg.to_vec()));
                    from.tx_seq += 1;
                }
                while !link.in_flight.is_empty() {
                    let w = window.clamp(1, link.in_flight.len());
                    let i = self.rng.next_u32() as usize % w;
                    let (seq, seg) = link.in_flight.remove(i);
                    deliver(to, seq, &seg);
                    moved = true;
                }
            }
        }
        to.collect();
        from.collect();
        Ok(moved)
    }
}

/// Hand one segment to the receiving stream. Refusals are recorded as stream
/// events by the stream itself; later segments of an erroneous stream are refused
/// unplaced, as on a real LLP until the ULP tears the stream down.
fn deliver(to: &mut Endpoint, seq: u64, seg: &[u8]) {
    // The outcome is in the stream's state and events; the test reads them there.
    let _: Result<(), StreamError> = to.stream.on_segment(&to.mem, seq, seg);
}

pub(crate) fn cut<'a>(bytes: &'a [u8], chunking: Chunking, rng: &mut ChaCha8Rng) -> Vec<&'a [u8]> {
    match chunking {
        Chunking::Whole => vec![bytes],
        Chunking::Fixed(n) => bytes.chunks(n.max(1)).collect(),
        Chunking::SplitAt(at) => {
            let (x, y) = bytes.split_at(at.min(bytes.len()));
            vec![x, y]
        }
        Chunking::Random { max } => {
            let mut out = Vec::new();
            let mut rest = bytes;
            while !rest.is_empty() {
                let n = 1 + rng.next_u32() as usize % max.max(1);
                let (x, y) = rest.split_at(n.min(rest.len()));
                out.push(x);
                rest = y;
            }
            out
        }
    }
}
