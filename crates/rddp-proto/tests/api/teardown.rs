//! Teardown and error reporting (RFC 5041 §6).

use crate::common::*;
use bytes::Bytes;
use rddp_proto::ddp::{RecvBuffer, StreamError, StreamEvent, StreamState};
use rddp_proto::mem::MemoryTable;

#[test]
fn graceful_teardown_finishes_queued_messages_and_refuses_new_ones() {
    let mut s = stream();
    s.set_mulpdu(18 + 4).unwrap();
    s.send_untagged(0, [0; 5], Bytes::from_static(b"0123456789"))
        .unwrap();
    let first = s.poll_segment().unwrap();
    assert!(!first.header.last());
    s.close();
    assert_eq!(s.state(), &StreamState::Closing);
    assert_eq!(
        s.send_untagged(0, [0; 5], Bytes::new()),
        Err(StreamError::Closing)
    );
    assert_eq!(
        s.send_tagged(0, 1, 0, Bytes::new()),
        Err(StreamError::Closing)
    );
    // The in-progress message still leaves, to its L=1 segment.
    let rest: Vec<_> = std::iter::from_fn(|| s.poll_segment()).collect();
    assert_eq!(rest.len(), 2);
    assert!(rest[1].header.last());
    assert!(s.drained());
    s.on_llp_closed(true);
    assert_eq!(s.state(), &StreamState::Closed);
    assert_eq!(s.poll_event(), Some(StreamEvent::Closed { graceful: true }));
}

#[test]
fn graceful_close_by_peer_keeps_delivered_messages_and_flushes_the_rest() {
    let mem = MemoryTable::with_seed(1);
    let mut s = stream();
    for id in 0..3 {
        s.post_recv(
            0,
            RecvBuffer {
                id,
                data: vec![0; 8],
            },
        )
        .unwrap();
    }
    assert_eq!(
        feed(&mut s, &mem, 0, &untagged(true, 0, 1, 0, b"done")),
        None
    );
    // Half of MSN 2 arrives, then the peer closes.
    assert_eq!(
        feed(&mut s, &mem, 1, &untagged(false, 0, 2, 0, b"ha")),
        None
    );
    s.on_llp_closed(true);
    assert!(
        s.poll_delivery().is_some(),
        "MSN 1 was delivered before the close"
    );
    assert!(
        s.poll_delivery().is_none(),
        "the partial MSN 2 is discarded"
    );
    let mut flushed = vec![];
    let mut closed = None;
    while let Some(e) = s.poll_event() {
        match e {
            StreamEvent::Flushed(b) => flushed.push(b.id),
            StreamEvent::Closed { graceful } => closed = Some(graceful),
            StreamEvent::Error(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(flushed, vec![1, 2]);
    assert_eq!(closed, Some(true));
}

#[test]
fn llp_loss_is_an_abortive_teardown() {
    let mut s = stream();
    s.post_recv(
        0,
        RecvBuffer {
            id: 5,
            data: vec![],
        },
    )
    .unwrap();
    s.send_untagged(0, [0; 5], Bytes::from_static(b"never sent"))
        .unwrap();
    s.on_llp_closed(false);
    assert_eq!(s.state(), &StreamState::Closed);
    assert!(s.poll_segment().is_none(), "queued messages are dropped");
    assert_eq!(
        s.poll_event(),
        Some(StreamEvent::Flushed(RecvBuffer {
            id: 5,
            data: vec![]
        }))
    );
    assert_eq!(
        s.poll_event(),
        Some(StreamEvent::Closed { graceful: false })
    );
    assert_eq!(
        s.send_untagged(0, [0; 5], Bytes::new()),
        Err(StreamError::Closed)
    );
    assert_eq!(
        s.post_recv(
            0,
            RecvBuffer {
                id: 6,
                data: vec![]
            }
        ),
        Err(StreamError::Closed)
    );
}

#[test]
fn a_fatal_error_leaves_the_stream_until_the_ulp_aborts() {
    let mem = MemoryTable::with_seed(2);
    let mut s = stream();
    s.send_untagged(0, [0; 5], Bytes::from_static(b"queued"))
        .unwrap();
    let code = feed(&mut s, &mem, 0, &untagged(true, 9, 1, 0, b"x")).unwrap();
    // DDP does not tear down by itself: the stream stays, erroneous, sends nothing.
    assert_eq!(s.state(), &StreamState::Erroneous(code));
    assert!(s.poll_segment().is_none());
    assert_eq!(
        s.send_untagged(0, [0; 5], Bytes::new()),
        Err(StreamError::Erroneous(code))
    );
    // A graceful close cannot rescue it; only abortive teardown ends it.
    s.close();
    assert_eq!(s.state(), &StreamState::Erroneous(code));
    s.on_llp_closed(true);
    assert_eq!(s.state(), &StreamState::Closed);
    let graceful = std::iter::from_fn(|| s.poll_event()).find_map(|e| match e {
        StreamEvent::Closed { graceful } => Some(graceful),
        _ => None,
    });
    assert_eq!(
        graceful,
        Some(false),
        "an erroneous stream never closes gracefully"
    );
}
