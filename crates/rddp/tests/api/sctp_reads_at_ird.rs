//! Reads pipelined at ORD = IRD over SCTP are served: the responder frees a Read
//! Response's IRD slot as the response goes to the relay, not when the relay's
//! report of the send reaches the queue pair (another thread, later). Before, a
//! requester that issued its next Read as soon as a response arrived could
//! reach the responder first and get 0/2/0x07 ("more than IRD Reads
//! outstanding"); seen in the perf test under a loaded machine. Real usrsctp.

use crate::common;
use crate::common::sctp_llp as llp;

use rddp::transport::sctp::{SctpOptions, connect};
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, WcStatus};
use std::time::Duration;

const READS: u64 = 3000;
const LEN: usize = 8;

#[test]
fn reads_pipelined_at_ird_over_sctp_are_served() {
    if !llp::own_process(
        module_path!(),
        "reads_pipelined_at_ird_over_sctp_are_served",
    ) {
        return;
    }
    let Some((addr, listener)) = llp::listening() else {
        return;
    };
    let dev = Device::new();
    let sdev = dev.clone();
    let (ad_tx, ad_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let prep = QueuePairBuilder::new(&pd, &cq, &cq)
            .ird(1)
            .ord(1)
            .build()
            .unwrap();
        let conn = listener.accept(Duration::from_secs(10), b"").unwrap();
        let qp = prep.attach(conn).unwrap();
        let src = pd.register(vec![0x5a; LEN], Access::REMOTE_READ).unwrap();
        ad_tx.send(src.remote()).unwrap();
        let _ = done_rx.recv_timeout(Duration::from_secs(60));
        qp.async_events()
    });
    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .ird(1)
        .ord(1)
        .max_send_wr(1)
        .build()
        .unwrap()
        .attach(connect(addr, SctpOptions::default(), b"").unwrap())
        .unwrap();
    let remote = ad_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let sink = pd.register(vec![0; LEN], Access::REMOTE_WRITE).unwrap();
    // Each Read is posted the moment the one before completes: the next Read
    // Request races the responder's own bookkeeping of the last response.
    for i in 0..READS {
        qp.post_read(i, &sink, 0, LEN as u32, remote, 0).unwrap();
        let got = cq.wait(1, Duration::from_secs(10));
        assert_eq!(got.len(), 1, "Read {i} never completed");
        assert_eq!(got[0].status, WcStatus::Success, "Read {i}: {:?}", got[0]);
    }
    assert_eq!(sink.read(0, LEN as u64).unwrap(), vec![0x5a; LEN]);
    done_tx.send(()).unwrap();
    let events = server.join().unwrap();
    assert!(events.is_empty(), "the responder: {events:?}");
}
