//! Seed corpora from real traffic: the octets rddp's own engines produce in the
//! exchanges its tests run (MPA Request/Reply of every revision, RTRs, RDMA
//! Write/Read/Send segments and FPDUs, Terminates, DDP/SCTP session chunks),
//! wrapped in each target's input format. `cargo run -p rddp-fuzz --example
//! make_seeds` writes them under `fuzz/corpus/<target>/`.

use crate::fixture::{PD, STREAM};
use crate::input::Seed;
use crate::mpa_setup::Empty;
use bytes::Bytes;
use rddp_mpa::fpdu::{FpduReceiver, Progress, RdmapPlacer, RxConfig};
use rddp_mpa::{Initiator, MpaOptions, Negotiated, Responder, Rtr};
use rddp_proto::ddp::{DdpConfig, DdpStream};
use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_proto::rdmap::{RdmapConfig, RdmapStream, WorkRequest};
use rddp_wire::{
    DdpHeader, FpduEncoder, Opcode, RdmapControl, ReadRequestHeader, TaggedHeader, Terminate,
    TerminateCode, mulpdu,
};
use std::time::Instant;

/// (target, seed name, input).
pub type SeedFile = (&'static str, String, Vec<u8>);

fn ctrl(op: Opcode) -> u8 {
    RdmapControl::new(op).0
}

/// MPA option sets the tests use: Rev 1, Rev 2 with each RTR, Markers, CRC off.
pub fn mpa_option_sets() -> Vec<MpaOptions> {
    let mut v = vec![MpaOptions::default(), MpaOptions::rev1()];
    let mut m = MpaOptions {
        markers: true,
        private_data: b"hello, private data".to_vec(),
        ..MpaOptions::default()
    };
    v.push(m.clone());
    m.rtr.write = false;
    v.push(m.clone());
    m.crc = false;
    m.p2p = false;
    v.push(m);
    v
}

/// Request and Reply octets of a setup between `io` and `ro`.
pub fn setup_frames(io: &MpaOptions, ro: &MpaOptions) -> (Vec<u8>, Vec<u8>) {
    let now = Instant::now();
    let mut i = Initiator::new(io, now).expect("valid options");
    let req = i.poll_transmit().expect("a Request");
    let mut r = Responder::new(ro, now);
    r.on_bytes(&req);
    r.accept().expect("accepts");
    let rep = r.poll_transmit().expect("a Reply");
    (req, rep)
}

/// The DDP segments of a Write, a Read Request, a Send and a Terminate, as a
/// DDP source cuts them at `mulpdu`.
pub fn segments(mulpdu: usize) -> Vec<Vec<u8>> {
    let cfg = DdpConfig {
        mulpdu,
        ..DdpConfig::default()
    };
    let mut s = DdpStream::new(StreamId(1), PdId(1), cfg).expect("valid config");
    let data: Vec<u8> = (0..600u32).map(|i| (i * 31) as u8).collect();
    s.send_tagged(
        ctrl(Opcode::RDMA_WRITE),
        0x0100_0042,
        0x1000,
        Bytes::from(data.clone()),
    )
    .expect("queued");
    let rr = ReadRequestHeader {
        sink_stag: 0x0200_0017,
        sink_to: 0,
        size: 64,
        src_stag: 0x0100_0042,
        src_to: 0x1000,
    };
    let rsvd = [ctrl(Opcode::READ_REQUEST), 0, 0, 0, 0];
    s.send_untagged(1, rsvd, Bytes::copy_from_slice(&rr.to_bytes()))
        .expect("queued");
    let send = [ctrl(Opcode::SEND_SE_INVALIDATE), 0x01, 0, 0, 0x42];
    s.send_untagged(0, send, Bytes::from(data[..100].to_vec()))
        .expect("queued");
    s.send_tagged(
        ctrl(Opcode::READ_RESPONSE),
        0x0200_0017,
        0,
        Bytes::from(data[..64].to_vec()),
    )
    .expect("queued");
    let mut out: Vec<Vec<u8>> = std::iter::from_fn(|| s.poll_segment())
        .map(|x| x.to_vec())
        .collect();
    for t in terminates() {
        out.push(t.to_segment().expect("encodes"));
    }
    out
}

/// Terminates of every shape: bare, with the offending DDP header, with a Read
/// Request header (RFC 5040 §4.8; the worked vector of an Invalid STag among them).
pub fn terminates() -> Vec<Terminate> {
    vec![
        Terminate::bare(TerminateCode::MPA_CRC_ERROR),
        Terminate::with_headers(
            TerminateCode::DDP_INVALID_STAG,
            19,
            DdpHeader::Tagged(TaggedHeader::new(true, 0x40, 0x1234, 0x1000)),
            None,
        ),
        Terminate::with_headers(
            TerminateCode::RDMAP_INVALID_STAG,
            46,
            DdpHeader::Untagged(rddp_wire::UntaggedHeader::new(
                true,
                [0x41, 0, 0, 0, 0],
                1,
                1,
                0,
            )),
            Some(ReadRequestHeader::default()),
        ),
    ]
}

/// FPDUs carrying `segs`, as an encoder with these settings frames them.
pub fn fpdus(segs: &[Vec<u8>], crc: bool, markers: bool) -> Vec<u8> {
    let mut enc = FpduEncoder::new(crc, markers);
    let mut w = Vec::new();
    for s in segs {
        enc.encode(s, &mut w).expect("valid ULPDU");
    }
    w
}

fn wire_seeds(out: &mut Vec<SeedFile>) {
    let sets = mpa_option_sets();
    for (k, o) in sets.iter().enumerate() {
        let (req, rep) = setup_frames(o, &sets[(k + 1) % sets.len()]);
        out.push(("wire_decoders", format!("request-{k}"), req));
        out.push(("wire_decoders", format!("reply-{k}"), rep));
    }
    let segs = segments(256);
    for (k, s) in segs.iter().enumerate() {
        out.push(("wire_decoders", format!("segment-{k}"), s.clone()));
        if s.len() > 18 {
            // The body after an untagged header: Read Request, Terminate.
            out.push(("wire_decoders", format!("body-{k}"), s[18..].to_vec()));
        }
        let mut chunk = vec![0, k as u8];
        chunk.extend_from_slice(s);
        out.push(("wire_decoders", format!("sctp-chunk-{k}"), chunk));
    }
    out.push((
        "wire_decoders",
        "adaptation-indication".into(),
        rddp_wire::AdaptationIndication::DDP.to_bytes().to_vec(),
    ));
    let sc = rddp_wire::SessionControl {
        ssn: 0,
        function: rddp_wire::SessionFunction::Initiate,
        private_data: b"session".to_vec(),
    };
    out.push((
        "wire_decoders",
        "session-initiate".into(),
        sc.to_vec().expect("encodes"),
    ));
    // FPDU streams: config octet (CRC, Markers; offset 0; no limit), chunk size.
    for (cfg, crc, markers) in [
        (0x00u8, false, false),
        (0x01, true, false),
        (0x03, true, true),
        (0x02, false, true),
    ] {
        let mut s = Seed::default();
        s.u8(cfg).u8(7).bytes(&fpdus(&segs, crc, markers));
        out.push(("wire_decoders", format!("fpdus-{cfg:02x}"), s.0));
    }
}

/// The option octets `mpa_setup::options` reads back as `o` (private data
/// length only: the harness fills it with a pattern).
fn options_seed(s: &mut Seed, o: &MpaOptions) {
    let rev_bits = if o.rev == 1 { 2 } else { 0 };
    let f = rev_bits
        | u8::from(o.crc) << 2
        | u8::from(o.markers) << 3
        | u8::from(o.p2p) << 4
        | u8::from(o.rtr.write) << 5
        | u8::from(o.rtr.read) << 6
        | u8::from(o.strict_ird) << 7;
    s.u8(f)
        .u16(o.private_data.len() as u16)
        .u16(o.ird)
        .u16(o.ord);
}

/// A queue pair's RDMAP stream in FPDU mode after setup agreed `neg` (as
/// `mpa_setup::fpdu_mode` and `rddp::transport::mpa` build it).
fn fpdu_stream(neg: &Negotiated) -> RdmapStream {
    let cfg = RdmapConfig {
        ddp: DdpConfig {
            mulpdu: mulpdu(1460, neg.markers_tx),
            ..DdpConfig::default()
        },
        ..RdmapConfig::default()
    };
    RdmapStream::new(STREAM, PD, cfg).expect("valid settings")
}

/// Two Sends (700 and 40 octets, the second with Solicited Event) posted on
/// `s`, then every segment it has to send, as FPDUs with its settings.
fn sends_then_fpdus(s: &mut RdmapStream, mut segs: Vec<Vec<u8>>, neg: &Negotiated) -> Vec<u8> {
    let mem = MemoryTable::new();
    let data: Vec<u8> = (0..700u32).map(|k| (k * 13) as u8).collect();
    for (wr_id, solicited, len) in [(1, false, 700), (2, true, 40)] {
        s.post(
            &mem,
            WorkRequest::Send {
                wr_id,
                payload: Bytes::from(data[..len].to_vec()).into(),
                solicited,
                invalidate: None,
                fence: false,
            },
        );
    }
    while let Some(seg) = s.poll_segment() {
        segs.push(seg.to_vec());
    }
    fpdus(&segs, neg.crc, neg.markers_tx)
}

/// Both ends of a setup and the first FPDUs each queue pair sends: the
/// initiator its RTR (as agreed) and two Sends; the responder, once it took
/// those (its RTR check and the answer to a Read RTR included), two Sends.
fn conversation(io: &MpaOptions, ro: &MpaOptions) -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let now = Instant::now();
    let mut i = Initiator::new(io, now).expect("valid options");
    let req = i.poll_transmit().expect("a Request");
    let mut r = Responder::new(ro, now);
    r.on_bytes(&req);
    r.accept().expect("accepts");
    let rep = r.poll_transmit().expect("a Reply");
    i.on_bytes(&rep);
    let ni = i.take_result().expect("done").expect("established");
    let nr = r.take_result().expect("done").expect("established");
    let mut si = fpdu_stream(&ni);
    let mut rtr = Vec::new();
    match ni.rtr {
        Some(Rtr::Write) => {
            rtr.push(
                TaggedHeader::new(true, ctrl(Opcode::RDMA_WRITE), 1, 0)
                    .to_bytes()
                    .to_vec(),
            );
        }
        Some(Rtr::Read) => si.post_read_rtr().expect("ORD allows the Read RTR"),
        None => {}
    }
    let from_i = sends_then_fpdus(&mut si, rtr, &ni);
    let mut sr = fpdu_stream(&nr);
    for id in 0..2 {
        sr.post_recv(id, vec![0; 1024]).expect("posted");
    }
    let mem = MemoryTable::new();
    let mut rx = FpduReceiver::new(
        RxConfig {
            crc: nr.crc,
            markers: nr.markers_rx,
            max_ulpdu: rddp_wire::mpa::MAX_ULPDU,
            expect_rtr: nr.rtr,
        },
        from_i.clone(),
    );
    while let Ok(Progress::Paused) = rx.drive(&mut Empty, &mut RdmapPlacer::new(&mut sr, &mem)) {}
    assert_eq!(
        std::iter::from_fn(|| sr.poll_completion()).count(),
        2,
        "the responder took the initiator's Sends"
    );
    let from_r = sends_then_fpdus(&mut sr, Vec::new(), &nr);
    (req, rep, from_i, from_r)
}

