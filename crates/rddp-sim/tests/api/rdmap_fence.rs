//! Ported from rddp's socket tests of the Read fence (a raw MPA peer that
//! held the first Read's response back and watched the wire for 300 ms):
//! here B's responses are held back by its link's delay on the virtual
//! clock, and what A put on the wire before they arrive is exact.
//!
//! A fenced work request leaves only once every earlier RDMA Read has its
//! response (RFC 5040 §5.5); unfenced, it leaves at once (the control: else
//! the test could not tell a fence from a slow engine). Either way the send
//! queue completes in posting order.

use crate::rdmap_fixture::{mpa_pair, octets, read, region, write};
use rddp_proto::mem::Access;
use rddp_proto::rdmap::{WcOpcode, WcStatus, WorkRequest};
use rddp_sim::Dir;
use rddp_wire::{Opcode, RdmapControl};

/// Ticks B's answers take to reach A.
const HELD: u64 = 100;

#[derive(Clone, Copy, PartialEq)]
enum Second {
    Write,
    Read,
}

/// The segment's RDMAP opcode (its second octet, RFC 5040 §4.2).
fn opcode(seg: &[u8]) -> Opcode {
    RdmapControl(seg[1]).opcode()
}

fn is_write(seg: &[u8]) -> bool {
    seg[0] & 0x80 != 0 && opcode(seg) == Opcode::RDMA_WRITE
}

fn is_read_request(seg: &[u8]) -> bool {
    seg[0] & 0x80 == 0 && opcode(seg) == Opcode::READ_REQUEST
}

/// What [`run`] saw.
struct Seen {
    /// The second request left A before the Read had its response.
    early: bool,
    /// What the Reads placed.
    read: Vec<u8>,
    /// The work requests in the order they completed.
    order: Vec<u64>,
    /// Those completed before the Read's response arrived.
    before_response: Vec<u64>,
}

/// A posts a Read of 4 octets, then `second` (fenced or not); B's answers
/// take [`HELD`] ticks.
fn run(second: Second, fence: bool, seed: u64) -> Seen {
    let mut p = mpa_pair(true, seed.is_multiple_of(2), seed);
    p.set_delay(Dir::AtoB, 1);
    p.set_delay(Dir::BtoA, HELD);
    let b = p.b_mut();
    let source = region(&b.mem, Access::REMOTE_READ, b"readmore".to_vec());
    let target = region(&b.mem, Access::REMOTE_WRITE, vec![0; 4]);
    let a = p.a_mut();
    let sink = region(&a.mem, Access::REMOTE_WRITE, vec![0; 8]);
    a.post(read(1, sink, source, 0, 4));
    let (op, is_second): (_, fn(&[u8]) -> bool) = match second {
        Second::Write => {
            let mut wr = write(2, b"late", target, 0);
            set_fence(&mut wr, fence);
            a.post(wr);
            (WcOpcode::RdmaWrite, is_write)
        }
        Second::Read => {
            let mut wr = read(2, sink, source, 4, 4);
            set_fence(&mut wr, fence);
            a.post(wr);
            (WcOpcode::RdmaRead, |s: &[u8]| is_read_request(s))
        }
    };
    p.run_until(HELD / 2).unwrap();
    let a = p.a();
    let first = a
        .segments_sent()
        .iter()
        .position(|s| is_read_request(s))
        .expect("the Read Request left");
    let early = a.segments_sent()[first + 1..].iter().any(|s| is_second(s));
    let before_response = a.completions().iter().map(|c| c.wr_id).collect();
    p.run_until_idle().unwrap();
    let a = p.a();
    assert!(
        a.segments_sent()[first + 1..].iter().any(|s| is_second(s)),
        "the second never left after the Read's response"
    );
    let mut got: Vec<_> = a
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.status))
        .collect();
    let order = got.iter().map(|c| c.0).collect();
    got.sort_by_key(|c| c.0);
    assert_eq!(
        got,
        [
            (1, WcOpcode::RdmaRead, WcStatus::Success),
            (2, op, WcStatus::Success)
        ]
    );
    if second == Second::Write {
        assert_eq!(octets(&p.b().mem, target), b"late");
    }
    Seen {
        early,
        read: octets(&a.mem, sink),
        order,
        before_response,
    }
}

fn set_fence(wr: &mut WorkRequest, on: bool) {
    match wr {
        WorkRequest::Send { fence, .. }
        | WorkRequest::Write { fence, .. }
        | WorkRequest::Read { fence, .. } => *fence = on,
    }
}

const SEEDS: u64 = 12;

#[test]
fn a_fenced_write_waits_for_the_earlier_reads_response() {
    for seed in 0..SEEDS {
        let s = run(Second::Write, true, seed);
        assert!(!s.early, "the fenced Write left before the Read's response");
        assert_eq!(&s.read[..4], b"read");
        assert_eq!(s.order, [1, 2]);
    }
}

#[test]
fn an_unfenced_write_does_not_wait_for_reads() {
    for seed in 0..SEEDS {
        let s = run(Second::Write, false, seed);
        assert!(s.early, "the unfenced Write waited for the Read");
        assert_eq!(&s.read[..4], b"read");
        // The Write left, but its completion would say the Read is done
        // too: it waits for the Read's.
        assert_eq!(s.before_response, [] as [u64; 0]);
        assert_eq!(s.order, [1, 2]);
    }
}

#[test]
fn a_fenced_read_waits_for_the_earlier_reads_response() {
    for seed in 0..SEEDS {
        let s = run(Second::Read, true, seed);
        assert!(!s.early, "the fenced Read left before the first's response");
        assert_eq!(s.read, b"readmore");
        assert_eq!(s.order, [1, 2]);
    }
}

#[test]
fn an_unfenced_read_does_not_wait_for_reads() {
    for seed in 0..SEEDS {
        let s = run(Second::Read, false, seed);
        assert!(s.early, "the unfenced Read waited for the first");
        assert_eq!(s.read, b"readmore");
        assert_eq!(s.order, [1, 2]);
    }
}
