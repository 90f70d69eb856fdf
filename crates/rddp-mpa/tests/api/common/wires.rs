//! Wires of small Sends and Writes, and what a receiver makes of them: shared
//! by the tests that compare ways of receiving (`rx_batch_diff.rs`,
//! `fpdu/rx_direct/lone.rs`).

use super::source::Source;
use bytes::Bytes;
use rddp_mpa::fpdu::{FpduReceiver, Progress, RdmapPlacer, RxConfig};
use rddp_proto::ddp::{BufferOrdering, BufferPool, DdpConfig, PoolConfig, PoolStats, RecvBuffer};
use rddp_proto::mem::{Access, MemoryTable, PdId, Stag, StagScope, StreamId};
use rddp_proto::rdmap::{RdmapConfig, RdmapStream, WorkRequest};
use rddp_wire::FpduEncoder;
use rddp_wire::rdmap::qn;

pub(crate) const BASE: [u64; 2] = [0x10_0000, 0x20_0000];
pub(crate) const REGION: usize = 4096;
pub(crate) const RECV: usize = 64;
pub(crate) const RECVS: usize = 200;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    Send(usize),
    /// Region 0 or 1, offset, length.
    Write(usize, usize, usize),
    /// A Write to an STag nobody registered.
    WriteBadStag,
}

pub(crate) fn stream(id: u32) -> RdmapStream {
    stream_mulpdu(id, 16_000)
}

/// An RDMAP stream (PD 1) whose DDP segments carry at most `mulpdu` octets.
pub(crate) fn stream_mulpdu(id: u32, mulpdu: usize) -> RdmapStream {
    let cfg = RdmapConfig {
        ddp: DdpConfig {
            mulpdu,
            ..DdpConfig::default()
        },
        ..RdmapConfig::default()
    };
    RdmapStream::new(StreamId(id), PdId(1), cfg).unwrap()
}

/// The receiver's memory: two regions (the same STags every time).
pub(crate) fn memory() -> (MemoryTable, [Stag; 2]) {
    let mem = MemoryTable::with_seed(7);
    let reg = |b| {
        mem.register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            b,
            vec![0; REGION],
        )
        .unwrap()
    };
    let stags = [reg(BASE[0]), reg(BASE[1])];
    (mem, stags)
}

/// The sender's FPDUs for `ops`, each apart (CRC on, no Markers).
pub(crate) fn fpdus(ops: &[Op]) -> Vec<Vec<u8>> {
    let (_, stags) = memory();
    let tx_mem = MemoryTable::with_seed(99);
    let mut tx = stream(2);
    for (i, op) in ops.iter().enumerate() {
        let data = |n: usize| -> Bytes { (0..n).map(|k| (i * 31 + k) as u8).collect() };
        let wr = match *op {
            Op::Send(n) => WorkRequest::Send {
                wr_id: i as u64,
                payload: data(n).into(),
                solicited: false,
                invalidate: None,
                fence: false,
            },
            Op::Write(r, off, n) => WorkRequest::Write {
                wr_id: i as u64,
                payload: data(n).into(),
                remote_stag: stags[r].0,
                remote_to: BASE[r] + off as u64,
                fence: false,
            },
            Op::WriteBadStag => WorkRequest::Write {
                wr_id: i as u64,
                payload: data(32).into(),
                remote_stag: stags[0].0 ^ 0x0100,
                remote_to: BASE[0],
                fence: false,
            },
        };
        tx.post(&tx_mem, wr);
    }
    let mut enc = FpduEncoder::new(true, false);
    let mut out = Vec::new();
    while let Some(seg) = tx.poll_segment() {
        let mut w = Vec::new();
        enc.encode(&seg.to_vec(), &mut w).unwrap();
        out.push(w);
    }
    out
}

/// Everything a receiver made of `wire`.
#[derive(Debug, PartialEq)]
pub(crate) struct Outcome {
    pub completions: Vec<String>,
    pub regions: [Vec<u8>; 2],
    pub sent: Vec<Vec<u8>>,
    pub progress: Progress,
    /// The shared pool's events and counters (receive buffers from a pool).
    pub pool_events: Vec<String>,
    pub pool_stats: Option<PoolStats>,
}

/// Where Sends land: posted receive buffers, or a shared pool (SRQ) with this
/// soft limit.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Recvs {
    Posted,
    Pool {
        soft_limit: usize,
        buffers: usize,
        sequential: bool,
    },
}

/// How a receiver takes a wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Way {
    /// Every FPDU alone, header first (`drive`).
    Alone,
    /// `drive_buffered`: batches of small FPDUs, lone Sends in one read.
    Buffered,
}

