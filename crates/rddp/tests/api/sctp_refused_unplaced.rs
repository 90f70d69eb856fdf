//! DDP over SCTP, a message taken as soon as it arrives (docs/data-path.md):
//! it comes as usrsctp's mbuf chain, its length known, so every check of its
//! header and length runs before any octet of it is placed (RFC 5041), and
//! its payload is copied from the chain straight into place. A hostile peer
//! (rddp-sctp's own DDP stream, sending segments RDMAP would never send)
//! shows that a payload longer than what its header may write gets the right
//! Terminate, delivers nothing and places no octet at all, not even inside
//! the range it could reach: a Write past its region's end, a Read Response
//! past what its Read asked for, a Send past its receive buffer. And an
//! honest Write and Send land with no user-space copy.
//!
//! One test (a usrsctp stack per process has one encapsulation port), several
//! associations to one listener, one per case.

use crate::common;
use crate::common::sctp_llp as llp;

use llp::ddp_peer;
use rddp::transport::sctp::Listener;
use rddp::{
    Access, AsyncEvent, CompletionQueue, Device, QueuePairBuilder, RemoteBuf, TerminateCode,
    WcOpcode, WcStatus,
};
use rddp_proto::mem::MemoryTable;
use rddp_wire::{Opcode, RdmapControl};
use std::net::SocketAddrV4;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const REGION: usize = 4096;
const RECV: usize = 1000;
const FILL: u8 = 0xAA;

/// What the hostile peer sends, given the server's region.
#[derive(Clone, Copy, Debug)]
enum Case {
    /// A Write inside the region, then a Send inside its buffer: both land.
    Honest,
    /// A Write that starts inside the region and runs 104 octets past its end.
    WritePastRegion,
    /// A Send of 1,500 octets into a 1,000-octet receive buffer.
    SendPastBuffer,
    /// A Read Response of 200 octets to a Read of 100 into a 4 KiB region.
    ReadResponsePastRead,
}

fn ctrl(op: Opcode) -> u8 {
    RdmapControl::new(op).0
}

/// The peer's half of `case` against the server's region `r`.
fn hostile(addr: SocketAddrV4, case: Case, r: RemoteBuf, go: Receiver<()>) {
    let mut c = ddp_peer(addr);
    // Once the server's queue pair is attached (what comes before it is
    // queued whole, copied: not what this test looks at).
    go.recv().unwrap();
    let mem = MemoryTable::new();
    let s = c.stream(0).unwrap();
    match case {
        Case::Honest => {
            s.send_tagged(
                ctrl(Opcode::RDMA_WRITE),
                r.stag,
                r.to + 100,
                vec![1u8; 3000],
            )
            .unwrap();
            s.send_untagged(0, [ctrl(Opcode::SEND), 0, 0, 0, 0], vec![2u8; RECV])
                .unwrap();
        }
        Case::WritePastRegion => {
            let to = r.to + REGION as u64 - 96;
            s.send_tagged(ctrl(Opcode::RDMA_WRITE), r.stag, to, vec![3u8; 200])
                .unwrap();
        }
        Case::SendPastBuffer => {
            s.send_untagged(0, [ctrl(Opcode::SEND), 0, 0, 0, 0], vec![4u8; 1500])
                .unwrap();
        }
        Case::ReadResponsePastRead => {
            // Not waiting for the Read Request: the sink is known here; the
            // Read was posted before `go`.
            s.send_tagged(ctrl(Opcode::READ_RESPONSE), r.stag, r.to, vec![5u8; 200])
                .unwrap();
        }
    }
    // Keep the association up while the server looks.
    let _ = c.run_until(&mem, Duration::from_secs(2), |_| false);
}

fn terminate_sent(events: &[AsyncEvent]) -> Option<TerminateCode> {
    events.iter().find_map(|e| match e {
        AsyncEvent::TerminateSent { code, .. } => Some(*code),
        _ => None,
    })
}

