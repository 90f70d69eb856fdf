//! Remote invalidation only of regions registered to allow it, and a Read
//! Response that cannot be sent ends the stream with a Terminate (RFC 5042
//! §5; RFC 5040 §5.5, §4.8).

use crate::common::host::*;
use rddp_proto::mem::{Access, AccessFault, PdId, Stag, StreamId};
use rddp_proto::rdmap::{RdmapConfig, WcStatus};
use rddp_wire::{Opcode, ReadRequestHeader, TerminateCode as T};

fn in_order() -> RdmapConfig {
    let mut cfg = RdmapConfig::default();
    cfg.ddp.max_reorder = 0;
    cfg
}

fn send_inv(stag: Stag) -> Vec<u8> {
    useg(true, Opcode::SEND_INVALIDATE, stag.0, 0, 1, 0, b"inv")
}

fn read_request(sink_to: u64, size: u32, src: Stag) -> Vec<u8> {
    let rr = ReadRequestHeader {
        sink_stag: 0x1234_5600,
        sink_to,
        size,
        src_stag: src.0,
        src_to: BASE,
    };
    useg(true, Opcode::READ_REQUEST, 0, 1, 1, 0, &rr.to_bytes())
}

/// Remote read and write do not imply remote invalidation: a peer may
/// invalidate only an STag registered with `Access::REMOTE_INVALIDATE` (RFC 5042
/// §5: remote invalidation of an STag used by other streams is a denial of
/// service, so it is the owner's choice). The others are refused with 0/1/0x09
/// (STag cannot be invalidated, Remote Protection Error: the STag is valid but
/// its rights do not allow it). Today any associated STag was invalidated.
#[test]
fn remote_invalidation_needs_a_region_registered_for_it() {
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    assert!(!rw.contains(Access::REMOTE_INVALIDATE));
    assert!(!Access::default().contains(Access::REMOTE_INVALIDATE));

    let mut h = Host::with(in_order());
    let target = h.region(rw, 8);
    h.s.post_recv(1, vec![0; 8]).unwrap();
    assert!(h.feed(&send_inv(target)));
    assert_eq!(h.terminate_sent(), Some(T::RDMAP_PROT_CANNOT_INVALIDATE));
    assert!(h.mem.region(target).unwrap().is_valid(), "not invalidated");
    let c = h.completions();
    assert_eq!(c[0].status, WcStatus::LocalProtection, "{c:?}");
    assert_eq!(c[0].invalidated_stag, None);
    let t = h.terminate_on_wire().expect("Terminate on the wire");
    assert!(t.m && t.d() && !t.r);

    // The table refuses it too, after the association check.
    assert_eq!(
        h.mem.remote_invalidate(target, PdId(1), StreamId(1)),
        Err(AccessFault::AccessRights)
    );
    assert_eq!(
        h.mem.remote_invalidate(target, PdId(2), StreamId(1)),
        Err(AccessFault::NotAssociated)
    );

    // Registered to allow it: invalidated, and the receive says which STag.
    let mut h = Host::with(in_order());
    let target = h.region(rw | Access::REMOTE_INVALIDATE, 8);
    h.s.post_recv(1, vec![0; 8]).unwrap();
    assert!(h.feed(&send_inv(target)));
    assert_eq!(h.terminate_sent(), None);
    assert!(!h.mem.region(target).unwrap().is_valid());
    let c = h.completions();
    assert_eq!(c[0].status, WcStatus::Success);
    assert_eq!(c[0].invalidated_stag, Some(target.0));
}

/// A Read Request whose sink TO + size wraps 2^64 cannot be answered: the Read
/// Response would be an invalid tagged message. It ends the stream with 0/1/0x04
/// (TO wrap) and the Read Request header (M=D=R=1). Today the response was
/// dropped silently and the peer's Read waited forever.
#[test]
fn a_read_request_whose_sink_would_wrap_ends_the_stream() {
    let mut h = Host::with(in_order());
    let src = h.region(Access::REMOTE_READ, 16);
    assert!(h.feed(&read_request(u64::MAX - 3, 8, src)));
    assert_eq!(h.terminate_sent(), Some(T::RDMAP_TO_WRAP));
    let t = h.terminate_on_wire().expect("Terminate on the wire");
    assert!(t.m && t.d() && t.r);
    assert_eq!(t.rdmap_hdr.map(|r| r.sink_to), Some(u64::MAX - 3));
    assert!(h.s.should_close());

    // At the very end of the TO space, without wrapping: served.
    let mut h = Host::with(in_order());
    let src = h.region(Access::REMOTE_READ, 16);
    assert!(h.feed(&read_request(u64::MAX - 8, 8, src)));
    assert_eq!(h.terminate_sent(), None);
    let seg = h.s.poll_segment().expect("the Read Response");
    assert_eq!(seg.payload.len(), 8);
}

/// A Read Request that arrives once graceful teardown has begun cannot be
/// answered (no new message may enter the stream): 0/2/0x07 (catastrophic
/// error, localized to the RDMAP stream) with the Read Request header, instead
/// of a response silently dropped.
#[test]
fn a_read_request_while_closing_ends_the_stream() {
    let mut h = Host::with(in_order());
    let src = h.region(Access::REMOTE_READ, 16);
    h.s.ddp_mut().close();
    assert!(h.feed(&read_request(0, 8, src)));
    assert_eq!(h.terminate_sent(), Some(T::RDMAP_CATASTROPHIC_STREAM));
    let t = h.terminate_on_wire().expect("Terminate on the wire");
    assert!(t.m && t.d() && t.r);
    assert_eq!(t.rdmap_hdr.map(|r| r.size), Some(8));
    assert!(h.s.should_close());
}
