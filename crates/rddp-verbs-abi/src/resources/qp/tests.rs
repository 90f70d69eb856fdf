//! Two verbs QPs of two contexts connected over loopback TCP (port 0)
//! through the connection manager's hook ([`accept_mpa`], [`connect_mpa`]),
//! then RDMA Write, Read, Send/Recv through the C-level entry points
//! (`post_send`/`post_recv` through the context's ops, `poll_cq`), data
//! checked in memory registered with `ibv_reg_mr`.

use super::*;
use crate::abi::{ibv_context, ibv_cq, ibv_mr, ibv_pd, ibv_send_wr_rdma, ibv_send_wr_wr, ibv_wc};
use crate::exports::{close_device, open_device, the_device};
use crate::resources::mr::reg_mr;
use crate::resources::{alloc_pd, create_cq};
use rddp::transport::mpa::Listener;
use rddp_mpa::MpaOptions;
use std::time::{Duration, Instant};

/// Application memory: a leaked heap block, read only through raw copies.
struct Buf {
    at: *mut u8,
    len: usize,
}

impl Buf {
    fn new(len: usize) -> Self {
        let at = Box::into_raw(vec![0u8; len].into_boxed_slice()).cast::<u8>();
        Self { at, len }
    }
    fn addr(&self, off: usize) -> u64 {
        self.at as u64 + off as u64
    }
    fn set(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        // SAFETY: within the block; nothing else writes these octets now.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.at.add(off), data.len()) };
    }
    fn get(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off + len <= self.len);
        let mut v = vec![0u8; len];
        // SAFETY: within the block; the stack's writes there have completed.
        unsafe { ptr::copy_nonoverlapping(self.at.add(off), v.as_mut_ptr(), len) };
        v
    }
}

/// One side: a context, a PD, a CQ, an RC QP in INIT, a buffer and its MR.
struct Side {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    cq: *mut ibv_cq,
    qp: *mut ibv_qp,
    buf: Buf,
    mr: *mut ibv_mr,
}

const ALL: c_int = (abi::IBV_ACCESS_LOCAL_WRITE
    | abi::IBV_ACCESS_REMOTE_WRITE
    | abi::IBV_ACCESS_REMOTE_READ) as c_int;

fn side(sq_sig_all: bool) -> Side {
    side_sized(sq_sig_all, 64, 16, 16)
}

/// A side whose one CQ has `cqe` entries and whose QP's queues are
/// `send_wr` and `recv_wr` deep.
fn side_sized(sq_sig_all: bool, cqe: c_int, send_wr: u32, recv_wr: u32) -> Side {
    // SAFETY: the constructors with valid arguments.
    unsafe {
        let ctx = open_device(the_device());
        let pd = alloc_pd(ctx);
        let cq = create_cq(ctx, cqe, ptr::null_mut(), ptr::null_mut(), 0);
        assert!(!ctx.is_null() && !pd.is_null() && !cq.is_null());
        let mut ia = ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: send_wr,
                max_recv_wr: recv_wr,
                max_send_sge: 2,
                max_recv_sge: 1,
                max_inline_data: 64,
            },
            qp_type: abi::IBV_QPT_RC,
            sq_sig_all: c_int::from(sq_sig_all),
        };
        let qp = create_qp(pd, &mut ia);
        assert!(!qp.is_null());
        let mut a = zeroed_attr();
        a.qp_state = abi::IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = ALL as u32;
        let mask = abi::IBV_QP_STATE | abi::IBV_QP_PORT | abi::IBV_QP_ACCESS_FLAGS;
        assert_eq!(modify_qp(qp, &mut a, mask), 0);
        let buf = Buf::new(4096);
        let mr = reg_mr(pd, buf.at.cast(), buf.len, ALL);
        assert!(!mr.is_null());
        Side {
            ctx,
            pd,
            cq,
            qp,
            buf,
            mr,
        }
    }
}

impl Side {
    fn lkey(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { (*self.mr).lkey }
    }

    fn sge(&self, off: usize, len: u32) -> ibv_sge {
        ibv_sge {
            addr: self.buf.addr(off),
            length: len,
            lkey: self.lkey(),
        }
    }

    /// `ibv_post_send` as verbs.h's inline does it: through the context's ops.
    fn post_send(&self, wr: &mut ibv_send_wr) -> c_int {
        let mut bad = ptr::null_mut();
        // SAFETY: a live context; the QP and work request are valid.
        unsafe {
            let f = (*self.ctx).ops.post_send.unwrap();
            f(self.qp.cast(), (wr as *mut ibv_send_wr).cast(), &mut bad)
        }
    }

    fn post_recv(&self, wr_id: u64, sge: &mut ibv_sge) -> c_int {
        let mut wr = ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: sge,
            num_sge: 1,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: as post_send.
        unsafe {
            let f = (*self.ctx).ops.post_recv.unwrap();
            f(self.qp.cast(), (&raw mut wr).cast(), &mut bad)
        }
    }

    /// Polls through the ops until `n` completions came (5 s at most).
    fn poll(&self, n: usize) -> Vec<ibv_wc> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < n && Instant::now() < deadline {
            let mut wc = [ibv_wc::default(); 8];
            // SAFETY: a live CQ and an array of 8.
            let k = unsafe {
                let f = (*self.ctx).ops.poll_cq.unwrap();
                f(self.cq.cast(), 8, wc.as_mut_ptr().cast())
            };
            got.extend_from_slice(&wc[..k as usize]);
            if k == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        got
    }

    fn qp_num(&self) -> u32 {
        // SAFETY: a live QP.
        unsafe { (*self.qp).qp_num }
    }

    fn state(&self) -> c_int {
        // SAFETY: a live QP.
        unsafe { (*self.qp).state }
    }
}

