//! [`DdpStream`] wrappers for header-first receive (see `direct.rs`): the
//! stream's state rules and error reporting, exactly as for
//! [`DdpStream::on_segment`] (which is built on them).

use super::*;
use crate::ddp::{Begin, NotBegun, Target};

impl DdpStream {
    pub(super) fn refuse(&mut self, e: super::super::DdpError) -> StreamError {
        self.refused += 1;
        let code = e.code;
        self.state = StreamState::Erroneous(code);
        self.events.push_back(StreamEvent::Error(e));
        StreamError::Erroneous(code)
    }

    pub(super) fn may_receive(&self) -> Result<(), StreamError> {
        match self.state {
            StreamState::Open | StreamState::Closing => Ok(()),
            StreamState::Erroneous(c) => Err(StreamError::Erroneous(c)),
            StreamState::Closed => Err(StreamError::Closed),
        }
    }

    /// Validate a segment from its DDP header (`head`) and payload length and
    /// say where its payload goes; then the LLP fills the target
    /// ([`Self::segment_buffers`] for a receive buffer) and calls
    /// [`Self::finish_segment`].
    ///
    /// [`Begin::Alone`]: a refusal (`StreamError::Erroneous`) is held, nothing
    /// placed: the LLP's own check of the same segment (its CRC) comes first
    /// (RFC 5041 §7.1), and `finish_segment(true)` reports it (the stream
    /// erroneous, the error queued as an event once, as `on_segment`). Other
    /// errors: the stream receives nothing any more, nothing held.
    ///
    /// [`Begin::Ahead`]: one more segment of a batch (see
    /// `DdpSink::begin_segment`); `StreamError::NotAhead` when it cannot join
    /// (nothing changed, no error raised) or the stream receives nothing any
    /// more (taken alone, it is told why).
    pub fn begin_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        how: Begin<'_>,
    ) -> Result<Target, StreamError> {
        self.held = None;
        if let Err(e) = self.may_receive() {
            return Err(match how {
                Begin::Ahead(_) => StreamError::NotAhead,
                Begin::Alone => e,
            });
        }
        self.sink
            .begin_segment(mem, seq, head, payload_len, how)
            .map_err(|e| match e {
                NotBegun::NotAhead => StreamError::NotAhead,
                NotBegun::Refused(e) => {
                    let code = e.code;
                    self.held = Some(Box::new(e));
                    StreamError::Erroneous(code)
                }
            })
    }

    /// Run `f` over the receive-buffer octets of the begun untagged segments
    /// (see [`super::DdpSink::segment_buffers`]); `None` once the stream is not
    /// open.
    pub fn segment_buffers<R>(&mut self, f: impl FnOnce(&mut [&mut [u8]]) -> R) -> Option<R> {
        self.may_receive().ok()?;
        self.sink.segment_buffers(f)
    }

    /// The begun segment's payload is in place and the LLP checked it
    /// (`crc_ok`; true where it has no check of its own): account for it and
    /// deliver what it completes (of a batch: the oldest begun). A failed
    /// check: nothing of the begun segments is delivered, nothing reported
    /// (the LLP reports its own error). After a refused
    /// [`Self::begin_segment`]: the refusal is reported now if the check
    /// passed, else dropped.
    pub fn finish_segment(&mut self, crc_ok: bool) -> Result<(), StreamError> {
        if let Some(e) = self.held.take() {
            return Err(if crc_ok {
                self.refuse(*e)
            } else {
                StreamError::Erroneous(TerminateCode::MPA_CRC_ERROR)
            });
        }
        if !crc_ok {
            let _ = self.sink.finish_segment(false);
            return Err(StreamError::Erroneous(TerminateCode::MPA_CRC_ERROR));
        }
        if let Err(e) = self.may_receive() {
            let _ = self.sink.finish_segment(false);
            return Err(e);
        }
        self.sink.finish_segment(true).map_err(|e| self.refuse(e))
    }
}
