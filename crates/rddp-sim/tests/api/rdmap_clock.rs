//! The pair's virtual clock: what is sent at tick t arrives at t plus the
//! link's delay, not before; a byte stream stays in order when its delay
//! shrinks; the directions keep their own delays.

use crate::rdmap_fixture::{mpa_pair, send};
use rddp_proto::rdmap::WcOpcode;
use rddp_sim::Dir;

fn recvs(p: &rddp_sim::RdmapPair) -> Vec<u64> {
    p.b()
        .completions()
        .iter()
        .filter(|c| c.opcode == WcOpcode::Recv)
        .map(|c| c.wr_id)
        .collect()
}

#[test]
fn a_send_arrives_at_its_delay_and_not_before() {
    let mut p = mpa_pair(true, false, 3);
    p.set_delay(Dir::AtoB, 10);
    p.b_mut().post_recv(1, 64).unwrap();
    p.a_mut().post(send(7, b"hello"));
    p.run_until(9).unwrap();
    assert_eq!(p.now(), 9);
    assert_eq!(recvs(&p), [] as [u64; 0], "arrived before its delay");
    assert!(p.in_flight());
    p.run_until(10).unwrap();
    assert_eq!(recvs(&p), [1]);
    assert!(!p.in_flight());
}

#[test]
fn a_byte_stream_stays_in_order_when_its_delay_shrinks() {
    let mut p = mpa_pair(true, true, 4);
    p.set_delay(Dir::AtoB, 10);
    p.b_mut().post_recv(1, 64).unwrap();
    p.b_mut().post_recv(2, 64).unwrap();
    p.a_mut().post(send(7, b"first"));
    p.run_until(2).unwrap();
    p.set_delay(Dir::AtoB, 0);
    p.a_mut().post(send(8, b"second"));
    p.run_until(9).unwrap();
    assert_eq!(recvs(&p), [] as [u64; 0], "the second overtook the first");
    assert_eq!(p.run_until_idle().unwrap(), 10);
    assert_eq!(recvs(&p), [1, 2]);
    let bufs: Vec<_> = p
        .b()
        .completions()
        .iter()
        .map(|c| c.buffer.clone())
        .collect();
    assert_eq!(&bufs[0].as_ref().unwrap()[..5], b"first");
    assert_eq!(&bufs[1].as_ref().unwrap()[..6], b"second");
}

#[test]
fn each_direction_keeps_its_own_delay() {
    let mut p = mpa_pair(false, false, 5);
    p.set_delay(Dir::AtoB, 3);
    p.set_delay(Dir::BtoA, 20);
    p.b_mut().post_recv(1, 64).unwrap();
    p.a_mut().post_recv(2, 64).unwrap();
    p.a_mut().post(send(7, b"to b"));
    p.b_mut().post(send(8, b"to a"));
    p.run_until(3).unwrap();
    assert_eq!(recvs(&p), [1]);
    assert!(
        p.a()
            .completions()
            .iter()
            .all(|c| c.opcode != WcOpcode::Recv)
    );
    p.run_until_idle().unwrap();
    assert_eq!(p.now(), 20);
    assert!(p.a().completions().iter().any(|c| c.wr_id == 2));
}
