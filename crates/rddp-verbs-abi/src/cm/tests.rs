//! The CM through its C entry points, in one process: refusals with their
//! errno, the channel fd's readiness, a listener on port 0, and connections
//! over loopback TCP accepted, rejected, refused and disconnected.

use super::*;
use crate::resources::{alloc_pd, create_cq};
use std::ffi::CString;

fn errno() -> c_int {
    // SAFETY: __errno_location is always valid.
    unsafe { *libc::__errno_location() }
}

/// Whether `fd` is readable within `ms` milliseconds.
fn readable(fd: c_int, ms: c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd.
    unsafe { libc::poll(&raw mut p, 1, ms) == 1 }
}

/// What an event said, copied out before it is acknowledged.
#[derive(Debug)]
struct Ev {
    kind: c_int,
    status: c_int,
    id: *mut rdma_cm_id,
    listen_id: *mut rdma_cm_id,
    private: Vec<u8>,
    ird: u8,
    ord: u8,
}

/// The next event on `ch`; fails the test after 10 s rather than hang.
fn next(ch: *mut rdma_event_channel) -> Ev {
    // SAFETY: `ch` is a live channel of the test.
    let fd = unsafe { (*ch).fd };
    assert!(readable(fd, 10_000), "no event within 10 s");
    let mut ev = ptr::null_mut();
    // SAFETY: live channel, our out-pointer.
    assert_eq!(unsafe { get_cm_event(ch, &raw mut ev) }, 0);
    // SAFETY: get_cm_event returned a live event.
    let e = unsafe { &*ev };
    let c = e.param.conn;
    let private = if c.private_data.is_null() {
        Vec::new()
    } else {
        // SAFETY: the event's private data holds private_data_len bytes.
        unsafe {
            std::slice::from_raw_parts(c.private_data.cast::<u8>(), c.private_data_len.into())
        }
        .to_vec()
    };
    let out = Ev {
        kind: e.event,
        status: e.status,
        id: e.id,
        listen_id: e.listen_id,
        private,
        ird: c.responder_resources,
        ord: c.initiator_depth,
    };
    // SAFETY: handed out above, acknowledged once.
    assert_eq!(unsafe { ack_cm_event(ev) }, 0);
    out
}

fn channel() -> *mut rdma_event_channel {
    // SAFETY: no arguments.
    let ch = unsafe { create_event_channel() };
    assert!(!ch.is_null());
    ch
}

fn id_on(ch: *mut rdma_event_channel) -> *mut rdma_cm_id {
    let mut id = ptr::null_mut();
    // SAFETY: live channel, our out-pointer.
    let r = unsafe { create_id(ch, &raw mut id, ptr::null_mut(), RDMA_PS_TCP) };
    assert_eq!(r, 0);
    id
}

fn sockaddr(a: SocketAddr) -> libc::sockaddr_storage {
    to_storage(a).0
}

/// A PD, a CQ and a QP of the id's context, made by `rdma_create_qp`.
fn qp_on(id: *mut rdma_cm_id) {
    // SAFETY: `id` is live; its verbs were set by bind/resolve.
    let ctx = unsafe { (*id).verbs };
    assert!(!ctx.is_null());
    // SAFETY: a live context of this library.
    let pd = unsafe { alloc_pd(ctx) };
    // SAFETY: as above; no channel.
    let cq = unsafe { create_cq(ctx, 16, ptr::null_mut(), ptr::null_mut(), 0) };
    assert!(!pd.is_null() && !cq.is_null());
    // SAFETY: all-zero is a valid ibv_qp_init_attr.
    let mut a: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    a.send_cq = cq;
    a.recv_cq = cq;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.qp_type = abi::IBV_QPT_RC;
    // SAFETY: live id, PD and attributes of ours.
    assert_eq!(unsafe { create_qp(id, pd, &raw mut a) }, 0, "{}", errno());
    // SAFETY: `id` is live.
    assert!(!unsafe { (*id).qp }.is_null());
}

