//! Untagged messages from real DDP sources over a reordering LLP, received by two
//! connections whose queues draw on one shared pool (docs/receive-strategies.md, strategies 2 and 3).

use bytes::Bytes;
use rddp_proto::ddp::{BufferOrdering, BufferPool, DdpConfig, Delivery, PoolConfig, RecvBuffer};
use rddp_sim::{LinkMode, Pair};

const MSGS: u32 = 30;

fn cfg() -> DdpConfig {
    DdpConfig {
        mulpdu: 64,
        max_reorder: 1 << 12,
        ..DdpConfig::default()
    }
}

fn message(pair: u32, k: u32) -> Vec<u8> {
    (0..100 + k).map(|i| (i ^ k ^ (pair << 4)) as u8).collect()
}

fn run(pool_cfg: PoolConfig, credits: bool) {
    let pool = BufferPool::new(pool_cfg);
    for id in 0..u64::from(2 * MSGS) {
        pool.post(RecvBuffer {
            id,
            data: vec![0; 256],
        })
        .unwrap();
    }
    // Two connections; both B ends are StreamId(2) locally, which the pool must
    // not confuse.
    let mut pairs: Vec<Pair> = (0..2)
        .map(|s| Pair::new(7 + s, LinkMode::Reorder { window: 64 }, cfg()))
        .collect();
    for (n, p) in (0u32..).zip(pairs.iter_mut()) {
        p.b.stream.set_recv_pool(0, &pool).unwrap();
        if credits {
            assert!(p.b.stream.grant_credits(0, MSGS));
        }
        for k in 0..MSGS {
            p.a.stream
                .send_untagged(0, [0x43, 0, 0, 0, 0], Bytes::from(message(n, k)))
                .unwrap();
        }
    }
    for p in &mut pairs {
        p.run().unwrap();
        p.b.collect();
    }
    for (n, p) in (0u32..).zip(pairs.iter()) {
        assert!(p.b.error().is_none(), "{:?}", p.b.error());
        let got: Vec<(u32, Vec<u8>)> =
            p.b.delivered
                .iter()
                .filter_map(|d| match d {
                    Delivery::Untagged {
                        msn, len, buffer, ..
                    } => Some((*msn, buffer.data[..*len as usize].to_vec())),
                    Delivery::Tagged { .. } => None,
                })
                .collect();
        let want: Vec<(u32, Vec<u8>)> = (0..MSGS).map(|k| (k + 1, message(n, k))).collect();
        assert_eq!(got, want, "pair {n}: every message, in order, intact");
    }
    assert_eq!(pool.free(), 0);
    assert_eq!(
        pool.poll_event(),
        None,
        "no soft limit crossed, nothing stranded"
    );
}

#[test]
fn shared_receive_queue_under_reordering() {
    for o in [BufferOrdering::Arrival, BufferOrdering::Sequential] {
        run(PoolConfig::shared(o, 64, 64), false);
    }
}

#[test]
fn pooled_credits_under_reordering() {
    for o in [BufferOrdering::Arrival, BufferOrdering::Sequential] {
        run(PoolConfig::credits(o, 64), true);
    }
}
