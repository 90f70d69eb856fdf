//! Shared helpers for the loopback tests: endpoint pairs over real TCP on
//! 127.0.0.1 with kernel-chosen ports, and raw-socket peers speaking crafted bytes.

pub(crate) mod rdmap_conn;
pub(crate) mod source;
pub(crate) mod tcp_conn;
pub(crate) mod wires;

pub(crate) use rdmap_conn::RdmapConn;
pub(crate) use tcp_conn::{RdmapAccept, TcpConn, connect};

use rddp_mpa::{MpaError, MpaOptions, Negotiated, listen};
use rddp_proto::mem::{Access, MemoryTable, PdId, Stag, StagScope};
use rddp_proto::rdmap::{Completion, WcOpcode, WcStatus, WorkRequest};
use rddp_wire::{DdpHeader, FpduDecoder, Opcode, RdmapControl, Terminate};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

pub(crate) const BASE_TO: u64 = 0x1000;

pub(crate) fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) ^ (i >> 8) as u8)
        .collect()
}

pub(crate) fn ctrl(op: Opcode) -> u8 {
    RdmapControl::new(op).0
}

/// An RDMA Write of `data` to the peer's (`stag`, `to`).
pub(crate) fn write(wr_id: u64, stag: Stag, to: u64, data: Vec<u8>) -> WorkRequest {
    WorkRequest::Write {
        wr_id,
        payload: data.into(),
        remote_stag: stag.0,
        remote_to: to,
        fence: false,
    }
}

/// A Send of `data`.
pub(crate) fn send(wr_id: u64, data: Vec<u8>) -> WorkRequest {
    WorkRequest::Send {
        wr_id,
        payload: data.into(),
        solicited: false,
        invalidate: None,
        fence: false,
    }
}

/// Poll `c` until a receive completes; every completion before it succeeded.
pub(crate) fn next_recv(c: &mut TcpConn, mem: &MemoryTable) -> Completion {
    loop {
        let got = c.poll(mem).unwrap();
        assert_eq!(got.status, WcStatus::Success, "{got:?}");
        if got.opcode == WcOpcode::Recv {
            return got;
        }
    }
}

/// A table with one remotely writable region of `size` octets at BASE_TO.
pub(crate) fn table(size: usize) -> (MemoryTable, Stag) {
    let m = MemoryTable::new();
    let s = m
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            BASE_TO,
            vec![0; size],
        )
        .unwrap();
    (m, s)
}

/// A table of seed `seed` with one remotely writable region of `len` octets
/// at `base`: the same seed gives the same STag, so a sender's table and a
/// receiver's agree on it.
pub(crate) fn seeded_region(seed: u64, base: u64, len: usize) -> (MemoryTable, Stag) {
    let m = MemoryTable::with_seed(seed);
    let s = m
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            base,
            vec![0; len],
        )
        .unwrap();
    (m, s)
}

/// What one side saw.
pub(crate) struct Seen {
    pub neg: Negotiated,
    pub region: Vec<u8>,
    pub message: Vec<u8>,
    /// Payload octets this side placed straight from the socket.
    pub direct_bytes: u64,
}

/// Both endpoints over loopback: the initiator writes `size` octets into the
/// responder's region and sends a `size`-octet message; then the responder does the
/// same back. Each side checks what it got; returns (initiator, responder) views.
/// When the Send completes, the Write before it is placed (RFC 5040 §5.5).
pub(crate) fn exchange(iopts: MpaOptions, ropts: MpaOptions, size: usize) -> (Seen, Seen) {
    let (mem_i, stag_i) = table(size);
    let (mem_r, stag_r) = table(size);
    let l = listen("127.0.0.1:0", ropts).unwrap();
    let addr = l.local_addr().unwrap();
    let to_r = pattern(size, 1);
    let to_i = pattern(size, 2);
    let (a, b) = (to_r.clone(), to_i.clone());
    let resp = thread::spawn(move || {
        let mut c = l.accept().unwrap();
        c.post_recv(7, size).unwrap();
        let got = next_recv(&mut c, &mem_r);
        assert_eq!((got.wr_id, got.byte_len as usize), (7, size));
        assert_eq!(got.qn_msn, Some((0, 1)));
        let region = mem_r.region(stag_r).unwrap().data().to_vec();
        c.post(&mem_r, write(1, stag_i, BASE_TO, b.clone()))
            .unwrap();
        c.post(&mem_r, send(2, b)).unwrap();
        for wr_id in [1, 2] {
            let done = c.poll(&mem_r).unwrap();
            assert_eq!((done.wr_id, done.status), (wr_id, WcStatus::Success));
        }
        // The initiator closes after it has everything: a graceful end.
        let end = c.poll_timeout(&mem_r, Duration::from_secs(10));
        assert!(matches!(end, Err(MpaError::ConnectionLost)), "{end:?}");
        Seen {
            neg: c.negotiated().clone(),
            direct_bytes: c.conn.direct_bytes(),
            region,
            message: got.buffer.unwrap()[..size].to_vec(),
        }
    });
    let mut c = connect(addr, iopts).unwrap();
    c.post_recv(9, size).unwrap();
    c.post(&mem_i, write(1, stag_r, BASE_TO, a.clone()))
        .unwrap();
    c.post(&mem_i, send(2, a)).unwrap();
    let got = next_recv(&mut c, &mem_i);
    assert_eq!((got.wr_id, got.byte_len as usize), (9, size));
    assert_eq!(got.qn_msn, Some((0, 1)));
    let init = Seen {
        neg: c.negotiated().clone(),
        direct_bytes: c.conn.direct_bytes(),
        region: mem_i.region(stag_i).unwrap().data().to_vec(),
        message: got.buffer.unwrap()[..size].to_vec(),
    };
    c.close().unwrap();
    let resp = resp.join().unwrap();
    assert_eq!(resp.region, to_r);
    assert_eq!(resp.message, to_r);
    assert_eq!(init.region, to_i);
    assert_eq!(init.message, to_i);
    (init, resp)
}

/// An MPA Request/Reply frame by hand.
pub(crate) fn frame(key: &[u8; 16], flags: u8, rev: u8, pd_len: u16, pd: &[u8]) -> Vec<u8> {
    let mut b = key.to_vec();
    b.extend_from_slice(&[flags, rev]);
    b.extend_from_slice(&pd_len.to_be_bytes());
    b.extend_from_slice(pd);
    b
}

/// Everything the peer sends until it closes (or 5 s pass).
pub(crate) fn read_to_end(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut v = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return v,
            Ok(n) => v.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return v,
            Err(e) => panic!("peer neither closed nor finished: {e} after {v:?}"),
        }
    }
}

/// The Terminate carried by the last FPDU of `wire` (FPDU mode, no Markers).
pub(crate) fn last_terminate(wire: &[u8], crc: bool) -> Terminate {
    let mut d = FpduDecoder::new(crc, false, 65535);
    let mut out = Vec::new();
    d.feed(wire, &mut out).unwrap();
    let last = out.last().expect("no FPDU received");
    let DdpHeader::Untagged(h) = DdpHeader::parse(&last[..18]).unwrap() else {
        panic!("Terminate must be untagged")
    };
    assert_eq!(
        (h.qn, h.msn, h.mo, h.rsvd_ulp[0]),
        (2, 1, 0, ctrl(Opcode::TERMINATE))
    );
    Terminate::parse(&last[18..]).unwrap()
}

pub(crate) fn write_all(s: &mut TcpStream, b: &[u8]) {
    s.write_all(b).unwrap();
}
