//! Unsignaled Sends and RDMA Writes (`SendFlags::unsignaled`,
//! `WriteFlags::unsignaled`: verbs' work requests without `IBV_SEND_SIGNALED`)
//! over each LLP: MPA over loopback TCP (Rev 1), DDP/SCTP on usrsctp.

use crate::common::llp::Llp;
use crate::common::sctp_llp;
use crate::common::{self, wait};
use rddp::transport::Connection;
use rddp::{
    Access, AsyncEvent, CompletionQueue, Device, Error, ProtectionDomain, QueuePair,
    QueuePairBuilder, RemoteBuf, SendFlags, WcOpcode, WcStatus, WriteFlags,
};
use rddp_mpa::MpaOptions;
use std::time::{Duration, Instant};

/// Unsignaled Sends posted through a send queue of `DEPTH`, never polled.
const N: u64 = 40;
const DEPTH: u32 = 4;

/// A successful unsignaled Send makes no completion and frees its
/// send-queue slot without a poll; a signaled one after it completes as
/// usual; one that cannot be sent (the peer closed) still completes, as
/// flushed. Every message arrives, in order.
fn sends(llp: Llp) {
    let Some((accept, connect)) = ends(llp) else {
        return;
    };
    let dev = Device::new();
    let spd = common::pd(&dev, "server");
    let (closed_tx, closed_rx) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let cq = CompletionQueue::new(128);
        let mut prepared = QueuePairBuilder::new(&spd, &cq, &cq)
            .max_recv_wr(N as u32 + 1)
            .build()
            .unwrap();
        for i in 0..=N {
            prepared.post_recv(i, 8).unwrap();
        }
        let qp = prepared.attach(accept()).unwrap();
        let got: Vec<_> = wait(&cq, N as usize + 1)
            .into_iter()
            .map(|w| {
                assert_eq!((w.opcode, w.status), (WcOpcode::Recv, WcStatus::Success));
                w.buffer.as_ref().unwrap()[..w.byte_len as usize].to_vec()
            })
            .collect();
        qp.disconnect();
        closed_rx.recv().unwrap();
        got
    });

    let pd = common::pd(&dev, "client");
    let (cq, qp) = client(&pd, connect);
    let quiet = SendFlags {
        unsignaled: true,
        ..SendFlags::default()
    };
    for i in 0..N {
        // Ten times the send queue's depth, and the CQ is never polled: each
        // slot comes back once its Send was accepted by the LLP.
        post_until_taken("Send", i, || {
            qp.post_send_inline(i, &i.to_be_bytes(), quiet)
        });
    }
    signaled_send_completes_alone(&qp, &cq, &N.to_be_bytes());

    let closed = common::poll_event(&qp, |e| match e {
        AsyncEvent::Closed { .. } => Some(()),
        _ => None,
    });
    assert!(closed.is_some(), "the server's disconnect never arrived");
    // Posted after the peer closed: it completes (flushed), unsignaled or not.
    qp.post_send_inline(500, b"late", quiet).unwrap();
    let flushed = wait(&cq, 1);
    assert_eq!(
        (flushed[0].wr_id, flushed[0].status),
        (500, WcStatus::Flushed)
    );
    closed_tx.send(()).unwrap();
    let got = server.join().unwrap();
    let want: Vec<_> = (0..=N).map(|i| i.to_be_bytes().to_vec()).collect();
    assert_eq!(got, want, "every Send arrives, in order");
}

