//! [`DdpStream`] wrappers for header-first receive (see `direct.rs`): the
//! stream's state rules and error reporting, exactly as for
//! [`DdpStream::on_segment`] (which is built on them).

use super::*;
use crate::ddp::Target;

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
    /// say where its payload goes; then the LLP fills the target and calls
    /// [`Self::finish_segment`] (or [`Self::abandon_segment`] if its own check
    /// failed). A refusal makes the stream erroneous, like `on_segment`: nothing
    /// placed, the error returned and queued as an event once.
    pub fn begin_segment(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
    ) -> Result<Target, StreamError> {
        self.may_receive()?;
        self.sink
            .begin_segment(mem, seq, head, payload_len)
            .map_err(|e| self.refuse(e))
    }

    /// As [`Self::begin_segment`], but a refusal by the header checks is only
    /// returned (`Err(Err(e))`), not yet reported: the LLP's own check of the
    /// same segment (its CRC) comes first (RFC 5041 §7.1). Report it with
    /// [`Self::refuse_held`] once that check passed. `Err(Ok(_))`: the stream
    /// receives nothing any more (as `begin_segment`).
    #[allow(clippy::result_large_err)]
    pub fn begin_segment_held(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
    ) -> Result<Target, Result<StreamError, super::super::DdpError>> {
        self.may_receive().map_err(Ok)?;
        self.sink
            .begin_segment(mem, seq, head, payload_len)
            .map_err(Err)
    }

    /// Report a refusal held by [`Self::begin_segment_held`] (the stream turns
    /// erroneous, the error is queued as an event).
    pub fn refuse_held(&mut self, e: super::super::DdpError) -> StreamError {
        self.refuse(e)
    }

    /// The receive-buffer octets of the begun untagged segment (see
    /// [`super::DdpSink::begun_buffer`]); `None` once the stream is not open.
    pub fn begun_buffer(&mut self) -> Option<&mut [u8]> {
        self.may_receive().ok()?;
        self.sink.begun_buffer()
    }

    /// One more segment of a batch (see [`super::DdpSink::begin_more`]): `None`
    /// when it cannot join (nothing changed, no error raised) or the stream
    /// receives nothing any more.
    pub fn begin_more(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        fits: super::super::Fits<'_>,
    ) -> Option<Target> {
        self.may_receive().ok()?;
        self.sink.begin_more(mem, seq, head, payload_len, fits)
    }

    /// The receive-buffer octets of a batch's begun untagged segments (see
    /// [`super::DdpSink::begun_buffers`]); `None` once the stream is not open.
    pub fn begun_buffers(&mut self) -> Option<Vec<&mut [u8]>> {
        self.may_receive().ok()?;
        self.sink.begun_buffers()
    }

    /// The begun segment's payload is in place and checked.
    pub fn finish_segment(&mut self) -> Result<(), StreamError> {
        if let Err(e) = self.may_receive() {
            self.sink.abandon_segment();
            return Err(e);
        }
        self.sink.finish_segment().map_err(|e| self.refuse(e))
    }

    /// The begun segment failed the LLP's check: nothing of it is delivered.
    pub fn abandon_segment(&mut self) {
        self.sink.abandon_segment();
    }
}
