//! Receives posted into a registered region (`QueuePair::post_recv_mr`, as
//! `ibv_post_recv` with an SGE in an MR) over real MPA/TCP queue pairs, CRC
//! on: a Send's payload goes from the socket straight into the region's
//! octets that the receive names (no user-space copy: `QpStats::rx_copied_octets`),
//! several receives may name the same octets (as perftest posts them), a
//! Send longer than its receive is refused (1/2/0x05) with nothing placed
//! outside it; a shared receive queue takes them too, and a queue pair
//! before its attach. Where the receive is placed and what it costs are
//! checked over DDP/SCTP too (`_over_sctp`: usrsctp's message goes straight
//! into the region).

use crate::common;
use crate::common::llp::Llp;
use crate::common::sctp_llp;

use common::wait;
use rddp::transport::mpa::Listener;
use rddp::{
    Access, BufferOrdering, CompletionQueue, Device, Error, MemoryRegion, ProtectionDomain,
    QueuePair, QueuePairBuilder, RecvWr, SendFlags, SharedReceiveQueue, SrqMode, TerminateCode,
    WcOpcode, WcStatus,
};
use rddp_mpa::MpaOptions;
use std::time::{Duration, Instant};

const REGION: usize = 256 * 1024;
const FILL: u8 = 0x11;
/// The span two receives share, and a small one elsewhere.
const SHARED: (u64, u64) = (4096, 64 * 1024);
const SMALL: (u64, u64) = (200_000, 64);

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// One end: its protection domain, queue pair and CQ.
struct End {
    pd: ProtectionDomain,
    qp: QueuePair,
    cq: CompletionQueue,
}

/// A connected pair over `llp` on loopback: (server, client); `None` when
/// the LLP is missing here.
fn pair(llp: &Llp) -> Option<(End, End)> {
    let dev = Device::new();
    let (addr, passive) = llp.listen(b"")?;
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        let qp = passive.accept(prepared);
        End { pd, qp, cq }
    });
    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    let qp = llp.connect(prepared, addr, b"");
    Some((server.join().unwrap(), End { pd, qp, cq }))
}

/// One test's start: a pair connected over MPA, and a region of FILL
/// octets at the server.
fn setup() -> (End, End, MemoryRegion) {
    setup_over(&Llp::mpa(MpaOptions::default())).expect("MPA is always here")
}

/// As [`setup`], over `llp`.
fn setup_over(llp: &Llp) -> Option<(End, End, MemoryRegion)> {
    let (server, client) = pair(llp)?;
    let mr = server
        .pd
        .register(vec![FILL; REGION], Access::NONE)
        .unwrap();
    Some((server, client, mr))
}

fn send(e: &End, id: u64, data: &[u8]) {
    let mr = e.pd.register(data.to_vec(), Access::NONE).unwrap();
    e.qp.post_send(id, &mr, 0, data.len() as u64, SendFlags::default())
        .unwrap();
    let wc = wait(&e.cq, 1).pop().unwrap();
    assert_eq!((wc.wr_id, wc.status), (id, WcStatus::Success), "{wc:?}");
}

/// The region outside `spans` still holds FILL, and no guard octet changed.
fn untouched_outside(mr: &MemoryRegion, spans: &[(u64, u64)]) {
    let all = mr.read(0, REGION as u64).unwrap();
    for (i, &b) in all.iter().enumerate() {
        let i = i as u64;
        if !spans.iter().any(|&(o, l)| i >= o && i < o + l) {
            assert_eq!(b, FILL, "octet {i} outside the receives changed");
        }
    }
    assert!(mr.guards_intact());
}

#[test]
fn sends_land_in_the_region_where_their_receives_say() {
    land_where_receives_say(&Llp::mpa(MpaOptions::default()));
}

#[test]
fn sends_land_in_the_region_where_their_receives_say_over_sctp() {
    if sctp_llp::own_process(
        module_path!(),
        "sends_land_in_the_region_where_their_receives_say_over_sctp",
    ) {
        land_where_receives_say(&Llp::Sctp);
    }
}