fn send_wr(wr_id: u64, opcode: c_int, sges: &mut [ibv_sge], flags: u32) -> ibv_send_wr {
    ibv_send_wr {
        wr_id,
        next: ptr::null_mut(),
        sg_list: sges.as_mut_ptr(),
        num_sge: sges.len() as c_int,
        opcode,
        send_flags: flags,
        imm_data: 0,
        wr: ibv_send_wr_wr { _atomic: [0; 4] },
        qp_type: 0,
        _tail: [0; 6],
    }
}

fn rdma(wr: &mut ibv_send_wr, remote_addr: u64, rkey: u32) {
    wr.wr = ibv_send_wr_wr {
        rdma: ibv_send_wr_rdma { remote_addr, rkey },
    };
}

/// `ibv_modify_qp(qp, a, IBV_QP_STATE)`.
fn to_state(qp: *mut ibv_qp, a: &mut ibv_qp_attr) -> c_int {
    // SAFETY: the QP is checked against the registry; `a` is a valid struct.
    unsafe { modify_qp(qp, a, abi::IBV_QP_STATE) }
}

/// Waits until `f` holds (5 s at most).
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// A server and a client side (the client signalling every send), their QPs
/// connected over loopback TCP (port 0) through the CM hook.
fn connected() -> (Side, Side) {
    let server = side(false);
    let client = side(true);
    connect(&server, &client);
    (server, client)
}

/// Connects `client`'s QP to `server`'s over loopback TCP (port 0) through
/// the CM hook.
fn connect(server: &Side, client: &Side) {
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sqp = server.qp as usize;
    let acceptor = std::thread::spawn(move || accept_mpa(sqp as *mut ibv_qp, &listener));
    connect_mpa(client.qp, addr, MpaOptions::default()).unwrap();
    acceptor.join().unwrap().unwrap();
}

