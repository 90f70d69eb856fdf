//! The Rust side of stage 2a: rddp queue pairs over the in-memory LLP
//! complete into a verbs CQ, and its channel fd wakes as an application
//! sees it (C programs cannot make completions before queue pairs exist).

use super::*;
use crate::exports::{close_device, open_device, the_device};
use rddp::transport::memory_pair;
use rddp::{Access, Device, QueuePair, QueuePairBuilder, Quota, SendFlags};
use std::time::{Duration, Instant};

fn readable(fd: c_int, ms: c_int) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of ours.
    unsafe { libc::poll(&mut pfd, 1, ms) == 1 }
}

/// A context with a PD, a channel and a CQ of 32 on it.
struct Fixture {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    ch: *mut ibv_comp_channel,
    cq: *mut ibv_cq,
}

const TAG: usize = 0x5eed;

fn fixture() -> Fixture {
    // SAFETY: the constructors with valid arguments.
    unsafe {
        let ctx = open_device(the_device());
        assert!(!ctx.is_null());
        let pd = alloc_pd(ctx);
        let ch = create_comp_channel(ctx);
        let cq = create_cq(ctx, 32, TAG as *mut c_void, ch, 0);
        assert!(!pd.is_null() && !ch.is_null() && !cq.is_null());
        Fixture { ctx, pd, ch, cq }
    }
}

impl Fixture {
    /// A queue pair of the PD completing into the CQ, connected to a peer
    /// that has one receive posted; and a 5-byte source region.
    fn qp(&self) -> (QueuePair, QueuePair, rddp::MemoryRegion) {
        // SAFETY: the PD and CQ are live Box<Pd>/Box<Cq>; fields C never writes.
        let (pd, cq) = unsafe { (&(*self.pd.cast::<Pd>())._pd, &(*self.cq.cast::<Cq>()).cq) };
        let (la, lb) = memory_pair(1024);
        let a = QueuePairBuilder::new(pd, cq, cq).build().unwrap();
        let a = a.attach(la).unwrap();
        let peer_cq = rddp::CompletionQueue::new(64);
        let pd_b = Device::new()
            .consumer("peer", Quota::default())
            .unwrap()
            .alloc_pd()
            .unwrap();
        let mut b = QueuePairBuilder::new(&pd_b, &peer_cq, &peer_cq)
            .build()
            .unwrap();
        for i in 0..8 {
            b.post_recv(i, 64).unwrap();
        }
        let b = b.attach(lb).unwrap();
        let src = pd.register(b"hello".to_vec(), Access::NONE).unwrap();
        (a, b, src)
    }

    fn fd(&self) -> c_int {
        // SAFETY: a live channel.
        unsafe { (*self.ch).fd }
    }

    /// Polls the CQ until `n` completions came (5 s at most).
    fn poll(&self, n: usize) -> Vec<ibv_wc> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < n && Instant::now() < deadline {
            let mut wc = [ibv_wc::default(); 4];
            // SAFETY: a live CQ and an array of 4.
            let k = unsafe { poll_cq(self.cq.cast(), 4, wc.as_mut_ptr().cast()) };
            assert!(k >= 0);
            got.extend_from_slice(&wc[..k as usize]);
            std::thread::sleep(Duration::from_millis(1));
        }
        got
    }

    fn event(&self) -> (c_int, *mut ibv_cq, *mut c_void) {
        let (mut cq, mut cx) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: a live channel and two out slots.
        let r = unsafe { get_cq_event(self.ch, &mut cq, &mut cx) };
        (r, cq, cx)
    }
}

#[test]
fn cq_sizes_round_up_to_a_power_of_two_as_siw() {
    assert_eq!(cq_size(1), Some(1));
    assert_eq!(cq_size(16), Some(16));
    assert_eq!(cq_size(17), Some(32));
    assert_eq!(cq_size(MAX_CQE), Some(MAX_CQE));
    assert_eq!(cq_size(0), None);
    assert_eq!(cq_size(-1), None);
    assert_eq!(cq_size(MAX_CQE + 1), None);
}

