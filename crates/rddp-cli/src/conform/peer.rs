//! The scripted peer each case drives: an MPA initiator on a blocking TCP
//! socket, or one DDP session of an SCTP association (`sctp.rs`), every wait
//! bounded by the case's deadline, every octet sent counted against the
//! case's budget. Framing is rddp-wire's (MPA frames, FPDUs, DDP and RDMAP
//! headers, RFC 5043 chunks); only deliberately broken octets are built by
//! hand. The DDP and RDMAP cases use the same calls over either.

use super::sctp::Assoc;
use rddp_wire::rdmap::qn;
use rddp_wire::sctp::{PPID_DDP_SEGMENT, SessionFunction};
use rddp_wire::{
    DdpHeader, EnhancedBlock, FpduDecoder, FpduEncoder, FrameKind, MpaFlags, MpaFrame, Opcode,
    RdmapControl, ReadRequestHeader, ReceivedTerminate, TaggedHeader, UntaggedHeader, frame_len,
};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The sink STag our Read Requests name (we place Read Responses ourselves).
pub(super) const SINK_STAG: u32 = 0x00C0_FF00;

/// A buffer the peer lets us read and write: STag, TO, length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Buffer {
    pub stag: u32,
    pub to: u64,
    pub len: u32,
}

/// What a peer's first 20 (+ PD_Length) octets were.
#[derive(Debug)]
pub(super) enum SetupReply {
    /// A well-formed Reply (accepting or refusing, see R).
    Reply(MpaFrame),
    /// The peer closed (or reset) before a whole Reply came.
    Closed,
    /// Nothing came before the deadline.
    Silent,
    /// Octets that are not a Reply.
    Bad(String),
}

/// Everything a connection saw come back, for the judge.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// The first Terminate and its DDP header.
    pub terminate: Option<(UntaggedHeader, ReceivedTerminate)>,
    /// Segments other than the Terminate, in order.
    pub segments: Vec<Vec<u8>>,
    /// The peer closed the connection (EOF or reset).
    pub closed: bool,
    /// The peer's octets did not decode as FPDUs.
    pub broken: Option<String>,
    /// The deadline passed while we waited.
    pub timed_out: bool,
}

/// What carries the segments: MPA FPDUs on TCP, or one DDP session (a
/// stream) of an SCTP association (RFC 5043: one segment per chunk).
enum Link {
    Mpa {
        sock: TcpStream,
        enc: FpduEncoder,
        dec: FpduDecoder,
    },
    Sctp {
        assoc: Box<Assoc>,
        sid: u16,
    },
}

pub(super) struct Peer {
    link: Link,
    deadline: Instant,
    budget: usize,
    /// The MPA Reply (over SCTP, where there is none, an empty placeholder).
    pub reply: MpaFrame,
    pub seen: Seen,
    /// Next MSN of our Sends (QN 0) and Read Requests (QN 1).
    pub send_msn: u32,
    pub read_msn: u32,
    /// Over SCTP: the DDP-SSN of every chunk the session read, in arrival order.
    pub ssns: Vec<u16>,
}

/// TCP connect within the deadline.
pub(super) fn dial(addr: SocketAddr, deadline: Instant) -> Result<TcpStream, String> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let sock = TcpStream::connect_timeout(&addr, left).map_err(|e| format!("connect: {e}"))?;
    let _ = sock.set_nodelay(true);
    Ok(sock)
}

/// Set the read timeout to what is left before `deadline`; false once passed.
fn arm(sock: &TcpStream, deadline: Instant) -> bool {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return false;
    }
    sock.set_read_timeout(Some(left)).is_ok()
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Read the peer's Reply (20 octets, then PD_Length more).
pub(super) fn read_reply(sock: &mut TcpStream, deadline: Instant) -> SetupReply {
    read_frame(sock, deadline, FrameKind::Reply)
}

/// Read the peer's Request (as the responder); it comes back as `Reply(frame)`.
pub(super) fn read_request(sock: &mut TcpStream, deadline: Instant) -> SetupReply {
    read_frame(sock, deadline, FrameKind::Request)
}