#[test]
fn two_verbs_qps_over_loopback_tcp() {
    let server = side(false);
    let client = side(true);
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();

    // rping's order: the receive is posted before the connection exists.
    let mut rsge = server.sge(1024, 64);
    assert_eq!(server.post_recv(1, &mut rsge), 0);
    // Not connected yet: RTR (nothing more than INIT over iWARP), no RTS,
    // no sends.
    let mut a = zeroed_attr();
    a.qp_state = abi::IBV_QPS_RTS;
    assert_eq!(to_state(client.qp, &mut a), libc::EINVAL);
    a.qp_state = abi::IBV_QPS_RTR;
    assert_eq!(to_state(client.qp, &mut a), 0);

    let sqp = server.qp as usize;
    let acceptor = std::thread::spawn(move || accept_mpa(sqp as *mut ibv_qp, &listener));
    connect_mpa(client.qp, addr, MpaOptions::default()).unwrap();
    acceptor.join().unwrap().unwrap();
    assert_eq!(server.state(), abi::IBV_QPS_RTS);
    assert_eq!(client.state(), abi::IBV_QPS_RTS);
    // Attached once: a second connection is refused before any is made.
    assert_eq!(
        connect_mpa(client.qp, addr, MpaOptions::default()).map(drop),
        Err(libc::EINVAL)
    );
    // RTS -> RTS is accepted (librdmacm may do it).
    a.qp_state = abi::IBV_QPS_RTS;
    assert_eq!(to_state(client.qp, &mut a), 0);

    // RDMA Write of 100 octets into the server's buffer at 0.
    let pattern: Vec<u8> = (0..100u8).collect();
    client.buf.set(0, &pattern);
    let (srkey, sbase) = (server.lkey(), server.buf.addr(0));
    let mut s = [client.sge(0, 100)];
    let mut w = send_wr(10, abi::IBV_WR_RDMA_WRITE, &mut s, 0);
    rdma(&mut w, sbase, srkey);
    assert_eq!(client.post_send(&mut w), 0);
    // A Send of two SGEs, gathered: "hello " + "world".
    client.buf.set(200, b"hello ");
    client.buf.set(300, b"world");
    let mut s2 = [client.sge(200, 6), client.sge(300, 5)];
    let mut w2 = send_wr(11, abi::IBV_WR_SEND, &mut s2, 0);
    assert_eq!(client.post_send(&mut w2), 0);
    let wcs = client.poll(2);
    assert_eq!(wcs.len(), 2, "{wcs:?}");
    assert_eq!(
        (wcs[0].wr_id, wcs[0].status, wcs[0].opcode),
        (10, 0, abi::IBV_WC_RDMA_WRITE)
    );
    assert_eq!(wcs[0].byte_len, 100);
    assert_eq!(wcs[0].qp_num, client.qp_num());
    assert_eq!(
        (wcs[1].wr_id, wcs[1].status, wcs[1].opcode),
        (11, 0, abi::IBV_WC_SEND)
    );
    let rwc = server.poll(1);
    assert_eq!(rwc.len(), 1);
    assert_eq!(
        (rwc[0].wr_id, rwc[0].status, rwc[0].opcode),
        (1, 0, abi::IBV_WC_RECV)
    );
    assert_eq!(rwc[0].byte_len, 11);
    assert_eq!(rwc[0].qp_num, server.qp_num());
    assert_eq!(server.buf.get(1024, 11), b"hello world");
    // The Write was placed before the Send that followed it.
    assert_eq!(server.buf.get(0, 100), pattern);

    // RDMA Read of the server's 100 octets into the client's buffer at 2048.
    let mut s3 = [client.sge(2048, 100)];
    let mut r = send_wr(12, abi::IBV_WR_RDMA_READ, &mut s3, 0);
    rdma(&mut r, sbase, srkey);
    assert_eq!(client.post_send(&mut r), 0);
    let wcs = client.poll(1);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].status, wcs[0].opcode),
        (12, 0, abi::IBV_WC_RDMA_READ)
    );
    assert_eq!(wcs[0].byte_len, 100);
    assert_eq!(client.buf.get(2048, 100), pattern);

    // The server sends inline (unsignaled: sq_sig_all 0, no SIGNALED), from
    // a stack buffer it may reuse at once, then a signaled Write.
    let mut csge = client.sge(1024, 64);
    assert_eq!(client.post_recv(2, &mut csge), 0);
    let mut stack = *b"inline!";
    let mut s4 = [ibv_sge {
        addr: stack.as_mut_ptr() as u64,
        length: 7,
        lkey: 0xdead_beef, // not checked for inline data
    }];
    let mut w4 = send_wr(20, abi::IBV_WR_SEND, &mut s4, abi::IBV_SEND_INLINE);
    assert_eq!(server.post_send(&mut w4), 0);
    stack.fill(0);
    server.buf.set(512, b"xyz");
    let (crkey, cbase) = (client.lkey(), client.buf.addr(3000));
    let mut s5 = [server.sge(512, 3)];
    let mut w5 = send_wr(21, abi::IBV_WR_RDMA_WRITE, &mut s5, abi::IBV_SEND_SIGNALED);
    rdma(&mut w5, cbase, crkey);
    assert_eq!(server.post_send(&mut w5), 0);
    let wcs = server.poll(1);
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (21, 0));
    let wcs = client.poll(1);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].opcode, wcs[0].byte_len),
        (2, abi::IBV_WC_RECV, 7)
    );
    assert_eq!(client.buf.get(1024, 7), b"inline!");
    assert!(eventually(|| client.buf.get(3000, 3) == b"xyz"));

    // A receive of three SGEs (scattered at poll_cq) under the largest
    // wr_id, then one of one SGE under a wr_id rddp keeps for itself.
    let mut three_r = [
        server.sge(2000, 4),
        server.sge(2100, 4),
        server.sge(2200, 64),
    ];
    let mut rwr = ibv_recv_wr {
        wr_id: u64::MAX,
        next: ptr::null_mut(),
        sg_list: three_r.as_mut_ptr(),
        num_sge: 3,
    };
    let mut badr = ptr::null_mut();
    // SAFETY: through the ops, a live QP and a valid receive.
    let r = unsafe {
        let f = (*server.ctx).ops.post_recv.unwrap();
        f(server.qp.cast(), (&raw mut rwr).cast(), &mut badr)
    };
    assert_eq!(r, 0);
    let mut one_r = server.sge(2400, 64);
    rwr.wr_id = 1 << 63;
    rwr.sg_list = &mut one_r;
    rwr.num_sge = 1;
    // SAFETY: as above.
    let r = unsafe {
        let f = (*server.ctx).ops.post_recv.unwrap();
        f(server.qp.cast(), (&raw mut rwr).cast(), &mut badr)
    };
    assert_eq!(r, 0);
    client.buf.set(400, b"0123456789ab");
    let mut s_a = [client.sge(400, 10)];
    let mut wa = send_wr(40, abi::IBV_WR_SEND, &mut s_a, 0);
    assert_eq!(client.post_send(&mut wa), 0);
    let mut s_b = [client.sge(410, 2)];
    let mut wb = send_wr(41, abi::IBV_WR_SEND, &mut s_b, 0);
    assert_eq!(client.post_send(&mut wb), 0);
    assert_eq!(client.poll(2).len(), 2);
    let rwc = server.poll(2);
    assert_eq!(rwc.len(), 2);
    assert_eq!(
        (rwc[0].wr_id, rwc[0].status, rwc[0].byte_len),
        (u64::MAX, 0, 10)
    );
    assert_eq!(
        (rwc[1].wr_id, rwc[1].status, rwc[1].byte_len),
        (1 << 63, 0, 2)
    );
    assert_eq!(server.buf.get(2000, 4), b"0123");
    assert_eq!(server.buf.get(2100, 4), b"4567");
    assert_eq!(server.buf.get(2200, 2), b"89");
    assert_eq!(server.buf.get(2400, 2), b"ab");

    // A failed local check completes with LOC_PROT_ERR; the QP goes on.
    let mut bad = [ibv_sge {
        lkey: 0x0bad_0bad,
        ..client.sge(0, 10)
    }];
    let mut w6 = send_wr(30, abi::IBV_WR_SEND, &mut bad, 0);
    assert_eq!(client.post_send(&mut w6), 0);
    let mut past = [client.sge(4090, 10)];
    let mut w7 = send_wr(31, abi::IBV_WR_RDMA_WRITE, &mut past, 0);
    rdma(&mut w7, sbase, srkey);
    assert_eq!(client.post_send(&mut w7), 0);
    let wcs = client.poll(2);
    assert_eq!(wcs.len(), 2);
    for (wc, id) in wcs.iter().zip([30, 31]) {
        assert_eq!((wc.wr_id, wc.status), (id, abi::IBV_WC_LOC_PROT_ERR));
    }
    // Inline data at NULL is a bad SGE, not a read of address 0.
    let mut null = [ibv_sge {
        addr: 0,
        length: 8,
        lkey: 0,
    }];
    let mut w10 = send_wr(34, abi::IBV_WR_SEND, &mut null, abi::IBV_SEND_INLINE);
    assert_eq!(client.post_send(&mut w10), 0);
    let wcs = client.poll(1);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].status),
        (34, abi::IBV_WC_LOC_PROT_ERR)
    );
    // Too many SGEs, an atomic: refused at posting with *bad_wr.
    let mut three = [client.sge(0, 1), client.sge(1, 1), client.sge(2, 1)];
    let mut w8 = send_wr(32, abi::IBV_WR_SEND, &mut three, 0);
    w8.num_sge = 9;
    assert_eq!(client.post_send(&mut w8), libc::EINVAL);
    let mut w9 = send_wr(33, abi::IBV_WR_ATOMIC_CMP_AND_SWP, &mut three, 0);
    assert_eq!(client.post_send(&mut w9), libc::EOPNOTSUPP);

    // The server disconnects gracefully (rdma_disconnect): its QP is in ERR
    // at once, a Send posted now is flushed; the client's receive posted
    // before is flushed when the close arrives.
    let mut csge = client.sge(1024, 64);
    assert_eq!(client.post_recv(4, &mut csge), 0);
    disconnect(server.qp).unwrap();
    assert_eq!(disconnect(server.qp), Err(libc::EINVAL));
    assert_eq!(server.state(), abi::IBV_QPS_ERR);
    let mut s_c = [server.sge(0, 4)];
    let mut wc_ = send_wr(50, abi::IBV_WR_SEND, &mut s_c, abi::IBV_SEND_SIGNALED);
    assert_eq!(server.post_send(&mut wc_), 0);
    let wcs = server.poll(1);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].status),
        (50, abi::IBV_WC_WR_FLUSH_ERR)
    );
    let wcs = client.poll(1);
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (4, abi::IBV_WC_WR_FLUSH_ERR));

    // ERR flushes what is posted; the CQs and PD are busy until destroy.
    let mut csge = client.sge(1024, 64);
    assert_eq!(client.post_recv(3, &mut csge), 0);
    a.qp_state = abi::IBV_QPS_ERR;
    assert_eq!(to_state(client.qp, &mut a), 0);
    let wcs = client.poll(1);
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (3, abi::IBV_WC_WR_FLUSH_ERR));
    // SAFETY: live objects; destroy in order.
    unsafe {
        assert_eq!(super::super::destroy_cq(client.cq), libc::EBUSY);
        assert_eq!(super::super::dealloc_pd(client.pd), libc::EBUSY);
        assert_eq!(destroy_qp(client.qp), 0);
        assert_eq!(destroy_qp(server.qp), 0);
        assert_eq!(super::super::destroy_cq(client.cq), 0);
        assert_eq!(close_device(client.ctx), 0);
        assert_eq!(close_device(server.ctx), 0);
    }
}

