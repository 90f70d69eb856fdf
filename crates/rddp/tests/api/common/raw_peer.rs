//! A hostile MPA peer on a raw TCP socket: does the Rev 1 handshake as initiator,
//! then sends whatever octets a test crafts and reads back what the rddp side says.
#![allow(dead_code)]

use rddp::transport::Connection;
use rddp::transport::mpa::Listener;
use rddp_mpa::MpaOptions;
use rddp_wire::mpa::{FrameKind, MpaFlags, MpaFrame};
use rddp_wire::{FpduDecoder, FpduEncoder, Terminate};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Read one MPA Request or Reply frame off `sock`.
pub(crate) fn read_frame(sock: &mut TcpStream) -> MpaFrame {
    let mut all = vec![0u8; 20];
    sock.read_exact(&mut all).unwrap();
    let pd_len = usize::from(u16::from_be_bytes([all[18], all[19]]));
    let mut rest = vec![0u8; pd_len];
    sock.read_exact(&mut rest).unwrap();
    all.extend_from_slice(&rest);
    MpaFrame::parse(&all).unwrap()
}

/// The first Terminate among DDP segments (untagged, RDMAP opcode 7), parsed.
pub(crate) fn terminate_in(segs: &[Vec<u8>]) -> Option<Terminate> {
    segs.iter()
        .find(|s| s.len() >= 18 && s[0] & 0x80 == 0 && s[1] & 0x0F == 7)
        .and_then(|s| Terminate::parse(&s[18..]).ok())
}

pub(crate) struct RawPeer {
    pub sock: TcpStream,
    enc: FpduEncoder,
    dec: FpduDecoder,
    /// The responder's private data from its Reply.
    pub reply_private_data: Vec<u8>,
}

impl RawPeer {
    /// A Rev 1 rddp listener on a port of its own and a raw peer connected to it
    /// (C=1): the raw peer and the rddp side's connection.
    pub(crate) fn accepted_rev1() -> (Self, Connection) {
        Self::accepted_with(MpaOptions::rev1())
    }

    /// As [`Self::accepted_rev1`], the listener with `opts` (its IRD, say).
    pub(crate) fn accepted_with(opts: MpaOptions) -> (Self, Connection) {
        let listener = Listener::bind("127.0.0.1:0", opts).unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = std::thread::spawn(move || listener.accept());
        let raw = Self::connect(addr, true);
        let conn = accept.join().unwrap().unwrap();
        (raw, conn)
    }

