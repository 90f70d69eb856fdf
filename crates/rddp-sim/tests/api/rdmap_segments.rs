//! The RDMAP pair over whole segments that overtake each other (SCTP-like,
//! RFC 5043): RDMAP's whole-segment entry point places them out of order
//! and delivers in order (RFC 5040 §5.5).

use crate::rdmap_fixture::{octets, pattern, read, region, send, write};
use rddp_proto::mem::Access;
use rddp_proto::rdmap::{WcOpcode, WcStatus};
use rddp_sim::{PairConfig, RdmapPair};

#[test]
fn write_read_and_sends_arrive_whole_in_any_order_and_complete_in_order() {
    let mut out_of_order = 0;
    for seed in 0..200u64 {
        let what = format!("seed {seed}");
        let cfg = PairConfig::segments(1 + (seed as usize % 32), 64 + (seed as usize * 13) % 1500);
        let mut p = RdmapPair::new(cfg, seed).unwrap();
        let b = p.b_mut();
        let sink = region(&b.mem, Access::REMOTE_WRITE, vec![0xEE; 8192]);
        let source = region(&b.mem, Access::REMOTE_READ, pattern(8192, 3));
        for i in 0..4 {
            b.post_recv(10 + i, 2048).unwrap();
        }
        let a = p.a_mut();
        let local = region(&a.mem, Access::REMOTE_WRITE, vec![0; 8192]);
        a.post(write(1, &pattern(5000, 1), sink, 7));
        a.post(read(2, local, source, 0, 4000));
        for i in 0..4u8 {
            a.post(send(
                3 + u64::from(i),
                &pattern(500 * usize::from(i) + 1, i),
            ));
        }
        p.run_until_idle().unwrap();
        let (a, b) = (p.a(), p.b());
        assert!(a.events().is_empty() && b.events().is_empty(), "{what}");
        let order: Vec<_> = a
            .completions()
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect();
        assert_eq!(
            order,
            (1..=6).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>(),
            "{what}"
        );
        let recvs: Vec<_> = b.completions().iter().collect();
        assert_eq!(recvs.len(), 4, "{what}");
        for (i, c) in recvs.iter().enumerate() {
            let n = 500 * i + 1;
            assert_eq!(
                (c.wr_id, c.opcode),
                (10 + i as u64, WcOpcode::Recv),
                "{what}"
            );
            assert_eq!(&c.buffer.as_ref().unwrap()[..n], &pattern(n, i as u8)[..]);
        }
        let mut want = vec![0xEE; 8192];
        want[7..5007].copy_from_slice(&pattern(5000, 1));
        assert!(octets(&b.mem, sink) == want, "{what}");
        assert!(
            octets(&a.mem, local)[..4000] == pattern(8192, 3)[..4000],
            "{what}"
        );
        assert!(a.mem.all_guards_intact() && b.mem.all_guards_intact());
        out_of_order += b.rdmap.stats().placed_out_of_order;
    }
    assert!(out_of_order > 1000, "really out of order: {out_of_order}");
}
