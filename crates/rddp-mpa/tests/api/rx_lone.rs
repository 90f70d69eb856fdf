//! A lone small Send in one read (`fpdu/rx_direct/lone.rs` in the receiver): when Sends of
//! one length keep arriving alone (a ping-pong), the receiver reads the next
//! one with one read into its scratch, instead of a peek and a read, and
//! copies the payload into its buffer only after every check passed (counted
//! as copies). Everything else must stay as it was: the same wires, arriving
//! FPDU by FPDU (or in pieces), give the same completions (buffers included),
//! region octets and Terminates as a receiver that takes every FPDU header
//! first. A shorter Send is a hit too, unless more than the next FPDU's head
//! was read behind it. A miss (a Write, a longer Send, a bad CRC, an FPDU cut
//! off, a shorter Send with the next FPDU's payload read behind it) is taken
//! header first from the octets already read (counted as copies). No buffer
//! is written before its Send's checks passed.

use crate::common::source::Source;
use crate::common::wires::{
    Op, Outcome, RECV, RECVS, Recvs, Way, any_recvs, damage, fpdus, memory, receive_units, stream,
};
use rddp_mpa::fpdu::{FpduReceiver, Placer, RdmapPlacer, Refused, RxConfig};
use rddp_proto::ddp::{Begin, Target};
use rddp_proto::rdmap::WcStatus;
use rddp_wire::TerminateCode;
use rddp_wire::crc::{crc_wire_bytes, crc32c};
use rddp_wire::ddp::UNTAGGED_HDR_LEN;
use rddp_wire::rdmap::qn;
use std::io;

/// Both ways over `units` (each arriving alone); the buffered one with the
/// receiver told that a short read means an empty socket (as busy polling).
/// Returns the outcome, the buffered receiver's reads and peeks, and the
/// octets it copied.
fn both(what: &str, units: &[Vec<u8>]) -> (Outcome, usize, usize, u64) {
    let units: Vec<&[u8]> = units.iter().map(|u| u.as_slice()).collect();
    let (alone, _, _) = receive_units(&units, Way::Alone, Recvs::Posted, usize::MAX, true);
    let (lone, src, copied) = receive_units(&units, Way::Buffered, Recvs::Posted, usize::MAX, true);
    assert_eq!(lone, alone, "{what}: the one-read path changed the outcome");
    (lone, src.reads, src.peeks, copied)
}

/// `FPDU` with its CRC made good again after an edit.
fn recrc(mut f: Vec<u8>) -> Vec<u8> {
    let n = f.len() - 4;
    let c = crc_wire_bytes(crc32c(&f[..n]));
    f[n..].copy_from_slice(&c);
    f
}

#[test]
fn lone_sends_take_one_read_each_and_copy_each_payload_once() {
    let n = 150;
    let f = fpdus(&vec![Op::Send(RECV); n]);
    let (o, reads, peeks, copied) = both("lone sends", &f);
    assert_eq!(o.completions.len(), n);
    assert!(o.sent.is_empty(), "refused: {:?}", o.sent);
    // Those taken in one read: each payload once, from scratch after its checks.
    let r = RECV as u64;
    assert!(
        copied > 0 && copied % r == 0 && copied <= n as u64 * r,
        "{copied} octets copied"
    );
    // Header first for the first few, then a peek and a read each until two
    // came alone, then one read each.
    assert!(
        peeks <= 4 && reads + peeks <= n + 12,
        "{reads} reads and {peeks} peeks for {n} lone FPDUs"
    );
}

#[test]
fn misses_are_taken_header_first_with_the_same_outcome() {
    // Enough lone Sends that the first Write is read in one read.
    let mut ops = vec![Op::Send(48); 6];
    for i in 0..40 {
        ops.push(Op::Send(48));
        ops.push(Op::Send(48));
        ops.push(Op::Send(48));
        ops.push(match i % 4 {
            0 => Op::Write(0, i * 64, 48),
            1 => Op::Send(20),
            2 => Op::Send(0),
            _ => Op::Write(1, i * 16, 8),
        });
    }
    let (o, _, _, copied) = both("misses", &fpdus(&ops));
    assert_eq!(o.completions.len(), 146);
    assert!(o.sent.is_empty(), "refused: {:?}", o.sent);
    assert!(o.regions[0].iter().any(|&b| b != 0));
    // Only misses copy, and a miss doubles the lone run needed before the
    // next try: a few of the 40 Writes and short Sends.
    assert!(copied > 0, "no miss was tried");
    assert!(copied <= 8 * 48, "{copied} octets copied");
}