fn mpa_setup_seeds(out: &mut Vec<SeedFile>) {
    let sets = mpa_option_sets();
    for (k, io) in sets.iter().enumerate() {
        let ro = &sets[(k + 2) % sets.len()];
        let (req, rep, from_i, from_r) = conversation(io, ro);
        // Initiator mode: our options are io; the wire is the Reply and FPDUs.
        let mut wire = rep.clone();
        wire.extend_from_slice(&from_r);
        let mut s = Seed::default();
        s.u8(0);
        options_seed(&mut s, io);
        s.u8(16).u8(0).u16(0).u16(1460).blob(&wire);
        out.push(("mpa_setup", format!("initiator-{k}"), s.0));
        // Responder mode: our options are ro; the Request, accept, then FPDUs.
        let mut wire = req.clone();
        wire.extend_from_slice(&from_i);
        let mut s = Seed::default();
        s.u8(1);
        options_seed(&mut s, ro);
        s.u8(16).u8(0).u16(req.len() as u16).u16(1460).blob(&wire);
        out.push(("mpa_setup", format!("responder-{k}"), s.0));
    }
}

/// Region octets as `Regions::new` reads them: six regions of `len` octets at
/// TO 0x1000.
fn regions_seed(s: &mut Seed, len: u8) {
    for _ in 0..crate::fixture::REGIONS {
        s.u8(len).u8(0);
    }
}

