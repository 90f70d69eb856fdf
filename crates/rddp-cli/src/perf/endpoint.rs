//! An attached queue pair with its protection domain and completion queues: what
//! the perf client and server run on.

use rddp::transport::Connection;
use rddp::{CompletionQueue, Device, ProtectionDomain, QueuePair, QueuePairBuilder, Quota};

/// Completion queue capacity `attach` gives each endpoint.
pub const CQ_CAPACITY: usize = 8192;

/// A connected queue pair and the resources it was built from.
pub struct Endpoint {
    pub qp: QueuePair,
    pub pd: ProtectionDomain,
    pub send_cq: CompletionQueue,
    pub recv_cq: CompletionQueue,
}

impl Endpoint {
    /// Build a queue pair for `conn` on `dev` (a consumer and PD of its own).
    pub fn attach(dev: &Device, name: &str, conn: Connection) -> Result<Self, String> {
        let quota = Quota {
            queue_pairs: 1,
            memory_regions: 16,
            registered_bytes: 1 << 30,
            receive_buffers: 8192,
            outstanding_reads: 1024,
        };
        let err = |e: rddp::Error| format!("setting up {name}: {e}");
        let consumer = dev.consumer(name, quota).map_err(err)?;
        let pd = consumer.alloc_pd().map_err(err)?;
        let send_cq = CompletionQueue::new(CQ_CAPACITY);
        let recv_cq = CompletionQueue::new(CQ_CAPACITY);
        let qp = QueuePairBuilder::new(&pd, &send_cq, &recv_cq)
            .build()
            .map_err(err)?
            .attach(conn)
            .map_err(err)?;
        Ok(Self {
            qp,
            pd,
            send_cq,
            recv_cq,
        })
    }
}