/// What the receiver made of `wire` taken in one go (see [`receive_units`]);
/// the peeks it made and the payload octets it copied.
pub(crate) fn receive(wire: &[u8], way: Way, recvs: Recvs, cut: usize) -> (Outcome, usize, u64) {
    let (o, src, copied) = receive_units(&[wire], way, recvs, cut, false);
    (o, src.peeks, copied)
}

/// What the receiver made of the wire that arrives in `units`: each unit is
/// added to the source and the receiver driven until the source would block,
/// as a socket whose peer sends them one by one (each alone, as in a
/// ping-pong). Reads take at most `cut` octets; `stream`: the receiver may
/// take a short read as an empty source (`set_stream_source`, as a
/// busy-polling thread does; only where `cut` never shortens a read).
/// Returns the outcome, the source (its reads and peeks counted) and the
/// payload octets copied in user space.
pub(crate) fn receive_units(
    units: &[&[u8]],
    way: Way,
    recvs: Recvs,
    cut: usize,
    stream_source: bool,
) -> (Outcome, Source, u64) {
    let (mem, stags) = memory();
    let mut s = stream(1);
    let pool = match recvs {
        Recvs::Posted => {
            for i in 0..RECVS {
                s.post_recv(i as u64, vec![0; RECV]).unwrap();
            }
            None
        }
        Recvs::Pool {
            soft_limit,
            buffers,
            sequential,
        } => {
            let ordering = if sequential {
                BufferOrdering::Sequential
            } else {
                BufferOrdering::Arrival
            };
            let pool = BufferPool::new(PoolConfig::shared(ordering, RECVS, soft_limit));
            for i in 0..buffers {
                pool.post(RecvBuffer {
                    id: i as u64,
                    data: vec![0; RECV],
                })
                .unwrap();
            }
            s.ddp_mut().set_recv_pool(qn::SEND, &pool).unwrap();
            Some(pool)
        }
    };
    let mut rx = FpduReceiver::new(
        RxConfig {
            crc: true,
            markers: false,
            max_ulpdu: 16_100,
            expect_rtr: None,
        },
        Vec::new(),
    );
    rx.set_stream_source(stream_source);
    let mut src = Source::new(Vec::new(), cut);
    let mut buf = vec![0u8; 4096];
    let mut progress = Progress::WouldBlock;
    for u in units {
        src.data.extend_from_slice(u);
        let mut p = RdmapPlacer::new(&mut s, &mem);
        progress = match way {
            Way::Buffered => rx.drive_buffered(&mut src, &mut p, &mut buf).unwrap(),
            Way::Alone => rx.drive(&mut src, &mut p).unwrap(),
        };
        if progress == Progress::Stopped {
            break;
        }
    }
    let completions = std::iter::from_fn(|| s.poll_completion())
        .map(|c| format!("{c:?}"))
        .collect();
    let sent = std::iter::from_fn(|| s.poll_segment())
        .map(|g| g.to_vec())
        .collect();
    assert!(mem.all_guards_intact());
    let region = |i: usize| mem.region(stags[i]).unwrap().data()[..].to_vec();
    let pool_events = pool
        .iter()
        .flat_map(|p| std::iter::from_fn(|| p.poll_event()))
        .map(|e| format!("{e:?}"))
        .collect();
    let pool_stats = pool.as_ref().map(|p| p.stats());
    // Payload octets copied in user space: the receiver's and the engine's.
    let copied = rx.copied_octets() + s.stats().rx_copied_octets;
    let o = Outcome {
        pool_stats,
        completions,
        regions: [region(0), region(1)],
        sent,
        progress,
        pool_events,
    };
    (o, src, copied)
}

/// Where Sends land, for the proptests: posted buffers, or (one time in
/// `1 + posted`) a shared pool with any soft limit, size and ordering.
pub(crate) fn any_recvs(posted: u32) -> impl proptest::strategy::Strategy<Value = Recvs> {
    use proptest::prelude::*;
    prop_oneof![
        posted => Just(Recvs::Posted),
        1 => (0..4usize, 0..80usize, any::<bool>()).prop_map(|(soft_limit, buffers, sequential)| {
            Recvs::Pool {
                soft_limit,
                buffers,
                sequential,
            }
        }),
    ]
}

/// A proptest's damage to a wire of FPDUs: an octet of one flipped, one
/// FPDU sent twice.
pub(crate) fn damage(
    f: &mut Vec<Vec<u8>>,
    flip: Option<(proptest::sample::Index, proptest::sample::Index)>,
    twice: Option<proptest::sample::Index>,
) {
    if let Some((i, k)) = flip {
        let i = i.index(f.len());
        let k = k.index(f[i].len());
        f[i][k] ^= 0x10;
    }
    if let Some(i) = twice {
        let i = i.index(f.len());
        f.insert(i, f[i].clone());
    }
}
