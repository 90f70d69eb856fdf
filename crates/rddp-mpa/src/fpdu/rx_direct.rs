//! Header-first FPDU receive (docs/data-path.md,
//! "Receive"): the one receive engine of MPA in FPDU mode, sans-IO.
//!
//! Per connection a small state machine reads, from any [`Read`] (a
//! non-blocking socket, a blocking one, a byte slice):
//!
//! 1. ULPDU_Length and the DDP header into a fixed scratch array;
//! 2. asks the engine ([`Placer::begin`], e.g. `RdmapStream::begin_segment`)
//!    where the payload goes;
//! 3. reads the payload straight into that place: a region range (the region
//!    locked for each single `read` call), or the engine's receive buffer
//!    ([`Placer::with_buffers`], one `read` per call); application memory
//!    (a verbs `ibv_reg_mr`, never borrowed) by `readv(2)` into it through the
//!    source's descriptor ([`Peek::read_fd`]), or, from a source without one,
//!    into scratch and copied (counted);
//! 4. reads PAD and CRC and checks the CRC over the octets where they now lie
//!    (RFC 5044 §4.4; computed as each read lands, under the same lock; for
//!    application memory over the octets loaded back from it);
//! 5. [`Placer::finish`]`(crc_ok)`: only now is anything delivered.
//!
//! The engine is a [`Placer`]; the product's is [`RdmapPlacer`], an
//! `RdmapStream` borrowed for one [`FpduReceiver::drive`] call.
//!
//! Markers towards us (RFC 5044 §4.3) sit every 512 octets of the stream
//! counted from the start of FPDU mode; they are read into scratch at their
//! positions, wherever they fall (before an FPDU, inside its DDP header or
//! payload, or between PAD and CRC: never inside ULPDU_Length, PAD or CRC),
//! checked (FPDUPTR) and covered by the CRC as the decoder in rddp-wire does.
//!
//! [`FpduReceiver::drive`] returns at `WouldBlock`, end of stream, a fatal
//! error, or when the engine asks for a pause; it resumes at any octet. Octets
//! are never read ahead into scratch past the next payload octet, so a payload
//! is never copied in user space, except octets that arrived before FPDU mode
//! (the setup's leftover) and a lone Send read in one system call
//! (`rx_direct/lone.rs`), which are copied and counted
//! ([`FpduReceiver::copied_octets`]). Nothing is allocated per FPDU; nothing
//! is written outside the target the engine returned.
//!
//! [`FpduReceiver::drive_buffered`] adds a caller's buffer for runs of small
//! FPDUs (payloads under [`SMALL_PAYLOAD`] octets): batches (`fpdu/rx_direct/batch.rs`),
//! one peek and one vectored read for as many FPDUs as the buffer shows, every
//! payload still straight into place (a stream of 64-octet Sends costs two
//! system calls per batch, not one or two per FPDU); a large payload ends the
//! run and is read header first.
//!
//! RFC 6581: a responder that expects an RTR ([`RxConfig::expect_rtr`]) reads
//! the first FPDU (at most 46 octets of ULPDU can be an RTR) whole into scratch,
//! checks its CRC and its shape, and hands it to the engine only if it is the
//! agreed RTR; else `framing_error(2/0/0x07)` (or 2/0/0x02 on a bad CRC).

use crate::setup::Rtr;
use rddp_proto::ddp::{Begin, StreamError, Target};
use rddp_proto::mem::{MemoryTable, Region};
use rddp_proto::rdmap::RdmapStream;
use rddp_wire::ddp::{TAGGED_HDR_LEN, UNTAGGED_HDR_LEN};
use rddp_wire::mpa::check;
use rddp_wire::mpa::marker::{MARKER_LEN, at_marker, until_marker};
use rddp_wire::mpa::{MAX_ULPDU, MIN_ULPDU, MPA_CRC_LEN, MPA_HDR_LEN, pad_len};
use rddp_wire::read_request::READ_REQ_HDR_LEN;
use rddp_wire::{Crc32c, DdpControl, Opcode, RdmapControl, TerminateCode, WireError};
use std::io::{self, IoSliceMut, Read};
use std::os::fd::{AsFd, BorrowedFd};

mod batch;
mod lone;

/// Octets of ULPDU_Length + DDP header, at most.
const HEAD_MAX: usize = MPA_HDR_LEN + UNTAGGED_HDR_LEN;
/// Every FPDU has at least this many octets that are never payload:
/// ULPDU_Length and 14 octets of ULPDU (MIN_ULPDU) are all DDP header.
const SAFE_HEAD: usize = MPA_HDR_LEN + MIN_ULPDU;
/// The longest ULPDU an RTR has (a Read Request).
const RTR_MAX: usize = UNTAGGED_HDR_LEN + READ_REQ_HDR_LEN;
/// Read-ahead of non-payload octets (PAD, CRC, Markers, the next header).
const AHEAD: usize = 32;
/// Payloads shorter than this may be taken in batches
/// ([`FpduReceiver::drive_buffered`]); longer ones are read header first.
pub const SMALL_PAYLOAD: usize = 1024;
/// Small payloads in a row after which [`FpduReceiver::drive_buffered`] takes
/// batches.
const STREAK: u32 = 4;

/// The engine above the FPDU receiver: RDMAP ([`RdmapPlacer`],
/// the verbs queue pair's; tests plug in others). Called only from
/// [`FpduReceiver::drive`], in FPDU order.
pub trait Placer {
    /// FPDU `seq` (from 0 after setup) carries a DDP segment whose header is
    /// `head` (`min(ULPDU_Length, header length)` octets) and `payload_len`
    /// payload octets. [`Begin::Alone`]: `Err` = refused, nothing placed (see
    /// [`Refused`]). [`Begin::Ahead`] (batched receive,
    /// [`FpduReceiver::drive_buffered`], `rx_direct/batch.rs`): begun while
    /// the batch's earlier FPDUs are begun and their payloads not yet read, if
    /// `fits` takes its target; [`Refused::NotAhead`]: it cannot join a batch,
    /// nothing changed (the receiver takes it alone next).
    fn begin(
        &mut self,
        seq: u64,
        head: &[u8],
        payload_len: usize,
        how: Begin<'_>,
    ) -> Result<Target, Refused>;
    /// Run `f` once over the receive buffers (payload ranges) of the begun
    /// FPDUs whose targets are [`Target::Buffer`] with payload, oldest first:
    /// one for an FPDU begun alone, those of a batch. `None`: they are gone
    /// (the stream died meanwhile); an FPDU's payload is then read and dropped.
    fn with_buffers(
        &mut self,
        f: &mut dyn FnMut(&mut [&mut [u8]]) -> io::Result<usize>,
    ) -> Option<io::Result<usize>>;
    /// The begun (or refused) segment's FPDU ended; `crc_ok` (always true
    /// without CRC). Only now is anything delivered, or a refusal reported
    /// (a failed CRC as such instead). A successful one that is the peer's
    /// first FPDU lets the responder send (RFC 5044 §7.1.2).
    fn finish(&mut self, crc_ok: bool);
    /// A framing error below DDP (ULPDU_Length, Marker, CRC of an FPDU not
    /// begun, the wrong RTR): Terminate with `code` alone, then close.
    fn framing_error(&mut self, code: TerminateCode, detail: String);
    /// Asked between FPDUs: `false` pauses the receiver ([`Progress::Paused`]).
    fn more(&mut self) -> bool {
        true
    }
}