/// A listening id on 127.0.0.1, port 0, and the port it got.
fn listener(ch: *mut rdma_event_channel) -> (*mut rdma_cm_id, u16) {
    let id = id_on(ch);
    let mut a = sockaddr("127.0.0.1:0".parse().unwrap());
    // SAFETY: live id, a sockaddr_in in the storage.
    assert_eq!(unsafe { bind_addr(id, (&raw mut a).cast()) }, 0);
    // SAFETY: live id.
    assert_eq!(unsafe { listen(id, 4) }, 0);
    // SAFETY: live id.
    let port = u16::from_be(unsafe { get_src_port(id) });
    assert_ne!(port, 0, "port 0 is replaced by the port bound");
    (id, port)
}

/// An id on `ch` with a QP, its address and route resolved to `port`.
fn client(ch: *mut rdma_event_channel, port: u16) -> *mut rdma_cm_id {
    let id = id_on(ch);
    let mut dst = sockaddr(SocketAddr::from(([127, 0, 0, 1], port)));
    // SAFETY: live id, a sockaddr_in in the storage.
    let r = unsafe { resolve_addr(id, ptr::null_mut(), (&raw mut dst).cast(), 2000) };
    assert_eq!(r, 0);
    assert_eq!(next(ch).kind, ADDR_RESOLVED);
    // SAFETY: live id.
    assert_eq!(unsafe { resolve_route(id, 2000) }, 0);
    assert_eq!(next(ch).kind, ROUTE_RESOLVED);
    qp_on(id);
    id
}

fn param(private: &[u8]) -> rdma_conn_param {
    rdma_conn_param {
        private_data: private.as_ptr().cast(),
        private_data_len: u8::try_from(private.len()).unwrap(),
        responder_resources: 1,
        initiator_depth: 1,
        flow_control: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: 0,
        qp_num: 0,
    }
}

