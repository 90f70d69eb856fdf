//! Regions over memory the application owns (verbs' `ibv_reg_mr`): the same
//! checks as any region, with TO = the virtual address; placements land in the
//! application's memory and transmits read from it, through copies only; octets
//! the stack did not place keep what the application wrote; and once the
//! region leaves the table nothing copies into or out of that memory again.
//!
//! The "application memory" is `rddp_appmem::Leaked`: never freed, watched by
//! the test through a registration of its own, as the application would look.

use crate::common::host::*;

use rddp_appmem::Leaked;
use rddp_proto::ddp::{Begin, fill_target};
use rddp_proto::mem::{Access, AccessFault, MemError, MemoryTable, PdId, StagScope, StreamId};
use rddp_proto::rdmap::{WcOpcode, WcStatus};
use rddp_wire::rdmap::qn;
use rddp_wire::{Opcode, TaggedHeader};

const PD: PdId = PdId(1);
const S: StreamId = StreamId(1);

fn rw() -> Access {
    Access::REMOTE_WRITE | Access::REMOTE_READ
}

#[test]
fn registration_takes_the_address_as_to_and_counts_the_bytes() {
    let mem = MemoryTable::with_seed(1);
    let app = Leaked::new(100);
    let stag = mem
        .register_app(PD, StagScope::Pd, rw(), app.addr() as u64, app.mem(true))
        .unwrap();
    let r = mem.region(stag).unwrap();
    assert!(r.is_app_memory() && r.is_mapped() && r.is_valid());
    assert_eq!((r.base_to(), r.len()), (app.addr() as u64, 100));
    assert_eq!(mem.registered_bytes(), 100);
    assert!(r.guards_intact());
}

#[test]
fn remote_access_gets_every_check_of_an_owned_region() {
    let mem = MemoryTable::with_seed(2);
    let app = Leaked::new(64);
    let to = app.addr() as u64;
    let stag = mem
        .register_app(PD, StagScope::Pd, Access::REMOTE_READ, to, app.mem(true))
        .unwrap();
    let place = |stag, pd, to, n: usize| mem.place(stag, pd, S, to, &vec![9; n]);
    assert_eq!(place(stag, PD, to, 8), Err(AccessFault::AccessRights));
    let w = mem
        .register_app(PD, StagScope::Pd, rw(), to, app.mem(true))
        .unwrap();
    assert_eq!(place(w, PdId(2), to, 8), Err(AccessFault::NotAssociated));
    assert_eq!(place(w, PD, to - 1, 8), Err(AccessFault::BaseBounds));
    assert_eq!(place(w, PD, to + 57, 8), Err(AccessFault::BaseBounds));
    assert_eq!(
        mem.place(w, PD, S, u64::MAX - 2, &[0; 8]),
        Err(AccessFault::ToWrap)
    );
    assert_eq!(place(w, PD, to + 56, 8), Ok(()));
    assert_eq!(
        app.mem(false).to_vec(0, 64).unwrap(),
        [vec![0; 56], vec![9; 8]].concat(),
        "only the placement in bounds landed"
    );
    mem.invalidate(w).unwrap();
    assert_eq!(place(w, PD, to, 8), Err(AccessFault::InvalidStag));
    // The application wrote; a remote Read sees it.
    app.mem(true).write(3, b"mine").unwrap();
    assert_eq!(mem.read_remote(stag, PD, S, to + 3, 4).unwrap(), b"mine");
}

#[test]
fn read_only_memory_takes_no_write_right() {
    let mem = MemoryTable::with_seed(3);
    let app = Leaked::new(8);
    for access in [Access::REMOTE_WRITE, Access::LOCAL_WRITE] {
        assert_eq!(
            mem.register_app(PD, StagScope::Pd, access, 0, app.mem(false)),
            Err(MemError::ReadOnlyMemory)
        );
    }
    assert!(
        mem.register_app(PD, StagScope::Pd, Access::REMOTE_READ, 0, app.mem(false))
            .is_ok()
    );
    assert_eq!(
        mem.register_app(PD, StagScope::Pd, rw(), u64::MAX - 4, app.mem(true)),
        Err(MemError::RangeWraps {
            base_to: u64::MAX - 4,
            len: 8
        })
    );
}

