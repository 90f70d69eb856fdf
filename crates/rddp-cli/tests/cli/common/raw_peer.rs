//! A hostile MPA peer on a raw TCP socket: does the handshake as initiator, then
//! sends whatever octets a test crafts and reads back what the target says.
//! (After crates/rddp/tests/common/raw_peer.rs.)

use rddp_wire::mpa::{FrameKind, MpaFlags, MpaFrame};
use rddp_wire::rdmap::qn;
use rddp_wire::{
    DdpHeader, FpduDecoder, FpduEncoder, Opcode, RdmapControl, TaggedHeader, Terminate,
    UntaggedHeader,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub(crate) struct RawPeer {
    pub sock: TcpStream,
    enc: FpduEncoder,
    dec: FpduDecoder,
    /// Segments read but not yet taken.
    pub segs: Vec<Vec<u8>>,
    pub closed: bool,
    /// The target's Reply.
    pub reply: MpaFrame,
}

/// TCP connect, send an MPA Rev 1 Request (M and C as given), read the Reply.
pub(crate) fn handshake(addr: SocketAddr, markers: bool, crc: bool) -> (TcpStream, MpaFrame) {
    let mut sock = TcpStream::connect(addr).unwrap();
    sock.set_nodelay(true).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let flags = MpaFlags::new(markers, crc, false, false);
    let req = MpaFrame::new(FrameKind::Request, flags, 1, None, Vec::new());
    sock.write_all(&req.to_vec().unwrap()).unwrap();
    let mut hdr = [0u8; 20];
    sock.read_exact(&mut hdr).unwrap();
    let pd_len = usize::from(u16::from_be_bytes([hdr[18], hdr[19]]));
    let mut all = hdr.to_vec();
    all.resize(20 + pd_len, 0);
    sock.read_exact(&mut all[20..]).unwrap();
    (sock, MpaFrame::parse(&all).unwrap())
}

impl RawPeer {
    /// Rev 1 without Markers, C as given; the target must accept.
    pub(crate) fn connect(addr: SocketAddr, crc: bool) -> Self {
        let (sock, reply) = handshake(addr, false, crc);
        assert!(!reply.flags.reject(), "the target refused: {reply:?}");
        let crc = crc || reply.flags.crc();
        Self {
            sock,
            enc: FpduEncoder::new(crc, reply.flags.markers()),
            dec: FpduDecoder::new(crc, false, 65535),
            segs: Vec::new(),
            closed: false,
            reply,
        }
    }

    /// Send one DDP segment as a well-formed FPDU.
    pub(crate) fn send_segment(&mut self, seg: &[u8]) {
        let mut out = Vec::new();
        self.enc.encode(seg, &mut out).unwrap();
        self.sock.write_all(&out).unwrap();
    }

    /// One FPDU for `seg` as it would go out (to break before sending).
    pub(crate) fn encode(&mut self, seg: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.enc.encode(seg, &mut out).unwrap();
        out
    }

    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        self.sock.write_all(bytes).unwrap();
    }

    /// A Send of `payload` as one segment on QN 0 with `msn` (L as given).
    pub(crate) fn send(&mut self, msn: u32, payload: &[u8], last: bool) {
        self.send_at(msn, 0, payload, last);
    }

    /// A segment of a Send at message offset `mo`.
    pub(crate) fn send_at(&mut self, msn: u32, mo: u32, payload: &[u8], last: bool) {
        let rsvd = [RdmapControl::new(Opcode::SEND).0, 0, 0, 0, 0];
        let mut seg = UntaggedHeader::new(last, rsvd, qn::SEND, msn, mo)
            .to_bytes()
            .to_vec();
        seg.extend_from_slice(payload);
        self.send_segment(&seg);
    }

    /// An RDMA Write of `payload` at `stag`/`to`.
    pub(crate) fn write(&mut self, stag: u32, to: u64, payload: &[u8]) {
        let rdmap = RdmapControl::new(Opcode::RDMA_WRITE).0;
        let mut seg = TaggedHeader::new(true, rdmap, stag, to).to_bytes().to_vec();
        seg.extend_from_slice(payload);
        self.send_segment(&seg);
    }

    /// Read until `n` segments are buffered, the target closes, or 10 s pass.
    pub(crate) fn read_segments(&mut self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut buf = [0u8; 4096];
        while self.segs.len() < n && !self.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            self.sock.set_read_timeout(Some(left)).unwrap();
            match self.sock.read(&mut buf) {
                Ok(0) => self.closed = true,
                Ok(k) => self.dec.feed(&buf[..k], &mut self.segs).unwrap(),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return;
                }
                Err(_) => self.closed = true,
            }
        }
    }

    /// The next untagged message the target sends: (QN, MSN, payload).
    pub(crate) fn next_untagged(&mut self) -> (u32, u32, Vec<u8>) {
        self.read_segments(1);
        assert!(!self.segs.is_empty(), "nothing from the target");
        let seg = self.segs.remove(0);
        match DdpHeader::parse(&seg).unwrap() {
            DdpHeader::Untagged(h) => (h.qn, h.msn, seg[18..].to_vec()),
            DdpHeader::Tagged(h) => panic!("tagged segment {h:?}"),
        }
    }

    /// The advertisement (first Send, MSN 1): (STag, TO, length).
    pub(crate) fn advert(&mut self) -> (u32, u64, u32) {
        let (q, msn, p) = self.next_untagged();
        assert_eq!((q, msn, p.len()), (0, 1, 16), "advertisement");
        let stag = u32::from_be_bytes(p[0..4].try_into().unwrap());
        let to = u64::from_be_bytes(p[4..12].try_into().unwrap());
        let len = u32::from_be_bytes(p[12..16].try_into().unwrap());
        (stag, to, len)
    }

    /// Read until closed; the Terminate the target sent, if any.
    pub(crate) fn terminate(&mut self) -> Option<Terminate> {
        self.read_segments(usize::MAX);
        assert!(self.closed, "the target did not close");
        self.segs
            .iter()
            .find(|s| s.len() >= 18 && s[0] & 0x80 == 0 && s[1] & 0x0F == 7)
            .map(|s| Terminate::parse(&s[18..]).unwrap())
    }
}

/// An untagged segment (RDMAP opcode `op`) with MO 0.
pub(crate) fn untagged(op: Opcode, qn: u32, msn: u32, last: bool, payload: &[u8]) -> Vec<u8> {
    let rsvd = [RdmapControl::new(op).0, 0, 0, 0, 0];
    let mut seg = UntaggedHeader::new(last, rsvd, qn, msn, 0)
        .to_bytes()
        .to_vec();
    seg.extend_from_slice(payload);
    seg
}
