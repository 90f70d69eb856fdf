//! Two sans-IO adaptation layers joined by chunk queues the test controls.

use rddp_proto::ddp::RecvBuffer;
use rddp_proto::mem::{Access, MemoryTable, PdId, Stag, StagScope, StreamId};
use rddp_sctp::{Adaptation, CloseReason, Config, Event, OutChunk, SessionState};
use rddp_wire::sctp::SessionControl;

/// Fragmentation point of the sans-IO tests: maximum DDP segment 598.
pub(crate) const FP: usize = 600;

pub(crate) struct Side {
    pub ad: Adaptation,
    pub mem: MemoryTable,
}

pub(crate) fn side(cfg: Config) -> Side {
    Side {
        ad: Adaptation::new(cfg, FP),
        mem: MemoryTable::with_seed(7),
    }
}

pub(crate) fn pair() -> (Side, Side) {
    (side(Config::default()), side(Config::default()))
}

pub(crate) fn drain(s: &mut Side) -> Vec<OutChunk> {
    std::iter::from_fn(|| s.ad.poll_transmit()).collect()
}

pub(crate) fn feed(to: &mut Side, chunks: &[OutChunk]) {
    for c in chunks {
        to.ad.on_chunk(&to.mem, c.sid, c.ppid, &c.to_vec()).unwrap();
    }
}

pub(crate) fn events(s: &mut Side) -> Vec<Event> {
    std::iter::from_fn(|| s.ad.poll_event()).collect()
}

pub(crate) fn ctl(c: &OutChunk) -> SessionControl {
    assert_eq!(c.ppid, 17);
    SessionControl::parse(&c.head).unwrap()
}

/// A PPID 17 payload with any function code and private data.
pub(crate) fn raw_ctl(ssn: u16, f: u16, pd: &[u8]) -> Vec<u8> {
    let mut v = ssn.to_be_bytes().to_vec();
    v.extend_from_slice(&f.to_be_bytes());
    v.extend_from_slice(pd);
    v
}

/// A opens a session on `sid`, B accepts; both established.
pub(crate) fn open(a: &mut Side, b: &mut Side, sid: u16) {
    a.ad.initiate(sid, StreamId(u32::from(sid)), PdId(1), b"hello")
        .unwrap();
    let c = drain(a);
    feed(b, &c);
    assert!(events(b).contains(&Event::InitiateRequest {
        sid,
        private_data: b"hello".to_vec()
    }));
    b.ad.accept(sid, StreamId(100 + u32::from(sid)), PdId(1), b"ok")
        .unwrap();
    let c = drain(b);
    feed(a, &c);
    assert!(events(a).contains(&Event::Accepted {
        sid,
        private_data: b"ok".to_vec()
    }));
    assert_eq!(a.ad.session_state(sid), Some(SessionState::Established));
    assert_eq!(b.ad.session_state(sid), Some(SessionState::Established));
}

/// Post one 16-octet receive buffer (wr 0, buffer 1) on the stream of `sid`.
pub(crate) fn post_recv16(s: &mut Side, sid: u16) {
    s.ad.stream(sid)
        .unwrap()
        .post_recv(
            0,
            RecvBuffer {
                id: 1,
                data: vec![0; 16],
            },
        )
        .unwrap();
}

pub(crate) fn register(s: &mut Side, len: usize) -> Stag {
    s.mem
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            0x1000,
            vec![0; len],
        )
        .unwrap()
}

pub(crate) fn closed(evs: &[Event], sid: u16) -> Option<CloseReason> {
    evs.iter().find_map(|e| match e {
        Event::Closed { sid: s, reason } if *s == sid => Some(reason.clone()),
        _ => None,
    })
}