/// The fixture regions the targets build from `regions_seed` (same table seed).
fn fixture_regions(seed: u64, len: u8) -> crate::fixture::Regions {
    let mut s = Seed::default();
    regions_seed(&mut s, len);
    let mem = rddp_proto::mem::MemoryTable::with_seed(seed);
    crate::fixture::Regions::new(
        &mem,
        &mut crate::input::Input::new(&s.0),
        crate::fixture::STREAM,
    )
}

/// Segments a real DDP source sends into the fixture: a Write into region 0,
/// Sends on QN 0, a Read Request of region 1, a zero-length Write.
fn fixture_segments(r: &crate::fixture::Regions, mulpdu: usize) -> Vec<Vec<u8>> {
    let cfg = DdpConfig {
        mulpdu,
        ..DdpConfig::default()
    };
    let mut s = DdpStream::new(StreamId(1), PdId(1), cfg).expect("valid config");
    let data: Vec<u8> = (0..200u32).map(|k| (k * 3) as u8).collect();
    s.send_tagged(
        ctrl(Opcode::RDMA_WRITE),
        r.stags[0],
        r.base[0] + 8,
        Bytes::from(data.clone()),
    )
    .expect("queued");
    s.send_untagged(
        0,
        [ctrl(Opcode::SEND), 0, 0, 0, 0],
        Bytes::from(data[..90].to_vec()),
    )
    .expect("queued");
    let rr = ReadRequestHeader {
        sink_stag: 0x0300_0001,
        sink_to: 0,
        size: 32,
        src_stag: r.stags[1],
        src_to: r.base[1],
    };
    s.send_untagged(
        1,
        [ctrl(Opcode::READ_REQUEST), 0, 0, 0, 0],
        Bytes::copy_from_slice(&rr.to_bytes()),
    )
    .expect("queued");
    s.send_untagged(
        0,
        [ctrl(Opcode::SEND_SE), 0, 0, 0, 0],
        Bytes::from(data[..5].to_vec()),
    )
    .expect("queued");
    s.send_tagged(
        ctrl(Opcode::RDMA_WRITE),
        r.stags[5],
        r.base[5],
        Bytes::new(),
    )
    .expect("queued");
    std::iter::from_fn(|| s.poll_segment())
        .map(|x| x.to_vec())
        .collect()
}

