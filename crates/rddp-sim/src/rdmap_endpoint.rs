//! One simulated RDMAP host of an [`crate::RdmapPair`]: its memory table, its
//! RDMAP stream (the product's engine), and logs of what it sent, completed
//! and reported.

use rddp_proto::ddp::StreamError;
use rddp_proto::mem::MemoryTable;
use rddp_proto::rdmap::{AsyncEvent, Completion, RdmapStream, WorkRequest};
use rddp_wire::{Terminate, TerminateCode};

/// One host of an [`crate::RdmapPair`]. Post work here (the `post*` methods,
/// or [`Self::rdmap`] directly), run the pair, then read what happened:
/// [`Self::completions`], [`Self::events`], [`Self::segments_sent`], the
/// regions in [`Self::mem`].
#[derive(Debug)]
pub struct RdmapEndpoint {
    /// The host's memory table (its regions).
    pub mem: MemoryTable,
    /// Its RDMAP stream, set up as the product's queue pair sets it up for
    /// its LLP.
    pub rdmap: RdmapStream,
    pub(crate) completions: Vec<Completion>,
    pub(crate) events: Vec<AsyncEvent>,
    /// Every DDP segment this host put on the link, in order.
    pub(crate) sent: Vec<Vec<u8>>,
    /// Its LLP connection closed (end of stream read, or its own side shut
    /// after its Terminate left).
    pub(crate) llp_closed: bool,
}

impl RdmapEndpoint {
    pub(crate) fn new(mem: MemoryTable, rdmap: RdmapStream) -> Self {
        Self {
            mem,
            rdmap,
            completions: Vec::new(),
            events: Vec::new(),
            sent: Vec::new(),
            llp_closed: false,
        }
    }

    /// Post a signaled work request (`RdmapStream::post` with this host's
    /// memory table).
    pub fn post(&mut self, wr: WorkRequest) {
        self.rdmap.post(&self.mem, wr);
    }

    /// Post a work request, signaled or not (`RdmapStream::post_as`).
    pub fn post_as(&mut self, wr: WorkRequest, signaled: bool) {
        self.rdmap.post_as(&self.mem, wr, signaled);
    }

    /// Post a receive buffer of `len` octets for Sends.
    pub fn post_recv(&mut self, wr_id: u64, len: usize) -> Result<(), StreamError> {
        self.rdmap.post_recv(wr_id, vec![0; len])
    }

    /// Completions so far, in the order the engine gave them.
    pub fn completions(&self) -> &[Completion] {
        &self.completions
    }

    /// Take the completions so far (the log starts empty again).
    pub fn take_completions(&mut self) -> Vec<Completion> {
        std::mem::take(&mut self.completions)
    }

    /// Asynchronous events so far (Terminates sent and received, the close).
    pub fn events(&self) -> &[AsyncEvent] {
        &self.events
    }

    /// The code of the Terminate this host sent, if it sent one.
    pub fn terminate_sent(&self) -> Option<TerminateCode> {
        self.events.iter().find_map(|e| match e {
            AsyncEvent::TerminateSent { code, .. } => Some(*code),
            _ => None,
        })
    }

    /// The Terminate this host received, as decoded, if one arrived.
    pub fn terminate_received(&self) -> Option<&Terminate> {
        self.events.iter().find_map(|e| match e {
            AsyncEvent::TerminateReceived { terminate, .. } => terminate.as_ref(),
            _ => None,
        })
    }

    /// Every DDP segment this host put on the link, in order (what a peer
    /// watching the wire saw leave).
    pub fn segments_sent(&self) -> &[Vec<u8>] {
        &self.sent
    }

    /// Whether this host's LLP connection is closed.
    pub fn llp_closed(&self) -> bool {
        self.llp_closed
    }

    /// Move what the engine has for the ULP into the logs.
    pub(crate) fn collect(&mut self) {
        while let Some(c) = self.rdmap.poll_completion() {
            self.completions.push(c);
        }
        while let Some(e) = self.rdmap.poll_event() {
            self.events.push(e);
        }
    }
}