fn land_where_receives_say(llp: &Llp) {
    let Some((server, client, mr)) = setup_over(llp) else {
        return;
    };
    // Two receives on the same octets, then one elsewhere.
    server.qp.post_recv_mr(1, &mr, SHARED.0, SHARED.1).unwrap();
    server.qp.post_recv_mr(2, &mr, SHARED.0, SHARED.1).unwrap();
    server.qp.post_recv_mr(3, &mr, SMALL.0, SMALL.1).unwrap();
    let copied = server.qp.stats().rx_copied_octets;

    // 64 KiB: two FPDUs (over MPA), each read straight into the region.
    let first = pattern(SHARED.1 as usize, 1);
    send(&client, 10, &first);
    let wc = wait(&server.cq, 1).pop().unwrap();
    assert_eq!(
        (wc.wr_id, wc.opcode, wc.status, wc.byte_len),
        (1, WcOpcode::Recv, WcStatus::Success, SHARED.1 as u32),
        "{wc:?}"
    );
    assert_eq!(wc.buffer.as_deref(), Some(&[][..]), "no buffer of its own");
    assert_eq!(mr.read(SHARED.0, SHARED.1).unwrap(), first);

    // A shorter one on the same octets: it overwrites the start only.
    let second = pattern(1000, 2);
    send(&client, 11, &second);
    let wc = wait(&server.cq, 1).pop().unwrap();
    assert_eq!((wc.wr_id, wc.byte_len), (2, 1000), "{wc:?}");
    let now = mr.read(SHARED.0, SHARED.1).unwrap();
    assert_eq!(&now[..1000], &second[..]);
    assert_eq!(&now[1000..], &first[1000..]);

    // A small Send (one FPDU, the size a lone read would guess for).
    let third = pattern(64, 3);
    send(&client, 12, &third);
    let wc = wait(&server.cq, 1).pop().unwrap();
    assert_eq!((wc.wr_id, wc.byte_len), (3, 64), "{wc:?}");
    assert_eq!(mr.read(SMALL.0, SMALL.1).unwrap(), third);

    untouched_outside(&mr, &[SHARED, SMALL]);
    assert_eq!(
        server.qp.stats().rx_copied_octets - copied,
        0,
        "payload octets copied in user space"
    );
}