#[test]
fn bad_input_gets_an_errno() {
    let ch = channel();
    let mut id = ptr::null_mut();
    // SAFETY: each call passes pointers the entry point checks or NULL.
    unsafe {
        assert_eq!(
            create_id(ch, ptr::null_mut(), ptr::null_mut(), RDMA_PS_TCP),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        for ps in [RDMA_PS_UDP, RDMA_PS_IB, RDMA_PS_IPOIB] {
            assert_eq!(create_id(ch, &raw mut id, ptr::null_mut(), ps), -1);
            assert_eq!(errno(), libc::EOPNOTSUPP);
        }
        assert_eq!(create_id(ch, &raw mut id, ptr::null_mut(), 7), -1);
        assert_eq!(errno(), libc::EINVAL);
        let bogus = 8usize as *mut rdma_event_channel;
        assert_eq!(
            create_id(bogus, &raw mut id, ptr::null_mut(), RDMA_PS_TCP),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);

        let id = id_on(ch);
        // A route needs an address; listening needs a bound one.
        assert_eq!(resolve_route(id, 100), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(listen(id, 1), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(bind_addr(id, ptr::null_mut()), -1);
        assert_eq!(errno(), libc::EAFNOSUPPORT);
        // Connecting or accepting without a QP, disconnecting without a
        // connection.
        assert_eq!(connect(id, ptr::null_mut()), -1);
        assert_eq!(accept(id, ptr::null_mut()), -1);
        assert_eq!(reject(id, ptr::null(), 0), -1);
        assert_eq!(disconnect(id), -1);
        assert_eq!(errno(), libc::EINVAL);
        let mut ev = ptr::null_mut();
        assert_eq!(get_cm_event(bogus, &raw mut ev), -1);
        assert_eq!(ack_cm_event(ptr::dangling_mut()), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(CStr::from_ptr(event_str(99)), c"UNKNOWN EVENT");
        assert_eq!(
            CStr::from_ptr(event_str(ESTABLISHED)),
            c"RDMA_CM_EVENT_ESTABLISHED"
        );
        assert_eq!(destroy_id(id), 0);
        assert_eq!(destroy_id(id), -1, "a destroyed id is stale");
        assert_eq!(errno(), libc::EINVAL);
        destroy_event_channel(ch);
    }
}

#[test]
fn the_channel_fd_is_readable_while_events_wait() {
    let ch = channel();
    let id = id_on(ch);
    // SAFETY: live channel.
    let fd = unsafe { (*ch).fd };
    assert!(!readable(fd, 0));
    let mut dst = sockaddr("127.0.0.1:9".parse().unwrap());
    // SAFETY: live id, a sockaddr_in in the storage.
    let r = unsafe { resolve_addr(id, ptr::null_mut(), (&raw mut dst).cast(), 100) };
    assert_eq!(r, 0);
    // SAFETY: live id.
    assert_eq!(unsafe { resolve_route(id, 100) }, 0);
    assert!(readable(fd, 0));
    let e = next(ch);
    assert_eq!((e.kind, e.id, e.status), (ADDR_RESOLVED, id, 0));
    assert!(readable(fd, 0), "one event is still queued");
    assert_eq!(next(ch).kind, ROUTE_RESOLVED);
    assert!(!readable(fd, 0));
    // SAFETY: live id; its verbs is this library's context.
    assert!(!unsafe { (*id).verbs }.is_null());
    // SAFETY: live id.
    assert_eq!(u16::from_be(unsafe { get_dst_port(id) }), 9);
    // Non-blocking, an empty channel is EAGAIN.
    // SAFETY: fcntl on our fd.
    unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) };
    let mut ev = ptr::null_mut();
    // SAFETY: live channel.
    assert_eq!(unsafe { get_cm_event(ch, &raw mut ev) }, -1);
    assert_eq!(errno(), libc::EAGAIN);
    // An event queued for an id that is destroyed is dropped with it.
    // SAFETY: live id.
    assert_eq!(unsafe { resolve_route(id, 100) }, 0);
    // SAFETY: live id, then the channel.
    unsafe {
        assert_eq!(destroy_id(id), 0);
        assert_eq!(get_cm_event(ch, &raw mut ev), -1);
        assert_eq!(errno(), libc::EAGAIN);
        destroy_event_channel(ch);
    }
}

#[test]
fn getaddrinfo_takes_a_numeric_host_and_port() {
    let host = CString::new("127.0.0.1").unwrap();
    let port = CString::new("7174").unwrap();
    // SAFETY: all-zero is a valid rdma_addrinfo.
    let mut hints: rdma_addrinfo = unsafe { std::mem::zeroed() };
    let mut res = ptr::null_mut();
    // SAFETY: NUL-terminated strings, our hints and out-pointer.
    unsafe {
        assert_eq!(
            getaddrinfo(host.as_ptr(), port.as_ptr(), &raw const hints, &raw mut res),
            0
        );
        assert!((*res).ai_src_addr.is_null());
        assert_eq!(
            from_sockaddr((*res).ai_dst_addr),
            Some("127.0.0.1:7174".parse().unwrap())
        );
        assert_eq!((*res).ai_port_space, RDMA_PS_TCP);
        freeaddrinfo(res);
        hints.ai_flags = RAI_PASSIVE;
        assert_eq!(
            getaddrinfo(ptr::null(), port.as_ptr(), &raw const hints, &raw mut res),
            0
        );
        assert_eq!(
            from_sockaddr((*res).ai_src_addr),
            Some("0.0.0.0:7174".parse().unwrap())
        );
        freeaddrinfo(res);
        let bad = CString::new("http").unwrap();
        assert_eq!(
            getaddrinfo(host.as_ptr(), bad.as_ptr(), &raw const hints, &raw mut res),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        hints.ai_port_space = RDMA_PS_UDP;
        assert_eq!(
            getaddrinfo(host.as_ptr(), port.as_ptr(), &raw const hints, &raw mut res),
            -1
        );
        assert_eq!(errno(), libc::EOPNOTSUPP);
    }
}

/// A connection request carries the initiator's private data and ORD to a
/// new id; accepted, both sides are ESTABLISHED; one side's disconnect is
/// DISCONNECTED on both.
#[test]
fn connect_accept_disconnect() {
    let (sch, cch) = (channel(), channel());
    let (lid, port) = listener(sch);
    let cid = client(cch, port);
    let mut p = param(b"hello");
    (p.responder_resources, p.initiator_depth) = (3, 5);
    // SAFETY: live id with a QP and a resolved route; `p` outlives the call.
    assert_eq!(unsafe { connect(cid, &raw mut p) }, 0);
    // SAFETY: as above; the id is already connecting.
    assert_eq!(unsafe { connect(cid, &raw mut p) }, -1);
    assert_eq!(errno(), libc::EINVAL);
    let req = next(sch);
    assert_eq!(req.kind, CONNECT_REQUEST);
    assert_eq!(req.listen_id, lid);
    assert_ne!(req.id, lid);
    assert_eq!(req.private, b"hello");
    // The Request carried the conn_param's IRD 3 and ORD 5: this side may
    // keep 3 Reads outstanding and must answer 5.
    assert_eq!((req.ird, req.ord), (5, 3));
    // SAFETY: the new id is live; its verbs is set.
    assert!(!unsafe { (*req.id).verbs }.is_null());
    qp_on(req.id);
    let mut reply = param(b"welcome");
    // SAFETY: live id with a QP, a request pending; `reply` outlives the call.
    assert_eq!(unsafe { accept(req.id, &raw mut reply) }, 0);
    // SAFETY: as above; the request was answered.
    assert_eq!(unsafe { accept(req.id, ptr::null_mut()) }, -1);
    let e = next(sch);
    assert_eq!((e.kind, e.id, e.status), (ESTABLISHED, req.id, 0));
    // The accepted id's destination is the initiator's address.
    // SAFETY: live id.
    let dst = unsafe { route_addr(req.id, true) }.expect("a destination");
    assert_eq!(dst.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_ne!(dst.port(), 0);
    let e = next(cch);
    assert_eq!((e.kind, e.id, e.status), (ESTABLISHED, cid, 0));
    // The initiator's ESTABLISHED carries the Reply's private data.
    assert_eq!(e.private, b"welcome");
    // The client's id moves to a new channel: its events follow it.
    let moved = channel();
    // SAFETY: live id and channel; then a stale channel.
    unsafe {
        assert_eq!(migrate_id(cid, moved), 0);
        assert_eq!((*cid).channel, moved);
        assert_eq!(migrate_id(cid, ptr::dangling_mut()), -1);
        assert_eq!(errno(), libc::EINVAL);
    }
    let cch_old = cch;
    let cch = moved;
    // SAFETY: live, connected id.
    assert_eq!(unsafe { disconnect(cid) }, 0);
    assert_eq!(next(cch).kind, DISCONNECTED);
    let e = next(sch);
    assert_eq!((e.kind, e.id), (DISCONNECTED, req.id));
    teardown(&[cid, req.id], lid, &[sch, cch, cch_old]);
}

/// `rdma_set_option` as the kernel takes it for an iWARP id: a type of
/// service (one octet) that the id's connections then carry, an ACK timeout
/// taken with no effect, REUSEADDR on taken and off refused, AFONLY refused,
/// a wrong length or level `EINVAL`.
#[test]
fn set_option_takes_what_an_iwarp_id_has() {
    let ch = channel();
    let id = id_on(ch);
    let (mut tos, mut ack, mut on, mut off) = (0x28u8, 14u8, 1 as c_int, 0 as c_int);
    let int = std::mem::size_of::<c_int>();
    // SAFETY: a live id; each value the caller's, of the length given.
    unsafe {
        assert_eq!(set_option(id, 0, 0, (&raw mut tos).cast(), 1), 0);
        assert_eq!(set_option(id, 0, 3, (&raw mut ack).cast(), 1), 0);
        assert_eq!(set_option(id, 0, 1, (&raw mut on).cast(), int), 0);
        assert_eq!(set_option(id, 0, 1, (&raw mut off).cast(), int), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!(set_option(id, 0, 2, (&raw mut on).cast(), int), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!(set_option(id, 0, 0, (&raw mut on).cast(), int), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(set_option(id, 1, 1, (&raw mut on).cast(), int), -1);
        assert_eq!(errno(), libc::EINVAL);
    }
    let state = id_state(id).expect("a live id");
    assert_eq!(cm_mpa_options(&state, Vec::new()).tos, Some(0x28));
    // SAFETY: the id and channel of this test, nothing else uses them.
    unsafe {
        assert_eq!(destroy_id(id), 0);
        destroy_event_channel(ch);
    }
}

/// Threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> Vec<String> {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim_end().to_string())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// The end of a connection reaches the CM through its QP's end hook, not a
/// thread per connection: with 8 connections up (16 ids) the CM runs no
/// thread besides its listener's and its one event thread, and a
/// disconnect is still DISCONNECTED on both sides of each.
#[test]
fn connections_cost_the_cm_no_thread_each() {
    const N: usize = 8;
    let (sch, cch) = (channel(), channel());
    let (lid, port) = listener(sch);
    let mut pairs = Vec::new();
    for _ in 0..N {
        let cid = client(cch, port);
        let mut p = param(b"");
        // SAFETY: live id with a QP and a resolved route.
        assert_eq!(unsafe { connect(cid, &raw mut p) }, 0);
        let req = next(sch);
        assert_eq!(req.kind, CONNECT_REQUEST);
        qp_on(req.id);
        // SAFETY: live id with a QP, a request pending.
        assert_eq!(unsafe { accept(req.id, ptr::null_mut()) }, 0);
        assert_eq!(next(sch).kind, ESTABLISHED);
        assert_eq!(next(cch).kind, ESTABLISHED);
        pairs.push((cid, req.id));
    }
    // (Other tests of this binary may run their own listeners meanwhile;
    // a connect's thread, and an accepted one's, ends once it is
    // established.)
    let extra: Vec<String> = threads_named("rdma_cm")
        .into_iter()
        .filter(|n| {
            !matches!(
                n.as_str(),
                "rdma_cm listen" | "rdma_cm connect" | "rdma_cm accept"
            )
        })
        .collect();
    assert!(extra.len() <= 1, "{} connections, threads {extra:?}", N);
    for &(cid, sid) in &pairs {
        // SAFETY: live, connected id.
        assert_eq!(unsafe { disconnect(cid) }, 0);
        let e = next(cch);
        assert_eq!((e.kind, e.id), (DISCONNECTED, cid));
        let e = next(sch);
        assert_eq!((e.kind, e.id), (DISCONNECTED, sid));
    }
    let ids: Vec<_> = pairs.iter().flat_map(|&(c, s)| [c, s]).collect();
    teardown(&ids, lid, &[sch, cch]);
}

/// Destroys the connected ids `ids` with their QPs, the listener `lid`, then
/// the channels.
fn teardown(ids: &[*mut rdma_cm_id], lid: *mut rdma_cm_id, channels: &[*mut rdma_event_channel]) {
    // SAFETY: live ids of the test with QPs, a live listener, live channels.
    unsafe {
        for &id in ids {
            destroy_qp(id);
            assert_eq!(destroy_id(id), 0);
        }
        assert_eq!(destroy_id(lid), 0);
        for &ch in channels {
            destroy_event_channel(ch);
        }
    }
}

/// A rejected request is REJECTED at the initiator; a port nobody listens
/// on is REJECTED with ECONNREFUSED.
#[test]
fn reject_and_refusal() {
    let (sch, cch) = (channel(), channel());
    let (lid, port) = listener(sch);
    let cid = client(cch, port);
    // SAFETY: live id with a QP and a resolved route.
    assert_eq!(unsafe { connect(cid, ptr::null_mut()) }, 0);
    let req = next(sch);
    assert_eq!(req.kind, CONNECT_REQUEST);
    // SAFETY: live id, a request pending; 2 bytes of private data.
    assert_eq!(unsafe { reject(req.id, b"no".as_ptr().cast(), 2) }, 0);
    let e = next(cch);
    assert_eq!((e.kind, e.id), (REJECTED, cid));
    assert!(e.status < 0, "{e:?}");

    // The listener gone, its port refuses.
    // SAFETY: live ids.
    unsafe {
        assert_eq!(destroy_id(req.id), 0);
        assert_eq!(destroy_id(lid), 0);
    }
    // The listener's thread wakes, sees it destroyed and closes the port.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "port {port} still listens after rdma_destroy_id"
        );
        std::thread::yield_now();
    }
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let free = closed.local_addr().unwrap().port();
    drop(closed);
    let cid2 = client(cch, free);
    // SAFETY: live id with a QP and a resolved route.
    assert_eq!(unsafe { connect(cid2, ptr::null_mut()) }, 0);
    let e = next(cch);
    assert_eq!(
        (e.kind, e.id, e.status),
        (REJECTED, cid2, -libc::ECONNREFUSED)
    );
    // SAFETY: live ids, then the channels.
    unsafe {
        destroy_qp(cid);
        destroy_qp(cid2);
        assert_eq!(destroy_id(cid), 0);
        assert_eq!(destroy_id(cid2), 0);
        destroy_event_channel(sch);
        destroy_event_channel(cch);
    }
}

/// A synchronous id (no channel) waits in each call for the event it
/// started and keeps it in `id->event`; `rdma_get_request` wants one.
#[test]
fn synchronous_ids_keep_their_events() {
    let mut id = ptr::null_mut();
    let mut dst = sockaddr("127.0.0.1:1".parse().unwrap());
    // SAFETY: our out-pointer, a live id, a sockaddr of ours.
    unsafe {
        assert_eq!(
            create_id(ptr::null_mut(), &raw mut id, ptr::null_mut(), RDMA_PS_TCP),
            0
        );
        assert!(!(*id).channel.is_null());
        assert_eq!(
            resolve_addr(id, ptr::null_mut(), (&raw mut dst).cast(), 2000),
            0
        );
        assert_eq!((*(*id).event).event, ADDR_RESOLVED);
        assert_eq!(resolve_route(id, 2000), 0);
        assert_eq!((*(*id).event).event, ROUTE_RESOLVED);
        // Not listening, and an asynchronous id has no request to get.
        let mut child = ptr::null_mut();
        let ch = channel();
        let other = id_on(ch);
        assert_eq!(get_request(other, &raw mut child), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(destroy_id(other), 0);
        destroy_event_channel(ch);
        // The kept event and the id's own channel go with it.
        assert_eq!(destroy_id(id), 0);
        assert!(!reg().ids.contains_key(&(id as usize)));
    }
}

/// An active endpoint: `rdma_create_ep` resolves and makes the QP, with the
/// default PD and CQs of its own (context the id, a channel each), and a
/// synchronous `rdma_connect` to a port nobody listens on fails with
/// `ECONNREFUSED` (REJECTED), as librdmacm's.
#[test]
fn an_active_endpoint_makes_its_qp_and_connects_synchronously() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let host = CString::new("127.0.0.1").unwrap();
    let port = CString::new(closed.port().to_string()).unwrap();
    let mut res = ptr::null_mut();
    // SAFETY: C strings and our out-pointers; the attr is ours.
    unsafe {
        assert_eq!(
            getaddrinfo(host.as_ptr(), port.as_ptr(), ptr::null(), &raw mut res),
            0
        );
        let mut attr: ibv_qp_init_attr = std::mem::zeroed();
        attr.cap.max_send_wr = 1;
        attr.cap.max_recv_wr = 1;
        attr.cap.max_send_sge = 1;
        attr.cap.max_recv_sge = 1;
        attr.cap.max_inline_data = 16;
        let mut id = ptr::null_mut();
        assert_eq!(
            create_ep(&raw mut id, res, ptr::null_mut(), &raw mut attr),
            0
        );
        assert!(!(*id).qp.is_null() && !(*id).pd.is_null());
        assert!(!(*id).send_cq.is_null() && !(*id).recv_cq.is_null());
        assert!(!(*id).send_cq_channel.is_null() && !(*id).recv_cq_channel.is_null());
        assert_eq!((*(*id).recv_cq).cq_context, id.cast());
        assert_eq!(attr.recv_cq, (*id).recv_cq);
        assert!(attr.cap.max_inline_data >= 16);
        assert_eq!(connect(id, ptr::null_mut()), -1);
        assert_eq!(errno(), libc::ECONNREFUSED);
        assert_eq!((*(*id).event).event, REJECTED);
        destroy_ep(id);
        assert!(!reg().ids.contains_key(&(id as usize)));
        freeaddrinfo(res);
    }
}

/// (IRD, ORD) of the connected QP of `id`, as `ibv_query_qp` reports them.
fn qp_ird_ord(id: *mut rdma_cm_id) -> (u8, u8) {
    // SAFETY: all-zero is valid for both; `id` is live with a QP.
    unsafe {
        let mut a: ibv_qp_attr = std::mem::zeroed();
        let mut init: ibv_qp_init_attr = std::mem::zeroed();
        assert_eq!(qp::query_qp((*id).qp, &raw mut a, 0, &raw mut init), 0);
        (a.max_dest_rd_atomic, a.max_rd_atomic)
    }
}

/// `rdma_accept`'s conn_param gives the Reply its IRD and ORD (RFC 6581
/// section 5.1), as the kernel's iw_cm: the initiator's ORD comes down to
/// the responder's IRD. A NULL conn_param answers what the request asked.
#[test]
fn accept_offers_its_conn_params_ird_and_ord() {
    for (given, want_server, want_client) in [
        // The initiator asks IRD 3, ORD 5.
        (Some((2, 1)), (2, 1), (3, 2)),
        (None, (5, 3), (3, 5)),
    ] {
        let (sch, cch) = (channel(), channel());
        let (lid, port) = listener(sch);
        let cid = client(cch, port);
        let mut p = param(b"");
        (p.responder_resources, p.initiator_depth) = (3, 5);
        // SAFETY: live id with a QP and a resolved route.
        assert_eq!(unsafe { connect(cid, &raw mut p) }, 0);
        let req = next(sch);
        assert_eq!(req.kind, CONNECT_REQUEST);
        qp_on(req.id);
        let mut a = param(b"");
        let ap = match given {
            Some((ird, ord)) => {
                (a.responder_resources, a.initiator_depth) = (ird, ord);
                &raw mut a
            }
            None => ptr::null_mut(),
        };
        // SAFETY: live id with a QP, a request pending.
        assert_eq!(unsafe { accept(req.id, ap) }, 0);
        assert_eq!(next(sch).kind, ESTABLISHED);
        assert_eq!(next(cch).kind, ESTABLISHED);
        assert_eq!(qp_ird_ord(req.id), want_server, "accepting with {given:?}");
        assert_eq!(qp_ird_ord(cid), want_client, "accepting with {given:?}");
        teardown(&[cid, req.id], lid, &[sch, cch]);
    }
}

/// `rdma_getaddrinfo` with neither node nor service takes the addresses its
/// hints carry (libfabric's verbs provider asks so), and a source address
/// from the hints in any case; with neither, `EINVAL`.
#[test]
fn getaddrinfo_takes_addresses_from_its_hints() {
    let mut dst = sockaddr("127.0.0.1:4791".parse().unwrap());
    let mut src = sockaddr("127.0.0.1:0".parse().unwrap());
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: all-zero is a valid rdma_addrinfo (NULL pointers).
    let mut hints: rdma_addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_port_space = RDMA_PS_TCP;
    hints.ai_dst_addr = (&raw mut dst).cast();
    hints.ai_dst_len = len;
    hints.ai_src_addr = (&raw mut src).cast();
    hints.ai_src_len = len;
    let mut res = ptr::null_mut();
    // SAFETY: our hints, addresses and out-pointer; the result freed once.
    unsafe {
        assert_eq!(
            getaddrinfo(ptr::null(), ptr::null(), &raw const hints, &raw mut res),
            0
        );
        let r = &*res;
        assert_eq!(
            from_sockaddr(r.ai_dst_addr),
            Some("127.0.0.1:4791".parse().unwrap())
        );
        assert_eq!(
            from_sockaddr(r.ai_src_addr),
            Some("127.0.0.1:0".parse().unwrap())
        );
        assert_eq!(
            (r.ai_family, r.ai_qp_type),
            (libc::AF_INET, abi::IBV_QPT_RC)
        );
        freeaddrinfo(res);
        let empty: rdma_addrinfo = std::mem::zeroed();
        assert_eq!(
            getaddrinfo(ptr::null(), ptr::null(), &raw const empty, &raw mut res),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(
            getaddrinfo(ptr::null(), ptr::null(), ptr::null(), &raw mut res),
            -1
        );
    }
}

/// The id of a CONNECT_REQUEST carries the connection's addresses when the
/// request is taken, as the kernel's rdma_cm fills it from the iWARP CM's
/// event: the local one the connection's (not the listener's wildcard), the
/// peer's where the request came from, as the initiator's id has them the
/// other way round.
#[test]
fn a_request_carries_the_connections_addresses() {
    let (sch, cch) = (channel(), channel());
    let lid = id_on(sch);
    let mut any = sockaddr("0.0.0.0:0".parse().unwrap());
    // SAFETY: live id, a sockaddr_in in the storage.
    assert_eq!(unsafe { bind_addr(lid, (&raw mut any).cast()) }, 0);
    // SAFETY: live id.
    assert_eq!(unsafe { listen(lid, 4) }, 0);
    // SAFETY: live id.
    let port = u16::from_be(unsafe { get_src_port(lid) });
    let cid = client(cch, port);
    let mut p = param(b"");
    // SAFETY: live id with a QP and a resolved route; `p` outlives the call.
    assert_eq!(unsafe { connect(cid, &raw mut p) }, 0);
    let req = next(sch);
    assert_eq!(req.kind, CONNECT_REQUEST);
    // SAFETY: the request's id is live.
    let (here, peer) = unsafe { (route_addr(req.id, false), route_addr(req.id, true)) };
    assert_eq!(here, Some(SocketAddr::from(([127, 0, 0, 1], port))));
    let peer = peer.expect("the initiator's address");
    assert_eq!(peer.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_ne!(peer.port(), 0);
    qp_on(req.id);
    // SAFETY: live id with a QP, a request pending.
    assert_eq!(unsafe { accept(req.id, ptr::null_mut()) }, 0);
    assert_eq!(next(sch).kind, ESTABLISHED);
    assert_eq!(next(cch).kind, ESTABLISHED);
    // SAFETY: both ids are live and connected.
    unsafe {
        assert_eq!(route_addr(req.id, true), Some(peer));
        assert_eq!(disconnect(cid), 0);
    }
    assert_eq!(next(cch).kind, DISCONNECTED);
    assert_eq!(next(sch).kind, DISCONNECTED);
    teardown(&[cid, req.id], lid, &[sch, cch]);
}

/// `rdma_resolve_addr` without a source address, or with a wildcard one,
/// takes the address the host's routing picks toward the destination (the
/// kernel's rdma_cm does; libfabric's verbs provider names its endpoints
/// with it); a source given with its address is kept; a destination with
/// no route is ADDR_ERROR with the negative errno, as the kernel reports it.
#[test]
fn resolve_addr_takes_the_routed_source() {
    let ch = channel();
    let mut dst = sockaddr("127.0.0.1:9".parse().unwrap());
    let mut any = sockaddr("0.0.0.0:0".parse().unwrap());
    let mut given = sockaddr("127.0.0.2:0".parse().unwrap());
    for (src, want) in [
        (ptr::null_mut(), [127, 0, 0, 1]),
        ((&raw mut any).cast(), [127, 0, 0, 1]),
        ((&raw mut given).cast(), [127, 0, 0, 2]),
    ] {
        let id = id_on(ch);
        // SAFETY: live id; NULL or a sockaddr_in, and one, in the storages.
        let r = unsafe { resolve_addr(id, src, (&raw mut dst).cast(), 100) };
        assert_eq!(r, 0);
        assert_eq!(next(ch).kind, ADDR_RESOLVED);
        // SAFETY: live id.
        let here = unsafe { route_addr(id, false) };
        assert_eq!(here.map(|a| a.ip()), Some(IpAddr::from(want)));
        // SAFETY: live id.
        assert_eq!(unsafe { destroy_id(id) }, 0);
    }
    // Broadcast: the route exists but is not for a connection (EACCES
    // without SO_BROADCAST).
    let id = id_on(ch);
    let mut bcast = sockaddr("255.255.255.255:9".parse().unwrap());
    // SAFETY: live id, a sockaddr_in in the storage.
    let r = unsafe { resolve_addr(id, ptr::null_mut(), (&raw mut bcast).cast(), 100) };
    assert_eq!(r, 0);
    let e = next(ch);
    assert_eq!((e.kind, e.status), (ADDR_ERROR, -libc::EACCES));
    // SAFETY: live id, then the channel.
    unsafe {
        assert_eq!(destroy_id(id), 0);
        destroy_event_channel(ch);
    }
}