/// Why [`Placer::begin`] placed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The engine holds its refusal until the FPDU's own check (RFC 5041
    /// §7.1: MPA's CRC before DDP's and RDMAP's header checks): the receiver
    /// reads the payload and drops it, reads PAD and CRC, calls
    /// [`Placer::finish`] (which reports the refusal, or the failed CRC
    /// instead) and reads nothing more.
    Held,
    /// Reported already, or the engine is gone: the receiver reads nothing
    /// more.
    Now,
    /// Begun [`Begin::Ahead`]: it cannot join the batch; nothing changed,
    /// nothing reported (the receiver takes it alone next).
    NotAhead,
}

/// The RDMAP engine of one queue pair, borrowed for one `drive` call: an
/// [`RdmapStream`] as the [`Placer`] of the FPDU receiver, for the verbs queue
/// pair over MPA.
///
/// Locks: the caller holds whatever guards the stream (the queue pair's state
/// lock) for the whole [`FpduReceiver::drive`] call, and the memory table is
/// shared (`&MemoryTable`: its lookups take its read lock briefly). The
/// receiver itself locks a region only around each single `read` into it; a
/// receive buffer is the engine's own (`RdmapStream::segment_buffers`), read
/// into under the caller's lock. With a non-blocking socket every lock is held
/// for one system call at most, never across a wait.
pub struct RdmapPlacer<'a> {
    /// The queue pair's RDMAP stream.
    pub stream: &'a mut RdmapStream,
    /// The memory table its regions are in.
    pub mem: &'a MemoryTable,
    /// Set when a segment was delivered, so the peer's first FPDU passed its
    /// checks (RFC 6581 / RFC 5044 §7.1.2: the responder may transmit from now
    /// on); the driver opens its gate.
    pub first_fpdu_seen: bool,
}

impl<'a> RdmapPlacer<'a> {
    /// Borrow `stream` and `mem`; the first FPDU is not seen yet.
    pub fn new(stream: &'a mut RdmapStream, mem: &'a MemoryTable) -> Self {
        Self {
            stream,
            mem,
            first_fpdu_seen: false,
        }
    }
}

impl Placer for RdmapPlacer<'_> {
    fn begin(
        &mut self,
        seq: u64,
        head: &[u8],
        payload_len: usize,
        how: Begin<'_>,
    ) -> Result<Target, Refused> {
        // A refusal is held until `finish` (RFC 5041 §7.1: the CRC first).
        match self
            .stream
            .begin_segment(self.mem, seq, head, payload_len, how)
        {
            Ok(t) => Ok(t),
            Err(StreamError::NotAhead) => Err(Refused::NotAhead),
            Err(StreamError::Closed) => Err(Refused::Now),
            Err(_) => Err(Refused::Held),
        }
    }

    fn finish(&mut self, crc_ok: bool) {
        // Refusals are handled inside the engine (Terminate queued, events).
        if self.stream.finish_segment(self.mem, crc_ok).is_ok() {
            self.first_fpdu_seen = true;
        }
    }

    fn framing_error(&mut self, code: TerminateCode, detail: String) {
        self.stream.llp_error(code, detail);
    }

    fn more(&mut self) -> bool {
        !self.stream.is_terminated()
    }

    fn with_buffers(
        &mut self,
        f: &mut dyn FnMut(&mut [&mut [u8]]) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        self.stream.segment_buffers(|b| f(b))
    }
}

/// A source that shows what it holds without consuming it (a TCP socket's
/// `MSG_PEEK`): the batched receive learns several FPDUs' headers from a peek
/// before one vectored read puts their payloads into place.
pub trait Peek {
    /// As `read`, but the octets stay in the source, to be read again.
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize>;

    /// Make `read`, a read from the source's own descriptor, as one of the
    /// source's reads (counted as it counts them): how a payload bound for
    /// application memory is read straight into it (`readv(2)` there, no copy
    /// in user space). `None`, with `read` not called: the source has no
    /// descriptor whose reads are all its reads (an in-memory source; a
    /// capture, which must see every octet); such payloads are then read into
    /// scratch and copied into place.
    fn read_fd(
        &mut self,
        read: &mut dyn FnMut(BorrowedFd<'_>) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        let _ = read;
        None
    }
}

impl Peek for &std::net::TcpStream {
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        std::net::TcpStream::peek(self, buf)
    }

    fn read_fd(
        &mut self,
        read: &mut dyn FnMut(BorrowedFd<'_>) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        Some(read(self.as_fd()))
    }
}

/// A capture sees what its source read into the capture's buffers: it has no
/// descriptor to lend ([`Peek::read_fd`] is `None`).
impl<R: Peek, F> Peek for Recorded<R, F> {
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.peek(buf)
    }
}

/// What a receive step reads from: a [`Read`], and [`Peek::read_fd`] where the
/// source has it ([`FpduReceiver::drive_buffered`]'s), else nothing
/// ([`FpduReceiver::drive`]'s, through [`NoFd`]).
trait Source: Read {
    fn read_fd(
        &mut self,
        read: &mut dyn FnMut(BorrowedFd<'_>) -> io::Result<usize>,
    ) -> Option<io::Result<usize>>;
}

impl<R: Read + Peek> Source for R {
    fn read_fd(
        &mut self,
        read: &mut dyn FnMut(BorrowedFd<'_>) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        Peek::read_fd(self, read)
    }
}

/// A plain [`Read`] as a [`Source`] without a descriptor.
struct NoFd<'a, R>(&'a mut R);

impl<R: Read> Read for NoFd<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.0.read_vectored(bufs)
    }
}

impl<R: Read> Source for NoFd<'_, R> {
    fn read_fd(
        &mut self,
        _: &mut dyn FnMut(BorrowedFd<'_>) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        None
    }
}