#[test]
fn a_send_longer_than_its_receive_is_refused_and_placed_nowhere() {
    let (server, client, mr) = setup();
    server.qp.post_recv_mr(1, &mr, SMALL.0, SMALL.1).unwrap();
    let long = client.pd.register(pattern(200, 4), Access::NONE).unwrap();
    client
        .qp
        .post_send(10, &long, 0, 200, SendFlags::default())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut sent = None;
    while sent.is_none() && Instant::now() < deadline {
        sent = common::terminate_sent(&server.qp);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(sent, Some(TerminateCode::DDP_MSG_TOO_LONG));
    let wc = wait(&server.cq, 1).pop().unwrap();
    assert_eq!(wc.wr_id, 1);
    assert_ne!(wc.status, WcStatus::Success, "{wc:?}");
    untouched_outside(&mr, &[]);
}

#[test]
fn a_receive_into_a_region_is_checked_when_posted() {
    let (server, _client, mr) = setup();
    assert!(matches!(
        server.qp.post_recv_mr(1, &mr, REGION as u64 - 10, 11),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        server.qp.post_recv_mr(2, &mr, u64::MAX, 2),
        Err(Error::OutOfRange { .. })
    ));
    let other = common::pd(&Device::new(), "other");
    let foreign = other.register(vec![0; 64], Access::NONE).unwrap();
    assert!(matches!(
        server.qp.post_recv_mr(3, &foreign, 0, 64),
        Err(Error::WrongPd)
    ));
    // A receive that was refused holds nothing: a good one still goes.
    server.qp.post_recv_mr(4, &mr, 0, 64).unwrap();
}

/// Two clients' queue pairs on one shared receive queue whose receives name
/// spans of one region (`SharedReceiveQueue::post_recv_mr`): each Send goes
/// straight from its socket into the span its message took, also in a run of
/// small Sends, nothing copied.
#[test]
fn a_shared_receive_queue_places_sends_into_its_region_receives() {
    srq_places(&Llp::mpa(MpaOptions::default()), 2);
}

#[test]
fn a_shared_receive_queue_places_sends_into_its_region_receives_over_sctp() {
    if sctp_llp::own_process(
        module_path!(),
        "a_shared_receive_queue_places_sends_into_its_region_receives_over_sctp",
    ) {
        srq_places(&Llp::Sctp, 2);
    }
}

/// `clients` queue pairs over `llp` on one shared receive queue whose
/// receives name spans of one region.
fn srq_places(llp: &Llp, clients: usize) {
    const SPAN: u64 = 32 * 1024;
    let dev = Device::new();
    let Some((addr, passive)) = llp.listen(b"") else {
        return;
    };
    let pd = common::pd(&dev, "server");
    let cq = CompletionQueue::new(256);
    let srq = SharedReceiveQueue::new(
        &pd,
        SrqMode::Shared { soft_limit: 32 },
        BufferOrdering::Arrival,
        32,
    );
    let mr = pd.register(vec![FILL; REGION], Access::NONE).unwrap();
    for i in 0..clients as u64 {
        srq.post_recv_mr(i, &mr, i * SPAN, SPAN).unwrap();
    }
    let other = common::pd(&dev, "other");
    let foreign = other.register(vec![0; 64], Access::NONE).unwrap();
    assert!(matches!(
        srq.post_recv_mr(9, &foreign, 0, 64),
        Err(Error::WrongPd)
    ));
    assert!(matches!(
        srq.post_recv_mr(9, &mr, REGION as u64 - 10, 11),
        Err(Error::OutOfRange { .. })
    ));
    assert_eq!(srq.free(), clients);
    let ends: Vec<_> = (0..clients)
        .map(|_| {
            let llp = llp.clone();
            std::thread::spawn(move || {
                let pd = common::pd(&Device::new(), "client");
                let cq = CompletionQueue::new(64);
                let prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
                let qp = llp.connect(prepared, addr, b"");
                End { pd, qp, cq }
            })
        })
        .collect();
    let server: Vec<QueuePair> = (0..clients)
        .map(|_| {
            let prepared = QueuePairBuilder::new(&pd, &cq, &cq)
                .srq(&srq)
                .build()
                .unwrap();
            passive.accept(prepared)
        })
        .collect();
    let clients: Vec<End> = ends.into_iter().map(|c| c.join().unwrap()).collect();
    let copied = dev.stats().totals.rx_copied_octets;
    // One Send each, one after the other: the first to arrive takes the
    // first span posted (arrival ordering).
    let sent: Vec<Vec<u8>> = (0..clients.len())
        .map(|i| pattern(SPAN as usize - 100 * i, 7 + i as u8))
        .collect();
    let mut spans = Vec::new();
    for (i, (c, data)) in clients.iter().zip(&sent).enumerate() {
        send(c, 10 + i as u64, data);
        let wc = wait(&cq, 1).pop().unwrap();
        assert_eq!(
            (wc.wr_id, wc.opcode, wc.status, wc.byte_len),
            (
                i as u64,
                WcOpcode::Recv,
                WcStatus::Success,
                data.len() as u32
            ),
            "{wc:?}"
        );
        assert_eq!(wc.buffer.as_deref(), Some(&[][..]), "no buffer of its own");
        let at = i as u64 * SPAN;
        assert_eq!(mr.read(at, data.len() as u64).unwrap(), *data, "Send {i}");
        spans.push((at, data.len() as u64));
    }
    assert_eq!(srq.free(), 0);
    // A run of small Sends posted back to back (the receiver meets them as
    // small FPDUs, taken in batches where they go into buffers of their
    // own): each takes the next span from the pool, and lands there alone.
    const RUN: u64 = 16;
    let small = |i: u64| (clients.len() as u64 * SPAN + i * 1000, 100);
    for i in 0..RUN {
        let (o, l) = small(i);
        srq.post_recv_mr(100 + i, &mr, o, l).unwrap();
    }
    spans.extend(send_a_run(&clients[0], &cq, &mr, RUN, 100, |i| small(i).0));
    assert_eq!(
        dev.stats().totals.rx_copied_octets - copied,
        0,
        "payload octets copied"
    );
    untouched_outside(&mr, &spans);
    drop(server);
}

/// A receive into a region posted before the queue pair is attached
/// (`PreparedQueuePair::post_recv_mr`) is there for the peer's first Send.
#[test]
fn a_receive_into_a_region_may_be_posted_before_attach() {
    let dev = Device::new();
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let pd = common::pd(&dev, "server");
    let cq = CompletionQueue::new(64);
    let mr = pd.register(vec![FILL; REGION], Access::NONE).unwrap();
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prepared.post_recv_mr(5, &mr, SMALL.0, SMALL.1).unwrap();
    assert!(matches!(
        prepared.post_recv_mr(6, &mr, REGION as u64, 1),
        Err(Error::OutOfRange { .. })
    ));
    let client = std::thread::spawn(move || {
        let pd = common::pd(&Device::new(), "client");
        let cq = CompletionQueue::new(64);
        let prepared = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        let qp = prepared.connect_mpa(addr, MpaOptions::default()).unwrap();
        let c = End { pd, qp, cq };
        // Sent as soon as the connection is up.
        send(&c, 1, &pattern(SMALL.1 as usize, 9));
        c
    });
    let qp = prepared.attach(listener.accept().unwrap()).unwrap();
    let wc = wait(&cq, 1).pop().unwrap();
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (5, WcStatus::Success, SMALL.1 as u32),
        "{wc:?}"
    );
    assert_eq!(
        mr.read(SMALL.0, SMALL.1).unwrap(),
        pattern(SMALL.1 as usize, 9)
    );
    untouched_outside(&mr, &[SMALL]);
    let _client = client.join().unwrap();
    drop(qp);
}

