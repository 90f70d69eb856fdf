//! Target `mpa_rx`: the receive path a verbs queue pair runs over MPA
//! (`FpduReceiver` with `RdmapPlacer` over an `RdmapStream`, as
//! `rddp::qp::task` drives it), fed FPDUs built from near-valid RDMAP
//! segments (Writes, Sends, Read Requests and Responses into the fixture's
//! regions), some damaged (an octet flipped, raw octets between FPDUs), with
//! CRC and Markers each on or off and any receive limit, arriving in units of
//! the fuzzer's sizes as a socket delivers them.
//!
//! Differential oracle: every reader strategy gives the same completions
//! (buffers included), the same segments sent back (Read Responses,
//! Terminates), the same region octets and the same end as plain header
//! first (`drive`): batches of small FPDUs and the one-read guess for lone
//! Sends (`drive_buffered`), with a short read taken as an empty socket or
//! not. Also: no panic, guard octets intact, nothing but writable regions of
//! this stream changed (the fixture's check).

use crate::fixture::{PD, Regions, STREAM, segment};
use crate::input::Input;
use rddp_mpa::fpdu::{FpduReceiver, Peek, Progress, RdmapPlacer, RxConfig};
use rddp_proto::ddp::DdpConfig;
use rddp_proto::mem::MemoryTable;
use rddp_proto::rdmap::{RdmapConfig, RdmapStream};
use rddp_wire::FpduEncoder;
use std::io::{self, IoSliceMut, Read};

/// Octets of the input that set up the regions (the same for every run).
const SETUP: usize = 32;
/// Receive buffers posted, and their length.
const RECVS: u64 = 8;
const RECV_LEN: usize = 128;

/// How a run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// Every FPDU header first (`drive`): the reference.
    Alone,
    /// `drive_buffered`: batches and the one-read guess.
    Buffered,
    /// `drive_buffered` told that a short read means an empty socket (as a
    /// busy-polling thread).
    BufferedStream,
}

/// What a run made of the wire.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    completions: Vec<String>,
    sent: Vec<Vec<u8>>,
    regions: Vec<Vec<u8>>,
    end: Progress,
}

/// The wire as a socket: `avail` octets have arrived; reads and peeks see
/// those, a would-block once they are all read, end of stream once `closed`.
struct Socket<'a> {
    wire: &'a [u8],
    avail: usize,
    at: usize,
    closed: bool,
}

impl Read for Socket<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_vectored(&mut [IoSliceMut::new(buf)])
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        if self.at == self.avail {
            return if self.closed {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let mut got = 0;
        for b in bufs.iter_mut() {
            let k = b.len().min(self.avail - self.at);
            b[..k].copy_from_slice(&self.wire[self.at..self.at + k]);
            self.at += k;
            got += k;
        }
        Ok(got)
    }
}

impl Peek for Socket<'_> {
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at == self.avail {
            return if self.closed {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = buf.len().min(self.avail - self.at);
        buf[..n].copy_from_slice(&self.wire[self.at..self.at + n]);
        Ok(n)
    }
}

/// The receiver's settings, the wire and the arrival units, from `input`.
struct Case<'a> {
    setup: &'a [u8],
    cfg: RxConfig,
    wire: Vec<u8>,
    units: &'a [u8],
}

fn case<'a>(input: &mut Input<'a>) -> Case<'a> {
    let setup = input.bytes(SETUP);
    let flags = input.u8();
    let (crc, markers) = (flags & 1 != 0, flags & 2 != 0);
    let max_ulpdu = match flags >> 6 {
        0 => 16_384,
        1 => 1_024,
        _ => 14 + usize::from(input.u16() % 4_096),
    };
    // The segments are built against regions like the runs' (same setup).
    let regions = Regions::new(&MemoryTable::with_seed(1), &mut Input::new(setup), STREAM);
    let mut enc = FpduEncoder::new(crc, markers);
    let mut wire = Vec::new();
    for _ in 0..input.below(40) {
        match input.u8() % 16 {
            // Octets that are no FPDU (framing errors from there on).
            0 => wire.extend_from_slice(input.blob(8)),
            kind => {
                let seg = segment(input, &regions);
                let start = wire.len();
                if enc.encode(&seg, &mut wire).is_ok() && kind == 1 {
                    // One octet of that FPDU flipped (its CRC catches it, or
                    // without CRC the header or payload changes).
                    let k = start + input.below(wire.len() - start);
                    wire[k] ^= 1 << (input.u8() % 8);
                }
            }
        }
    }
    Case {
        setup,
        cfg: RxConfig {
            crc,
            markers,
            max_ulpdu,
            expect_rtr: None,
        },
        wire,
        units: input.rest(),
    }
}

