//! An attached queue pair with its protection domain and completion queues: what
//! the perf client and server run on.

use rddp::transport::{Connection, ReadHold};
use rddp::{CompletionQueue, Device, ProtectionDomain, QueuePair, QueuePairBuilder, Quota};

/// Completion queue capacity `attach` gives each endpoint.
pub(crate) const CQ_CAPACITY: usize = 8192;

/// A connected queue pair and the resources it was built from.
pub(crate) struct Endpoint {
    /// Holds back the first read from the LLP until receives are posted. First,
    /// so that it is dropped (releasing it) before the queue pair, whose drop
    /// may join the reading thread.
    gate: Option<ReadHold>,
    pub qp: QueuePair,
    pub pd: ProtectionDomain,
    pub send_cq: CompletionQueue,
    pub recv_cq: CompletionQueue,
}

/// A device for `endpoints` endpoints: each gets its own consumer quota (see
/// [`Endpoint::attach`]), so the device's capacity grows with them (it only
/// bounds reservations; memory is used as buffers are registered).
pub(crate) fn device(endpoints: usize) -> Device {
    let n = endpoints.max(1) as u64;
    let per = endpoint_quota();
    let d = rddp::DeviceLimits::default().capacity;
    Device::with_limits(rddp::DeviceLimits {
        capacity: Quota {
            queue_pairs: d.queue_pairs.max(n * per.queue_pairs),
            memory_regions: d.memory_regions.max(n * per.memory_regions),
            registered_bytes: d.registered_bytes.max(n * per.registered_bytes),
            receive_buffers: d.receive_buffers.max(n * per.receive_buffers),
            outstanding_reads: d.outstanding_reads.max(n * per.outstanding_reads),
        },
    })
}

/// Enough for two buffers of the largest size and the small ones.
fn endpoint_quota() -> Quota {
    Quota {
        queue_pairs: 1,
        memory_regions: 16,
        registered_bytes: 2 * u64::from(super::opts::MAX_SIZE) + (1 << 20),
        receive_buffers: 8192,
        outstanding_reads: 1024,
    }
}

impl Endpoint {
    /// An endpoint of a queue pair attached elsewhere (its receives are the
    /// caller's business).
    pub(crate) fn new(
        qp: QueuePair,
        pd: ProtectionDomain,
        send_cq: CompletionQueue,
        recv_cq: CompletionQueue,
    ) -> Self {
        Self {
            gate: None,
            qp,
            pd,
            send_cq,
            recv_cq,
        }
    }

    /// Build a queue pair for `conn` on `dev` (a consumer and PD of its own).
    /// Nothing is read from the LLP until [`Endpoint::open`] (the perf client
    /// and server call it once their first receives are posted).
    pub(crate) fn attach(dev: &Device, name: &str, mut conn: Connection) -> Result<Self, String> {
        // The device (see [`device`]) has room for every endpoint's quota.
        let quota = endpoint_quota();
        let err = |e: rddp::Error| format!("setting up {name}: {e}");
        let consumer = dev.consumer(name, quota).map_err(err)?;
        let pd = consumer.alloc_pd().map_err(err)?;
        let send_cq = CompletionQueue::new(CQ_CAPACITY);
        let recv_cq = CompletionQueue::new(CQ_CAPACITY);
        // A Send from the peer that came in before the first receive was posted
        // would otherwise find no buffer and end the stream with a Terminate.
        let open = conn.hold_reads();
        // Each CQ serves one side of one queue pair: it reserves its whole depth.
        let depth = (CQ_CAPACITY / 2) as u32;
        let qp = QueuePairBuilder::new(&pd, &send_cq, &recv_cq)
            .max_send_wr(depth)
            .max_recv_wr(depth)
            .build()
            .map_err(err)?
            .attach(conn)
            .map_err(err)?;
        Ok(Self {
            gate: Some(open),
            ..Self::new(qp, pd, send_cq, recv_cq)
        })
    }

    /// Let the LLP's segments in.
    pub(crate) fn open(&mut self) {
        if let Some(g) = self.gate.take() {
            g.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rddp::transport::memory_pair;
    use rddp::{Access, SendFlags, WcStatus};
    use std::time::Duration;

    #[test]
    fn a_send_before_the_first_receive_waits_at_the_gate() {
        let dev = Device::new();
        let (a, b) = memory_pair(1024);
        let mut server = Endpoint::attach(&dev, "server", b).unwrap();
        let mut client = Endpoint::attach(&dev, "client", a).unwrap();
        client.open();
        let mr = client.pd.register(b"early".to_vec(), Access::NONE).unwrap();
        client
            .qp
            .post_send(1, &mr, 0, 5, SendFlags::default())
            .unwrap();
        // The Send is there before any receive is posted.
        std::thread::sleep(Duration::from_millis(50));
        server.qp.post_recv(7, 64).unwrap();
        server.open();
        let wc = server.recv_cq.wait(1, Duration::from_secs(5));
        assert_eq!(wc.len(), 1);
        assert_eq!(wc[0].status, WcStatus::Success);
        assert_eq!(&wc[0].buffer.as_ref().unwrap()[..5], b"early");
        assert!(server.qp.async_events().is_empty());
    }
}
