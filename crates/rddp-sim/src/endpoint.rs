//! One simulated host: its memory table and its end of a DDP stream.

use rddp_proto::ddp::{DdpConfig, DdpStream, Delivery, StreamEvent};
use rddp_proto::mem::{MemoryTable, PdId, StreamId};

/// One simulated host: its memory table, its DDP stream, and logs of what the
/// stream delivered and reported.
#[derive(Debug)]
pub struct Endpoint {
    /// The host's memory table (its regions).
    pub mem: MemoryTable,
    /// Its end of the DDP stream.
    pub stream: DdpStream,
    /// Everything delivered so far, in delivery order.
    pub delivered: Vec<Delivery>,
    /// Stream events (errors, flushes, close) so far.
    pub events: Vec<StreamEvent>,
    /// Sender order of the next segment this endpoint transmits.
    pub(crate) tx_seq: u64,
}

impl Endpoint {
    /// A host whose memory table draws STag keys from `seed`, with one DDP stream.
    pub fn new(seed: u64, stream: StreamId, pd: PdId, cfg: DdpConfig) -> Self {
        Self {
            mem: MemoryTable::with_seed(seed),
            // The configuration is the harness's own; a bad MULPDU is a test bug.
            stream: DdpStream::new(stream, pd, cfg).expect("valid DDP configuration"),
            delivered: Vec::new(),
            events: Vec::new(),
            tx_seq: 0,
        }
    }

    /// Move deliveries and events out of the stream into the logs.
    pub fn collect(&mut self) {
        while let Some(d) = self.stream.poll_delivery() {
            self.delivered.push(d);
        }
        while let Some(e) = self.stream.poll_event() {
            self.events.push(e);
        }
    }

    /// The first fatal error reported on this endpoint's stream, if any.
    pub fn error(&self) -> Option<&rddp_proto::ddp::DdpError> {
        self.events.iter().find_map(|e| match e {
            StreamEvent::Error(err) => Some(err),
            _ => None,
        })
    }
}
