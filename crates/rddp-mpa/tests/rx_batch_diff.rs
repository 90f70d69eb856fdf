//! Batches change nothing but the system calls: the same wire given to a
//! receiver that takes runs of small FPDUs in batches (`drive_buffered`: one
//! peek, one vectored read, every payload straight into place) and to one that
//! takes every FPDU alone, header first (`drive`), must give the same
//! completions, the same region octets and the same segments back (a
//! Terminate with the same code, after the same completions). The wires are
//! runs of small Sends and Writes with, in the middle of a run, a corrupted
//! CRC, a Send longer than its buffer, a repeated FPDU (the same MSN twice),
//! a Write to an invalid STag, a Write past its region's end, Writes over
//! each other's ranges (whole and in part) and into two regions, and
//! zero-length messages; then random runs of all that (proptest: any lengths,
//! an FPDU corrupted or repeated, posted or pooled buffers in either ordering,
//! reads of any size). No payload octet is copied either way.

mod common;

use common::wires::{
    Op, Outcome, RECV, RECVS, REGION, Recvs, Way, any_recvs, damage, fpdus, receive,
};

/// The same outcome with and without batches, batches taken, nothing copied.
fn same(what: &str, wire: &[u8]) -> Outcome {
    same_with(what, wire, Recvs::Posted)
}

fn same_with(what: &str, wire: &[u8], recvs: Recvs) -> Outcome {
    let (alone, _, _) = receive(wire, Way::Alone, recvs, usize::MAX);
    let (batched, peeks, copied) = receive(wire, Way::Buffered, recvs, usize::MAX);
    assert!(peeks > 0, "{what}: no batch was taken");
    assert_eq!(batched, alone, "{what}: batches changed the outcome");
    assert_eq!(copied, 0, "{what}: payload copied");
    batched
}

fn sends(n: usize, len: usize) -> Vec<Op> {
    vec![Op::Send(len); n]
}

#[test]
fn a_bad_crc_in_a_run_ends_it_as_alone() {
    let mut f = fpdus(&sends(40, 48));
    let k = f[25].len() - 10; // a payload octet of FPDU 25
    f[25][k] ^= 0x40;
    let o = same("crc", &f.concat());
    assert_eq!(o.completions.len(), 25);
    assert!(!o.sent.is_empty(), "no Terminate");
}

#[test]
fn a_refused_send_in_a_run_ends_it_as_alone() {
    let mut ops = sends(40, 48);
    ops[25] = Op::Send(RECV + 1);
    let o = same("too long", &fpdus(&ops).concat());
    assert_eq!(o.completions.len(), 25);
    assert!(!o.sent.is_empty(), "no Terminate");
}

#[test]
fn the_same_msn_twice_in_a_run_is_refused_as_alone() {
    let mut f = fpdus(&sends(40, 48));
    f.insert(21, f[20].clone());
    let o = same("msn twice", &f.concat());
    assert_eq!(o.completions.len(), 21);
    assert!(!o.sent.is_empty(), "no Terminate");
}

#[test]
fn writes_over_each_other_and_into_two_regions_land_as_in_order() {
    let mut ops = Vec::new();
    for i in 0..60 {
        ops.push(Op::Send(16));
        ops.push(match i % 6 {
            // Apart, the same range again, half over it, into the other region.
            0 | 1 => Op::Write(0, (i % 20) * 128, 96),
            2 => Op::Write(0, ((i - 1) % 20) * 128, 96),
            3 => Op::Write(0, ((i - 1) % 20) * 128 + 48, 96),
            4 => Op::Write(1, (i % 20) * 64, 64),
            _ => Op::Write(0, ((i - 5) % 20) * 128, 200),
        });
    }
    let o = same("overlaps", &fpdus(&ops).concat());
    assert_eq!(o.completions.len(), 60);
    assert!(o.sent.is_empty(), "refused: {:?}", o.sent);
    assert!(o.regions[0].iter().any(|&b| b != 0) && o.regions[1].iter().any(|&b| b != 0));
}