    /// A responder queue pair of `pd` (send queue of `max_send_wr`, `cq` for
    /// both queues) attached to a raw Rev 1 initiator, which has sent its
    /// first FPDU (a zero-length Write): the responder may send (RFC 5044 §7.1.2).
    pub(crate) fn responder_qp(
        pd: &rddp::ProtectionDomain,
        cq: &rddp::CompletionQueue,
        max_send_wr: u32,
    ) -> (Self, rddp::QueuePair) {
        let (mut raw, conn) = Self::accepted_rev1();
        let qp = rddp::QueuePairBuilder::new(pd, cq, cq)
            .max_send_wr(max_send_wr)
            .build()
            .unwrap()
            .attach(conn)
            .unwrap();
        raw.send_segment(&[0xC1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        (raw, qp)
    }

    /// TCP connect, send an MPA Request (Rev 1, C as given), read the Reply.
    pub(crate) fn connect(addr: SocketAddr, crc: bool) -> Self {
        let req = MpaFrame::new(
            FrameKind::Request,
            MpaFlags::new(false, crc, false, false),
            1,
            None,
            Vec::new(),
        );
        Self::connect_with(addr, &req)
    }

    /// TCP connect, send `req` (any Rev, enhanced block or not), read the Reply.
    pub(crate) fn connect_with(addr: SocketAddr, req: &MpaFrame) -> Self {
        let crc = req.flags.crc();
        let mut sock = TcpStream::connect(addr).unwrap();
        sock.set_nodelay(true).unwrap();
        sock.write_all(&req.to_vec().unwrap()).unwrap();
        let rep = read_frame(&mut sock);
        assert!(!rep.flags.reject(), "the rddp side refused the connection");
        let crc = crc || rep.flags.crc();
        Self {
            sock,
            enc: FpduEncoder::new(crc, rep.flags.markers()),
            dec: FpduDecoder::new(crc, false, 65535),
            reply_private_data: rep.private_data,
        }
    }

    /// A peer already past MPA setup on `sock` (say, a raw responder that sent its
    /// Reply), framing with CRC as given and no Markers.
    pub(crate) fn from_stream(sock: TcpStream, crc: bool) -> Self {
        Self {
            sock,
            enc: FpduEncoder::new(crc, false),
            dec: FpduDecoder::new(crc, false, 65535),
            reply_private_data: Vec::new(),
        }
    }

    /// Send one DDP segment as a well-formed FPDU.
    pub(crate) fn send_segment(&mut self, seg: &[u8]) {
        let mut out = Vec::new();
        self.enc.encode(seg, &mut out).unwrap();
        self.sock.write_all(&out).unwrap();
    }

    /// Send `seg` as an FPDU (CRC, no Markers) whose CRC is broken: its last
    /// octet XOR `flip`.
    pub(crate) fn send_bad_crc(&mut self, seg: &[u8], flip: u8) {
        let mut bad = Vec::new();
        FpduEncoder::new(true, false).encode(seg, &mut bad).unwrap();
        *bad.last_mut().unwrap() ^= flip;
        self.send_raw(&bad);
    }

    /// Send `segs` as FPDUs in one write: they reach the rddp side together.
    pub(crate) fn send_segments(&mut self, segs: &[Vec<u8>]) {
        let mut out = Vec::new();
        for seg in segs {
            self.enc.encode(seg, &mut out).unwrap();
        }
        self.sock.write_all(&out).unwrap();
    }

    /// Send raw octets (a broken FPDU, say).
    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        self.sock.write_all(bytes).unwrap();
    }

    /// Read FPDUs until the DDP segments received so far satisfy `enough`;
    /// fails the test naming `what` if they do not within 20 s (a bound, not
    /// a pace) or the connection ends first.
    pub(crate) fn read_until(
        &mut self,
        what: &str,
        enough: impl Fn(&[Vec<u8>]) -> bool,
    ) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut segs = Vec::new();
        let mut buf = [0u8; 4096];
        while !enough(&segs) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "not within 20 s: {what}; got {segs:02x?}");
            self.sock.set_read_timeout(Some(left)).unwrap();
            match self.sock.read(&mut buf) {
                Ok(0) => panic!("closed before {what}; got {segs:02x?}"),
                Ok(n) => {
                    if let Err(e) = self.dec.feed(&buf[..n], &mut segs) {
                        panic!("{e} before {what}; got {segs:02x?}");
                    }
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("{e} before {what}; got {segs:02x?}"),
            }
        }
        segs
    }

    /// Read FPDUs until the connection closes or `timeout` passes; returns the DDP
    /// segments received and whether the peer closed.
    pub(crate) fn read_all(&mut self, timeout: Duration) -> (Vec<Vec<u8>>, bool) {
        let deadline = Instant::now() + timeout;
        let mut segs = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return (segs, false);
            }
            self.sock.set_read_timeout(Some(left)).unwrap();
            match self.sock.read(&mut buf) {
                Ok(0) => return (segs, true),
                Ok(n) => {
                    if self.dec.feed(&buf[..n], &mut segs).is_err() {
                        return (segs, false);
                    }
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    return (segs, false);
                }
                Err(_) => return (segs, true),
            }
        }
    }

    /// The DDP segments in `bytes`, read off this peer's socket by someone else
    /// (the octets that follow what this peer decoded so far); `None` once the
    /// framing is broken.
    pub(crate) fn decode(&mut self, bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut segs = Vec::new();
        self.dec.feed(bytes, &mut segs).ok().map(|_| segs)
    }

    /// Read until closed; return the Terminate the rddp side sent, if any.
    pub(crate) fn terminate(&mut self) -> (Option<Terminate>, bool) {
        let (segs, closed) = self.read_all(Duration::from_secs(5));
        (terminate_in(&segs), closed)
    }
}