/// Why [`FpduReceiver::drive`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The source has nothing more now; call again when it is readable.
    WouldBlock,
    /// The source ended (`at_boundary`: between FPDUs, a clean end).
    Eof {
        /// Whether it ended between FPDUs.
        at_boundary: bool,
    },
    /// A fatal error was reported to the engine; nothing more is read.
    Stopped,
    /// The engine asked for a pause ([`Placer::more`]), between FPDUs.
    Paused,
}

/// Receive settings of one connection in FPDU mode.
#[derive(Debug, Clone, Copy)]
pub struct RxConfig {
    /// CRCs are checked (negotiated); else the CRC field is ignored.
    pub crc: bool,
    /// Markers are present towards us.
    pub markers: bool,
    /// Largest ULPDU_Length accepted.
    pub max_ulpdu: usize,
    /// Responder in peer-to-peer mode: the RTR the first FPDU must be.
    pub expect_rtr: Option<Rtr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// ULPDU_Length and the DDP header (into `head`).
    Head,
    Payload,
    Pad,
    Crc,
    Dead,
}

/// Where the current FPDU's payload goes.
#[derive(Debug)]
enum Sink {
    Engine(Target),
    /// The first FPDU while an RTR is expected: whole into `rtr`.
    Rtr,
    /// Read and dropped (not placed): a buffer that vanished, or a first FPDU
    /// too long to be the RTR (reported after its CRC).
    Discard {
        not_rtr: bool,
        /// The engine refused the header and holds the refusal (settled
        /// after the CRC).
        refused: bool,
    },
}

/// Octets read but not yet consumed: the setup's leftover (any octets), then a
/// small read-ahead that never holds payload. At most one of the two holds
/// octets at a time (each is filled only when both are empty).
#[derive(Debug, Default)]
struct Input {
    left: Vec<u8>,
    left_at: usize,
    ahead: [u8; AHEAD],
    lo: usize,
    hi: usize,
    /// The caller's buffer, lent for one [`FpduReceiver::drive_buffered`] call
    /// (empty otherwise: no batching): what a batch peeks into, and where the
    /// batch's non-payload octets are read to (never payload).
    ra: Vec<u8>,
    /// Payloads under [`SMALL_PAYLOAD`] octets in a row.
    streak: u32,
    /// The next FPDU could not join a batch: it is taken alone first.
    alone: bool,
    /// The source is a stream socket: a read that returns less than asked
    /// means it is empty now ([`FpduReceiver::set_stream_source`]).
    stream: bool,
    /// In this drive, a read came back short: the next would block.
    drained: bool,
    /// Payload octets copied from what was read before FPDU mode.
    copied: u64,
}

enum Halt {
    Block,
    Eof,
    Io(io::Error),
    /// The engine asked for a pause.
    Pause,
    /// A fatal error was reported; the receiver is dead.
    Dead,
}

fn read_src(src: &mut impl Read, buf: &mut [u8]) -> Result<usize, Halt> {
    loop {
        match src.read(buf) {
            Ok(0) => return Err(Halt::Eof),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(Halt::Block),
            Err(e) => return Err(Halt::Io(e)),
        }
    }
}

/// One read of the source. Of a stream socket, a short read means there is
/// nothing more now: the next read would only return `WouldBlock`, so it is
/// not made (epoll(7): for stream-oriented files a short read shows the input
/// space is exhausted; new data makes a new readiness edge).
fn read_once(
    stream: bool,
    drained: &mut bool,
    src: &mut impl Read,
    buf: &mut [u8],
) -> Result<usize, Halt> {
    if *drained {
        return Err(Halt::Block);
    }
    let n = read_src(src, buf)?;
    *drained = stream && n < buf.len();
    Ok(n)
}

impl Input {
    /// One read of the source (see [`read_once`]).
    fn read(&mut self, src: &mut impl Read, buf: &mut [u8]) -> Result<usize, Halt> {
        read_once(self.stream, &mut self.drained, src, buf)
    }

    /// Octets of `dst` filled from what was read already: (n, copied leftover).
    fn buffered(&mut self, dst: &mut [u8]) -> usize {
        let rest = &self.left[self.left_at..];
        if !rest.is_empty() {
            let n = rest.len().min(dst.len());
            dst[..n].copy_from_slice(&rest[..n]);
            self.left_at += n;
            if self.left_at == self.left.len() {
                self.left = Vec::new();
                self.left_at = 0;
            }
            return n;
        }
        let n = (self.hi - self.lo).min(dst.len());
        dst[..n].copy_from_slice(&self.ahead[self.lo..self.lo + n]);
        self.lo += n;
        n
    }

    fn has_buffered(&self) -> bool {
        self.left_at < self.left.len() || self.lo < self.hi
    }

    /// A run of small FPDUs: batches, each one peek and one vectored read for
    /// as many FPDUs as the caller's buffer shows.
    fn batching(&self) -> bool {
        !self.ra.is_empty() && self.streak >= STREAK && !self.alone
    }

    /// Non-payload octets into `dst`; a socket read takes at most `ahead`
    /// octets (the non-payload octets known to come), at least `dst.len()`.
    fn small(&mut self, src: &mut impl Read, dst: &mut [u8], ahead: usize) -> Result<usize, Halt> {
        if !self.has_buffered() {
            let k = ahead.clamp(dst.len(), AHEAD);
            let n = read_once(self.stream, &mut self.drained, src, &mut self.ahead[..k])?;
            (self.lo, self.hi) = (0, n);
        }
        Ok(self.buffered(dst))
    }

    /// Payload octets into `dst` (its final place): straight from `src`, or
    /// copied from what was read before (counted).
    /// Returns (octets, whether they were copied).
    /// `tail`: the non-payload octets known to follow `dst` (PAD, CRC, the
    /// next FPDU's head), read in the same call into the small read-ahead
    /// (a vectored read: one system call per FPDU of a bulk transfer, not two).
    fn payload(
        &mut self,
        src: &mut impl Read,
        dst: &mut [u8],
        tail: usize,
    ) -> Result<(usize, bool), Halt> {
        if self.has_buffered() {
            let n = self.buffered(dst);
            self.copied += n as u64;
            return Ok((n, true));
        }
        if tail == 0 {
            return Ok((self.read(src, dst)?, false));
        }
        if self.drained {
            return Err(Halt::Block);
        }
        let k = tail.min(AHEAD);
        let want = dst.len() + k;
        let mut bufs = [IoSliceMut::new(dst), IoSliceMut::new(&mut self.ahead[..k])];
        let n = loop {
            match src.read_vectored(&mut bufs) {
                Ok(0) => return Err(Halt::Eof),
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(Halt::Block),
                Err(e) => return Err(Halt::Io(e)),
            }
        };
        // Short if the payload's part came short, or the read went on into
        // the tail and stopped there. A read that filled the payload exactly
        // says nothing: a source without vectored reads (a wrapper's default
        // `read_vectored`) fills the first buffer alone and may have more.
        self.drained = self.stream && n < want && n != want - k;
        let placed = n.min(want - k);
        (self.lo, self.hi) = (0, n - placed);
        Ok((placed, false))
    }