/// A segment op as `fixture::segment` reads a raw one (kind 7).
fn raw_segment(s: &mut Seed, seg: &[u8]) {
    s.u8(7).blob(seg);
}

fn ddp_sink_seeds(out: &mut Vec<SeedFile>) {
    let r = fixture_regions(11, 255);
    for (k, (model, mulpdu, order)) in [
        (0u8, 64usize, false),
        (2, 300, true),
        (3, 40, true),
        (1, 1454, false),
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = Seed::default();
        // Three QNs; window 8 in order, 4096 for reverse order (no window octet).
        s.u8(2);
        if order {
            s.u8(255);
        } else {
            s.u8(0).u8(8);
        }
        s.u8(model).u8(8);
        regions_seed(&mut s, 255);
        for _ in 0..6 {
            s.u8(6).u8(0).u8(200); // post a 200-octet buffer on QN 0
            s.u8(6).u8(1).u8(28); // and a Read Request buffer on QN 1
        }
        if model == 1 {
            s.u8(7).u8(0).u8(7); // credits
        }
        let segs: Vec<(usize, Vec<u8>)> = fixture_segments(&r, mulpdu)
            .into_iter()
            .enumerate()
            .collect();
        // In order, or arriving last first (each with its sender position).
        let arrival: Vec<&(usize, Vec<u8>)> = if order {
            segs.iter().rev().collect()
        } else {
            segs.iter().collect()
        };
        for (seq, sg) in arrival {
            s.u8(0);
            if order {
                s.u8(9).u64(*seq as u64);
            } else {
                s.u8(0);
            }
            raw_segment(&mut s, sg);
        }
        out.push(("ddp_sink", format!("source-{k}"), s.0));
    }
    // The same traffic with QN 0's receives posted into spans of the receive
    // region (op 11): on an ordered queue, into a shared pool, into a pool
    // with credits.
    for model in [0u8, 3, 4] {
        let mut s = Seed::default();
        s.u8(2).u8(0).u8(8).u8(model).u8(8);
        regions_seed(&mut s, 255);
        for i in 0..6u16 {
            s.u8(11).u8(0).u16(i * 300).u8(200);
            s.u8(6).u8(1).u8(28);
        }
        if model == 4 {
            s.u8(7).u8(0).u8(7);
        }
        for sg in fixture_segments(&r, 64) {
            s.u8(0).u8(0);
            raw_segment(&mut s, &sg);
        }
        out.push(("ddp_sink", format!("region-{model}"), s.0));
    }
}

