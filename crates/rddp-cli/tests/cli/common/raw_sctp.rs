//! A raw usrsctp peer for `rddp target --transport sctp`: it sets up a DDP
//! association (Adaptation Layer Indication 1, UDP encapsulation) and then sends
//! whatever chunks a test wants, DDP-SSNs included, and reads every chunk back.
//! Nothing of rddp-sctp's session rules runs here: the peer may break them.
#![allow(dead_code)]

use rddp_wire::sctp::{SessionControl, SessionFunction};
use rddp_wire::{DdpHeader, Opcode, RdmapControl, UntaggedHeader};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};
use usrsctp_ffi::sys::{
    SCTP_ADAPTATION_INDICATION, SCTP_ASSOC_CHANGE, SCTP_COMM_UP, SCTP_SENDER_DRY_EVENT,
};
use usrsctp_ffi::{Encapsulation, Error, Notification, Received, Socket, Target, stack};

pub(crate) const STREAMS: u16 = 16;
pub(crate) const PPID_SEGMENT: u32 = 16;
pub(crate) const PPID_CONTROL: u32 = 17;

/// A chunk the target sent: stream, PPID, payload without the DDP-SSN.
#[derive(Debug, Clone)]
pub(crate) struct Chunk {
    pub sid: u16,
    pub ppid: u32,
    pub ssn: u16,
    pub body: Vec<u8>,
}

impl Chunk {
    pub(crate) fn control(&self) -> Option<SessionFunction> {
        if self.ppid != PPID_CONTROL {
            return None;
        }
        let mut p = self.ssn.to_be_bytes().to_vec();
        p.extend_from_slice(&self.body);
        SessionControl::parse(&p).ok().map(|c| c.function)
    }

    /// (MSN, payload) of an untagged Send segment.
    pub(crate) fn send(&self) -> Option<(u32, Vec<u8>)> {
        match (self.ppid, DdpHeader::parse(&self.body)) {
            (PPID_SEGMENT, Ok(h @ DdpHeader::Untagged(u))) => {
                Some((u.msn, self.body[h.len()..].to_vec()))
            }
            _ => None,
        }
    }
}

pub(crate) struct RawSctp {
    sock: Socket,
    buf: Vec<u8>,
    next_ssn: [u16; STREAMS as usize],
    /// Chunks read but not yet taken, in arrival order.
    inbox: VecDeque<Chunk>,
    dry: bool,
}

/// Start this process's usrsctp stack, or join the one running.
fn stack() {
    let port = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    match stack::init(Encapsulation::Udp(port)) {
        Ok(_)
        | Err(Error::StackMismatch {
            running: Encapsulation::Udp(_),
            ..
        }) => {}
        Err(e) => panic!("usrsctp: {e}"),
    }
}

