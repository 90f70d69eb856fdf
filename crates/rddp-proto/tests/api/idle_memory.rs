//! The target of docs/receive-strategies.md: 10,000 idle streams on one shared receive queue of 1,024
//! buffers need under 64 MiB beyond the buffers themselves. Counted by an
//! instrumented global allocator, the allocator of this whole test binary;
//! the test runs in a child process of its own
//! ([`own_process`](crate::common::own_process)), so nothing else allocates
//! meanwhile. The benchmark `recv` prints the same figure per strategy.

use crate::common::own_process;
use rddp_proto::ddp::{BufferOrdering, BufferPool, DdpConfig, DdpStream, PoolConfig, RecvBuffer};
use rddp_proto::mem::{PdId, StreamId};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn ten_thousand_idle_streams_on_one_srq_fit_in_64_mib() {
    if !own_process(
        module_path!(),
        "ten_thousand_idle_streams_on_one_srq_fit_in_64_mib",
    ) {
        return;
    }
    let pool = BufferPool::new(PoolConfig::shared(BufferOrdering::Arrival, 1024, 16));
    for id in 0..1024 {
        pool.post(RecvBuffer {
            id,
            data: vec![0; 4096],
        })
        .unwrap();
    }
    let r = Region::new(GLOBAL);
    let streams: Vec<DdpStream> = (0..10_000)
        .map(|i| {
            let mut s = DdpStream::new(StreamId(i), PdId(1), DdpConfig::default()).unwrap();
            s.set_recv_pool(0, &pool).unwrap();
            s
        })
        .collect();
    let c = r.change();
    let bytes = c.bytes_allocated as isize - c.bytes_deallocated as isize + c.bytes_reallocated;
    assert_eq!(streams.len(), 10_000);
    assert!(bytes > 0, "the count must see the streams");
    assert!(bytes < 64 << 20, "{bytes} B for 10,000 idle streams");
}