#[test]
fn an_armed_cq_wakes_its_channel_once() {
    let f = fixture();
    let (a, _b, src) = f.qp();
    assert!(!readable(f.fd(), 0), "nothing pending");
    // SAFETY: a live CQ.
    assert_eq!(unsafe { req_notify_cq(f.cq.cast(), 0) }, 0);
    a.post_send(7, &src, 0, 5, SendFlags::default()).unwrap();
    assert!(readable(f.fd(), 5000), "the completion raised an event");
    let (r, cq, cx) = f.event();
    assert_eq!((r, cq, cx as usize), (0, f.cq, TAG));
    assert!(!readable(f.fd(), 0), "the one event was taken");

    let wc = f.poll(1);
    assert_eq!(wc.len(), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].qp_num),
        (7, abi::IBV_WC_SUCCESS, abi::IBV_WC_SEND, a.qp_num())
    );

    // Not armed again: the next completion raises nothing.
    a.post_send(8, &src, 0, 5, SendFlags::default()).unwrap();
    assert_eq!(f.poll(1).len(), 1);
    assert!(!readable(f.fd(), 50));

    // The channel is in use: EBUSY, as rdma-core.
    // SAFETY: live objects throughout.
    unsafe {
        assert_eq!(destroy_comp_channel(f.ch), libc::EBUSY);
        ack_cq_events(f.cq, 1);
        assert_eq!(destroy_cq(f.cq), 0);
        assert_eq!(destroy_comp_channel(f.ch), 0);
        assert_eq!(dealloc_pd(f.pd), 0);
        assert_eq!(close_device(f.ctx), 0);
    }
}

#[test]
fn a_solicited_only_arm_ignores_ordinary_completions() {
    let f = fixture();
    let (a, _b, src) = f.qp();
    // SAFETY: a live CQ.
    assert_eq!(unsafe { req_notify_cq(f.cq.cast(), 1) }, 0);
    a.post_send(1, &src, 0, 5, SendFlags::default()).unwrap();
    assert_eq!(f.poll(1).len(), 1);
    assert!(!readable(f.fd(), 50), "a successful send is not solicited");
    // Arming for every completion widens it.
    // SAFETY: a live CQ.
    assert_eq!(unsafe { req_notify_cq(f.cq.cast(), 0) }, 0);
    a.post_send(2, &src, 0, 5, SendFlags::default()).unwrap();
    assert!(readable(f.fd(), 5000));
    assert_eq!(f.event().0, 0);
    // Closing frees what is left, the CQ with an unacknowledged event
    // included. (Whether the freed pointers are then refused is checked by
    // tests/c/abi_calls.c, single-threaded: here a parallel test could be
    // given the same addresses.)
    // SAFETY: a live context.
    assert_eq!(unsafe { close_device(f.ctx) }, 0);
}

#[test]
fn destroy_waits_for_the_acknowledgement_and_drops_unread_events() {
    let f = fixture();
    let (a, _b, src) = f.qp();
    // SAFETY: a live CQ.
    assert_eq!(unsafe { req_notify_cq(f.cq.cast(), 0) }, 0);
    a.post_send(1, &src, 0, 5, SendFlags::default()).unwrap();
    assert!(readable(f.fd(), 5000));
    assert_eq!(f.event().0, 0);
    assert_eq!(f.poll(1).len(), 1);
    // A second event, left unread.
    // SAFETY: a live CQ.
    assert_eq!(unsafe { req_notify_cq(f.cq.cast(), 0) }, 0);
    a.post_send(2, &src, 0, 5, SendFlags::default()).unwrap();
    assert!(readable(f.fd(), 5000));

    let cq = f.cq as usize;
    // SAFETY: a live CQ; destroy blocks until the read event is acknowledged.
    let t = std::thread::spawn(move || unsafe { destroy_cq(cq as *mut ibv_cq) });
    // A negative check: no sign marks "destroy is still waiting" (it waits by
    // design), so a destroy that did not wait is given 100 ms to show.
    std::thread::sleep(Duration::from_millis(100));
    assert!(!t.is_finished(), "one event read and not acknowledged");
    // SAFETY: reaches the CQ while its destroy waits.
    unsafe { ack_cq_events(f.cq, 1) };
    assert_eq!(t.join().unwrap(), 0);
    // SAFETY: a live channel.
    let shared = unsafe { (*f.ch.cast::<Channel>()).shared.clone() };
    assert_eq!(shared.pending(), 0, "the unread event went with its CQ");
    assert!(!readable(f.fd(), 0));
    // SAFETY: live objects.
    unsafe {
        assert_eq!((*f.ch).refcnt, 0);
        assert_eq!(destroy_comp_channel(f.ch), 0);
        assert_eq!(close_device(f.ctx), 0);
    }
}