impl RawSctp {
    /// A verified DDP association to the target at `addr`.
    pub(crate) fn connect(addr: SocketAddrV4) -> Self {
        stack();
        let s = Socket::new(false).unwrap();
        s.set_adaptation_layer(rddp_wire::sctp::ADAPTATION_DDP)
            .unwrap();
        s.set_init_streams(STREAMS).unwrap();
        for ev in [
            SCTP_ASSOC_CHANGE,
            SCTP_ADAPTATION_INDICATION,
            SCTP_SENDER_DRY_EVENT,
        ] {
            s.subscribe(ev).unwrap();
        }
        s.set_recv_rcvinfo(true).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_remote_udp_encaps_port(addr.port()).unwrap();
        s.bind(Target::Inet(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)))
            .unwrap();
        s.connect(Target::Inet(addr)).unwrap();
        let mut p = Self {
            sock: s,
            buf: vec![0; 1 << 16],
            next_ssn: [0; STREAMS as usize],
            inbox: VecDeque::new(),
            dry: false,
        };
        let (mut up, mut ddp) = (false, false);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(up && ddp) {
            assert!(Instant::now() < deadline, "no association");
            match p.sock.recv(&mut p.buf, Duration::from_millis(100)) {
                Ok(Received::Notification(Notification::AssocChange { state, .. })) => {
                    assert_eq!(state, SCTP_COMM_UP, "association state");
                    up = true;
                }
                Ok(Received::Notification(Notification::Adaptation { indication })) => {
                    assert_eq!(indication, 1, "the target's Adaptation Indication");
                    ddp = true;
                }
                Ok(Received::Notification(_)) | Err(Error::Timeout(_)) => {}
                other => panic!("during setup: {other:?}"),
            }
        }
        p
    }

    /// The largest message SCTP sends unfragmented here.
    pub(crate) fn fragmentation_point(&self) -> usize {
        self.sock.status().unwrap().fragmentation_point as usize
    }

    /// Send `body` after the next DDP-SSN of `sid`; returns that DDP-SSN.
    pub(crate) fn send(&mut self, sid: u16, ppid: u32, body: &[u8]) -> u16 {
        let ssn = self.take_ssn(sid);
        self.send_ssn(sid, ppid, ssn, body);
        ssn
    }

    /// The next DDP-SSN of `sid`, to send later with [`Self::send_ssn`].
    pub(crate) fn take_ssn(&mut self, sid: u16) -> u16 {
        let s = &mut self.next_ssn[usize::from(sid)];
        let ssn = *s;
        *s = s.wrapping_add(1);
        ssn
    }

    /// Send `body` with DDP-SSN `ssn` (unordered, as every DDP chunk).
    pub(crate) fn send_ssn(&mut self, sid: u16, ppid: u32, ssn: u16, body: &[u8]) {
        let mut p = ssn.to_be_bytes().to_vec();
        p.extend_from_slice(body);
        self.sock
            .send_wait(sid, ppid, true, &p, Duration::from_secs(5))
            .unwrap();
        self.dry = false;
    }

    /// A Session Control message (any function code, any private data).
    pub(crate) fn control(&mut self, sid: u16, function: u16, pd: &[u8]) -> u16 {
        let mut b = function.to_be_bytes().to_vec();
        b.extend_from_slice(pd);
        self.send(sid, PPID_CONTROL, &b)
    }

    /// An RDMAP Send of `data` as one untagged segment (QN 0).
    pub(crate) fn send_message(&mut self, sid: u16, msn: u32, data: &[u8]) {
        let rdmap = RdmapControl::new(Opcode::SEND).0;
        let mut b = UntaggedHeader::new(true, [rdmap, 0, 0, 0, 0], 0, msn, 0)
            .to_bytes()
            .to_vec();
        b.extend_from_slice(data);
        self.send(sid, PPID_SEGMENT, &b);
    }

    fn read_one(&mut self, timeout: Duration) -> bool {
        match self.sock.recv(&mut self.buf, timeout) {
            Ok(Received::Data {
                len,
                info,
                complete,
            }) => {
                assert!(complete && info.unordered && len >= 2, "{info:?}");
                self.inbox.push_back(Chunk {
                    sid: info.sid,
                    ppid: info.ppid,
                    ssn: u16::from_be_bytes([self.buf[0], self.buf[1]]),
                    body: self.buf[2..len].to_vec(),
                });
                true
            }
            Ok(Received::Notification(Notification::SenderDry)) => {
                self.dry = true;
                true
            }
            Ok(Received::Notification(
                n @ (Notification::AssocChange { .. } | Notification::Shutdown),
            )) => panic!("the association ended: {n:?}"),
            Ok(Received::Notification(_)) => true,
            Err(Error::Timeout(_)) => false,
            Err(e) => panic!("receive: {e}"),
        }
    }

    /// The next chunk the target sent on `sid` (others stay in the inbox).
    pub(crate) fn next_on(&mut self, sid: u16, timeout: Duration) -> Option<Chunk> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.inbox.iter().position(|c| c.sid == sid) {
                return self.inbox.remove(i);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            self.read_one(left.min(Duration::from_millis(50)));
        }
    }

    /// The next chunk on `sid`, which must be Session Control `f`.
    pub(crate) fn expect_control(&mut self, sid: u16, f: SessionFunction) -> Chunk {
        let c = self
            .next_on(sid, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("no {f:?} on stream {sid}"));
        assert_eq!(c.control(), Some(f), "stream {sid}: {c:?}");
        c
    }

    /// The next chunk on `sid`, which must be an RDMAP Send: (MSN, payload).
    pub(crate) fn expect_send(&mut self, sid: u16) -> (u32, Vec<u8>) {
        let c = self
            .next_on(sid, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("no Send on stream {sid}"));
        c.send()
            .unwrap_or_else(|| panic!("stream {sid}: not a Send: {c:?}"))
    }

    /// Every chunk the target sends on `sid` within `d`.
    pub(crate) fn collect_on(&mut self, sid: u16, d: Duration) -> Vec<Chunk> {
        let deadline = Instant::now() + d;
        let mut got = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            if let Some(c) = self.next_on(sid, left) {
                got.push(c);
            }
        }
        got
    }

    /// Wait until everything we sent is acknowledged (SCTP sender-dry): nothing of
    /// ours is outstanding, so a stream number may be reused (RFC 5043).
    pub(crate) fn wait_dry(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.dry {
            assert!(Instant::now() < deadline, "never sender-dry");
            self.read_one(Duration::from_millis(50));
        }
    }

    /// Open a session on `sid`: Initiate, the target's Accept, then its first Send
    /// (the 16-octet advertisement, MSN 1).
    pub(crate) fn open(&mut self, sid: u16) -> Vec<u8> {
        self.control(sid, SessionFunction::Initiate.code(), b"");
        self.expect_control(sid, SessionFunction::Accept);
        let (msn, ad) = self.expect_send(sid);
        assert_eq!((msn, ad.len()), (1, 16), "the advertisement");
        ad
    }
}