    /// Payload octets straight from the source's descriptor into `want`
    /// octets at `start` of `region`'s application memory (`readv(2)`, with
    /// `tail` octets into the read-ahead, as [`Self::payload`]), and into
    /// `digest` the octets placed, loaded back from where they now lie (after
    /// the read, under the same hold of the registration), if `digest` is
    /// given (CRCs negotiated: without them nothing reads the octets back, and
    /// the payload costs no pass in user space at all). An application
    /// that changes its receive buffer while a Write lands there makes the
    /// CRC fail (a Terminate), as its octets would be undefined anyway (RFC
    /// 5044 §4: the CRC covers the octets placed). `None`, nothing read: no
    /// descriptor, octets already read ahead (copied from there instead), a
    /// read-only or ended registration; the caller reads through scratch.
    fn payload_app(
        &mut self,
        src: &mut impl Source,
        region: &Region,
        start: usize,
        want: usize,
        tail: usize,
        mut digest: Option<&mut Crc32c>,
    ) -> Option<Result<usize, Halt>> {
        if self.has_buffered() {
            return None;
        }
        if self.drained {
            return Some(Err(Halt::Block));
        }
        let k = tail.min(AHEAD);
        let ahead = &mut self.ahead[..k];
        let gone = std::cell::Cell::new(false);
        let mut read = |fd: BorrowedFd<'_>| {
            let got = region.with_app_memory(|a| {
                if !a.is_writable() {
                    return None;
                }
                let got = a.readv_fd(fd, start, want, ahead);
                if let (Ok(n), Some(d)) = (&got, digest.as_deref_mut()) {
                    // Inside: `readv_fd` checked the range.
                    let _ = a.scan(start, (*n).min(want), |c| d.update(c));
                }
                Some(got)
            });
            got.flatten().unwrap_or_else(|| {
                gone.set(true);
                Ok(0)
            })
        };
        let n = loop {
            match src.read_fd(&mut read)? {
                _ if gone.get() => return None,
                Ok(0) => return Some(Err(Halt::Eof)),
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(Err(Halt::Block)),
                Err(e) => return Some(Err(Halt::Io(e))),
            }
        };
        // Short as for `payload`: the payload's part came short, or the read
        // went on into the tail and stopped there.
        self.drained = self.stream && n < want + k && n != want;
        let placed = n.min(want);
        (self.lo, self.hi) = (0, n - placed);
        Some(Ok(placed))
    }
}

fn halt_to_io(h: Halt) -> io::Error {
    match h {
        Halt::Block => io::ErrorKind::WouldBlock.into(),
        Halt::Eof => io::ErrorKind::UnexpectedEof.into(),
        Halt::Io(e) => e,
        Halt::Pause | Halt::Dead => io::Error::other("receiver stopped"),
    }
}

fn io_to_halt(e: io::Error) -> Halt {
    match e.kind() {
        io::ErrorKind::WouldBlock => Halt::Block,
        io::ErrorKind::UnexpectedEof => Halt::Eof,
        _ => Halt::Io(e),
    }
}

/// The header-first receiver of one connection (see the module docs).
#[derive(Debug)]
pub struct FpduReceiver {
    cfg: RxConfig,
    input: Input,
    /// Stream offset of the next wire octet relative to SeqStart (mod 2^32).
    off: u32,
    /// FPDUs completed.
    seq: u64,
    st: St,
    /// An FPDU has started (a leading Marker or its first octet was seen).
    in_fpdu: bool,
    digest: Digest,
    marker: [u8; MARKER_LEN],
    marker_have: usize,
    /// Offset of the current FPDU's ULPDU_Length field.
    len_off: u32,
    head: [u8; HEAD_MAX],
    have: usize,
    /// Octets of `head` to collect (ULPDU_Length + DDP header); 0 until known.
    head_want: usize,
    ulpdu_len: usize,
    payload_len: usize,
    done: usize,
    sink: Sink,
    rtr: [u8; RTR_MAX],
    pad_left: usize,
    crc: [u8; MPA_CRC_LEN],
    crc_have: usize,
    /// Payload octets of the current FPDU read straight into their place.
    placing: u64,
    /// Payload octets read straight into their place, of FPDUs whose CRC passed.
    placed: u64,
    /// Lone small Sends seen in a row (`rx_direct/lone.rs`).
    lone: lone::Lone,
    /// Where a payload bound for application memory is read first, then
    /// stored from, when it cannot be read straight into it (reused: its
    /// allocation).
    app_scratch: Vec<u8>,
}

impl Default for FpduReceiver {
    fn default() -> Self {
        Self::new(
            RxConfig {
                crc: true,
                markers: false,
                max_ulpdu: MAX_ULPDU,
                expect_rtr: None,
            },
            Vec::new(),
        )
    }
}

/// The running CRC32c of the FPDU being read (RFC 5044 §4.4), or nothing at
/// all on a connection that negotiated no CRC: its CRC field is not checked
/// (RFC 5044 §4.4, §7.1.2), so computing one would only pass over every
/// octet once more.
#[derive(Debug)]
struct Digest(Option<Crc32c>);

impl Digest {
    fn new(crc: bool) -> Self {
        Self(crc.then(Crc32c::new))
    }

    fn update(&mut self, octets: &[u8]) {
        if let Some(c) = &mut self.0 {
            c.update(octets);
        }
    }

    fn reset(&mut self) {
        if let Some(c) = &mut self.0 {
            c.reset();
        }
    }

    /// The CRC so far; 0 without one (never compared then).
    fn finalize(&self) -> u32 {
        self.0.as_ref().map_or(0, Crc32c::finalize)
    }

    /// The running CRC, when there is one, for a caller that feeds it itself.
    fn running(&mut self) -> Option<&mut Crc32c> {
        self.0.as_mut()
    }
}