#[test]
fn a_pd_in_use_is_busy() {
    let f = fixture();
    // SAFETY: a live PD; `users` stands for the MRs and QPs of stage 2b.
    unsafe {
        (*f.pd.cast::<Pd>()).users.fetch_add(1, Ordering::AcqRel);
        assert_eq!(dealloc_pd(f.pd), libc::EBUSY);
        (*f.pd.cast::<Pd>()).users.fetch_sub(1, Ordering::AcqRel);
        assert_eq!(dealloc_pd(f.pd), 0);
        assert_eq!(close_device(f.ctx), 0);
    }
}

#[test]
fn a_non_blocking_channel_says_eagain() {
    let f = fixture();
    let fd = f.fd();
    // SAFETY: fcntl on the live channel's fd.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        assert_eq!(fl & libc::O_NONBLOCK, 0, "blocking, as the kernel's");
        assert_eq!(libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK), 0);
    }
    let (r, ..) = f.event();
    // SAFETY: __errno_location returns this thread's errno slot, valid for
    // the thread's life.
    let errno = unsafe { *libc::__errno_location() };
    assert_eq!((r, errno), (-1, libc::EAGAIN));
    // SAFETY: a live context.
    assert_eq!(unsafe { close_device(f.ctx) }, 0);
}

#[test]
fn statuses_map_to_their_ibv_wc_status() {
    let all = [
        (WcStatus::Success, "IBV_WC_SUCCESS", 0),
        (WcStatus::LocalLength, "IBV_WC_LOC_LEN_ERR", 1),
        (WcStatus::LocalQpOperation, "IBV_WC_LOC_QP_OP_ERR", 2),
        (WcStatus::LocalProtection, "IBV_WC_LOC_PROT_ERR", 4),
        (WcStatus::Flushed, "IBV_WC_WR_FLUSH_ERR", 5),
        (WcStatus::RemoteAccess, "IBV_WC_REM_ACCESS_ERR", 10),
        (WcStatus::RemoteOperation, "IBV_WC_REM_OP_ERR", 11),
        (WcStatus::Fatal, "IBV_WC_FATAL_ERR", 19),
    ];
    for (s, name, v) in all {
        assert_eq!(wc_status(&s), v, "{name}");
    }
}

/// rping's shape: one thread blocks in `ibv_get_cq_event` on the blocking
/// channel fd while another posts; the completion wakes it.
#[test]
fn a_blocked_get_cq_event_wakes_on_a_completion() {
    let f = fixture();
    let (a, _b, src) = f.qp();
    // SAFETY: a live CQ.
    assert_eq!(unsafe { req_notify_cq(f.cq.cast(), 0) }, 0);
    let ch = f.ch as usize;
    let waiter = std::thread::spawn(move || {
        let (mut cq, mut cx) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: a live channel; blocks until an event comes.
        let r = unsafe { get_cq_event(ch as *mut ibv_comp_channel, &mut cq, &mut cx) };
        (r, cq as usize, cx as usize)
    });
    // A negative check: no sign marks "still blocked", so a wait that
    // returned with nothing completed is given 50 ms to show. The outcome
    // below holds whether or not the waiter blocked before the post.
    std::thread::sleep(Duration::from_millis(50));
    assert!(!waiter.is_finished(), "nothing completed yet");
    a.post_send(1, &src, 0, 5, SendFlags::default()).unwrap();
    assert_eq!(waiter.join().unwrap(), (0, f.cq as usize, TAG));
    assert_eq!(f.poll(1).len(), 1);
    // SAFETY: live objects.
    unsafe {
        ack_cq_events(f.cq, 1);
        assert_eq!(destroy_cq(f.cq), 0);
        assert_eq!(close_device(f.ctx), 0);
    }
}