fn run(listener: &Listener, addr: SocketAddrV4, case: Case) {
    let dev = Device::new();
    let pd = common::pd(&dev, "server");
    let cq = CompletionQueue::new(1024);
    let mut prep = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
    prep.post_recv(1, RECV).unwrap();
    let region = pd
        .register(
            vec![FILL; REGION],
            Access::REMOTE_WRITE | Access::LOCAL_WRITE,
        )
        .unwrap();
    // A neighbour registered right after: no segment may reach it.
    let neighbour = pd
        .register(vec![FILL; REGION], Access::REMOTE_WRITE)
        .unwrap();
    let r = region.remote();
    let (go, went) = channel();
    let p = std::thread::spawn(move || hostile(addr, case, r, went));
    let conn = listener.accept(Duration::from_secs(10), b"").unwrap();
    let qp = prep.attach(conn).unwrap();
    let rx0 = dev.stats().totals.rx_copied_octets;
    if let Case::ReadResponsePastRead = case {
        let sent = qp.stats().messages_sent;
        qp.post_read(
            9,
            &region,
            0,
            100,
            RemoteBuf {
                stag: 0x1234,
                to: 0,
                len: 100,
            },
            0,
        )
        .unwrap();
        // The Read Request is on its way (handed to SCTP) before the
        // response overtakes it.
        common::wait_until("the Read Request handed to SCTP", || {
            qp.stats().messages_sent > sent
        });
    }
    go.send(()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut wcs = Vec::new();
    let done = |wcs: &Vec<rddp::WorkCompletion>, ev: &[AsyncEvent]| match case {
        Case::Honest => wcs.iter().any(|w| w.opcode == WcOpcode::Recv),
        _ => terminate_sent(ev).is_some(),
    };
    let mut events = Vec::new();
    loop {
        wcs.extend(cq.poll(16));
        events.extend(qp.async_events());
        if done(&wcs, &events) || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let data = region.read(0, REGION as u64).unwrap();
    let untouched = |range: std::ops::Range<usize>| data[range].iter().all(|&b| b == FILL);
    let what = format!("{case:?}: {wcs:?} {events:?}");
    match case {
        Case::Honest => {
            let w = wcs
                .iter()
                .find(|w| w.opcode == WcOpcode::Recv)
                .expect(&what);
            assert_eq!(
                (w.status, w.byte_len as usize),
                (WcStatus::Success, RECV),
                "{what}"
            );
            assert!(w.buffer.as_ref().unwrap().iter().all(|&b| b == 2), "{what}");
            assert!(untouched(0..100) && untouched(3100..REGION), "{what}");
            assert!(data[100..3100].iter().all(|&b| b == 1), "{what}");
            // Straight from usrsctp's chains into the region and the buffer.
            if usrsctp_ffi::chain_available() {
                assert_eq!(dev.stats().totals.rx_copied_octets - rx0, 0, "{what}");
            }
        }
        Case::WritePastRegion => {
            assert_eq!(
                terminate_sent(&events),
                Some(TerminateCode::DDP_BASE_BOUNDS),
                "{what}"
            );
            // Refused before placement: not even the region's last 96 octets.
            assert!(untouched(0..REGION), "{what}");
        }
        Case::SendPastBuffer => {
            assert_eq!(
                terminate_sent(&events),
                Some(TerminateCode::DDP_MSG_TOO_LONG),
                "{what}"
            );
            assert!(
                !wcs.iter()
                    .any(|w| w.opcode == WcOpcode::Recv && w.status == WcStatus::Success),
                "{what}"
            );
            assert!(untouched(0..REGION), "{what}");
        }
        Case::ReadResponsePastRead => {
            assert_eq!(
                terminate_sent(&events),
                Some(TerminateCode::DDP_BASE_BOUNDS),
                "{what}"
            );
            // Refused before placement: not even the 100 octets the Read wants.
            assert!(untouched(0..REGION), "{what}");
            assert!(!wcs.iter().any(|w| w.status == WcStatus::Success), "{what}");
        }
    }
    let n = neighbour.read(0, REGION as u64).unwrap();
    assert!(
        n.iter().all(|&b| b == FILL),
        "{what}: the neighbour region changed"
    );
    p.join().unwrap();
}

#[test]
fn an_over_long_payload_is_refused_before_any_octet_is_placed() {
    if !llp::own_process(
        module_path!(),
        "an_over_long_payload_is_refused_before_any_octet_is_placed",
    ) {
        return;
    }
    let Some((addr, listener)) = llp::listening() else {
        return;
    };
    for case in [
        Case::Honest,
        Case::WritePastRegion,
        Case::SendPastBuffer,
        Case::ReadResponsePastRead,
    ] {
        run(&listener, addr, case);
    }
}