/// Shorter Sends among lone Sends of one length are read the same way, each
/// whole in the one read: each payload copied once at most, and the guess
/// stays (every Send is taken in one read).
#[test]
fn shorter_lone_sends_are_hits_too() {
    let mut ops = vec![Op::Send(48); 8];
    for len in [1, 2, 3, 4, 20, 44, 45, 46, 47] {
        ops.extend([Op::Send(len), Op::Send(48), Op::Send(48)]);
    }
    let (o, reads, peeks, copied) = both("shorter", &fpdus(&ops));
    assert_eq!(o.completions.len(), ops.len());
    assert!(o.sent.is_empty(), "refused: {:?}", o.sent);
    let sent: usize = ops
        .iter()
        .map(|o| if let Op::Send(l) = o { *l } else { 0 })
        .sum();
    assert!(copied <= sent as u64, "{copied} octets copied");
    assert!(
        peeks <= 4 && reads + peeks <= ops.len() + 12,
        "{reads} reads and {peeks} peeks for {} lone FPDUs",
        ops.len()
    );
}

/// A shorter Send that arrives with the next FPDU behind it: where the one
/// read took only the next FPDU's head (at most SAFE_HEAD octets, never
/// payload) it is a hit; where it took some of the next payload too, a miss
/// (that payload is copied into place from what was read). The outcome is
/// the same either way.
#[test]
fn a_shorter_send_with_the_next_fpdu_behind_it() {
    // 46 octets: its FPDU is as long as one of 48 (PAD 2), so the read takes
    // exactly the next head; 20 octets: 28 octets of the next FPDU too.
    for (len, copies) in [(46, false), (20, true)] {
        let f = fpdus(
            &[
                [Op::Send(48); 8].as_slice(),
                &[Op::Send(len), Op::Send(48), Op::Send(48)],
            ]
            .concat(),
        );
        let mut units: Vec<Vec<u8>> = f[..8].to_vec();
        units.push([f[8].clone(), f[9].clone()].concat());
        units.push(f[10].clone());
        let (o, _, _, copied) = both("shorter, then more", &units);
        assert_eq!(o.completions.len(), 11, "{len}");
        assert!(o.sent.is_empty(), "{len}: refused: {:?}", o.sent);
        // Sends 6 and 7 and the shorter one are taken in one read each; a
        // miss copies the next payload's octets it read too.
        let hits = 2 * 48 + len as u64;
        assert_eq!(copied > hits, copies, "{len}: {copied} octets copied");
    }
}

/// A longer Send where a run of short ones foresaw one more (as `rddp perf`'s
/// data Send after its one-octet Pads): a Send whole in the one read is a hit
/// (8 and 2 octets); of a longer one the read took part of the payload (60,
/// 64, 24 octets), copied from there, and header first goes on from there
/// (the rest straight into place). Copies stay within what the reads took.
#[test]
fn longer_lone_sends_copy_at_most_what_the_read_took() {
    // After Sends of 1 octet the read takes 1 + 23 octets after the head:
    // part of 60, all of 24 and the end of 8.
    for len in [60, RECV, 24, 8, 2] {
        let mut ops = vec![Op::Send(1); 8];
        for _ in 0..5 {
            ops.push(Op::Send(len));
            ops.extend([Op::Send(1); 8]);
        }
        let (o, _, _, copied) = both("longer", &fpdus(&ops));
        assert_eq!(o.completions.len(), ops.len(), "{len}");
        assert!(o.sent.is_empty(), "{len}: refused: {:?}", o.sent);
        // The one read takes 1 + 23 octets after the head; each of the 48
        // one-octet Sends is copied once at most.
        let most = 5 * len.min(24) + 48;
        assert!(copied <= most as u64, "{len}: {copied} octets copied");
    }
    // Longer than the buffer: refused as header first refuses it, and the
    // buffer keeps its octets (the outcomes compared in `both`).
    let mut ops = vec![Op::Send(1); 8];
    ops.push(Op::Send(RECV + 1));
    let (o, _, _, _) = both("longer than the buffer", &fpdus(&ops));
    assert!(!o.sent.is_empty(), "no Terminate");
}

/// Each miss doubles the run of lone Sends needed before the next try: after
/// the first miss (a lone Write after 10 Sends) runs of 3 Sends are too short
/// for another try, a run of 5 is long enough.
#[test]
fn each_miss_doubles_the_run_before_the_next_try() {
    let mut ops = vec![Op::Send(48); 10];
    ops.push(Op::Write(0, 0, 1));
    for i in 1..6 {
        ops.extend([Op::Send(48); 3]);
        ops.push(Op::Write(0, i * 64, 1));
    }
    ops.extend([Op::Send(48); 5]);
    ops.push(Op::Write(1, 0, 1));
    let (o, _, _, copied) = both("doubling", &fpdus(&ops));
    assert_eq!(o.completions.len(), 30);
    assert!(o.sent.is_empty(), "refused: {:?}", o.sent);
    // A miss on a lone Write copies its one payload octet from what was
    // read; a hit copies its Send's 48.
    assert_eq!(copied % 48, 2, "not two misses ({copied} octets copied)");
}