/// `ibv_reg_mr` over memory the "application" allocated: a peer's RDMA Write
/// to (rkey, address) lands in it, its Read gets it back, and after
/// `ibv_dereg_mr` the application frees it.
#[test]
fn a_registered_buffer_takes_a_peers_write_and_serves_its_read() {
    let f = fixture();
    let app = Box::into_raw(vec![0u8; 64].into_boxed_slice());
    let rw =
        abi::IBV_ACCESS_LOCAL_WRITE | abi::IBV_ACCESS_REMOTE_WRITE | abi::IBV_ACCESS_REMOTE_READ;
    // SAFETY: a live PD and 64 bytes that stay allocated until after
    // dereg_mr, reached by nothing else meanwhile.
    let mr = unsafe { mr::reg_mr(f.pd, app.cast(), 64, rw as c_int) };
    assert!(!mr.is_null());
    // SAFETY: a live MR.
    let (rkey, lkey, addr) = unsafe { ((*mr).rkey, (*mr).lkey, (*mr).addr as u64) };
    assert_eq!((rkey, addr), (lkey, app.cast::<u8>().addr() as u64));

    // SAFETY: the PD and CQ are live Box<Pd>/Box<Cq>; fields C never writes.
    let (pd, cq) = unsafe { (&(*f.pd.cast::<Pd>())._pd, &(*f.cq.cast::<Cq>()).cq) };
    let (la, lb) = memory_pair(1024);
    let _a = QueuePairBuilder::new(pd, cq, cq)
        .build()
        .unwrap()
        .attach(la)
        .unwrap();
    let peer_cq = rddp::CompletionQueue::new(64);
    let pd_b = Device::new()
        .consumer("peer", Quota::default())
        .unwrap()
        .alloc_pd()
        .unwrap();
    let b = QueuePairBuilder::new(&pd_b, &peer_cq, &peer_cq)
        .build()
        .unwrap()
        .attach(lb)
        .unwrap();
    let msg = b"written by the peer";
    let src = pd_b.register(msg.to_vec(), Access::NONE).unwrap();
    let sink = pd_b.register(vec![0; 19], Access::REMOTE_WRITE).unwrap();
    let target = rddp::RemoteBuf {
        stag: rkey,
        to: addr + 3,
        len: 19,
    };
    b.post_write(1, &src, 0, 19, target, 0).unwrap();
    b.post_read(2, &sink, 0, 19, target, 0).unwrap();
    let mut done = Vec::new();
    while done.len() < 2 {
        let more = peer_cq.wait(2 - done.len(), Duration::from_secs(5));
        assert!(!more.is_empty(), "timed out with {done:?}");
        done.extend(more);
    }
    assert!(
        done.iter().all(|c| c.status == rddp::WcStatus::Success),
        "{done:?}"
    );
    assert_eq!(sink.read(0, 19).unwrap(), msg);
    // What the application sees, read through its pointer.
    let seen: Vec<u8> = (0..64)
        // SAFETY: inside the allocation; the placements completed before the
        // completions above were taken.
        .map(|i| unsafe { app.cast::<u8>().add(i).read() })
        .collect();
    assert_eq!(&seen[3..22], msg);
    assert!(seen[..3].iter().chain(&seen[22..]).all(|&o| o == 0));

    // SAFETY: live objects; the memory is freed after dereg_mr returned.
    unsafe {
        assert_eq!(dealloc_pd(f.pd), libc::EBUSY);
        assert_eq!(mr::dereg_mr(mr), 0);
        assert_eq!(mr::dereg_mr(mr), libc::EINVAL);
        drop(Box::from_raw(app));
        assert_eq!(close_device(f.ctx), 0);
    }
}

#[test]
fn access_flags_as_the_kernel_checks_them() {
    use abi::*;
    assert_eq!(mr::rights(0), Ok(Access::NONE));
    assert_eq!(
        mr::rights(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ),
        Ok(Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ)
    );
    let accepted = IBV_ACCESS_LOCAL_WRITE
        | IBV_ACCESS_REMOTE_ATOMIC
        | IBV_ACCESS_MW_BIND
        | IBV_ACCESS_HUGETLB
        | IBV_ACCESS_RELAXED_ORDERING;
    assert_eq!(mr::rights(accepted), Ok(Access::LOCAL_WRITE));
    assert_eq!(mr::rights(IBV_ACCESS_REMOTE_WRITE), Err(libc::EINVAL));
    assert_eq!(mr::rights(IBV_ACCESS_REMOTE_ATOMIC), Err(libc::EINVAL));
    assert_eq!(mr::rights(IBV_ACCESS_ZERO_BASED), Err(libc::EINVAL));
    assert_eq!(mr::rights(1 << 12), Err(libc::EINVAL));
    assert_eq!(mr::rights(1 << 30), Err(libc::EINVAL));
    assert_eq!(mr::rights(IBV_ACCESS_ON_DEMAND), Err(libc::EOPNOTSUPP));
}
