//! Payloads bound for application memory (`MemoryTable::register_app`, what
//! `ibv_reg_mr` registers) read from a real TCP socket straight into it
//! (`Peek::read_fd`: `readv(2)` into the registration), the CRC computed over
//! the octets where they landed; and through a capture, which lends no
//! descriptor, by the copy through scratch, counted.

use bytes::Bytes;
use rddp_appmem::Leaked;
use rddp_mpa::fpdu::{FpduReceiver, Progress, RdmapPlacer, Recorded, RxConfig};
use rddp_proto::ddp::DdpConfig;
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope, StreamId};
use rddp_proto::rdmap::{AsyncEvent, RdmapConfig, RdmapStream, WorkRequest};
use rddp_wire::{FpduEncoder, TerminateCode};
use std::io::Write;
use std::net::{TcpListener, TcpStream};

const BASE: u64 = 0x10_0000;
const MULPDU: usize = 8000;
const LEN: usize = 40 * MULPDU + 123;

fn stream(id: u32) -> RdmapStream {
    let cfg = RdmapConfig {
        ddp: DdpConfig {
            mulpdu: MULPDU,
            ..DdpConfig::default()
        },
        ..RdmapConfig::default()
    };
    RdmapStream::new(StreamId(id), PdId(1), cfg).unwrap()
}

/// What one Write of `LEN` octets into application memory left: the drive's
/// end, the Terminate sent, the memory's octets, the octets copied and placed
/// straight from the socket. `corrupt`: flip a payload octet of one FPDU in
/// the middle (its CRC then fails). `capture`: read through a `Recorded`.
/// `crc`: CRCs negotiated (without them the octets are not read back).
fn write_into_app_memory(
    crc: bool,
    markers: bool,
    corrupt: bool,
    capture: bool,
) -> (Progress, Option<TerminateCode>, Vec<u8>, Vec<u8>, u64, u64) {
    let (amem, bmem) = (MemoryTable::with_seed(1), MemoryTable::with_seed(2));
    let (mut a, mut b) = (stream(1), stream(2));
    let app = Leaked::new(LEN);
    let dst = bmem
        .register_app(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            BASE,
            app.mem(true),
        )
        .unwrap();
    let data: Vec<u8> = (0..LEN as u32).map(|i| (i * 31 + 7) as u8).collect();
    a.post(
        &amem,
        WorkRequest::Write {
            wr_id: 1,
            payload: Bytes::from(data.clone()).into(),
            remote_stag: dst.0,
            remote_to: BASE,
            fence: false,
        },
    );
    let mut enc = FpduEncoder::new(crc, markers);
    let mut fpdus = Vec::new();
    while let Some(seg) = a.poll_segment() {
        let mut w = Vec::new();
        enc.encode(&seg.to_vec(), &mut w).unwrap();
        fpdus.push(w);
    }
    assert!(fpdus.len() > 20);
    if corrupt {
        let f = &mut fpdus[20];
        let at = f.len() - 40;
        f[at] ^= 0x10;
    }
    let wire = fpdus.concat();

    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let writer = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        // In uneven pieces, so reads end anywhere.
        for part in wire.chunks(7777) {
            s.write_all(part).unwrap();
        }
    });
    let (sock, _) = l.accept().unwrap();
    let mut rx = FpduReceiver::new(
        RxConfig {
            crc,
            markers,
            max_ulpdu: MULPDU,
            expect_rtr: None,
        },
        Vec::new(),
    );
    rx.set_stream_source(false);
    let mut buf = vec![0; 16 << 10];
    let mut p = RdmapPlacer::new(&mut b, &bmem);
    let got = if capture {
        let mut src = Recorded {
            inner: &sock,
            record: |_: &[u8]| {},
        };
        rx.drive_buffered(&mut src, &mut p, &mut buf).unwrap()
    } else {
        rx.drive_buffered(&mut &sock, &mut p, &mut buf).unwrap()
    };
    writer.join().unwrap();
    let term = std::iter::from_fn(|| b.poll_event()).find_map(|e| match e {
        AsyncEvent::TerminateSent { code, .. } => Some(code),
        _ => None,
    });
    let copied = rx.copied_octets() + b.stats().rx_copied_octets;
    let octets = app.mem(false).to_vec(0, LEN).unwrap();
    (got, term, octets, data, copied, rx.placed_octets())
}

#[test]
fn a_write_into_application_memory_is_read_straight_into_it() {
    for (crc, markers) in [(true, false), (true, true), (false, false), (false, true)] {
        let what = format!("crc {crc} markers {markers}");
        let (got, term, octets, data, copied, placed) =
            write_into_app_memory(crc, markers, false, false);
        assert_eq!(got, Progress::Eof { at_boundary: true }, "{what}");
        assert_eq!(term, None, "{what}");
        assert!(octets == data, "{what}: the Write's octets");
        assert_eq!(copied, 0, "{what}: payload octets copied");
        assert_eq!(placed, LEN as u64, "{what}: placed from the socket");
    }
}

/// The CRC of a payload read straight into application memory is computed
/// over the octets there: a payload changed on the wire fails it, and the
/// peer hears 2/0/0x02; the FPDUs before it were placed.
#[test]
fn a_bad_crc_into_application_memory_is_caught() {
    for markers in [false, true] {
        let (got, term, octets, data, copied, _) =
            write_into_app_memory(true, markers, true, false);
        assert_eq!(got, Progress::Stopped, "markers {markers}");
        assert_eq!(
            term,
            Some(TerminateCode::MPA_CRC_ERROR),
            "markers {markers}"
        );
        assert!(octets[..1000] == data[..1000], "markers {markers}");
        assert_eq!(copied, 0, "markers {markers}");
    }
}

/// A capture lends no descriptor (it must see every octet): the payload is
/// read into scratch and copied into application memory, every octet counted.
#[test]
fn through_a_capture_application_memory_is_copied_and_counted() {
    let (got, term, octets, data, copied, placed) = write_into_app_memory(true, false, false, true);
    assert_eq!(got, Progress::Eof { at_boundary: true });
    assert_eq!(term, None);
    assert!(octets == data, "the Write's octets");
    assert_eq!(copied, LEN as u64, "payload octets copied");
    assert_eq!(placed, 0);
}