/// A receive limit lowered while Sends come alone holds for the next one too:
/// its ULPDU_Length is refused as header first refuses it (found in review).
#[test]
fn a_lowered_receive_limit_holds_for_a_lone_send_too() {
    let f = fpdus(&[Op::Send(RECV); 12]);
    let run = |way: Way| {
        let (mem, _) = memory();
        let mut s = stream(1);
        for i in 0..RECVS {
            s.post_recv(i as u64, vec![0; RECV]).unwrap();
        }
        let cfg = RxConfig {
            crc: true,
            markers: false,
            max_ulpdu: 16_100,
            expect_rtr: None,
        };
        let mut rx = FpduReceiver::new(cfg, Vec::new());
        rx.set_stream_source(true);
        let mut src = Source::new(Vec::new(), usize::MAX);
        let mut buf = vec![0u8; 4096];
        for (i, u) in f.iter().enumerate() {
            if i == 10 {
                rx.set_max_ulpdu(UNTAGGED_HDR_LEN + RECV - 1);
            }
            src.data.extend_from_slice(u);
            let mut p = RdmapPlacer::new(&mut s, &mem);
            match way {
                Way::Buffered => rx.drive_buffered(&mut src, &mut p, &mut buf).unwrap(),
                Way::Alone => rx.drive(&mut src, &mut p).unwrap(),
            };
        }
        let done = std::iter::from_fn(|| s.poll_completion())
            .filter(|c| c.status == WcStatus::Success)
            .count();
        let sent: Vec<Vec<u8>> = std::iter::from_fn(|| s.poll_segment())
            .map(|g| g.to_vec())
            .collect();
        (done, sent)
    };
    let (done, sent) = run(Way::Buffered);
    assert_eq!((done, &sent), (10, &run(Way::Alone).1));
    assert!(!sent.is_empty(), "no Terminate");
}

#[test]
fn a_bad_crc_on_a_lone_send_delivers_nothing() {
    for k in [3, 20, 40, 87] {
        let mut f = fpdus(&vec![Op::Send(RECV); 30]);
        // An octet of FPDU 20 (RDMAP header, payload, CRC): Terminate 2/0/0x02.
        f[20][k] ^= 0x08;
        let (o, _, _, _) = both("bad crc", &f);
        assert_eq!(o.completions.len(), 20, "octet {k}");
        assert!(!o.sent.is_empty(), "no Terminate (octet {k})");
    }
}

#[test]
fn a_refused_lone_send_leaves_its_buffer_as_it_was() {
    let mut f = fpdus(&vec![Op::Send(RECV); 30]);
    // RDMAP version 0 (RFC 5040 §4.2: 1/0/0x05... refused after its CRC
    // passed); the DDP header still names the next MSN of QN 0 from MO 0.
    f[20][3] &= 0x3f;
    f[20] = recrc(f[20].clone());
    let (o, _, _, _) = both("refused", &f);
    assert_eq!(o.completions.len(), 20);
    assert!(!o.sent.is_empty(), "no Terminate");
}

#[test]
fn lone_sends_cut_anywhere_are_read_as_before() {
    let f = fpdus(&vec![Op::Send(RECV); 40]);
    // FPDU 25 arrives in two pieces at every octet boundary.
    for cut in 1..f[25].len() {
        let mut units = f.clone();
        let tail = units[25].split_off(cut);
        units.insert(26, tail);
        let (o, _, _, _) = both("cut", &units);
        assert_eq!(o.completions.len(), 40, "cut at {cut}");
        assert!(o.sent.is_empty(), "cut at {cut}: {:?}", o.sent);
    }
}