/// Completions waiting in `side`'s CQ. A test waits for these, not for the
/// last message's octets in its buffer: placement comes before the
/// completion is queued, and a loaded machine shows the gap.
fn waiting(side: &Side) -> usize {
    // SAFETY: a live CQ is create_cq's Box<Cq>.
    unsafe { (*side.cq.cast::<crate::resources::Cq>()).cq.len() }
}

/// perftest's shape: each QP's send and receive queues on one CQ of the
/// send depth (8 entries; 8 + 32 work requests), which the kernel accepts
/// and rddp refused at connect (ENOMEM). It connects; the server lets all
/// 32 receive completions wait, four times its `cqe`, and finds every one,
/// in order, with its data; the overrun raised `IBV_EVENT_CQ_ERR`.
#[test]
fn queues_overcommitting_their_cq_connect_and_lose_nothing() {
    let server = side_sized(false, 8, 8, 32);
    let client = side_sized(true, 8, 8, 32);
    // SAFETY: live CQs.
    assert_eq!(unsafe { ((*server.cq).cqe, (*client.cq).cqe) }, (8, 8));
    for i in 0..32 {
        let mut r = server.sge(64 * i, 64);
        assert_eq!(server.post_recv(i as u64, &mut r), 0);
    }
    connect(&server, &client);
    // Four rounds of the send queue's depth, each taken by the client.
    for round in 0..4u8 {
        for k in 0..8u8 {
            let n = round * 8 + k;
            client.buf.set(2048 + 16 * usize::from(n), &[n; 16]);
            let mut g = [client.sge(2048 + 16 * usize::from(n), 16)];
            let mut w = send_wr(u64::from(n), abi::IBV_WR_SEND, &mut g, 0);
            assert_eq!(client.post_send(&mut w), 0);
        }
        assert_eq!(client.poll(8).len(), 8);
    }
    // Every receive's completion waits in the CQ before the server polls.
    assert!(eventually(|| waiting(&server) == 32));
    let wcs = server.poll(32);
    assert_eq!(wcs.len(), 32);
    for (i, wc) in wcs.iter().enumerate() {
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode, wc.byte_len),
            (i as u64, 0, abi::IBV_WC_RECV, 16)
        );
        assert_eq!(server.buf.get(64 * i, 16), [i as u8; 16]);
    }
    // The overrun was reported as the kernel reports one: IBV_EVENT_CQ_ERR
    // for the server's CQ on its context's async_fd (the client's never
    // held more than 8).
    let mut e = async_event(server.ctx);
    assert_eq!(
        (e.element, e.event_type),
        (server.cq.cast(), abi::IBV_EVENT_CQ_ERR)
    );
    // SAFETY: the event as returned.
    unsafe { crate::exports::ack_async_event(&raw mut e) };
    let mut p = libc::pollfd {
        // SAFETY: a live context.
        fd: unsafe { (*client.ctx).async_fd },
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, no wait.
    assert_eq!(unsafe { libc::poll(&raw mut p, 1, 0) }, 0);
    // SAFETY: live objects; destroy in order.
    unsafe {
        assert_eq!(destroy_qp(client.qp), 0);
        assert_eq!(destroy_qp(server.qp), 0);
        assert_eq!(close_device(client.ctx), 0);
        assert_eq!(close_device(server.ctx), 0);
    }
}