#[test]
fn a_bad_stag_or_a_write_past_the_region_in_a_run_is_refused_as_alone() {
    let mut ops = sends(20, 32);
    ops.extend([Op::Write(0, 0, 64), Op::WriteBadStag, Op::Send(8)]);
    let o = same("bad stag", &fpdus(&ops).concat());
    assert_eq!(o.completions.len(), 20);
    assert!(!o.sent.is_empty(), "no Terminate");

    let mut ops = sends(20, 32);
    ops.extend([
        Op::Write(1, 64, 64),
        Op::Write(0, REGION - 32, 64),
        Op::Send(8),
    ]);
    let o = same("past the end", &fpdus(&ops).concat());
    assert_eq!(o.completions.len(), 20);
    assert!(
        o.regions[0].iter().all(|&b| b == 0),
        "placed past the check"
    );
    assert!(!o.sent.is_empty(), "no Terminate");
}

#[test]
fn zero_length_messages_join_runs() {
    let mut ops = Vec::new();
    for i in 0..50 {
        ops.push(Op::Send(if i % 3 == 0 { 0 } else { 20 }));
        ops.push(Op::Write(0, i * 16, if i % 4 == 0 { 0 } else { 16 }));
    }
    let o = same("zero length", &fpdus(&ops).concat());
    assert_eq!(o.completions.len(), 50);
    assert!(o.sent.is_empty(), "refused: {:?}", o.sent);
}

/// Sends into a shared pool with a soft limit: in order each Send holds its
/// buffer alone (delivered before the next takes one), so a stream that
/// never holds more than the limit raises no SoftLimit event; a batch must
/// not hold several at once and raise one that taking them in order never
/// would (or fewer, with the limit crossed once per Send in order).
#[test]
fn sends_into_a_pool_raise_the_soft_limit_events_of_in_order() {
    let mut ops = Vec::new();
    for i in 0..60 {
        ops.push(Op::Send(24));
        if i % 3 == 0 {
            ops.push(Op::Write(0, i * 16, 16));
        }
    }
    let wire = fpdus(&ops).concat();
    for soft_limit in [0, 1, 2] {
        let recvs = Recvs::Pool {
            soft_limit,
            buffers: RECVS,
            sequential: false,
        };
        let o = same_with("pool", &wire, recvs);
        assert_eq!(o.completions.len(), 60);
        assert!(o.sent.is_empty(), "refused: {:?}", o.sent);
    }
}

/// A pool that runs out in the middle of a run: the Send that finds it empty
/// is refused (no buffer) after the ones before it were delivered, and the
/// pool counts one refused request, as in order (a batch must not ask for
/// the buffer once itself and once more when it takes that Send alone).
#[test]
fn a_pool_running_out_in_a_run_is_refused_and_counted_as_in_order() {
    let wire = fpdus(&sends(40, 24)).concat();
    let recvs = Recvs::Pool {
        soft_limit: RECVS,
        buffers: 30,
        sequential: false,
    };
    let o = same_with("pool empty", &wire, recvs);
    assert_eq!(o.completions.len(), 30);
    assert!(!o.sent.is_empty(), "no Terminate");
    assert_eq!(o.pool_stats.map(|s| s.empty), Some(1));
}

/// Random runs: Sends of any length (some too long for their buffer), Writes
/// anywhere (some past their region, some over each other), bad STags, an
/// FPDU corrupted or repeated, posted or pooled buffers, reads of any size.
mod random {
    use super::*;
    use proptest::prelude::*;

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..RECV + 8).prop_map(Op::Send),
            4 => (0..2usize, 0..REGION, 0..300usize).prop_map(|(r, o, l)| Op::Write(r, o, l)),
            1 => (0..2usize, 0..REGION / 2, 1000..2000usize)
                .prop_map(|(r, o, l)| Op::Write(r, o, l)),
            1 => Just(Op::WriteBadStag),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn batches_never_change_an_outcome(
            ops in proptest::collection::vec(op(), 1..80),
            flip in proptest::option::of((any::<prop::sample::Index>(), any::<prop::sample::Index>())),
            twice in proptest::option::of(any::<prop::sample::Index>()),
            recvs in any_recvs(1),
            cut in prop_oneof![Just(usize::MAX), 1..3000usize],
        ) {
            let mut f = fpdus(&ops);
            damage(&mut f, flip, twice);
            let wire = f.concat();
            let (alone, _, _) = receive(&wire, Way::Alone, recvs, cut);
            let (batched, _, copied) = receive(&wire, Way::Buffered, recvs, cut);
            prop_assert_eq!(&batched, &alone, "ops {:?}", ops);
            prop_assert_eq!(copied, 0);
        }
    }
}
