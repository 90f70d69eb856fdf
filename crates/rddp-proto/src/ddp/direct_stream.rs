//! [`DdpStream`] wrappers for direct placement (see `direct.rs`): the stream's
//! state rules and error reporting, exactly as for [`DdpStream::on_segment`].

use super::*;
use crate::ddp::DirectTarget;
use rddp_wire::TaggedHeader;

impl DdpStream {
    fn direct_fail(&mut self, e: super::super::DdpError) -> StreamError {
        self.refused += 1;
        let code = e.code;
        self.state = StreamState::Erroneous(code);
        self.events.push_back(StreamEvent::Error(e));
        StreamError::Erroneous(code)
    }

    fn may_receive(&self) -> Result<(), StreamError> {
        match self.state {
            StreamState::Open | StreamState::Closing => Ok(()),
            StreamState::Erroneous(c) => Err(StreamError::Erroneous(c)),
            StreamState::Closed => Err(StreamError::Closed),
        }
    }

    /// Validate a tagged segment from its 14-octet header and payload length; on
    /// success the LLP places the payload at the returned target (`None`: zero
    /// length) and then calls [`Self::direct_placed`]. A failure makes the stream
    /// erroneous, like `on_segment`.
    pub fn direct_target(
        &mut self,
        mem: &MemoryTable,
        seq: SenderSeq,
        hdr: &[u8],
        len: usize,
    ) -> Result<Option<DirectTarget>, StreamError> {
        self.may_receive()?;
        self.sink
            .direct_target(mem, seq, hdr, len)
            .map_err(|e| self.direct_fail(e))
    }

    /// The payload accepted by [`Self::direct_target`] is in place and checked.
    pub fn direct_placed(
        &mut self,
        seq: SenderSeq,
        hdr: &TaggedHeader,
        len: usize,
    ) -> Result<(), StreamError> {
        self.may_receive()?;
        self.sink
            .direct_placed(seq, hdr, len)
            .map_err(|e| self.direct_fail(e))
    }
}
