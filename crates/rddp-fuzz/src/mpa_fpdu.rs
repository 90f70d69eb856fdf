//! Target `mpa_fpdu`: an MPA connection in FPDU mode (RFC 5044 §4-5, RFC 6581
//! RTRs) with any negotiated settings (role, CRC and Markers each way, RTR),
//! fed arbitrary octets in arbitrary chunkings through the same steps as the
//! TCP driver: whole FPDUs through `on_bytes`, or header first through `drive`
//! (every payload read from the "socket" straight into its region or receive
//! buffer, in the fuzzer's read sizes with would-blocks between).
//!
//! Oracles: no panic; guard octets intact and nothing but writable regions of
//! our stream changes; the same octets fed whole (no direct placement) and
//! chunked deliver the same messages, and without direct placement also end in
//! the same error and send the same octets; every FPDU we send decodes.

use crate::fixture::{Regions, STREAM};
use crate::input::Input;
use bytes::Bytes;
use rddp_mpa::fpdu::Progress;
use rddp_mpa::{FpduConn, MpaOptions, Negotiated, Role, Rtr};
use rddp_proto::ddp::{Delivery, RecvBuffer};
use rddp_proto::mem::MemoryTable;
use rddp_wire::{FpduDecoder, Opcode, RdmapControl};

/// How one run went.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    deliveries: Vec<Delivery>,
    dead: bool,
    terminate: Option<String>,
    sent: Vec<u8>,
}

struct Setup {
    neg: Negotiated,
    emss: usize,
    new_emss: Option<usize>,
    recvs: Vec<usize>,
    sends: Vec<(bool, u32, Vec<u8>)>,
}

fn setup(input: &mut Input<'_>) -> Setup {
    let f = input.u8();
    let g = input.u8();
    let role = if f & 1 == 0 {
        Role::Initiator
    } else {
        Role::Responder
    };
    let rtr = match (f >> 1) & 3 {
        0 | 1 => None,
        2 => Some(Rtr::Write),
        _ => Some(Rtr::Read),
    };
    let neg = Negotiated {
        role,
        rev: if rtr.is_some() { 2 } else { 1 + (g & 1) },
        crc: f & 0x08 != 0,
        markers_tx: f & 0x10 != 0,
        markers_rx: f & 0x20 != 0,
        rtr,
        ird_ord: None,
        peer_ird_ord: None,
        peer_private_data: Vec::new(),
    };
    let emss = match g >> 6 {
        0 => 1460,
        1 => 536,
        2 => 65_000,
        _ => usize::from(input.u16()),
    };
    let new_emss = (g & 0x02 != 0).then(|| usize::from(input.u16()));
    let recvs = (0..input.below(6))
        .map(|_| usize::from(input.u16() % 2048))
        .collect();
    let sends = (0..input.below(4))
        .map(|_| {
            let tagged = input.bool();
            let stag = input.u32();
            let n = usize::from(input.u16() % 4096);
            (tagged, stag, crate::fixture::payload(input, n))
        })
        .collect();
    Setup {
        neg,
        emss,
        new_emss,
        recvs,
        sends,
    }
}

/// The TCP driver's receive steps (tcp/rx.rs), with `wire` as the socket: fed
/// whole through `on_bytes`, or (`direct`) read header first by `drive` in reads
/// of the fuzzer's sizes with a would-block after each, as a non-blocking socket
/// gives them.
struct Driver<'a> {
    conn: FpduConn,
    wire: &'a [u8],
    /// Sizes of successive socket reads (cycled).
    reads: &'a [u8],
    direct: bool,
    pending: Vec<u8>,
    /// Deliveries taken between drives (drive pauses while one waits).
    delivered: Vec<Delivery>,
}

/// `wire` as a non-blocking socket: reads of the given sizes, each followed by
/// one `WouldBlock`, then end of stream.
struct Chunked<'a> {
    wire: &'a [u8],
    reads: &'a [u8],
    k: usize,
    blocked: bool,
}

impl std::io::Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.blocked && !self.wire.is_empty() {
            self.blocked = false;
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        let n = if self.reads.is_empty() {
            self.wire.len()
        } else {
            1 + usize::from(self.reads[self.k % self.reads.len()]) * 7
        };
        self.k += 1;
        let n = n.min(self.wire.len()).min(buf.len());
        buf[..n].copy_from_slice(&self.wire[..n]);
        self.wire = &self.wire[n..];
        self.blocked = true;
        Ok(n)
    }
}