/// `ibv_resize_cq`: the overrun event counts from the new size, rounded as
/// at creation; a size below what waits, or outside 1..=MAX_CQE, is
/// refused. 32 receives wait on a CQ resized from 8 to 32: no event; the
/// CQ made 4 after they were polled: the fifth waiting raises it.
#[test]
fn a_resized_cq_counts_its_overrun_from_the_new_size() {
    use crate::resources::{MAX_CQE, resize_cq};
    let server = side_sized(false, 8, 8, 32);
    let client = side_sized(true, 8, 8, 32);
    // SAFETY: a live CQ.
    unsafe {
        assert_eq!(resize_cq(server.cq, 0), libc::EINVAL);
        assert_eq!(resize_cq(server.cq, MAX_CQE + 1), libc::EINVAL);
        assert_eq!(resize_cq(server.cq, 17), 0);
        assert_eq!((*server.cq).cqe, 32);
    }
    for i in 0..32 {
        let mut r = server.sge(64 * i, 64);
        assert_eq!(server.post_recv(i as u64, &mut r), 0);
    }
    connect(&server, &client);
    let send = |n: u8| {
        client.buf.set(2048 + 16 * usize::from(n), &[n; 16]);
        let mut g = [client.sge(2048 + 16 * usize::from(n), 16)];
        let mut w = send_wr(u64::from(n), abi::IBV_WR_SEND, &mut g, 0);
        assert_eq!(client.post_send(&mut w), 0);
    };
    for round in 0..4u8 {
        for k in 0..8u8 {
            send(round * 8 + k);
        }
        assert_eq!(client.poll(8).len(), 8);
    }
    assert!(eventually(|| waiting(&server) == 32));
    let overrun_raised = || {
        let mut p = libc::pollfd {
            // SAFETY: a live context.
            fd: unsafe { (*server.ctx).async_fd },
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, no wait.
        unsafe { libc::poll(&raw mut p, 1, 0) == 1 }
    };
    assert!(!overrun_raised(), "32 waiting on a CQ of 32");
    // SAFETY: a live CQ.
    assert_eq!(unsafe { resize_cq(server.cq, 16) }, libc::EINVAL);
    assert_eq!(server.poll(32).len(), 32);
    // SAFETY: a live CQ.
    unsafe {
        assert_eq!(resize_cq(server.cq, 4), 0);
        assert_eq!((*server.cq).cqe, 4);
    }
    for i in 0..5 {
        let mut r = server.sge(64 * i, 64);
        assert_eq!(server.post_recv(i as u64, &mut r), 0);
    }
    for n in 0..5u8 {
        send(n);
    }
    assert_eq!(client.poll(5).len(), 5);
    assert!(eventually(|| server.buf.get(64 * 4, 16) == [4; 16]));
    let mut e = async_event(server.ctx);
    assert_eq!(
        (e.element, e.event_type),
        (server.cq.cast(), abi::IBV_EVENT_CQ_ERR)
    );
    // SAFETY: the event as returned; then live objects, destroyed in order.
    unsafe {
        crate::exports::ack_async_event(&raw mut e);
        assert_eq!(server.poll(5).len(), 5);
        assert_eq!(destroy_qp(client.qp), 0);
        assert_eq!(destroy_qp(server.qp), 0);
        assert_eq!(close_device(client.ctx), 0);
        assert_eq!(close_device(server.ctx), 0);
    }
}

/// A side moved to the echo thread (its raw pointers are the library's
/// objects, live until the test ends).
struct Moved(Side);
// SAFETY: the objects behind the pointers are the library's, usable from
// any thread; only the echo thread uses this side while it runs.
unsafe impl Send for Moved {}

impl Side {
    /// Spins on `poll_cq` until a receive completes (send completions are
    /// taken and dropped).
    fn spin_recv(&self) -> ibv_wc {
        let f = {
            // SAFETY: a live context.
            unsafe { (*self.ctx).ops.poll_cq.unwrap() }
        };
        loop {
            let mut wc = [ibv_wc::default(); 4];
            // SAFETY: a live CQ and an array of 4.
            let k = unsafe { f(self.cq.cast(), 4, wc.as_mut_ptr().cast()) };
            if let Some(r) = wc[..k.max(0) as usize]
                .iter()
                .find(|w| w.opcode == abi::IBV_WC_RECV)
            {
                return *r;
            }
        }
    }
}

const ROUNDS: usize = 20_000;
const WARM: usize = 1_000;

fn p50_one_way(mut rtts: Vec<Duration>) -> f64 {
    rtts.sort();
    rtts[rtts.len() / 2].as_secs_f64() * 1e6 / 2.0
}

/// Send ping-pong of 64 octets through the verbs entry points
/// (`post_send`, `post_recv` and `poll_cq` through the ops table, busy
/// polling), then the same exchange on rddp's own API, over loopback TCP:
/// p50 one way, in microseconds. `cargo test --release -p rddp-verbs-abi
/// --lib -- --ignored --nocapture pingpong`.
#[test]
#[ignore = "a measurement"]
fn pingpong_64b_verbs_and_rddp() {
    let server = side(false);
    let client = side(true);
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut rsge = server.sge(1024, 64);
    assert_eq!(server.post_recv(1, &mut rsge), 0);
    let mut csge = client.sge(1024, 64);
    assert_eq!(client.post_recv(1, &mut csge), 0);
    let sqp = server.qp as usize;
    let acceptor = std::thread::spawn(move || accept_mpa(sqp as *mut ibv_qp, &listener));
    connect_mpa(client.qp, addr, MpaOptions::default()).unwrap();
    acceptor.join().unwrap().unwrap();
    let moved = Moved(server);
    let echo = std::thread::spawn(move || {
        let s = moved;
        let s = &s.0;
        for _ in 0..ROUNDS + WARM {
            s.spin_recv();
            let mut r = s.sge(1024, 64);
            assert_eq!(s.post_recv(1, &mut r), 0);
            let mut g = [s.sge(0, 64)];
            let mut w = send_wr(2, abi::IBV_WR_SEND, &mut g, 0);
            assert_eq!(s.post_send(&mut w), 0);
        }
    });
    let mut rtts = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS + WARM {
        let t0 = Instant::now();
        let mut g = [client.sge(0, 64)];
        let mut w = send_wr(2, abi::IBV_WR_SEND, &mut g, 0);
        assert_eq!(client.post_send(&mut w), 0);
        client.spin_recv();
        if i >= WARM {
            rtts.push(t0.elapsed());
        }
        let mut r = client.sge(1024, 64);
        assert_eq!(client.post_recv(1, &mut r), 0);
    }
    echo.join().unwrap();
    let verbs = p50_one_way(rtts);

    // The same on rddp's API.
    let dev = rddp::Device::new();
    let pd_of = |name| {
        dev.consumer(name, rddp::Quota::default())
            .unwrap()
            .alloc_pd()
            .unwrap()
    };
    let (pd_s, pd_c) = (pd_of("s"), pd_of("c"));
    let (cq_s, cq_c) = (
        rddp::CompletionQueue::new(64),
        rddp::CompletionQueue::new(64),
    );
    let mr_s = pd_s.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap();
    let mr_c = pd_c.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut ps = QueuePairBuilder::new(&pd_s, &cq_s, &cq_s).build().unwrap();
    ps.post_recv_mr(1, &mr_s, 1024, 64).unwrap();
    let mut pc = QueuePairBuilder::new(&pd_c, &cq_c, &cq_c).build().unwrap();
    pc.post_recv_mr(1, &mr_c, 1024, 64).unwrap();
    let acceptor = std::thread::spawn(move || ps.accept_mpa(&listener).unwrap());
    let qc = pc.connect_mpa(addr, MpaOptions::default()).unwrap();
    let qs = acceptor.join().unwrap();
    let spin = |cq: &rddp::CompletionQueue| loop {
        if cq.poll(4).iter().any(|w| w.opcode == WcOpcode::Recv) {
            return;
        }
    };
    let echo = std::thread::spawn(move || {
        for _ in 0..ROUNDS + WARM {
            spin(&cq_s);
            qs.post_recv_mr(1, &mr_s, 1024, 64).unwrap();
            qs.post_send(2, &mr_s, 0, 64, SendFlags::default()).unwrap();
        }
        qs
    });
    let mut rtts = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS + WARM {
        let t0 = Instant::now();
        qc.post_send(2, &mr_c, 0, 64, SendFlags::default()).unwrap();
        spin(&cq_c);
        if i >= WARM {
            rtts.push(t0.elapsed());
        }
        qc.post_recv_mr(1, &mr_c, 1024, 64).unwrap();
    }
    drop(echo.join().unwrap());
    let native = p50_one_way(rtts);
    println!("Send ping-pong 64 B, p50 one way: verbs {verbs:.1} us, rddp API {native:.1} us");
}

/// A receive posted into an MR that is deregistered before its Send arrives
/// does not complete as a success with nothing placed: the segment is
/// refused before any octet moves (a local catastrophic error, RFC 5041
/// section 7.2: the stream ends with a Terminate), and the receive
/// completes in error.
#[test]
fn a_receive_into_a_deregistered_mr_fails() {
    let (server, client) = connected();

    let mut rsge = server.sge(0, 64);
    assert_eq!(server.post_recv(7, &mut rsge), 0);
    // SAFETY: a live MR, used by no other thread.
    assert_eq!(unsafe { crate::resources::mr::dereg_mr(server.mr) }, 0);
    client.buf.set(0, b"too late");
    let mut s = [client.sge(0, 8)];
    let mut w = send_wr(1, abi::IBV_WR_SEND, &mut s, 0);
    assert_eq!(client.post_send(&mut w), 0);
    let rwc = server.poll(1);
    assert_eq!(rwc.len(), 1, "the receive completes");
    assert_eq!(rwc[0].wr_id, 7);
    // Flushed with the rest of the queue once the stream ended.
    assert_eq!(rwc[0].status, abi::IBV_WC_WR_FLUSH_ERR, "{:?}", rwc[0]);
    assert_eq!(server.buf.get(0, 8), [0; 8]);
}

/// The next asynchronous event of `ctx` (10 s at most, polling `async_fd`).
fn async_event(ctx: *mut ibv_context) -> abi::ibv_async_event {
    let mut p = libc::pollfd {
        // SAFETY: a live context.
        fd: unsafe { (*ctx).async_fd },
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd.
    assert_eq!(unsafe { libc::poll(&raw mut p, 1, 10_000) }, 1, "no event");
    let mut e = abi::ibv_async_event {
        element: ptr::null_mut(),
        event_type: -1,
    };
    // SAFETY: a live context, our event.
    let r = unsafe { crate::exports::get_async_event(ctx, &raw mut e) };
    assert_eq!(r, 0);
    e
}

/// A Write naming an rkey the target does not have: the target's QP gets
/// `IBV_EVENT_QP_ACCESS_ERR` (it sent a Terminate for a tagged buffer
/// error, RFC 5041 section 7.2), the initiator's `IBV_EVENT_QP_FATAL` (it
/// received one), each on its context's `async_fd`; `ibv_destroy_qp` waits
/// until the event it reported is acknowledged.
#[test]
fn a_terminate_raises_qp_events_on_async_fd() {
    let (server, client) = connected();

    let mut s = [client.sge(0, 8)];
    let mut w = send_wr(1, abi::IBV_WR_RDMA_WRITE, &mut s, 0);
    rdma(&mut w, server.buf.addr(0), server.lkey() ^ 0x5a00);
    assert_eq!(client.post_send(&mut w), 0);

    let e = async_event(server.ctx);
    assert_eq!(
        (e.element, e.event_type),
        (server.qp.cast(), abi::IBV_EVENT_QP_ACCESS_ERR)
    );
    let mut c = async_event(client.ctx);
    assert_eq!(
        (c.element, c.event_type),
        (client.qp.cast(), abi::IBV_EVENT_QP_FATAL)
    );
    // SAFETY: the event as returned.
    unsafe { crate::exports::ack_async_event(&raw mut c) };
    // SAFETY: a live QP with no event unacknowledged.
    assert_eq!(unsafe { destroy_qp(client.qp) }, 0);

    // The server's event is not acknowledged yet: its destroy waits.
    let (tx, rx) = std::sync::mpsc::channel();
    let q = server.qp as usize;
    // SAFETY: a live QP, destroyed once.
    let destroyer = std::thread::spawn(move || tx.send(unsafe { destroy_qp(q as *mut ibv_qp) }));
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    let mut e = e;
    // SAFETY: the event as returned.
    unsafe { crate::exports::ack_async_event(&raw mut e) };
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(0));
    destroyer.join().unwrap().unwrap();
}

/// `ibv_post_srq_recv` as verbs.h's inline does it: through the context's ops.
fn post_srq(ctx: *mut ibv_context, srq: *mut abi::ibv_srq, wr: &mut ibv_recv_wr) -> c_int {
    let mut bad = ptr::null_mut();
    // SAFETY: a live context; the SRQ is checked; the work request is valid.
    unsafe {
        let f = (*ctx).ops.post_srq_recv.unwrap();
        f(srq.cast(), (wr as *mut ibv_recv_wr).cast(), &mut bad)
    }
}

/// Two client QPs Send to two server QPs that share one SRQ: each Send
/// takes the oldest receive posted there, whichever QP it comes in on, and
/// completes on that QP's CQ with the SRQ receive's wr_id, its payload in
/// the receive's octets. What an SRQ refuses: a receive on the QP itself,
/// two SGEs, a wr_id of rddp's range, an MR of another PD, a limit or a new
/// size; its destroy while a QP uses it, its PD's while it lives.
#[test]
fn two_qps_take_their_receives_from_one_srq() {
    use crate::resources::srq::{create_srq, destroy_srq, modify_srq, query_srq};
    // SAFETY: the constructors with valid arguments; every object checked.
    let (ctx, pd, cq, srq, buf, mr) = unsafe {
        let ctx = open_device(the_device());
        let pd = alloc_pd(ctx);
        let cq = create_cq(ctx, 64, ptr::null_mut(), ptr::null_mut(), 0);
        let mut init = abi::ibv_srq_init_attr {
            srq_context: ptr::null_mut(),
            attr: abi::ibv_srq_attr {
                max_wr: 8,
                max_sge: 1,
                srq_limit: 0,
            },
        };
        let srq = create_srq(pd, &mut init);
        assert!(!srq.is_null());
        assert_eq!((init.attr.max_wr, init.attr.max_sge), (8, 1));
        let buf = Buf::new(4096);
        let mr = reg_mr(pd, buf.at.cast(), buf.len, ALL);
        assert!(!mr.is_null());
        (ctx, pd, cq, srq, buf, mr)
    };
    let qp_on_srq = || {
        let mut ia = ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: srq.cast(),
            cap: ibv_qp_cap {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: abi::IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: a live PD and attributes of ours.
        let qp = unsafe { create_qp(pd, &mut ia) };
        assert!(!qp.is_null());
        assert_eq!((ia.cap.max_recv_wr, ia.cap.max_recv_sge), (0, 0));
        let mut a = zeroed_attr();
        a.qp_state = abi::IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = ALL as u32;
        let mask = abi::IBV_QP_STATE | abi::IBV_QP_PORT | abi::IBV_QP_ACCESS_FLAGS;
        // SAFETY: a live QP, a valid attribute struct.
        assert_eq!(unsafe { modify_qp(qp, &mut a, mask) }, 0);
        qp
    };
    let sqps = [qp_on_srq(), qp_on_srq()];
    // SAFETY: live QP and SRQ.
    unsafe {
        assert_eq!((*sqps[0]).srq, srq.cast());
        assert_eq!(destroy_srq(srq), libc::EBUSY);
    }
    let lkey = {
        // SAFETY: a live MR.
        unsafe { (*mr).lkey }
    };
    let recv = |wr_id: u64, sge: &mut ibv_sge| ibv_recv_wr {
        wr_id,
        next: ptr::null_mut(),
        sg_list: sge,
        num_sge: 1,
    };
    // Three receives of 16 octets at 0, 100 and 200, in that order.
    for (i, off) in [0usize, 100, 200].into_iter().enumerate() {
        let mut sge = ibv_sge {
            addr: buf.addr(off),
            length: 16,
            lkey,
        };
        assert_eq!(post_srq(ctx, srq, &mut recv(i as u64, &mut sge)), 0);
    }
    // Refused: a wr_id rddp keeps, two SGEs, an lkey that is no MR.
    let mut sge = ibv_sge {
        addr: buf.addr(300),
        length: 16,
        lkey,
    };
    assert_eq!(
        post_srq(ctx, srq, &mut recv(TOKEN_BASE, &mut sge)),
        libc::EINVAL
    );
    let mut two = [sge, sge];
    let mut w = recv(9, &mut two[0]);
    w.num_sge = 2;
    assert_eq!(post_srq(ctx, srq, &mut w), libc::EINVAL);
    let mut stale = ibv_sge {
        lkey: lkey ^ 0x5a00,
        ..sge
    };
    assert_eq!(post_srq(ctx, srq, &mut recv(9, &mut stale)), libc::EINVAL);
    // A QP on an SRQ has no receive queue of its own.
    let mut own = recv(9, &mut sge);
    let mut bad = ptr::null_mut();
    // SAFETY: a live context; the QP and work request are valid.
    let r = unsafe {
        let f = (*ctx).ops.post_recv.unwrap();
        f(sqps[0].cast(), (&raw mut own).cast(), &mut bad)
    };
    assert_eq!(r, libc::EINVAL);
    let mut attr = abi::ibv_srq_attr::default();
    // SAFETY: a live SRQ and the caller's attribute struct.
    unsafe {
        assert_eq!(query_srq(srq, &mut attr), 0);
        assert_eq!((attr.max_wr, attr.max_sge, attr.srq_limit), (8, 1, 0));
        attr.srq_limit = 9;
        assert_eq!(modify_srq(srq, &mut attr, abi::IBV_SRQ_LIMIT), libc::EINVAL);
        attr.max_wr = 16;
        assert_eq!(
            modify_srq(srq, &mut attr, abi::IBV_SRQ_MAX_WR),
            libc::EOPNOTSUPP
        );
        // Armed at 2 with 3 posted: the second message raises it.
        attr.srq_limit = 2;
        assert_eq!(modify_srq(srq, &mut attr, abi::IBV_SRQ_LIMIT), 0);
        assert_eq!(query_srq(srq, &mut attr), 0);
        assert_eq!(attr.srq_limit, 2);
    }
    // SAFETY: a live context.
    let async_fd = unsafe { (*ctx).async_fd };
    let readable = || {
        let mut p = libc::pollfd {
            fd: async_fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd of ours.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    };

    // Two clients, one per server QP; the second sends first.
    let clients = [side(true), side(true)];
    for (c, &sqp) in clients.iter().zip(&sqps) {
        let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
        let addr = listener.local_addr().unwrap();
        let s = sqp as usize;
        let acceptor = std::thread::spawn(move || accept_mpa(s as *mut ibv_qp, &listener));
        connect_mpa(c.qp, addr, MpaOptions::default()).unwrap();
        acceptor.join().unwrap().unwrap();
    }
    let got_one = |c: &Side, text: &[u8], wr_id: u64| {
        c.buf.set(0, text);
        let mut s = [c.sge(0, text.len() as u32)];
        let mut w = send_wr(wr_id, abi::IBV_WR_SEND, &mut s, 0);
        assert_eq!(c.post_send(&mut w), 0);
        assert_eq!(c.poll(1).len(), 1);
        let mut wc = [ibv_wc::default(); 1];
        assert!(eventually(|| {
            // SAFETY: a live CQ and an array of 1.
            unsafe {
                let f = (*ctx).ops.poll_cq.unwrap();
                f(cq.cast(), 1, wc.as_mut_ptr().cast()) == 1
            }
        }));
        wc[0]
    };
    let first = got_one(&clients[1], b"second client", 20);
    // SAFETY: live QPs.
    let qpn = |q: *mut ibv_qp| unsafe { (*q).qp_num };
    assert_eq!(
        (first.wr_id, first.status, first.opcode, first.byte_len),
        (0, 0, abi::IBV_WC_RECV, 13)
    );
    assert_eq!(first.qp_num, qpn(sqps[1]));
    assert_eq!(buf.get(0, 13), b"second client");
    assert!(!readable(), "two receives left, the limit 2: no event yet");
    let second = got_one(&clients[0], b"first", 21);
    assert_eq!((second.wr_id, second.byte_len), (1, 5));
    assert_eq!(second.qp_num, qpn(sqps[0]));
    assert_eq!(buf.get(100, 5), b"first");
    // One receive left: the limit is raised once, and disarmed.
    assert!(readable());
    let mut ev = abi::ibv_async_event {
        element: ptr::null_mut(),
        event_type: -1,
    };
    // SAFETY: a live context, the caller's event slot; a live SRQ.
    unsafe {
        assert_eq!(crate::exports::get_async_event(ctx, &mut ev), 0);
        assert_eq!(
            (ev.element, ev.event_type),
            (srq.cast(), abi::IBV_EVENT_SRQ_LIMIT_REACHED)
        );
        assert!(!readable());
        assert_eq!(query_srq(srq, &mut attr), 0);
        assert_eq!(attr.srq_limit, 0);
        crate::exports::ack_async_event(&mut ev);
    }

    // SAFETY: the objects of this test, each destroyed once, users first.
    unsafe {
        for c in &clients {
            assert_eq!(destroy_qp(c.qp), 0);
        }
        for q in sqps {
            assert_eq!(destroy_qp(q), 0);
        }
        assert_eq!(crate::resources::dealloc_pd(pd), libc::EBUSY);
        assert_eq!(destroy_srq(srq), 0);
    }
}

/// Two contexts (each its own rddp device) can hand out the same lkey; a
/// receive posted with its own MR's lkey still finds that MR, not the other
/// context's (before, one registry keyed by lkey alone took the later MR,
/// of another PD, and the receive completed IBV_WC_LOC_PROT_ERR at once).
#[test]
fn an_lkey_equal_to_another_contexts_finds_its_own_mr() {
    use crate::resources::mr::dereg_mr;
    let a = side(false);
    let b = side(false);
    let (buf_a, buf_b) = (Buf::new(4096), Buf::new(4096));
    // One more MR on each side, A's first, until both have the same lkey
    // (the same STag index, and keys drawn at random: about one try in 256).
    let mut twins = None;
    for _ in 0..20_000 {
        // SAFETY: live PDs and live buffers of those lengths.
        let (ma, mb) = unsafe {
            (
                reg_mr(a.pd, buf_a.at.cast(), buf_a.len, ALL),
                reg_mr(b.pd, buf_b.at.cast(), buf_b.len, ALL),
            )
        };
        assert!(!ma.is_null() && !mb.is_null());
        // SAFETY: live MRs.
        if unsafe { (*ma).lkey == (*mb).lkey } {
            twins = Some((ma, mb));
            break;
        }
        // SAFETY: live MRs, each deregistered once.
        unsafe { assert_eq!((dereg_mr(ma), dereg_mr(mb)), (0, 0)) };
    }
    let (ma, mb) = twins.expect("no two MRs with one lkey");
    let mut r = ibv_sge {
        addr: buf_a.addr(0),
        length: 64,
        // SAFETY: a live MR.
        lkey: unsafe { (*ma).lkey },
    };
    assert_eq!(a.post_recv(7, &mut r), 0);
    let mut wc = [ibv_wc::default(); 4];
    // SAFETY: a live CQ and an array of 4.
    let k = unsafe {
        let f = (*a.ctx).ops.poll_cq.unwrap();
        f(a.cq.cast(), 4, wc.as_mut_ptr().cast())
    };
    assert_eq!(
        k,
        0,
        "the receive completed at once: {:?}",
        &wc[..k as usize]
    );
    // SAFETY: live objects, freed once.
    unsafe {
        assert_eq!((dereg_mr(ma), dereg_mr(mb)), (0, 0));
        assert_eq!(destroy_qp(a.qp), 0);
        assert_eq!(destroy_qp(b.qp), 0);
        assert_eq!(close_device(a.ctx), 0);
        assert_eq!(close_device(b.ctx), 0);
    }
}
