//! Target `rdmap_stream`: an RDMAP stream (RFC 5040) over its DDP stream, fed
//! arbitrary peer segments (Writes, Read Requests and Responses, Sends with
//! Invalidate, Terminates, garbage) in arbitrary sender order, interleaved with
//! local work requests, receive buffers, the LLP taking segments, LLP errors,
//! MULPDU changes and teardowns.
//!
//! Oracles: no panic; guard octets intact; regions equal to a model in which
//! only accepted tagged segments were placed, only into writable regions of
//! this stream; every segment handed to the LLP is a well-formed DDP segment no
//! longer than MULPDU; no lost completion: after teardown every work request
//! and every receive posted has exactly one completion, and no completion is
//! for something never posted; work requests complete in posting order
//! (`rddp_proto::rdmap::sq_order`); reads outstanding never exceed ORD.

use crate::ddp::Order;
use crate::fixture::{PD, Regions, STREAM, payload, segment};
use crate::input::Input;
use bytes::Bytes;
use rddp_proto::ddp::DdpConfig;
use rddp_proto::mem::MemoryTable;
use rddp_proto::rdmap::{INTERNAL_WR_ID, RdmapConfig, RdmapStream, WorkRequest};
use rddp_wire::{DdpHeader, Opcode, RdmapControl};
use std::collections::{BTreeMap, VecDeque};

/// Count the completions the stream has produced against what was posted;
/// `open`: the work requests posted and not yet completed, in posting order.
fn complete(s: &mut RdmapStream, posted: &mut BTreeMap<u64, u32>, open: &mut VecDeque<u64>) {
    while let Some(c) = s.poll_completion() {
        if c.opcode != rddp_proto::rdmap::WcOpcode::Recv {
            assert_eq!(
                open.pop_front(),
                Some(c.wr_id),
                "work request completed out of posting order: {c:?}"
            );
        }
        if c.status == rddp_proto::rdmap::WcStatus::Success {
            crate::reach::note(|r| r.completed_ok += 1);
        }
        let n = posted
            .get_mut(&c.wr_id)
            .unwrap_or_else(|| panic!("completion for wr_id {:#x} never posted: {c:?}", c.wr_id));
        *n += 1;
        crate::trace!("completion {c:?}");
        assert_eq!(*n, 1, "second completion for wr_id {}: {c:?}", c.wr_id);
    }
    while s.poll_event().is_some() {}
}