impl Driver<'_> {
    fn run(&mut self, mem: &MemoryTable) {
        if self.direct {
            let mut src = Chunked {
                wire: self.wire,
                reads: self.reads,
                k: 0,
                blocked: false,
            };
            // Each drive ends at a would-block, a pause for the ULP, the end of
            // the stream (drive closes the connection) or its death.
            let mut rounds = 0usize;
            while !self.conn.is_dead() {
                let got = self.conn.drive(mem, &mut src);
                while let Some(x) = self.conn.poll_delivery() {
                    self.delivered.push(x);
                }
                match got {
                    Ok(Progress::WouldBlock) | Ok(Progress::Paused) => {}
                    Ok(_) | Err(_) => break,
                }
                rounds += 1;
                assert!(
                    rounds <= 4 * self.wire.len() + 16,
                    "drive makes no progress"
                );
            }
            self.wire = src.wire;
            if !self.conn.is_dead() && !self.wire.is_empty() {
                self.conn.on_llp_closed(true);
            }
            return;
        }
        let mut k = 0;
        while !self.wire.is_empty() && !self.conn.is_dead() {
            let n = if self.reads.is_empty() {
                self.wire.len()
            } else {
                1 + usize::from(self.reads[k % self.reads.len()]) * 7
            };
            k += 1;
            let (a, b) = self.wire.split_at(n.min(self.wire.len()));
            self.wire = b;
            let mut data = std::mem::take(&mut self.pending);
            data.extend_from_slice(a);
            self.process(mem, &data);
        }
        // End of the stream: whatever is pending is a truncated FPDU.
        self.conn.on_llp_closed(true);
    }

    fn process(&mut self, mem: &MemoryTable, mut data: &[u8]) {
        loop {
            if data.is_empty() || self.conn.is_dead() {
                break;
            }
            let used = self.conn.on_bytes(mem, data);
            assert!(used <= data.len());
            if used == 0 {
                break;
            }
            data = &data[used..];
        }
        if !self.conn.is_dead() {
            self.pending.extend_from_slice(data);
        }
    }
}

fn run(s: &Setup, wire: &[u8], reads: &[u8], direct: bool, input: &mut Input<'_>) -> Option<Run> {
    let opts = MpaOptions {
        stream: STREAM,
        ..MpaOptions::default()
    };
    let mut conn = FpduConn::new(s.neg.clone(), &opts, s.emss).ok()?;
    if let Some(e) = s.new_emss {
        let _ = conn.set_emss(e);
    }
    let mem = MemoryTable::with_seed(5);
    let regions = Regions::new(&mem, input, STREAM);
    for (id, &n) in s.recvs.iter().enumerate() {
        let _ = conn.stream_mut().post_recv(
            0,
            RecvBuffer {
                id: id as u64,
                data: vec![0; n],
            },
        );
    }
    for (tagged, stag, p) in &s.sends {
        let st = conn.stream_mut();
        let _ = if *tagged {
            st.send_tagged(
                RdmapControl::new(Opcode::RDMA_WRITE).0,
                *stag,
                0,
                Bytes::from(p.clone()),
            )
        } else {
            let rsvd = [RdmapControl::new(Opcode::SEND).0, 0, 0, 0, 0];
            st.send_untagged(0, rsvd, Bytes::from(p.clone()))
                .map(|_| ())
        };
    }
    let mulpdu = conn.stream().mulpdu();
    let mut d = Driver {
        conn,
        wire,
        reads,
        direct,
        delivered: Vec::new(),
        pending: Vec::new(),
    };
    d.run(&mem);
    let mut conn = d.conn;
    let mut deliveries = Vec::new();
    for x in std::mem::take(&mut d.delivered) {
        crate::reach::note(|r| r.delivered += 1);
        deliveries.push(x);
    }
    while let Some(x) = conn.poll_delivery() {
        crate::reach::note(|r| r.delivered += 1);
        deliveries.push(x);
    }
    let mut sent = Vec::new();
    while let Some(f) = conn.poll_transmit() {
        sent.extend_from_slice(&f.to_vec());
    }
    // Everything we sent is well-formed MPA in our transmit direction.
    let mut dec = FpduDecoder::new(s.neg.crc, s.neg.markers_tx, 65_535);
    let mut out = Vec::new();
    dec.feed(&sent, &mut out).expect("our FPDUs decode");
    assert!(dec.at_boundary(), "we sent a partial FPDU");
    for u in &out {
        assert!(
            u.len() <= mulpdu.max(70),
            "FPDU of {} > MULPDU {mulpdu}",
            u.len()
        );
    }
    // Direct placement may leave undefined octets in a writable region (CRC
    // failure, RFC 5044 §4), never anywhere else.
    regions.check(&mem, None);
    let terminate = conn
        .take_error()
        .and_then(|e| e.terminate_code())
        .map(|c| c.to_string());
    Some(Run {
        deliveries,
        dead: conn.is_dead(),
        terminate,
        sent,
    })
}

/// The `mpa_fpdu` target: `FpduConn` with any negotiated settings fed octets through the TCP driver's steps; panics when an oracle fails
/// (docs/reliability.md lists them).
pub fn mpa_fpdu(data: &[u8]) {
    let mut input = Input::new(data);
    let s = setup(&mut input);
    let direct = input.bool();
    let reads = input.blob(8);
    let region_cfg = input.bytes(24);
    let wire = input.rest();
    let Some(whole) = run(&s, wire, &[], false, &mut Input::new(region_cfg)) else {
        return;
    };
    let chunked = run(&s, wire, reads, direct, &mut Input::new(region_cfg)).expect("same setup");
    assert_eq!(
        whole.deliveries, chunked.deliveries,
        "chunking {reads:?} (direct {direct}) changed the deliveries"
    );
    assert_eq!(whole.dead, chunked.dead);
    if !direct {
        assert_eq!(whole, chunked, "chunking {reads:?} changed the outcome");
    }
}