impl FpduReceiver {
    /// A receiver at the start of FPDU mode (SeqStart); `leftover`: octets the
    /// setup read past its last frame (they are the first FPDU octets).
    pub fn new(cfg: RxConfig, leftover: Vec<u8>) -> Self {
        Self {
            cfg: RxConfig {
                max_ulpdu: cfg.max_ulpdu.clamp(MIN_ULPDU, MAX_ULPDU),
                ..cfg
            },
            input: Input {
                left: leftover,
                ..Input::default()
            },
            off: 0,
            seq: 0,
            st: St::Head,
            in_fpdu: false,
            digest: Digest::new(cfg.crc),
            marker: [0; MARKER_LEN],
            marker_have: 0,
            len_off: 0,
            head: [0; HEAD_MAX],
            have: 0,
            head_want: 0,
            ulpdu_len: 0,
            payload_len: 0,
            done: 0,
            sink: Sink::Discard {
                not_rtr: false,
                refused: false,
            },
            rtr: [0; RTR_MAX],
            pad_left: 0,
            crc: [0; MPA_CRC_LEN],
            crc_have: 0,
            placing: 0,
            placed: 0,
            lone: lone::Lone::default(),
            app_scratch: Vec::new(),
        }
    }

    /// A new receive limit (MULPDU changed); applies from the next FPDU.
    pub fn set_max_ulpdu(&mut self, max: usize) {
        self.cfg.max_ulpdu = max.clamp(MIN_ULPDU, MAX_ULPDU);
    }

    /// The largest ULPDU taken now.
    pub fn max_ulpdu(&self) -> usize {
        self.cfg.max_ulpdu
    }

    /// FPDUs received whole so far (the next one's number).
    pub fn fpdus(&self) -> u64 {
        self.seq
    }

    /// Payload octets read straight from the source into their place.
    pub fn placed_octets(&self) -> u64 {
        self.placed
    }

    /// Payload octets copied into their place in user space: those that
    /// arrived before FPDU mode (the setup's leftover), those of the one
    /// read of a lone Send (`rx_direct/lone.rs`: its payload, after its
    /// checks, or what a miss read), and those stored into application memory
    /// from scratch (a source without a descriptor, a batch of small FPDUs),
    /// the only ones this receiver copies. A read straight into application
    /// memory is not a copy (the kernel writes there); the one octet it stores
    /// itself to keep rddp-appmem's "last octet last" is not counted.
    pub fn copied_octets(&self) -> u64 {
        self.input.copied
    }

    /// Between FPDUs, nothing of the next one consumed.
    pub fn at_boundary(&self) -> bool {
        self.st == St::Head && !self.in_fpdu && self.marker_have == 0
    }

    /// A fatal error stopped the receiver.
    pub fn is_dead(&self) -> bool {
        self.st == St::Dead
    }

    /// Octets read from the source (or given as leftover) but not yet used.
    pub fn buffered(&self) -> usize {
        (self.input.left.len() - self.input.left_at) + (self.input.hi - self.input.lo)
    }

    /// As [`Self::drive`], with `buf` lent for runs of small FPDUs (the
    /// caller's, e.g. one per I/O thread shared by its connections; its length
    /// is what one peek may show). After a few FPDUs in a row whose payloads
    /// are under [`SMALL_PAYLOAD`] octets, the receiver works in batches
    /// (`rx_direct/batch.rs`): one peek at the source shows as many whole FPDUs
    /// as `buf` holds, their headers and CRCs are checked there, the engine
    /// begins each ([`Placer::begin`], `Begin::Ahead`), and one vectored read
    /// puts every payload straight into its place and the rest (headers, PAD, CRC) into
    /// `buf`. No payload octet of a batch is copied in user space. A small
    /// Send that arrives alone may be read in one read into scratch
    /// (`rx_direct/lone.rs`), and copied into place after its checks. An FPDU that cannot
    /// join a batch (a large payload, a bad CRC, one the engine would refuse
    /// or that is not a one-segment Send or Write, one cut off at the peek's
    /// end) is taken alone, header first, as by [`Self::drive`]. When this
    /// returns, no octet of this connection is left in `buf`.
    pub fn drive_buffered(
        &mut self,
        src: &mut (impl Read + Peek),
        engine: &mut impl Placer,
        buf: &mut Vec<u8>,
    ) -> io::Result<Progress> {
        std::mem::swap(&mut self.input.ra, buf);
        self.input.drained = false;
        let got = self.run(|rx| {
            if rx.batch_ready() {
                if rx.lone_ready() {
                    rx.lone(src, engine)
                } else {
                    rx.batch(src, engine)
                }
            } else {
                rx.step(src, engine)
            }
        });
        std::mem::swap(&mut self.input.ra, buf);
        got
    }

    /// A batch (`rx_direct/batch.rs`, see its module docs) may start here:
    /// at an FPDU boundary after the first FPDU, without Markers, nothing
    /// buffered, after a run of small payloads. Asked before every FPDU of
    /// [`Self::drive_buffered`]; `false` reads the next one header first.
    fn batch_ready(&self) -> bool {
        self.at_boundary()
            && self.seq > 0
            && !self.cfg.markers
            && !self.input.has_buffered()
            && self.input.batching()
    }

    /// The source is a stream socket (TCP): a short read means it has nothing
    /// more now, so [`Self::drive`] returns `WouldBlock` without the read that
    /// would say so (one system call less per look). Not for sources that
    /// may return less than they have (a test's chunked reader), and not for
    /// an edge-triggered reader that waits for the next edge after
    /// `WouldBlock`: an end of stream already pending behind the short read
    /// brings no new edge (the verbs QP turns it on for a busy-polling
    /// thread's look only, which comes back).
    pub fn set_stream_source(&mut self, on: bool) {
        self.input.stream = on;
    }

    /// Give back the read-ahead: octets read from the source but not yet used
    /// by the state machine (never payload); returns how many. They were the
    /// last octets read, so a caller reading from its own buffer (`on_bytes`)
    /// simply feeds them again; the setup's leftover is not touched.
    pub fn unread_ahead(&mut self) -> usize {
        let n = self.input.hi - self.input.lo;
        (self.input.lo, self.input.hi) = (0, 0);
        n
    }

    /// Read and place FPDUs from `src` until it would block or ends, a fatal
    /// error, or the engine pauses. `Err`: an I/O error of the source (the
    /// connection is lost; nothing of the current FPDU was delivered).
    pub fn drive(&mut self, src: &mut impl Read, engine: &mut impl Placer) -> io::Result<Progress> {
        self.input.drained = false;
        self.run(|rx| rx.step(&mut NoFd(&mut *src), engine))
    }