fn read_frame(sock: &mut TcpStream, deadline: Instant, kind: FrameKind) -> SetupReply {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 600];
    loop {
        let want = if buf.len() < 20 {
            20
        } else {
            match frame_len(&buf) {
                Ok(n) => n,
                Err(e) => return SetupReply::Bad(e.to_string()),
            }
        };
        if buf.len() >= 20 && buf.len() == want {
            return match MpaFrame::parse(&buf) {
                Ok(f) if f.kind == kind => SetupReply::Reply(f),
                Ok(f) => SetupReply::Bad(format!("a {:?} frame, not a {kind:?}", f.kind)),
                Err(e) => SetupReply::Bad(e.to_string()),
            };
        }
        if !arm(sock, deadline) {
            return SetupReply::Silent;
        }
        // Only what the frame still needs: what follows it is FPDU mode.
        let n = (want - buf.len()).min(chunk.len());
        match sock.read(&mut chunk[..n]) {
            Ok(0) => return SetupReply::Closed,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(e) if would_block(&e) => return SetupReply::Silent,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return SetupReply::Closed,
        }
    }
}

/// Wait for the peer to close: true if it did before the deadline. What it
/// sent meanwhile is dropped.
pub(super) fn wait_close(sock: &mut TcpStream, deadline: Instant) -> bool {
    let mut b = [0u8; 4096];
    loop {
        if !arm(sock, deadline) {
            return false;
        }
        match sock.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if would_block(&e) => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

/// What the peer sends until it closes (true) or the deadline passes (false);
/// at most 64 KiB kept.
pub(super) fn drain(sock: &mut TcpStream, deadline: Instant) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        if !arm(sock, deadline) {
            return (got, false);
        }
        match sock.read(&mut b) {
            Ok(0) => return (got, true),
            Ok(n) => {
                let room = (64 * 1024usize).saturating_sub(got.len());
                got.extend_from_slice(&b[..n.min(room)]);
            }
            Err(e) if would_block(&e) => return (got, false),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return (got, true),
        }
    }
}

/// A Request: `rev`, flags, the enhanced block (Rev 2 with E), private data.
pub(super) fn request(
    rev: u8,
    markers: bool,
    crc: bool,
    enhanced: Option<EnhancedBlock>,
    pd: Vec<u8>,
) -> MpaFrame {
    let e = enhanced.is_some();
    MpaFrame::new(
        FrameKind::Request,
        MpaFlags::new(markers, crc, false, e),
        rev,
        enhanced,
        pd,
    )
}

/// The enhanced block we offer: IRD/ORD and the RTR types (A=1 if any).
pub(super) fn block(ird: u16, ord: u16, send: bool, write: bool, read: bool) -> EnhancedBlock {
    EnhancedBlock {
        p2p: send || write || read,
        rtr_send: send,
        ird,
        rtr_write: write,
        rtr_read: read,
        ord,
    }
}

impl Peer {
    /// Enter FPDU mode after `reply` answered `req` on `sock` (CRC if either
    /// side asked; Markers towards the peer if its Reply asked, towards us if we
    /// did: RFC 5044 §7.1.1).
    pub(super) fn new(
        sock: TcpStream,
        req: &MpaFrame,
        reply: MpaFrame,
        deadline: Instant,
        budget: usize,
    ) -> Self {
        let crc = req.flags.crc() || reply.flags.crc();
        Self {
            link: Link::Mpa {
                sock,
                enc: FpduEncoder::new(crc, reply.flags.markers()),
                dec: FpduDecoder::new(crc, req.flags.markers(), 65535),
            },
            deadline,
            budget,
            reply,
            seen: Seen::default(),
            send_msn: 1,
            read_msn: 1,
            ssns: Vec::new(),
        }
    }

    /// FPDU mode as the responder, after our `reply` to the peer's `req`: the
    /// Markers directions swap (the peer's M bit asks for them in what we send).
    pub(super) fn responder(
        sock: TcpStream,
        req: &MpaFrame,
        reply: MpaFrame,
        deadline: Instant,
        budget: usize,
    ) -> Self {
        let crc = req.flags.crc() || reply.flags.crc();
        let markers = reply.flags.markers();
        let mut p = Self::new(sock, req, reply, deadline, budget);
        if let Link::Mpa { enc, dec, .. } = &mut p.link {
            *enc = FpduEncoder::new(crc, req.flags.markers());
            *dec = FpduDecoder::new(crc, markers, 65535);
        }
        p
    }

    /// The DDP session on stream `sid` of `assoc`, accepted (RFC 5043): no
    /// MPA, no CRC of ours (SCTP's own covers every packet).
    pub(super) fn sctp(assoc: Assoc, sid: u16, deadline: Instant) -> Self {
        Self {
            link: Link::Sctp {
                assoc: Box::new(assoc),
                sid,
            },
            deadline,
            budget: 0,
            reply: MpaFrame::new(
                FrameKind::Reply,
                MpaFlags::new(false, false, false, false),
                2,
                None,
                Vec::new(),
            ),
            seen: Seen::default(),
            send_msn: 1,
            read_msn: 1,
            ssns: Vec::new(),
        }
    }