fn rdmap_seeds(out: &mut Vec<SeedFile>) {
    let r = fixture_regions(13, 255);
    for (k, mulpdu) in [64u16, 600].into_iter().enumerate() {
        let mut s = Seed::default();
        s.bool(false).u16(mulpdu - 19).u8(4).u8(4).bool(k == 1);
        regions_seed(&mut s, 255);
        for _ in 0..4 {
            s.u8(7).u8(100); // post_recv of 100 octets
        }
        // Our own Write, Send and Read, then the LLP takes them.
        s.u8(5)
            .u8(1)
            .u8(1)
            .u16(300)
            .bytes(&[0x22; 300])
            .u32(0x0500_0001)
            .u64(0);
        s.u8(5)
            .u8(1)
            .u8(0)
            .u16(50)
            .bytes(&[0x33; 50])
            .bool(true)
            .bool(false);
        s.u8(5)
            .u8(1)
            .u8(2)
            .u8(0)
            .u8(0)
            .u8(0)
            .u8(0)
            .bool(true)
            .u8(64)
            .u32(0x0500_0001)
            .u64(0);
        s.u8(8).u8(15);
        for sg in fixture_segments(&r, usize::from(mulpdu)) {
            s.u8(0).u8(0);
            raw_segment(&mut s, &sg);
        }
        s.u8(8).u8(15);
        out.push(("rdmap_stream", format!("peer-{k}"), s.0));
    }
}

fn sctp_seeds(out: &mut Vec<SeedFile>) {
    let r = fixture_regions(17, 255);
    let mut s = Seed::default();
    s.u8(1).u8(3).u8(8).u16(1000); // 2 streams, 3 pending, window 9, frag 1500
    regions_seed(&mut s, 255);
    // The peer's Initiate on stream 0 (DDP-SSN 0), our Accept.
    s.u8(0).u8(0).u8(0).u8(4).u8(0).u8(1).u8(0).blob(b"hello");
    s.u8(0).u8(0).u8(7).u8(0).blob(b"welcome");
    s.u8(0)
        .u8(0)
        .u8(11)
        .u8(0)
        .u16(300)
        .bytes(&[0; 300])
        .u8(0)
        .u8(0);
    // Its DDP segments (DDP-SSN 1, 2, ...), then its Terminate.
    for sg in fixture_segments(&r, 600) {
        s.u8(0).u8(0).u8(0).u8(0).u8(0);
        raw_segment(&mut s, &sg);
    }
    s.u8(0).u8(0).u8(0).u8(4).u8(0).u8(1).u8(3);
    s.u8(0).u8(0).u8(8);
    out.push(("sctp_adaptation", "passive-session".into(), s.0));
    // Our Initiate on stream 1, the peer's Accept, then traffic both ways.
    let mut s = Seed::default();
    s.u8(1).u8(3).u8(8).u16(1000);
    regions_seed(&mut s, 255);
    s.u8(0).u8(1).u8(6).blob(b"hi");
    s.u8(0).u8(1).u8(0).u8(4).u8(0).u8(1).u8(1).blob(b"ok");
    s.u8(0)
        .u8(1)
        .u8(12)
        .u8(2)
        .u16(700)
        .bytes(&[7; 700])
        .u8(0)
        .u8(0);
    for sg in fixture_segments(&r, 600) {
        s.u8(0).u8(1).u8(0).u8(0).u8(0);
        raw_segment(&mut s, &sg);
    }
    out.push(("sctp_adaptation", "active-session".into(), s.0));
}