    /// Make steps until one halts.
    fn run(&mut self, mut step: impl FnMut(&mut Self) -> Result<(), Halt>) -> io::Result<Progress> {
        loop {
            match step(self) {
                Ok(()) => {}
                Err(Halt::Block) => return Ok(Progress::WouldBlock),
                Err(Halt::Eof) => {
                    return Ok(Progress::Eof {
                        at_boundary: self.at_boundary(),
                    });
                }
                Err(Halt::Pause) => return Ok(Progress::Paused),
                Err(Halt::Dead) => return Ok(Progress::Stopped),
                Err(Halt::Io(e)) => return Err(e),
            }
        }
    }

    /// Non-payload octets known to come before the next payload octet. In a
    /// run of small FPDUs the next FPDU's head is not read ahead: a batch
    /// starts from a boundary with nothing read ahead.
    fn ahead(&self) -> usize {
        let next_head = self.next_head();
        match self.st {
            St::Head if self.head_want == 0 => SAFE_HEAD - self.have,
            St::Head => {
                let rest = self.head_want - self.have;
                if self.ulpdu_len + MPA_HDR_LEN == self.head_want {
                    // No payload: PAD, CRC and the next FPDU's head follow.
                    rest + pad_len(self.ulpdu_len) + MPA_CRC_LEN + next_head
                } else {
                    rest
                }
            }
            St::Pad => self.pad_left + MPA_CRC_LEN + next_head,
            St::Crc => MPA_CRC_LEN - self.crc_have + next_head,
            St::Payload | St::Dead => 0,
        }
    }

    /// Octets of the next FPDU's head worth reading with this one's end: none
    /// where a batch will take the next FPDU (Markers towards us: never).
    /// After an untagged FPDU that is not its message's last, the whole
    /// untagged head of the next one (20 octets, where any head has at least
    /// 16): senders go on with the same message (a message's segments leave
    /// in offset order, and no sender we know, rddp or siw, puts another
    /// message's segments among them: RFC 5041 §5), so a
    /// 64 KiB Send, two FPDUs, is read with one call fewer. A tagged FPDU
    /// there (interleaving is tolerated, siw's rule) has its first 4 payload
    /// octets copied from the read-ahead (counted, as any payload taken
    /// from it).
    fn next_head(&self) -> usize {
        if self.input.batching() && !self.cfg.markers {
            return 0;
        }
        let c = DdpControl(self.head[MPA_HDR_LEN]);
        if self.head_want > MPA_HDR_LEN && !c.tagged() && !c.last() {
            HEAD_MAX
        } else {
            SAFE_HEAD
        }
    }

    fn advance(&mut self, n: usize) {
        self.off = self.off.wrapping_add(n as u32);
    }

    fn die(&mut self) -> Halt {
        self.st = St::Dead;
        Halt::Dead
    }

    fn wire_error(&mut self, engine: &mut impl Placer, e: WireError) -> Halt {
        let code = super::errors::terminate_for_wire(&e).code;
        engine.framing_error(
            code,
            format!("MPA framing: {e} (FPDU {} after setup)", self.seq),
        );
        self.die()
    }

    /// One unit of progress (a Marker, header, payload, PAD or CRC read).
    fn step(&mut self, src: &mut impl Source, engine: &mut impl Placer) -> Result<(), Halt> {
        if self.st == St::Dead {
            return Err(Halt::Dead);
        }
        if self.at_boundary() && !engine.more() {
            return Err(Halt::Pause);
        }
        if self.cfg.markers && (self.marker_have > 0 || at_marker(self.off)) {
            let ahead = self.ahead().max(MARKER_LEN - self.marker_have);
            let mut m = [0u8; MARKER_LEN];
            let want = MARKER_LEN - self.marker_have;
            let n = self.input.small(src, &mut m[..want], ahead)?;
            self.marker[self.marker_have..self.marker_have + n].copy_from_slice(&m[..n]);
            self.marker_have += n;
            self.advance(n);
            if self.marker_have == MARKER_LEN {
                self.marker_have = 0;
                if let Err(e) = self.on_marker() {
                    return Err(self.wire_error(engine, e));
                }
            }
            return Ok(());
        }
        let room = if self.cfg.markers {
            until_marker(self.off)
        } else {
            usize::MAX
        };
        match self.st {
            St::Head => self.read_head(src, engine, room),
            St::Payload => self.read_payload(src, engine, room),
            St::Pad => {
                let mut p = [0u8; 3];
                let want = self.pad_left.min(room);
                let n = self.input.small(src, &mut p[..want], self.ahead())?;
                self.digest.update(&p[..n]);
                self.advance(n);
                self.pad_left -= n;
                if self.pad_left == 0 {
                    self.st = St::Crc;
                }
                Ok(())
            }
            St::Crc => {
                let mut c = [0u8; MPA_CRC_LEN];
                let want = (MPA_CRC_LEN - self.crc_have).min(room);
                let n = self.input.small(src, &mut c[..want], self.ahead())?;
                self.crc[self.crc_have..self.crc_have + n].copy_from_slice(&c[..n]);
                self.crc_have += n;
                self.advance(n);
                if self.crc_have == MPA_CRC_LEN {
                    self.end_fpdu(engine)?;
                }
                Ok(())
            }
            St::Dead => Err(self.die()),
        }
    }

    /// A complete Marker ended at `self.off`: check FPDUPTR and feed the CRC if
    /// the Marker lies in its coverage (as `rddp_wire::FpduDecoder`).
    fn on_marker(&mut self) -> Result<(), WireError> {
        let at = self.off.wrapping_sub(MARKER_LEN as u32);
        let leading = self.st == St::Head && self.have == 0;
        if leading {
            // Right before a ULPDU_Length field: it opens the next FPDU.
            self.digest.reset();
            self.in_fpdu = true;
        }
        check::marker(&self.marker, at, (!leading).then_some(self.len_off))?;
        if !(self.st == St::Crc && self.crc_have > 0) {
            self.digest.update(&self.marker);
        }
        Ok(())
    }

    fn read_head(
        &mut self,
        src: &mut impl Read,
        engine: &mut impl Placer,
        room: usize,
    ) -> Result<(), Halt> {
        let goal = if self.head_want == 0 {
            if self.have < MPA_HDR_LEN {
                MPA_HDR_LEN
            } else {
                SAFE_HEAD
            }
        } else {
            self.head_want
        };
        let want = (goal - self.have).min(room);
        let ahead = self.ahead();
        let mut b = [0u8; HEAD_MAX];
        let n = self.input.small(src, &mut b[..want], ahead)?;
        // The FPDU starts with its first octet read (a source that ends right
        // at a boundary ends cleanly).
        if !self.in_fpdu {
            self.digest.reset();
            self.in_fpdu = true;
        }
        if self.have == 0 {
            self.len_off = self.off;
        }
        self.head[self.have..self.have + n].copy_from_slice(&b[..n]);
        self.digest.update(&b[..n]);
        self.have += n;
        self.advance(n);
        if self.have == MPA_HDR_LEN && self.head_want == 0 {
            match check::ulpdu_len([self.head[0], self.head[1]], self.cfg.max_ulpdu) {
                Ok(l) => self.ulpdu_len = l,
                Err(e) => return Err(self.wire_error(engine, e)),
            }
        }
        if self.head_want == 0 && self.have == SAFE_HEAD {
            let hl = DdpControl(self.head[MPA_HDR_LEN]).header_len();
            self.head_want = MPA_HDR_LEN + hl.min(self.ulpdu_len);
        }
        if self.head_want != 0 && self.have == self.head_want {
            self.start_payload(engine)?;
        }
        Ok(())
    }