    pub(super) fn over_sctp(&self) -> bool {
        matches!(self.link, Link::Sctp { .. })
    }

    /// The association and stream of an SCTP session.
    pub(super) fn sctp_link(&mut self) -> Option<(&mut Assoc, u16)> {
        match &mut self.link {
            Link::Sctp { assoc, sid } => Some((assoc, *sid)),
            Link::Mpa { .. } => None,
        }
    }

    pub(super) fn crc(&self) -> bool {
        match &self.link {
            Link::Mpa { enc, .. } => enc.crc,
            Link::Sctp { .. } => false,
        }
    }

    /// The RTR the Reply chose (RFC 6581), if any.
    pub(super) fn rtr(&self) -> Option<Opcode> {
        let b = self.reply.enhanced.filter(|b| b.p2p)?;
        if b.rtr_write {
            Some(Opcode::RDMA_WRITE)
        } else if b.rtr_read {
            Some(Opcode::READ_REQUEST)
        } else if b.rtr_send {
            Some(Opcode::SEND)
        } else {
            None
        }
    }

    /// Octets onto the wire, within the case's budget.
    pub(super) fn send_raw(&mut self, b: &[u8]) -> Result<(), String> {
        if b.len() > self.budget {
            return Err(format!(
                "the case would send more than its bound ({} octets left)",
                self.budget
            ));
        }
        let Link::Mpa { sock, .. } = &mut self.link else {
            return Err("no MPA framing over SCTP".into());
        };
        self.budget -= b.len();
        sock.write_all(b)
            .map_err(|e| format!("write: {e} (the peer closed?)"))
    }

    /// One DDP segment as one well-formed FPDU, or as one SCTP chunk.
    pub(super) fn send_segment(&mut self, seg: &[u8]) -> Result<(), String> {
        if let Link::Sctp { assoc, sid } = &mut self.link {
            return assoc.segment(*sid, seg).map(|_| ());
        }
        let out = self.encode(seg)?;
        self.send_raw(&out)
    }

    /// The FPDU for `seg` as it would go out (the encoder advances).
    pub(super) fn encode(&mut self, seg: &[u8]) -> Result<Vec<u8>, String> {
        let Link::Mpa { enc, .. } = &mut self.link else {
            return Err("no MPA framing over SCTP".into());
        };
        let mut out = Vec::new();
        enc.encode(seg, &mut out)
            .map_err(|e| format!("cannot frame the segment: {e}"))?;
        Ok(out)
    }

    /// The first FPDU after the Reply: the RTR the Reply chose, else a
    /// zero-length RDMA Write (which the peer must not validate, RFC 5041
    /// §7.1; it is the RFC 6581 Write RTR), so the responder may send.
    pub(super) fn start(&mut self) -> Result<(), String> {
        match self.rtr() {
            Some(Opcode::READ_REQUEST) => self.read_request(0, 0, 0, 0),
            Some(Opcode::SEND) => self.send(&[]),
            _ => self.write(1, 0, &[]),
        }
    }

    pub(super) fn write(&mut self, stag: u32, to: u64, payload: &[u8]) -> Result<(), String> {
        let seg = tagged(Opcode::RDMA_WRITE, stag, to, true, payload);
        self.send_segment(&seg)
    }

    /// A whole Send (one segment) with the next MSN.
    pub(super) fn send(&mut self, payload: &[u8]) -> Result<(), String> {
        let msn = self.send_msn;
        self.send_msn = msn.wrapping_add(1);
        let seg = untagged(Opcode::SEND, qn::SEND, msn, 0, true, payload);
        self.send_segment(&seg)
    }

    /// A Read Request for `size` octets of (`stag`, `to`) into our sink.
    pub(super) fn read_request(
        &mut self,
        stag: u32,
        to: u64,
        size: u32,
        sink_to: u64,
    ) -> Result<(), String> {
        let seg = self.read_request_segment(stag, to, size, sink_to);
        self.send_segment(&seg)
    }

    pub(super) fn read_request_segment(
        &mut self,
        stag: u32,
        to: u64,
        size: u32,
        sink_to: u64,
    ) -> Vec<u8> {
        let msn = self.read_msn;
        self.read_msn = msn.wrapping_add(1);
        let rr = ReadRequestHeader {
            sink_stag: SINK_STAG,
            sink_to,
            size,
            src_stag: stag,
            src_to: to,
        };
        untagged(
            Opcode::READ_REQUEST,
            qn::READ_REQUEST,
            msn,
            0,
            true,
            &rr.to_bytes(),
        )
    }