/// A handle held past the removal (a posted receive, a lease) copies nothing
/// any more: the application may free its memory once removal returns.
#[test]
fn removal_ends_every_copy() {
    let mem = MemoryTable::with_seed(4);
    let app = Leaked::new(16);
    let stag = mem
        .register_app(PD, StagScope::Pd, rw(), 0, app.mem(true))
        .unwrap();
    let held = mem.region(stag).unwrap();
    assert!(held.write_at(0, b"before"));
    assert_eq!(mem.deregister(stag).unwrap(), Vec::<u8>::new());
    assert_eq!((mem.len(), mem.registered_bytes()), (0, 0));
    assert!(!held.is_mapped() && !held.is_valid());
    assert!(!held.write_at(0, b"after!"));
    let mut back = [0; 6];
    assert!(!held.read_at(0, &mut back));
    held.fill_at(0, 6, |b| b.copy_from_slice(b"filled"));
    drop(held.data_mut());
    assert_eq!(held.with_octets(0, 6, <[u8]>::to_vec), b"");
    assert_eq!(&app.mem(false).to_vec(0, 6).unwrap(), b"before");
    assert_eq!(
        mem.place(stag, PD, S, 0, b"x"),
        Err(AccessFault::InvalidStag)
    );
}

/// The copies the data paths use, and the whole-region views kept for the rest
/// of the stack: the octets a writer did not change keep the application's
/// concurrent writes.
#[test]
fn copies_and_views_leave_the_application_its_octets() {
    let mem = MemoryTable::with_seed(5);
    let app = Leaked::new(32);
    let own = app.mem(true);
    let stag = mem
        .register_app(PD, StagScope::Pd, rw(), 0, app.mem(true))
        .unwrap();
    let r = mem.region(stag).unwrap();

    let mut view = r.data_mut();
    view[0..4].copy_from_slice(b"rddp");
    own.write(20, b"app").unwrap(); // the application, meanwhile
    drop(view);
    let now = own.to_vec(0, 32).unwrap();
    assert_eq!((&now[0..4], &now[20..23]), (&b"rddp"[..], &b"app"[..]));
    assert_eq!(&r.data()[..], &now[..]);

    // A fill that stops early stores what it filled, nothing else.
    own.write(8, b"12345678").unwrap();
    let got = r.fill_at(8, 8, |b| {
        b[..3].copy_from_slice(b"abc");
        false
    });
    assert!(!got);
    assert_eq!(&own.to_vec(8, 8).unwrap(), b"abc45678");
    assert_eq!(r.with_octets(8, 3, <[u8]>::to_vec), b"abc");
    // Ranges past the end are cut, never a panic.
    assert_eq!(r.with_octets(30, 10, <[u8]>::len), 2);
    assert_eq!(r.with_octets(40, 10, <[u8]>::len), 0);
    assert!(!r.write_at(31, b"xy"));
    assert!(!r.write_at(usize::MAX, b"x"));
}

/// An RDMA Write and a Read Response, fed as segments to an RDMAP stream, land
/// in application memory at their TOs (virtual addresses).
#[test]
fn tagged_placements_land_in_application_memory() {
    let mut h = Host::new();
    let app = Leaked::new(64);
    let base = app.addr() as u64;
    let stag = h
        .mem
        .register_app(
            PdId(1),
            StagScope::Pd,
            rw() | Access::LOCAL_WRITE,
            base,
            app.mem(true),
        )
        .unwrap();
    assert!(h.feed(&tseg(true, Opcode::RDMA_WRITE, stag, base + 5, b"written")));
    h.read(7, stag, base + 40, 4);
    assert!(h.feed(&rresp(true, stag, base + 40, b"read")));
    let c = h.completions();
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].wr_id, c[0].opcode, c[0].status),
        (7, WcOpcode::RdmaRead, WcStatus::Success)
    );
    let seen = app.mem(false).to_vec(0, 64).unwrap();
    assert_eq!(&seen[5..12], b"written");
    assert_eq!(&seen[40..44], b"read");
    assert!(seen[..5].iter().chain(&seen[12..40]).all(|&o| o == 0));
}