    /// The header is in: decide where the payload goes.
    fn start_payload(&mut self, engine: &mut impl Placer) -> Result<(), Halt> {
        let hlen = self.head_want - MPA_HDR_LEN;
        self.payload_len = self.ulpdu_len - hlen;
        self.done = 0;
        self.pad_left = pad_len(self.ulpdu_len);
        self.crc_have = 0;
        self.input.streak = if self.payload_len < SMALL_PAYLOAD {
            self.input.streak.saturating_add(1)
        } else {
            0
        };
        self.sink = if self.seq == 0 && self.cfg.expect_rtr.is_some() {
            if self.ulpdu_len <= RTR_MAX {
                Sink::Rtr
            } else {
                Sink::Discard {
                    not_rtr: true,
                    refused: false,
                }
            }
        } else {
            let head = &self.head[MPA_HDR_LEN..self.head_want];
            match engine.begin(self.seq, head, self.payload_len, Begin::Alone) {
                Ok(t) if t.len() == self.payload_len => Sink::Engine(t),
                Ok(_) => {
                    // An engine bug; never write outside what it returned.
                    engine.framing_error(
                        TerminateCode::MPA_LOCAL_CATASTROPHIC,
                        "placement target does not match the payload length".into(),
                    );
                    return Err(self.die());
                }
                Err(Refused::Held) => Sink::Discard {
                    not_rtr: false,
                    refused: true,
                },
                // (`NotAhead` is never the answer to `Alone`.)
                Err(Refused::Now | Refused::NotAhead) => return Err(self.die()),
            }
        };
        self.st = self.after_payload_state();
        if self.payload_len > 0 {
            self.st = St::Payload;
        }
        Ok(())
    }

    fn after_payload_state(&self) -> St {
        if self.pad_left > 0 { St::Pad } else { St::Crc }
    }

    fn read_payload(
        &mut self,
        src: &mut impl Source,
        engine: &mut impl Placer,
        room: usize,
    ) -> Result<(), Halt> {
        let want = (self.payload_len - self.done).min(room);
        let at = self.done;
        // Read to the payload's end: what follows is PAD, CRC and the next
        // head (with Markers too, never payload: as `ahead` counts them).
        let tail = if at + want == self.payload_len {
            self.pad_left + MPA_CRC_LEN + self.next_head()
        } else {
            0
        };
        let n = match &self.sink {
            Sink::Engine(Target::Region { region, offset, .. }) => {
                let region = region.clone();
                let start = offset + at;
                let (input, digest) = (&mut self.input, &mut self.digest);
                let direct = if region.is_app_memory() {
                    // Application memory is never borrowed (rddp-appmem): the
                    // kernel reads into it, and the CRC is computed over the
                    // octets loaded back from it (`Input::payload_app`).
                    input.payload_app(src, &region, start, want, tail, digest.running())
                } else {
                    None
                };
                let (n, copied) = if let Some(got) = direct {
                    (got?, false)
                } else if region.is_app_memory() {
                    // No descriptor, octets read ahead, or a registration
                    // ended or read-only: read into scratch, then the octets
                    // read stored into it (those only: one copy, counted,
                    // never the region whole). The scratch keeps its length:
                    // zeroed only where it grows.
                    let mut scratch = std::mem::take(&mut self.app_scratch);
                    if scratch.len() < want {
                        scratch.resize(want, 0);
                    }
                    let got = input.payload(src, &mut scratch[..want], tail);
                    if let Ok((n, from_ahead)) = got {
                        digest.update(&scratch[..n]);
                        // An ended registration takes nothing, as any copy.
                        if region.write_at(start, &scratch[..n]) && !from_ahead {
                            input.copied += n as u64;
                        }
                    }
                    self.app_scratch = scratch;
                    (got?.0, true)
                } else {
                    // The region's own lock, for this one read (never across a
                    // wait: a non-blocking source returns at once).
                    region.fill_at(start, want, |dst| {
                        let (n, copied) = input.payload(src, dst, tail)?;
                        digest.update(&dst[..n]);
                        Ok::<_, Halt>((n, copied))
                    })?
                };
                if !copied {
                    self.placing += n as u64;
                }
                n
            }
            Sink::Engine(Target::Buffer { .. }) => {
                let (input, digest) = (&mut self.input, &mut self.digest);
                let mut direct = 0;
                let mut f = |buf: &mut [u8]| {
                    // Never outside the target (an engine handing a shorter
                    // buffer is a bug: the connection fails, nothing is written).
                    let Some(dst) = buf.get_mut(at..at + want) else {
                        return Err(io::Error::other("receive buffer shorter than the payload"));
                    };
                    let (n, copied) = input.payload(src, dst, tail).map_err(halt_to_io)?;
                    digest.update(&dst[..n]);
                    if !copied {
                        direct = n;
                    }
                    Ok(n)
                };
                let got = engine.with_buffers(&mut |bufs| match bufs {
                    [b] => f(b),
                    _ => Err(io::Error::other("not one receive buffer")),
                });
                match got {
                    Some(Ok(n)) => {
                        self.placing += direct as u64;
                        n
                    }
                    Some(Err(e)) => return Err(io_to_halt(e)),
                    None => {
                        self.sink = Sink::Discard {
                            not_rtr: false,
                            refused: false,
                        };
                        return Ok(());
                    }
                }
            }
            Sink::Engine(Target::Nothing) => 0,
            Sink::Rtr => {
                let ahead = self.payload_len - at + self.pad_left + MPA_CRC_LEN;
                let mut b = [0u8; RTR_MAX];
                let n = self.input.small(src, &mut b[..want.min(RTR_MAX)], ahead)?;
                self.rtr[at..at + n].copy_from_slice(&b[..n]);
                self.digest.update(&b[..n]);
                n
            }
            Sink::Discard { .. } => {
                let mut b = [0u8; 512];
                let k = want.min(b.len());
                let n = if self.input.has_buffered() {
                    self.input.buffered(&mut b[..k])
                } else {
                    self.input.read(src, &mut b[..k])?
                };
                self.digest.update(&b[..n]);
                n
            }
        };
        self.done += n;
        self.advance(n);
        if self.done == self.payload_len {
            self.st = self.after_payload_state();
        }
        Ok(())
    }