/// The `rdmap_stream` target: an RDMAP stream fed any peer messages and local work requests; panics when an oracle fails
/// (docs/reliability.md lists them).
pub fn rdmap_stream(data: &[u8]) {
    let mut input = Input::new(data);
    let cfg = RdmapConfig {
        ddp: DdpConfig {
            max_reorder: if input.bool() {
                usize::from(input.u8() % 16)
            } else {
                4096
            },
            mulpdu: 19 + usize::from(input.u16() % 2048),
            ..DdpConfig::default()
        },
        ird: u32::from(input.u8() % 5),
        ord: u32::from(input.u8() % 5),
    };
    let hold = input.bool();
    let mem = MemoryTable::with_seed(13);
    let regions = Regions::new(&mem, &mut input, STREAM);
    let mut model = regions.model();
    let Ok(mut s) = RdmapStream::new(STREAM, PD, cfg) else {
        return;
    };
    if hold {
        s.hold_ird_until_sent();
    }
    let mut order = Order::default();
    // wr_id -> completions seen.
    let mut posted: BTreeMap<u64, u32> = BTreeMap::new();
    let mut sq_open = VecDeque::new();
    let mut next_id = 1u64;
    let mut ops = 0;
    let mut mulpdu = cfg.ddp.mulpdu;
    while !input.is_empty() && ops < 512 {
        ops += 1;
        match input.u8() % 12 {
            0..=4 => {
                let seq = order.pick(&mut input);
                let seg = segment(&mut input, &regions);
                let res = s.on_segment(&mem, seq, &seg);
                crate::trace!(
                    "peer seg seq {seq} {:02x?} -> {res:?}",
                    &seg[..seg.len().min(48)]
                );
                let tagged = match DdpHeader::parse(&seg) {
                    Ok(DdpHeader::Tagged(h)) if seg.len() > 14 => Some(h),
                    _ => None,
                };
                if res.is_ok() {
                    crate::reach::note(|r| r.placed += 1);
                    order.accepted(seq);
                    if let Some(h) = tagged {
                        regions.apply(&mut model, h.stag, h.to, &seg[14..]);
                    }
                } else if let Some(h) = tagged {
                    // Refused, yet placed if the error was an earlier-arrived
                    // segment's, found once this one completed the order.
                    regions.apply_if_placed(&mem, &mut model, h.stag, h.to, &seg[14..]);
                }
            }
            5 | 6 => {
                let id = next_id;
                next_id += 1;
                let fence = input.u8().is_multiple_of(4);
                let wr = match input.u8() % 3 {
                    0 => {
                        let n = usize::from(input.u16() % 3000);
                        WorkRequest::Send {
                            wr_id: id,
                            payload: Bytes::from(payload(&mut input, n)).into(),
                            solicited: input.bool(),
                            invalidate: input.bool().then(|| regions.stag(&mut input)),
                            fence,
                        }
                    }
                    1 => {
                        let n = usize::from(input.u16() % 3000);
                        WorkRequest::Write {
                            wr_id: id,
                            payload: Bytes::from(payload(&mut input, n)).into(),
                            remote_stag: input.u32(),
                            remote_to: input.u64(),
                            fence,
                        }
                    }
                    _ => {
                        let local_stag = regions.stag(&mut input);
                        WorkRequest::Read {
                            wr_id: id,
                            local_stag,
                            local_to: regions.to(&mut input, local_stag),
                            len: if input.bool() {
                                u32::from(input.u8())
                            } else {
                                input.u32()
                            },
                            remote_stag: input.u32(),
                            remote_to: input.u64(),
                            fence,
                        }
                    }
                };
                posted.insert(id, 0);
                sq_open.push_back(id);
                crate::trace!("post {wr:?}");
                s.post(&mem, wr);
            }
            7 => {
                let id = next_id;
                next_id += 1;
                let len = usize::from(input.u8());
                crate::trace!("post_recv {id} {len}");
                if s.post_recv(id, vec![0; len]).is_ok() {
                    posted.insert(id, 0);
                }
            }
            8 | 9 => {
                // The LLP takes up to n segments.
                for _ in 0..input.below(16) + 1 {
                    let Some(seg) = s.poll_segment() else { break };
                    let bytes = seg.to_vec();
                    let h = DdpHeader::parse(&bytes).expect("our segment parses");
                    assert!(
                        bytes.len() <= mulpdu,
                        "segment of {} > MULPDU {mulpdu}",
                        bytes.len()
                    );
                    if let DdpHeader::Tagged(t) = h
                        && t.ctrl.last()
                        && RdmapControl(t.rsvd_ulp).opcode() == Opcode::READ_RESPONSE
                    {
                        s.read_response_sent();
                    }
                }
            }
            10 => match crate::trace_val(input.u8() % 5, "teardown op") {
                0 => s.abort(),
                1 => s.on_llp_closed(input.bool()),
                2 => s.llp_error(rddp_wire::TerminateCode::MPA_CRC_ERROR, "fuzz".into()),
                3 => {
                    let m = usize::from(input.u16() % 4096);
                    if s.ddp_mut().set_mulpdu(m).is_ok() {
                        mulpdu = m;
                    }
                }
                _ => s.ddp_mut().close(),
            },
            _ => {}
        }
        complete(&mut s, &mut posted, &mut sq_open);
        assert!(
            s.reads_outstanding() <= cfg.ord as usize,
            "more Reads outstanding than ORD"
        );
    }
    // Teardown: everything still pending completes (flushed) now.
    while s.poll_segment().is_some() {}
    s.abort();
    complete(&mut s, &mut posted, &mut sq_open);
    for (id, n) in &posted {
        assert!(*id < INTERNAL_WR_ID);
        assert_eq!(*n, 1, "wr_id {id} completed {n} times (lost completion)");
    }
    regions.check(&mem, Some(&model));
}