/// A peer's Read Request served from application memory: the Read Response
/// carries what the application wrote there.
#[test]
fn read_responses_carry_application_memory() {
    let mut h = Host::new();
    let app = Leaked::new(32);
    let base = app.addr() as u64;
    app.mem(true).write(10, b"from the app").unwrap();
    let src = h
        .mem
        .register_app(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_READ,
            base,
            app.mem(false),
        )
        .unwrap();
    let mut body = Vec::new();
    body.extend_from_slice(&0x0BAD_0200u32.to_be_bytes()); // sink STag
    body.extend_from_slice(&0x9000u64.to_be_bytes()); // sink TO
    body.extend_from_slice(&12u32.to_be_bytes()); // size
    body.extend_from_slice(&src.0.to_be_bytes());
    body.extend_from_slice(&(base + 10).to_be_bytes());
    assert!(h.feed(&useg(
        true,
        Opcode::READ_REQUEST,
        0,
        qn::READ_REQUEST,
        1,
        0,
        &body
    )));
    let seg = h.s.poll_segment().expect("a Read Response").to_vec();
    let head = TaggedHeader::new(true, 0, 0, 0).to_bytes().len();
    assert_eq!(&seg[2..6], &0x0BAD_0200u32.to_be_bytes(), "sink STag");
    assert_eq!(&seg[6..14], &0x9000u64.to_be_bytes(), "sink TO");
    assert_eq!(&seg[head..], b"from the app");
}

/// The header-first receive (an LLP that reads a segment's payload straight
/// into its target): the LLP's read fills application memory, and a read cut
/// short stores only what it read.
#[test]
fn header_first_receive_fills_application_memory() {
    let mut h = Host::new();
    let app = Leaked::new(32);
    let base = app.addr() as u64;
    let stag = h
        .mem
        .register_app(PdId(1), StagScope::Pd, rw(), base, app.mem(true))
        .unwrap();
    app.mem(true).write(0, &[0xee; 32]).unwrap();
    let seg = tseg(true, Opcode::RDMA_WRITE, stag, base + 4, b"straight in");
    let (head, payload) = seg.split_at(14);
    let t =
        h.s.begin_segment(&h.mem, 0, head, payload.len(), Begin::Alone)
            .unwrap();
    let mut fill = |b: &mut [u8]| {
        b.copy_from_slice(payload);
        true
    };
    assert!(fill_target(&t, payload.len(), &mut fill, || None));
    h.s.finish_segment(&h.mem, true).unwrap();
    let seen = app.mem(false).to_vec(0, 32).unwrap();
    assert_eq!(&seen[4..15], b"straight in");
    assert!(seen[..4].iter().chain(&seen[15..]).all(|&o| o == 0xee));

    // An LLP read that fails after 3 octets.
    let seg = tseg(true, Opcode::RDMA_WRITE, stag, base + 20, b"cut short");
    let (head, payload) = seg.split_at(14);
    let t =
        h.s.begin_segment(&h.mem, 1, head, payload.len(), Begin::Alone)
            .unwrap();
    let mut fill = |b: &mut [u8]| {
        b[..3].copy_from_slice(&payload[..3]);
        false
    };
    assert!(!fill_target(&t, payload.len(), &mut fill, || None));
    let seen = app.mem(false).to_vec(0, 32).unwrap();
    assert_eq!(&seen[20..23], b"cut");
    assert!(seen[23..].iter().all(|&o| o == 0xee));
}