/// Random runs arriving FPDU by FPDU or in random pieces: lone Sends of a
/// few lengths, Writes, a corrupted or repeated FPDU, posted or pooled
/// buffers.
mod random {
    use super::*;
    use crate::common::wires::REGION;
    use proptest::prelude::*;

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => prop_oneof![Just(RECV), Just(16usize), 0..RECV + 8].prop_map(Op::Send),
            2 => (0..2usize, 0..REGION, 0..300usize).prop_map(|(r, o, l)| Op::Write(r, o, l)),
            1 => Just(Op::WriteBadStag),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn one_read_never_changes_an_outcome(
            runs in proptest::collection::vec((op(), 1..10usize), 1..40),
            flip in proptest::option::of((any::<prop::sample::Index>(), any::<prop::sample::Index>())),
            twice in proptest::option::of(any::<prop::sample::Index>()),
            split in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
            recvs in any_recvs(4),
        ) {
            // Runs of one op, so that Sends of one length come alone in a row.
            let ops: Vec<Op> = runs.iter().flat_map(|&(o, n)| std::iter::repeat_n(o, n)).collect();
            let mut f = fpdus(&ops);
            damage(&mut f, flip, twice);
            // A few FPDUs arrive in two pieces.
            for s in split {
                let i = s.index(f.len());
                if f[i].len() > 1 {
                    let cut = 1 + s.index(f[i].len() - 1);
                    let tail = f[i].split_off(cut);
                    f.insert(i + 1, tail);
                }
            }
            let units: Vec<&[u8]> = f.iter().map(|u| u.as_slice()).collect();
            let (alone, _, _) = receive_units(&units, Way::Alone, recvs, usize::MAX, true);
            let (lone, _, _) = receive_units(&units, Way::Buffered, recvs, usize::MAX, true);
            prop_assert_eq!(&lone, &alone, "ops {:?}", ops);
        }
    }
}

/// The engine of `a_lone_send_writes_no_buffer_before_its_checks`: the
/// product placer, which at every `begin` (the engine's checks not yet made)
/// counts the posted buffers the next Send would fill that hold anything but
/// the application's own octets.
struct Watch<'a, 'b> {
    inner: RdmapPlacer<'a>,
    early: &'b mut usize,
}

impl Placer for Watch<'_, '_> {
    fn begin(
        &mut self,
        seq: u64,
        head: &[u8],
        payload_len: usize,
        how: Begin<'_>,
    ) -> Result<Target, Refused> {
        if matches!(how, Begin::Alone)
            && let Some((_, b)) = self.inner.stream.ddp().sink().next_posted(qn::SEND)
            && b.iter().any(|&o| o != OWN)
        {
            *self.early += 1;
        }
        self.inner.begin(seq, head, payload_len, how)
    }
    fn finish(&mut self, crc_ok: bool) {
        self.inner.finish(crc_ok)
    }
    fn framing_error(&mut self, code: TerminateCode, detail: String) {
        self.inner.framing_error(code, detail)
    }
    fn more(&mut self) -> bool {
        self.inner.more()
    }
    fn with_buffers(
        &mut self,
        f: &mut dyn FnMut(&mut [&mut [u8]]) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        self.inner.with_buffers(f)
    }
}

/// The application's octets in the buffers it posts.
const OWN: u8 = 0xee;

/// No octet of a lone Send goes into the posted buffer before the engine
/// checked its header and its CRC passed: at every `begin` the buffer the
/// next Send would fill holds the application's octets alone, and a refused
/// Send's buffer comes back as it was posted (found in review: the one read
/// used to put the payload there first and restore the buffer on a miss).
#[test]
fn a_lone_send_writes_no_buffer_before_its_checks() {
    let mut f = fpdus(&vec![Op::Send(RECV); 30]);
    // FPDU 20: RDMAP version 0, refused after its CRC passed.
    f[20][3] &= 0x3f;
    f[20] = recrc(f[20].clone());
    let (mem, _) = memory();
    let mut s = stream(1);
    for i in 0..RECVS {
        s.post_recv(i as u64, vec![OWN; RECV]).unwrap();
    }
    let mut rx = FpduReceiver::new(
        RxConfig {
            crc: true,
            markers: false,
            max_ulpdu: 16_100,
            expect_rtr: None,
        },
        Vec::new(),
    );
    rx.set_stream_source(true);
    let mut src = Source::new(Vec::new(), usize::MAX);
    let mut buf = vec![0u8; 4096];
    let mut early = 0;
    for u in &f {
        src.data.extend_from_slice(u);
        let mut p = Watch {
            inner: RdmapPlacer::new(&mut s, &mem),
            early: &mut early,
        };
        rx.drive_buffered(&mut src, &mut p, &mut buf).unwrap();
    }
    assert_eq!(early, 0, "buffers written before their Send's checks");
    assert!(s.poll_segment().is_some(), "no Terminate");
    // The connection ends: the buffers come back to the application.
    s.on_llp_closed(false);
    let done: Vec<_> = std::iter::from_fn(|| s.poll_completion()).collect();
    assert_eq!(
        done.iter()
            .filter(|c| c.status == WcStatus::Success)
            .count(),
        20
    );
    let refused = done.iter().find(|c| c.wr_id == 20).expect("buffer 20 back");
    assert_ne!(refused.status, WcStatus::Success);
    let b = refused.buffer.as_ref().expect("its buffer");
    assert!(
        b.iter().all(|&o| o == OWN),
        "the refused Send's buffer changed"
    );
}