fn run(c: &Case<'_>, way: Way) -> Outcome {
    let mem = MemoryTable::with_seed(1);
    let regions = Regions::new(&mem, &mut Input::new(c.setup), STREAM);
    let cfg = RdmapConfig {
        ddp: DdpConfig {
            mulpdu: c.cfg.max_ulpdu.max(64),
            ..DdpConfig::default()
        },
        ..RdmapConfig::default()
    };
    let Ok(mut s) = RdmapStream::new(STREAM, PD, cfg) else {
        unreachable!("the fixture's stream settings are valid");
    };
    for i in 0..RECVS {
        let _ = s.post_recv(i, vec![0; RECV_LEN]);
    }
    let mut rx = FpduReceiver::new(c.cfg, Vec::new());
    rx.set_stream_source(way == Way::BufferedStream);
    let mut sock = Socket {
        wire: &c.wire,
        avail: 0,
        at: 0,
        closed: false,
    };
    let mut buf = vec![0u8; 4096];
    let mut end;
    let mut units = c.units.iter().cycle();
    loop {
        if sock.avail == c.wire.len() {
            sock.closed = true;
        } else {
            // At least one octet arrives per unit (a unit of 0: all the rest).
            let unit = units.next().map_or(0, |&u| usize::from(u));
            let unit = if unit == 0 { usize::MAX } else { unit };
            sock.avail = sock.avail.saturating_add(unit).min(c.wire.len());
        }
        end = loop {
            let mut p = RdmapPlacer::new(&mut s, &mem);
            let got = match way {
                Way::Alone => rx.drive(&mut sock, &mut p),
                Way::Buffered | Way::BufferedStream => {
                    rx.drive_buffered(&mut sock, &mut p, &mut buf)
                }
            };
            match got {
                // A pause waits for nothing here: go on reading.
                Ok(Progress::Paused) => continue,
                Ok(p) => break p,
                Err(e) => unreachable!("the in-memory socket never fails: {e}"),
            }
        };
        if sock.closed || matches!(end, Progress::Stopped | Progress::Eof { .. }) {
            break;
        }
    }
    regions.check(&mem, None);
    Outcome {
        completions: std::iter::from_fn(|| s.poll_completion())
            .map(|c| format!("{c:?}"))
            .collect(),
        sent: std::iter::from_fn(|| s.poll_segment())
            .map(|g| g.to_vec())
            .collect(),
        regions: regions
            .stags
            .iter()
            .map(|&t| {
                mem.region(rddp_proto::mem::Stag(t))
                    .map(|r| r.data().to_vec())
                    .unwrap_or_default()
            })
            .collect(),
        end,
    }
}

/// The `mpa_rx` target: every reader strategy of the product's MPA receive
/// path against plain header first; panics when they differ or an oracle
/// fails (docs/reliability.md lists them).
pub fn mpa_rx(data: &[u8]) {
    let mut input = Input::new(data);
    let c = case(&mut input);
    let alone = run(&c, Way::Alone);
    crate::trace!("header first: {alone:?}");
    let ok = alone
        .completions
        .iter()
        .filter(|c| c.contains("Success"))
        .count();
    crate::reach::note(|r| r.completed_ok += ok);
    for way in [Way::Buffered, Way::BufferedStream] {
        let other = run(&c, way);
        assert_eq!(other, alone, "{way:?} differs from header first");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_short_inputs_run() {
        for data in [&[][..], &[0; 8], &[0xFF; 64], &[3; 200]] {
            mpa_rx(data);
        }
    }
}