fn verbs_seeds(out: &mut Vec<SeedFile>) {
    let mut s = Seed::default();
    s.u16(1024 - 19);
    for _ in 0..2 {
        s.u8(16).u8(4).u8(2).u8(100); // quotas (4 regions), CQ of 108
        for len in [1000u16, 1000, 64, 1000] {
            s.u16(len - 1);
        }
        s.u8(15).u8(15).u8(4).u8(4);
    }
    // B posts receives; A writes, reads back, sends; both poll; A disconnects.
    for _ in 0..3 {
        s.u8(1).u8(7).u16(0).u16(64);
    }
    s.u8(0).u8(3).u16(0).u16(1000).u8(1).u16(0).u8(1);
    s.u8(0).u8(5).u16(0).u16(1000).u8(1).u16(0).u8(0);
    s.u8(0).u8(0).u16(10).u16(5).bool(true).bool(false).u8(1);
    for me in [0, 0, 0, 1] {
        s.u8(me).u8(13).u16(0).u16(0).u8(8); // wait for completions
    }
    s.u8(0).u8(9).u16(0).u16(0).u8(8);
    s.u8(1).u8(9).u16(0).u16(0).u8(8);
    s.u8(0).u8(10).u16(0).u16(0);
    out.push(("verbs_ops", "write-read-send".into(), s.0));
}

/// Every seed of every target.
/// `mpa_rx`: six regions of 256 octets at TO 0x1000, then runs of Writes
/// into region 0 and Sends of MSN 1 to 3 (small, so batches and the one-read
/// guess are taken), with CRC, Markers or neither, arriving in small units.
fn mpa_rx_seeds(out: &mut Vec<SeedFile>) {
    for (name, flags, units) in [
        ("crc", 0x01u8, &[0u8][..]),
        ("crc-units", 0x01, &[7, 13, 64, 1][..]),
        ("markers", 0x03, &[50, 3][..]),
        ("plain-limit", 0x40, &[0][..]),
    ] {
        let mut s = Seed::default();
        let mut setup = [0u8; 32];
        for r in 0..6 {
            setup[2 * r] = 0xFF; // 256 octets at TO 0x1000
        }
        s.bytes(&setup).u8(flags).u8(9);
        for k in 0..3u8 {
            // A Write of 64 octets into region 0 at TO 0x1000 + 16k.
            s.u8(2).u8(0).u8(0).u8(0).u8(0).u8(0).u8(16 * k).u8(64);
            s.bytes(&[0x40 + k; 64]);
            // Sends of 40 and 2 octets (MSN k + 1), then one of 70.
            for len in [40u8, 2, 70].into_iter().skip(usize::from(k)).take(1) {
                s.u8(2)
                    .u8(3)
                    .u8(0)
                    .u8(0)
                    .u8(0)
                    .u8(1)
                    .u8(k + 1)
                    .u8(0)
                    .u8(len);
                s.bytes(&vec![0x60 + k; usize::from(len)]);
            }
        }
        s.bytes(units);
        out.push(("mpa_rx", name.to_string(), s.0));
    }
}

/// Every seed file of every target, as `make_seeds` writes them.
pub fn all() -> Vec<SeedFile> {
    let mut out = Vec::new();
    wire_seeds(&mut out);
    mpa_setup_seeds(&mut out);
    mpa_rx_seeds(&mut out);
    ddp_sink_seeds(&mut out);
    rdmap_seeds(&mut out);
    sctp_seeds(&mut out);
    verbs_seeds(&mut out);
    out
}