    /// Read what the peer sends until `stop` says so, the peer closes, or the
    /// deadline (`until`, at most the case's) passes. Terminates are kept apart.
    pub(super) fn read_until(
        &mut self,
        until: Instant,
        mut stop: impl FnMut(&Seen) -> bool,
    ) -> Result<(), String> {
        let until = until.min(self.deadline);
        if self.over_sctp() {
            return self.read_sctp_until(until, stop);
        }
        let mut buf = vec![0u8; 65536];
        while !stop(&self.seen) && !self.seen.closed && self.seen.broken.is_none() {
            let Link::Mpa { sock, .. } = &mut self.link else {
                break;
            };
            if !arm(sock, until) {
                self.seen.timed_out = true;
                return Ok(());
            }
            let n = match sock.read(&mut buf) {
                Ok(0) => {
                    self.seen.closed = true;
                    0
                }
                Ok(n) => n,
                Err(e) if would_block(&e) => {
                    self.seen.timed_out = true;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => 0,
                Err(_) => {
                    self.seen.closed = true;
                    0
                }
            };
            self.feed(&buf[..n]);
        }
        Ok(())
    }

    /// [`Self::read_until`] over SCTP: the session's chunks; its Session
    /// Terminate (RFC 5043) or the association's end is the close.
    fn read_sctp_until(
        &mut self,
        until: Instant,
        mut stop: impl FnMut(&Seen) -> bool,
    ) -> Result<(), String> {
        while !stop(&self.seen) && !self.seen.closed && self.seen.broken.is_none() {
            let Link::Sctp { assoc, sid } = &mut self.link else {
                break;
            };
            let Some(c) = assoc.next_on(*sid, until) else {
                if assoc.lost {
                    self.seen.closed = true;
                } else {
                    self.seen.timed_out = true;
                }
                return Ok(());
            };
            self.ssns.push(c.ssn);
            match (c.ppid, c.control()) {
                (PPID_DDP_SEGMENT, _) => self.segment(c.body),
                (_, Some(SessionFunction::Terminate)) => self.seen.closed = true,
                (_, f) => {
                    self.seen.broken = Some(format!(
                        "in an accepted session, a chunk with PPID {} ({})",
                        c.ppid,
                        f.map_or("not a DDP Segment or Session Control".into(), |f| format!(
                            "Session {f:?}"
                        ))
                    ));
                }
            }
        }
        Ok(())
    }

    fn feed(&mut self, b: &[u8]) {
        let Link::Mpa { dec, .. } = &mut self.link else {
            return;
        };
        let mut segs = Vec::new();
        let r = dec.feed(b, &mut segs);
        for s in segs {
            self.segment(s);
        }
        if let Err(e) = r {
            self.seen.broken = Some(format!("the peer's octets are not FPDUs: {e}"));
        }
    }

    /// A segment the peer sent: its Terminate kept apart.
    fn segment(&mut self, s: Vec<u8>) {
        match DdpHeader::parse(&s) {
            Ok(DdpHeader::Untagged(h)) if h.qn == qn::TERMINATE => {
                if self.seen.terminate.is_none() {
                    let body = ReceivedTerminate::decode(&s[18..]);
                    self.seen.terminate = Some((h, body));
                }
            }
            _ => self.seen.segments.push(s),
        }
    }

    /// Wait for the end of the connection (a Terminate, a close) until the deadline.
    pub(super) fn read_to_end(&mut self) -> Result<(), String> {
        self.read_until(self.deadline, |_| false)
    }

    /// The advertisement as `rddp target` sends it: its first Send (QN 0, MSN 1),
    /// STag || TO || length, 16 octets; waits at most until `until`.
    pub(super) fn advertisement(&mut self, until: Instant) -> Result<Option<Buffer>, String> {
        self.read_until(until, |s| s.segments.iter().any(|x| advert(x).is_some()))?;
        Ok(self.seen.segments.iter().find_map(|x| advert(x)))
    }

    /// Probe that the peer is still there: a zero-length Read Request (RFC 5040
    /// §5.2: legal, answered by a zero-length Read Response), answered in time.
    /// A peer that took no Reads (its Reply's IRD 0, or Rev 1, where IRD is not
    /// negotiated and may be 0) is only watched for half a second instead: a
    /// Read would break its IRD. Over SCTP, where nothing negotiates IRD
    /// (RFC 5043), the Read is sent: a peer that serves Reads takes one.
    pub(super) fn probe(&mut self, until: Instant) -> Result<bool, String> {
        if !self.over_sctp() && self.reply.enhanced.is_none_or(|b| b.ird == 0) {
            self.quiet_for(Duration::from_millis(500))?;
            return Ok(self.seen.terminate.is_none() && !self.seen.closed);
        }
        let before = self.read_responses();
        self.read_request(0, 0, 0, 0)?;
        self.read_until(until, |s| {
            s.terminate.is_some() || count_responses(&s.segments) > before
        })?;
        Ok(self.seen.terminate.is_none() && self.read_responses() > before)
    }

    pub(super) fn read_responses(&self) -> usize {
        count_responses(&self.seen.segments)
    }

    /// Stop reading after `d` (or the deadline), whatever came.
    pub(super) fn quiet_for(&mut self, d: Duration) -> Result<(), String> {
        let until = Instant::now() + d;
        self.read_until(until, |s| s.terminate.is_some())?;
        self.seen.timed_out = false;
        Ok(())
    }

    /// A clean close: FIN, then what the peer still sends is read (briefly)
    /// so that its close is not answered with a reset.
    /// Over SCTP: our Session Terminate (every session ends with at least
    /// one, RFC 5043), then the association's graceful SHUTDOWN.
    pub(super) fn close(self) {
        let until = Instant::now() + Duration::from_millis(500);
        match self.link {
            Link::Mpa { mut sock, .. } => {
                let _ = sock.shutdown(Shutdown::Write);
                let _ = wait_close(&mut sock, until.min(self.deadline.max(Instant::now())));
            }
            Link::Sctp { mut assoc, sid } => {
                // SHUTDOWN delivers what is queued first (RFC 4960 §9.2).
                let _ = assoc.control(sid, SessionFunction::Terminate.code(), &[]);
                assoc.close();
            }
        }
    }

    /// Read Response payloads for our sink, placed by TO; `None` until the
    /// last one (L=1) of `len` octets has come.
    pub(super) fn read_data(&self, len: usize) -> Option<Vec<u8>> {
        read_data(&self.seen.segments, len)
    }
}

/// Read Response payloads for our sink among `segs`, placed by TO; `None`
/// until the last one (L=1) of `len` octets has come.
pub(super) fn read_data(segs: &[Vec<u8>], len: usize) -> Option<Vec<u8>> {
    let mut out = vec![0u8; len];
    let mut done = false;
    for s in segs {
        if let Ok(DdpHeader::Tagged(h)) = DdpHeader::parse(s)
            && RdmapControl(h.rsvd_ulp).opcode() == Opcode::READ_RESPONSE
            && h.stag == SINK_STAG
        {
            let p = &s[14..];
            let at = usize::try_from(h.to).ok()?;
            out.get_mut(at..at + p.len())?.copy_from_slice(p);
            done |= h.ctrl.last() && at + p.len() == len;
        }
    }
    done.then_some(out)
}

fn count_responses(segs: &[Vec<u8>]) -> usize {
    segs.iter()
        .filter(|s| match DdpHeader::parse(s) {
            Ok(DdpHeader::Tagged(h)) => {
                RdmapControl(h.rsvd_ulp).opcode() == Opcode::READ_RESPONSE && h.ctrl.last()
            }
            _ => false,
        })
        .count()
}

/// The advertisement in a segment: a 16-octet Send, QN 0, MSN 1.
fn advert(s: &[u8]) -> Option<Buffer> {
    match DdpHeader::parse(s).ok()? {
        DdpHeader::Untagged(h) if h.qn == qn::SEND && h.msn == 1 && s.len() == 18 + 16 => {
            let p = &s[18..];
            Some(Buffer {
                stag: u32::from_be_bytes(p[0..4].try_into().ok()?),
                to: u64::from_be_bytes(p[4..12].try_into().ok()?),
                len: u32::from_be_bytes(p[12..16].try_into().ok()?),
            })
        }
        _ => None,
    }
}

/// A tagged segment (RDMAP opcode `op`).
pub(super) fn tagged(op: Opcode, stag: u32, to: u64, last: bool, payload: &[u8]) -> Vec<u8> {
    let mut seg = TaggedHeader::new(last, RdmapControl::new(op).0, stag, to)
        .to_bytes()
        .to_vec();
    seg.extend_from_slice(payload);
    seg
}

/// An untagged segment (RDMAP opcode `op`).
pub(super) fn untagged(
    op: Opcode,
    qn: u32,
    msn: u32,
    mo: u32,
    last: bool,
    payload: &[u8],
) -> Vec<u8> {
    let rsvd = [RdmapControl::new(op).0, 0, 0, 0, 0];
    let mut seg = UntaggedHeader::new(last, rsvd, qn, msn, mo)
        .to_bytes()
        .to_vec();
    seg.extend_from_slice(payload);
    seg
}