/// Unsignaled RDMA Writes (`WriteFlags::unsignaled`) the same way: `N` of them
/// through a send queue of `DEPTH`, never polled, each into its own 8 octets of
/// the server's region; then a signaled Send, whose completion comes alone and
/// whose arrival says every Write before it was placed (RFC 5040 §5.5).
fn writes(llp: Llp) {
    let Some((accept, connect)) = ends(llp) else {
        return;
    };
    let dev = Device::new();
    let spd = common::pd(&dev, "server");
    let (advert_tx, advert_rx) = std::sync::mpsc::channel::<RemoteBuf>();
    let server = std::thread::spawn(move || {
        let cq = CompletionQueue::new(64);
        let mut prepared = QueuePairBuilder::new(&spd, &cq, &cq).build().unwrap();
        prepared.post_recv(0, 8).unwrap();
        let qp = prepared.attach(accept()).unwrap();
        let region = spd
            .register(vec![0; 8 * N as usize], Access::REMOTE_WRITE)
            .unwrap();
        advert_tx.send(region.remote()).unwrap();
        let w = wait(&cq, 1);
        assert_eq!(
            (w[0].opcode, w[0].status),
            (WcOpcode::Recv, WcStatus::Success)
        );
        let placed = region.read(0, 8 * N).unwrap();
        qp.disconnect();
        placed
    });

    let pd = common::pd(&dev, "client");
    let (cq, qp) = client(&pd, connect);
    let remote = advert_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let src: Vec<u8> = (0..N).flat_map(|i| i.to_be_bytes()).collect();
    let mr = pd.register(src.clone(), Access::NONE).unwrap();
    let quiet = WriteFlags {
        unsignaled: true,
        ..WriteFlags::default()
    };
    for i in 0..N {
        post_until_taken("Write", i, || {
            qp.post_write_with(i, &mr, 8 * i, 8, remote, 8 * i, quiet)
        });
    }
    signaled_send_completes_alone(&qp, &cq, b"done");
    assert_eq!(server.join().unwrap(), src, "every Write was placed");
}

/// How the two ends get their connections over `llp`: the server's accept
/// (run on its thread) and the client's connect; `None` when the LLP is
/// missing here.
fn ends(
    llp: Llp,
) -> Option<(
    impl FnOnce() -> Connection + Send + 'static,
    impl FnOnce() -> Connection,
)> {
    let (addr, passive) = llp.listen(b"")?;
    Some((
        move || passive.connection(),
        move || llp.connection(addr, b""),
    ))
}

/// The client's queue pair: a send queue of `DEPTH`, one CQ for both queues.
fn client(
    pd: &ProtectionDomain,
    connect: impl FnOnce() -> Connection,
) -> (CompletionQueue, QueuePair) {
    let cq = CompletionQueue::new(64);
    let qp = QueuePairBuilder::new(pd, &cq, &cq)
        .max_send_wr(DEPTH)
        .build()
        .unwrap()
        .attach(connect())
        .unwrap();
    (cq, qp)
}

/// Post work request `i` (`what`), waiting while the send queue is full: the
/// unsignaled ones' slots come back without a poll, once the LLP has taken
/// them, or the test fails.
fn post_until_taken(what: &str, i: u64, mut post: impl FnMut() -> Result<(), Error>) {
    let start = Instant::now();
    loop {
        match post() {
            Ok(()) => return,
            Err(Error::SendQueueFull { .. }) if start.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("{what} (wr_id {i}; {N} unsignaled, send queue of {DEPTH}): {e}"),
        }
    }
}

/// A signaled Send (wr_id `N`) after the unsignaled ones: its completion is the
/// only one. It waits for a slot as they did: the last unsignaled requests may
/// still hold theirs (an LLP that has not taken them yet: SCTP's relay, under
/// load, was seen not to have).
fn signaled_send_completes_alone(qp: &QueuePair, cq: &CompletionQueue, data: &[u8]) {
    post_until_taken("the signaled Send", N, || {
        qp.post_send_inline(N, data, SendFlags::default())
    });
    let done = wait(cq, 1);
    assert_eq!(
        (done[0].wr_id, done[0].opcode, done[0].status),
        (N, WcOpcode::Send, WcStatus::Success),
        "the signaled Send's completion comes first and alone"
    );
    // The send queue completes in posting order: a completion of any
    // unsignaled request would have come before the Send's (taken above), so
    // what is queued now shows it.
    assert!(
        cq.poll(64).is_empty(),
        "an unsignaled work request completed"
    );
}

#[test]
fn unsignaled_sends_free_their_slots_without_a_completion() {
    sends(Llp::mpa(MpaOptions::rev1()));
}

#[test]
fn unsignaled_writes_free_their_slots_without_a_completion() {
    writes(Llp::mpa(MpaOptions::rev1()));
}

#[test]
fn unsignaled_sends_free_their_slots_without_a_completion_over_sctp() {
    if sctp_llp::own_process(
        module_path!(),
        "unsignaled_sends_free_their_slots_without_a_completion_over_sctp",
    ) {
        sends(Llp::Sctp);
    }
}

#[test]
fn unsignaled_writes_free_their_slots_without_a_completion_over_sctp() {
    if sctp_llp::own_process(
        module_path!(),
        "unsignaled_writes_free_their_slots_without_a_completion_over_sctp",
    ) {
        writes(Llp::Sctp);
    }
}
