//! IRD/ORD over SCTP: RFC 5043 negotiates no IRD/ORD, so the queue pair
//! runs with its builder's values on both sides. Real usrsctp, UDP encapsulation.

use crate::common;
use crate::common::sctp_llp as llp;

use rddp::transport::sctp::{SctpOptions, connect};
use rddp::{CompletionQueue, Device, QueuePairBuilder};
use std::time::Duration;

/// Over SCTP the queue pair runs with its builder's IRD and
/// ORD on the active and on the passive side (before: 16/16 whatever was asked).
#[test]
fn builder_ird_ord_are_used_on_both_sctp_sides() {
    if !llp::own_process(
        module_path!(),
        "builder_ird_ord_are_used_on_both_sctp_sides",
    ) {
        return;
    }
    let Some((addr, listener)) = llp::listening() else {
        return;
    };
    let dev = Device::new();
    let sdev = dev.clone();
    let server = std::thread::spawn(move || {
        let pd = common::pd(&sdev, "server");
        let cq = CompletionQueue::new(64);
        let prep = QueuePairBuilder::new(&pd, &cq, &cq)
            .ird(3)
            .ord(5)
            .build()
            .unwrap();
        let conn = listener.accept(Duration::from_secs(10), b"").unwrap();
        prep.attach(conn).unwrap().ird_ord()
    });
    let pd = common::pd(&dev, "client");
    let cq = CompletionQueue::new(64);
    let prep = QueuePairBuilder::new(&pd, &cq, &cq)
        .ird(7)
        .ord(2)
        .build()
        .unwrap();
    let qp = prep
        .attach(connect(addr, SctpOptions::default(), b"").unwrap())
        .unwrap();
    assert_eq!(qp.ird_ord(), (7, 2), "active side");
    assert_eq!(server.join().unwrap(), (3, 5), "passive side");
}