/// `n` Sends of 60 + i octets posted back to back by `client`, completed on
/// `cq` as the receives `first_wr_id + i`, each found in `mr` at `at(i)`;
/// the (offset, length) each filled.
fn send_a_run(
    client: &End,
    cq: &CompletionQueue,
    mr: &MemoryRegion,
    n: u64,
    first_wr_id: u64,
    at: impl Fn(u64) -> u64,
) -> Vec<(u64, u64)> {
    let src = client
        .pd
        .register(pattern(n as usize * 100, 5), Access::NONE)
        .unwrap();
    for i in 0..n {
        client
            .qp
            .post_send(1000 + i, &src, i * 100, 60 + i, SendFlags::default())
            .unwrap();
    }
    wait(&client.cq, n as usize);
    let mut got = wait(cq, n as usize);
    got.sort_by_key(|w| w.wr_id);
    let want = pattern(n as usize * 100, 5);
    for (i, wc) in (0..n).zip(&got) {
        assert_eq!(
            (wc.wr_id, wc.status, wc.byte_len),
            (first_wr_id + i, WcStatus::Success, 60 + i as u32),
            "{wc:?}"
        );
        let s = (i * 100) as usize;
        assert_eq!(
            mr.read(at(i), 60 + i).unwrap(),
            &want[s..s + 60 + i as usize],
            "Send {i} of the run"
        );
    }
    (0..n).map(|i| (at(i), 60 + i)).collect()
}

#[test]
fn a_run_of_small_sends_each_lands_in_its_own_span() {
    let (server, client, mr) = setup();
    const N: u64 = 16;
    let span = |i: u64| (i * 1000, 100);
    for i in 0..N {
        let (o, l) = span(i);
        server.qp.post_recv_mr(i, &mr, o, l).unwrap();
    }
    let copied = server.qp.stats().rx_copied_octets;
    // Posted back to back: the receiver meets them as a run of small FPDUs
    // (taken in batches when they go into receive buffers of their own).
    let spans = send_a_run(&client, &server.cq, &mr, N, 0, |i| span(i).0);
    untouched_outside(&mr, &spans);
    assert_eq!(
        server.qp.stats().rx_copied_octets - copied,
        0,
        "payload octets copied"
    );
}

/// A list of receives into regions (`post_recv_list`, one lock): those
/// before a refused one are posted, it and those after it are not.
#[test]
fn a_list_of_receives_stops_at_the_refused_one() {
    let (server, client, mr) = setup();
    let wr = |wr_id: u64, offset: u64, len: u64| RecvWr {
        wr_id,
        mr: &mr,
        offset,
        len,
    };
    let e = server
        .qp
        .post_recv_list(&[wr(0, 0, 100), wr(1, REGION as u64, 1), wr(2, 1000, 100)])
        .unwrap_err();
    assert_eq!(e.posted, 1);
    assert!(matches!(*e.error, Error::OutOfRange { .. }), "{e}");
    server.qp.post_recv_list(&[wr(3, 2000, 100)]).unwrap();
    server.qp.post_recv_list(&[]).unwrap();
    for (i, seed) in [(10, 1u8), (11, 2)] {
        send(&client, i, &pattern(100, seed));
    }
    let got: Vec<(u64, u32)> = wait(&server.cq, 2)
        .iter()
        .map(|w| (w.wr_id, w.byte_len))
        .collect();
    assert_eq!(got, [(0, 100), (3, 100)]);
    assert_eq!(mr.read(0, 100).unwrap(), pattern(100, 1));
    assert_eq!(mr.read(2000, 100).unwrap(), pattern(100, 2));
    untouched_outside(&mr, &[(0, 100), (2000, 100)]);
}
