//! ORD 0 (RFC 6581: the peer announced IRD 0) never wedges an RDMAP stream:
//! each RDMA Read fails at once and the work posted after it goes out.

use bytes::Bytes;
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_proto::rdmap::{RdmapConfig, RdmapStream, WcOpcode, WcStatus, WorkRequest};
use rddp_wire::{DdpHeader, Opcode, RdmapControl};

#[test]
fn reads_with_ord_0_fail_at_once_and_block_nothing() {
    let cfg = RdmapConfig {
        ord: 0,
        ..RdmapConfig::default()
    };
    let mut s = RdmapStream::new(StreamId(1), PdId(1), cfg).unwrap();
    let mem = MemoryTable::new();
    let sink = mem
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            0x4000,
            vec![0; 64],
        )
        .unwrap();
    for wr_id in [1, 2] {
        s.post(
            &mem,
            WorkRequest::Read {
                wr_id,
                local_stag: sink.0,
                local_to: 0x4000,
                len: 8,
                remote_stag: 0x77,
                remote_to: 0,
                fence: false,
            },
        );
    }
    s.post(
        &mem,
        WorkRequest::Send {
            wr_id: 3,
            payload: Bytes::from_static(b"after").into(),
            solicited: false,
            invalidate: None,
            fence: false,
        },
    );
    let mut ops = Vec::new();
    while let Some(seg) = s.poll_segment() {
        let DdpHeader::Untagged(h) = DdpHeader::parse(&seg.to_vec()).unwrap() else {
            panic!("untagged only")
        };
        ops.push(RdmapControl(h.rsvd_ulp[0]).opcode());
    }
    assert_eq!(ops, [Opcode::SEND], "the Send left; no Read Request did");
    let got: Vec<_> = std::iter::from_fn(|| s.poll_completion())
        .map(|c| (c.wr_id, c.opcode, c.status))
        .collect();
    assert_eq!(
        got,
        [
            (1, WcOpcode::RdmaRead, WcStatus::LocalQpOperation),
            (2, WcOpcode::RdmaRead, WcStatus::LocalQpOperation),
            (3, WcOpcode::Send, WcStatus::Success),
        ]
    );
    assert_eq!(s.reads_outstanding(), 0);
}