    /// PAD and CRC are in: check, then hand the FPDU to the engine.
    fn end_fpdu(&mut self, engine: &mut impl Placer) -> Result<(), Halt> {
        let crc_ok = check::crc(self.cfg.crc, self.crc, self.digest.finalize()).is_ok();
        if crc_ok {
            self.placed += self.placing;
        }
        self.placing = 0;
        let seq = self.seq;
        self.seq += 1;
        self.st = St::Head;
        self.in_fpdu = false;
        self.have = 0;
        self.head_want = 0;
        self.input.alone = false;
        let none = Sink::Discard {
            not_rtr: false,
            refused: false,
        };
        match std::mem::replace(&mut self.sink, none) {
            Sink::Engine(_) => {
                engine.finish(crc_ok);
                if !crc_ok {
                    return Err(self.die());
                }
                Ok(())
            }
            Sink::Discard { refused: true, .. } => {
                // The CRC decides which error the peer hears.
                engine.finish(crc_ok);
                Err(self.die())
            }
            Sink::Discard { not_rtr, .. } => {
                if !crc_ok {
                    return Err(self.crc_failed(engine, seq));
                }
                if not_rtr {
                    return Err(self.no_rtr(engine));
                }
                // The buffer vanished (the stream died): nothing to deliver.
                Ok(())
            }
            Sink::Rtr => {
                if !crc_ok {
                    return Err(self.crc_failed(engine, seq));
                }
                let hl = self.head_want_for_rtr();
                let mut ulpdu = [0u8; RTR_MAX];
                let head = &self.head[MPA_HDR_LEN..MPA_HDR_LEN + hl];
                ulpdu[..hl].copy_from_slice(head);
                ulpdu[hl..hl + self.payload_len].copy_from_slice(&self.rtr[..self.payload_len]);
                let want = self.cfg.expect_rtr.unwrap_or(Rtr::Write);
                if !is_rtr(want, &ulpdu[..self.ulpdu_len]) {
                    return Err(self.no_rtr(engine));
                }
                // RDMAP's own small message, handed over whole (not user payload).
                let t = match engine.begin(seq, &ulpdu[..hl], self.payload_len, Begin::Alone) {
                    Ok(t) => t,
                    Err(r) => {
                        if r == Refused::Held {
                            // Its CRC passed: the refusal is reported now.
                            engine.finish(true);
                        }
                        return Err(self.die());
                    }
                };
                let payload = &self.rtr[..self.payload_len];
                if !place_copy(engine, t, payload) {
                    engine.framing_error(
                        TerminateCode::MPA_LOCAL_CATASTROPHIC,
                        "placement target does not match the payload length".into(),
                    );
                    return Err(self.die());
                }
                engine.finish(true);
                Ok(())
            }
        }
    }

    /// A bad CRC on an FPDU not handed to the engine: 2/0/0x02 (RFC 5044 §4).
    fn crc_failed(&mut self, engine: &mut impl Placer, seq: u64) -> Halt {
        engine.framing_error(
            TerminateCode::MPA_CRC_ERROR,
            format!("MPA framing: MPA CRC mismatch (FPDU {seq} after setup)"),
        );
        self.die()
    }

    fn head_want_for_rtr(&self) -> usize {
        self.ulpdu_len - self.payload_len
    }

    fn no_rtr(&mut self, engine: &mut impl Placer) -> Halt {
        let want = self.cfg.expect_rtr.unwrap_or(Rtr::Write);
        engine.framing_error(
            TerminateCode::MPA_NO_MATCHING_RTR,
            format!("the initiator's first FPDU is not the agreed {want:?} RTR"),
        );
        self.die()
    }
}

/// Copy a whole payload, already checked, into the target the engine named
/// for it (RDMAP's RTR, a lone Send read into scratch). `false`: the target
/// does not match the payload (an engine bug); nothing was written.
fn place_copy(engine: &mut impl Placer, t: Target, payload: &[u8]) -> bool {
    match t {
        Target::Nothing => payload.is_empty(),
        Target::Region {
            region,
            offset,
            len,
        } if len == payload.len() => {
            // Only this range (for application memory, never the region whole).
            let _ = region.write_at(offset, payload);
            true
        }
        Target::Buffer { len } if len == payload.len() => {
            let f = |b: &mut [u8]| match b.get_mut(..payload.len()) {
                Some(b) => {
                    b.copy_from_slice(payload);
                    Ok(payload.len())
                }
                None => Err(io::Error::other("receive buffer shorter than the payload")),
            };
            // A buffer gone meanwhile (the stream died): nothing to deliver.
            let got = engine.with_buffers(&mut |bufs| match bufs {
                [b] => f(b),
                _ => Err(io::Error::other("not one receive buffer")),
            });
            !matches!(got, Some(Err(_)))
        }
        _ => false,
    }
}

/// Whether a ULPDU is the RFC 6581 RTR of kind `want` (a zero-length Write, or a
/// zero-length Read Request).
pub fn is_rtr(want: Rtr, u: &[u8]) -> bool {
    let op = u.get(1).map(|c| RdmapControl(*c).opcode());
    match want {
        Rtr::Write => {
            u.len() == TAGGED_HDR_LEN && u[0] & 0x80 != 0 && op == Some(Opcode::RDMA_WRITE)
        }
        Rtr::Read => {
            u.len() == RTR_MAX
                && u[0] & 0x80 == 0
                && op == Some(Opcode::READ_REQUEST)
                && u[UNTAGGED_HDR_LEN + 12..UNTAGGED_HDR_LEN + 16] == [0; 4]
        }
    }
}

/// A source whose every read is also shown to `record` (a capture, `--pcap`):
/// the octets stay where they were read to; `record` sees them there.
pub struct Recorded<R, F> {
    /// The source read from.
    pub inner: R,
    /// Called with the octets of every read.
    pub record: F,
}

impl<R: Read, F: FnMut(&[u8])> Read for Recorded<R, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        (self.record)(&buf[..n]);
        Ok(n)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        let n = self.inner.read_vectored(bufs)?;
        let mut left = n;
        for b in bufs.iter() {
            let k = left.min(b.len());
            (self.record)(&b[..k]);
            left -= k;
            if left == 0 {
                break;
            }
        }
        Ok(n)
    }
}
