//! [`RdmapPlacer`]: an [`RdmapStream`] as the engine of the header-first FPDU
//! receiver ([`super::FpduReceiver`]), for the verbs queue pair over MPA.
//!
//! Locks: the caller holds whatever guards the stream (the queue pair's state
//! lock) for the whole [`super::FpduReceiver::drive`] call, and the memory
//! table is shared (`&MemoryTable`: its lookups take its read lock briefly).
//! The receiver itself locks a region only around each single `read` into it;
//! a receive buffer is the engine's own (`RdmapStream::segment_buffers`), read
//! into under the caller's lock. With a non-blocking socket every lock is held
//! for one system call at most, never across a wait.

use super::rx_direct::{Placer, Refused};
use rddp_proto::ddp::StreamError;
use rddp_proto::ddp::{Begin, Target};
use rddp_proto::mem::MemoryTable;
use rddp_proto::rdmap::RdmapStream;
use rddp_wire::TerminateCode;
use std::io;

/// The RDMAP engine of one queue pair, borrowed for one `drive` call.
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
