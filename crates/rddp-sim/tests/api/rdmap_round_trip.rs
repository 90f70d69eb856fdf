//! Write, Read and Send/Recv between two RDMAP engines over the product's
//! MPA framing and reader, CRC and Markers each on or off, the byte stream
//! cut at random: every octet lands where it belongs and nowhere else, and
//! every request completes once, in order.

use crate::rdmap_fixture::{mpa_pair, octets, pattern, read, region, send, write};
use rddp_proto::mem::Access;
use rddp_proto::rdmap::{WcOpcode, WcStatus};

const SEEDS: u64 = 200;

/// One Write, one Read and one Send from A, and their checks.
fn round_trip(crc: bool, markers: bool, seed: u64) {
    let what = format!("crc {crc} markers {markers} seed {seed}");
    let mut p = mpa_pair(crc, markers, seed);
    // Sizes from the seed: from one octet to several FPDUs.
    let (wlen, rlen, slen) = (
        1 + (seed as usize * 977) % 6000,
        1 + (seed as usize * 613) % 5000,
        (seed as usize * 389) % 3000,
    );
    let b = p.b_mut();
    let sink = region(&b.mem, Access::REMOTE_WRITE, vec![0xEE; 8192]);
    let source = region(&b.mem, Access::REMOTE_READ, pattern(8192, 3));
    b.post_recv(7, 4096).unwrap();
    let a = p.a_mut();
    let local = region(&a.mem, Access::REMOTE_WRITE, vec![0xDD; 8192]);
    let wdata = pattern(wlen, 1);
    let sdata = pattern(slen, 2);
    a.post(write(1, &wdata, sink, 100));
    a.post(read(2, local, source, 50, rlen as u32));
    a.post(send(3, &sdata));
    p.run_until_idle().unwrap();

    let (a, b) = (p.a(), p.b());
    assert!(a.events().is_empty(), "{what}: A {:?}", a.events());
    assert!(b.events().is_empty(), "{what}: B {:?}", b.events());
    let done: Vec<_> = a
        .completions()
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.status))
        .collect();
    assert_eq!(
        done,
        [
            (1, WcOpcode::RdmaWrite, WcStatus::Success),
            (2, WcOpcode::RdmaRead, WcStatus::Success),
            (3, WcOpcode::Send, WcStatus::Success),
        ],
        "{what}"
    );
    let recv = b.completions();
    assert_eq!(recv.len(), 1, "{what}: {recv:?}");
    assert_eq!((recv[0].wr_id, recv[0].status), (7, WcStatus::Success));
    assert_eq!(recv[0].byte_len as usize, slen, "{what}");
    assert_eq!(
        &recv[0].buffer.as_ref().unwrap()[..slen],
        &sdata[..],
        "{what}"
    );
    // The Write's octets in place, the rest of the region as it was.
    let mut want = vec![0xEE; 8192];
    want[100..100 + wlen].copy_from_slice(&wdata);
    assert!(octets(&b.mem, sink) == want, "{what}: the Write's region");
    let mut want = vec![0xDD; 8192];
    want[50..50 + rlen].copy_from_slice(&pattern(8192, 3)[50..50 + rlen]);
    assert!(octets(&a.mem, local) == want, "{what}: the Read's sink");
    assert!(octets(&b.mem, source) == pattern(8192, 3), "{what}: source");
    assert!(a.mem.all_guards_intact() && b.mem.all_guards_intact());
}

#[test]
fn plain_fpdus_carry_write_read_and_send_under_random_chunking() {
    for seed in 0..SEEDS {
        round_trip(false, false, seed);
    }
}

#[test]
fn fpdus_with_crc_carry_write_read_and_send_under_random_chunking() {
    for seed in 0..SEEDS {
        round_trip(true, false, seed);
    }
}

#[test]
fn fpdus_with_markers_carry_write_read_and_send_under_random_chunking() {
    for seed in 0..SEEDS {
        round_trip(false, true, seed);
    }
}

#[test]
fn fpdus_with_crc_and_markers_carry_write_read_and_send_under_random_chunking() {
    for seed in 0..SEEDS {
        round_trip(true, true, seed);
    }
}
