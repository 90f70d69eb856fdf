//! A pool shared by streams that live on different threads (the verbs layer runs
//! one thread per connection): handles are Send + Sync and no buffer is lost.

use crate::common::*;
use rddp_proto::cq::CompletionQueue;
use rddp_proto::ddp::{
    BufferOrdering, BufferPool, DdpConfig, DdpStream, Delivery, PoolConfig, RecvBuffer,
};
use rddp_proto::mem::{MemoryTable, StreamId};

fn send_sync<T: Send + Sync>() {}

#[test]
fn handles_are_send_and_sync() {
    send_sync::<BufferPool>();
    send_sync::<CompletionQueue>();
    send_sync::<DdpStream>();
}

#[test]
fn four_threads_share_one_pool() {
    const PER_THREAD: u32 = 2000;
    let pool = BufferPool::new(PoolConfig::shared(BufferOrdering::Arrival, 64, 8));
    for id in 0..64 {
        pool.post(RecvBuffer {
            id,
            data: vec![0; 32],
        })
        .unwrap();
    }
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let mem = MemoryTable::with_seed(u64::from(t));
                let mut s = DdpStream::new(StreamId(t), PD, DdpConfig::default()).unwrap();
                s.set_recv_pool(0, &pool).unwrap();
                let mut got = 0;
                for msn in 1..=PER_THREAD {
                    let seg = untagged(true, 0, msn, 0, &msn.to_be_bytes());
                    assert_eq!(feed(&mut s, &mem, u64::from(msn - 1), &seg), None);
                    while let Some(Delivery::Untagged { msn: m, buffer, .. }) = s.poll_delivery() {
                        assert_eq!(buffer.data[..4], m.to_be_bytes());
                        pool.post(buffer).unwrap();
                        got += 1;
                    }
                }
                got
            })
        })
        .collect();
    let total: u32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(total, 4 * PER_THREAD);
    assert_eq!(pool.free(), 64);
    assert_eq!(pool.poll_event(), None);
}
