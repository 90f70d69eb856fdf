//! Strategy 3 of docs/receive-strategies.md (the RDDP working group's note on
//! sharing buffers and credits): "unauthorized actions by the remote peer
//! cannot provoke such a shortage". With a pool provisioned for every credit granted, nothing the
//! peer of stream A sends can leave stream B without a buffer for a valid MSN.

use crate::common::*;
use proptest::prelude::*;
use rddp_proto::ddp::{
    BufferOrdering, BufferPool, DdpConfig, DdpStream, Delivery, PoolConfig, RecvBuffer, StreamEvent,
};
use rddp_proto::mem::{MemoryTable, StreamId};

const CREDITS: u32 = 4;

fn buf(id: u64) -> RecvBuffer {
    RecvBuffer {
        id,
        data: vec![0; 8],
    }
}

fn open(pool: &BufferPool, id: u32) -> DdpStream {
    let mut s = DdpStream::new(StreamId(id), PD, DdpConfig::default()).unwrap();
    s.set_recv_pool(0, pool).unwrap();
    assert!(s.grant_credits(0, CREDITS));
    s
}

/// The ULP consumes every delivery: the buffer goes back to the pool and the
/// stream gets one more credit. Returns the number consumed.
fn consume(s: &mut DdpStream, pool: &BufferPool) -> usize {
    let mut n = 0;
    while let Some(d) = s.poll_delivery() {
        if let Delivery::Untagged { buffer, .. } = d {
            pool.post(buffer).unwrap();
            assert!(s.grant_credits(0, 1));
            n += 1;
        }
    }
    n
}

/// One action of A's peer: an untagged segment at MSN `expected - 2 + off`, or B's
/// honest peer sending its next message.
#[derive(Debug, Clone)]
enum Step {
    Abuse {
        off: u32,
        last: bool,
        mo: u32,
        len: usize,
    },
    Honest,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u32..12, any::<bool>(), 0u32..10, 0usize..10)
            .prop_map(|(off, last, mo, len)| Step::Abuse { off, last, mo, len }),
        1 => Just(Step::Honest),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]
    #[test]
    fn no_peer_action_on_a_starves_b(
        sequential in any::<bool>(),
        steps in proptest::collection::vec(step(), 1..80),
    ) {
        let ordering = if sequential { BufferOrdering::Sequential } else { BufferOrdering::Arrival };
        let mem = MemoryTable::with_seed(5);
        let pool = BufferPool::new(PoolConfig::credits(ordering, 64));
        // Provisioned: one buffer per credit of each stream.
        for id in 0..u64::from(2 * CREDITS) {
            pool.post(buf(id)).unwrap();
        }
        let mut a = open(&pool, 1);
        let mut b = open(&pool, 2);
        let (mut a_seq, mut b_seq, mut b_msn, mut b_got) = (0u64, 0u64, 1u32, 0usize);
        for s in &steps {
            match *s {
                Step::Abuse { off, last, mo, len } => {
                    let msn = a.sink().expected_msn(0).unwrap().wrapping_add(off).wrapping_sub(2);
                    let seg = untagged(last, 0, msn, mo, &vec![0xAB; len]);
                    let refused = feed(&mut a, &mem, a_seq, &seg).is_some();
                    a_seq += 1;
                    // A never holds more buffers than it has credits.
                    prop_assert!(a.sink().posted(0) as u64 <= a.sink().credits(0));
                    consume(&mut a, &pool);
                    if refused {
                        // A's ULP ends the stream, reposts its buffers and opens a new one.
                        a.abort();
                        while let Some(e) = a.poll_event() {
                            if let StreamEvent::Flushed(bf) = e {
                                pool.post(bf).unwrap();
                            }
                        }
                        a = open(&pool, 1);
                        a_seq = 0;
                    }
                }
                Step::Honest => {
                    let seg = untagged(true, 0, b_msn, 0, b"ok");
                    prop_assert_eq!(feed(&mut b, &mem, b_seq, &seg), None, "B starved");
                    b_seq += 1;
                    b_msn += 1;
                    b_got += consume(&mut b, &pool);
                }
            }
        }
        prop_assert_eq!(b_got as u32, b_msn - 1);
    }
}
