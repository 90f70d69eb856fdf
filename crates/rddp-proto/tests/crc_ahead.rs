//! CRCs computed ahead over a lease (`Payload::with_crc_ahead`): a segment
//! cut from it finds its CRC only if it is exactly one of the pieces and the
//! region was not written since.

use rddp_proto::ddp::{DdpSource, Payload};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope};
use rddp_wire::crc::{CrcShift, crc32c};
use rddp_wire::ddp::TAGGED_HDR_LEN;

#[test]
fn each_segment_cut_at_the_expected_mulpdu_finds_its_crc() {
    let mem = MemoryTable::with_seed(1);
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 + i / 7) as u8).collect();
    let stag = mem
        .register(PdId(1), StagScope::Pd, Access::NONE, 0, data.clone())
        .unwrap();
    let region = mem.region(stag).unwrap();
    let (off, len, mulpdu) = (100, 9_000, 1_024);
    let piece = mulpdu - TAGGED_HDR_LEN;
    let lease = Payload::region(region.clone(), off, len)
        .unwrap()
        .with_crc_ahead(piece);
    let v = region.version();
    let mut src = DdpSource::new(1, mulpdu).unwrap();
    src.submit_tagged(0, 0x100, 0, lease.clone()).unwrap();
    let mut at = off;
    while let Some(seg) = src.poll_segment() {
        let n = seg.payload.len();
        let want = crc32c(&data[at..at + n]);
        assert_eq!(seg.payload.crc_ahead(v), Some((want, CrcShift::over(n))));
        // The region written since: no longer.
        assert_eq!(seg.payload.crc_ahead(v + 1), None);
        at += n;
    }
    assert_eq!(at, off + len);
    // Cut elsewhere (MULPDU changed): not one of the pieces.
    assert_eq!(lease.slice(1..1 + piece).crc_ahead(v), None);
    assert_eq!(lease.slice(0..piece - 1).crc_ahead(v), None);
    assert_eq!(lease.slice(0..2 * piece).crc_ahead(v), None);
    // Owned octets have none.
    assert_eq!(Payload::from(vec![1u8; 3]).crc_ahead(v), None);
}
