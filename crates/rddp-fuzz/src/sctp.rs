//! Target `sctp_adaptation`: the sans-IO RFC 5043 adaptation layer of one
//! association fed arbitrary chunks (any stream, any PPID, DDP-SSNs in order,
//! ahead, duplicated or anything; session controls of every function; DDP
//! segments near valid or garbage), interleaved with the ULP's session
//! requests, DDP traffic on open sessions, sender-dry, path changes and loss.
//!
//! Oracles: no panic; guard octets intact and nothing but writable regions
//! changes; every chunk we send parses as its PPID says, its DDP-SSN is the next
//! of its stream (0, 1, 2, ... no gaps, RFC 5043), a segment chunk is no
//! longer than the maximum segment and goes out only on an established
//! session; Initiates awaiting the ULP stay within the configured bound; after
//! the association is lost (an association error aborts it, as the driver
//! does) every later chunk is refused and nothing more is sent.

use crate::fixture::{PD, Regions, STREAM, payload, segment};
use crate::input::Input;
use bytes::Bytes;
use rddp_proto::ddp::RecvBuffer;
use rddp_proto::mem::MemoryTable;
use rddp_sctp::{Adaptation, Config, SessionState};
use rddp_wire::sctp::{PPID_DDP_SEGMENT, PPID_SESSION_CONTROL};
use rddp_wire::{Opcode, RdmapControl, SctpPayload};

/// The `sctp_adaptation` target: the RFC 5043 adaptation fed arbitrary chunks and session calls; panics when an oracle fails
/// (docs/reliability.md lists them).
pub fn sctp_adaptation(data: &[u8]) {
    let mut input = Input::new(data);
    let cfg = Config {
        streams: 1 + input.below(4) as u16,
        max_pending_initiates: input.below(4),
        reorder_window: 1 + input.below(16),
        ..Config::default()
    };
    let frag = 500 + usize::from(input.u16() % 2000);
    let mut a = Adaptation::new(cfg, frag);
    let mem = MemoryTable::with_seed(17);
    let regions = Regions::new(&mem, &mut input, STREAM);
    let n = usize::from(cfg.streams);
    // Next DDP-SSN the peer would send / we must send, per stream.
    let mut peer_ssn = vec![0u16; n + 1];
    let mut our_ssn = vec![0u16; n];
    let mut dead = false;
    let mut ops = 0;
    while !input.is_empty() && ops < 512 {
        ops += 1;
        let beyond = usize::from(input.u8().is_multiple_of(8));
        let sid = input.below(n + beyond) as u16;
        match input.u8() % 14 {
            0..=5 => {
                let ppid = match input.u8() % 8 {
                    0..=3 => PPID_DDP_SEGMENT,
                    4..=6 => PPID_SESSION_CONTROL,
                    _ => input.u32(),
                };
                let s = usize::from(sid).min(n);
                let ssn = match input.u8() % 8 {
                    0..=4 => {
                        let v = peer_ssn[s];
                        peer_ssn[s] = v.wrapping_add(1);
                        v
                    }
                    5 => peer_ssn[s].wrapping_add(1 + u16::from(input.u8() % 4)),
                    6 => peer_ssn[s].wrapping_sub(1),
                    _ => input.u16(),
                };
                let mut chunk = ssn.to_be_bytes().to_vec();
                if ppid == PPID_SESSION_CONTROL && !input.u8().is_multiple_of(8) {
                    let f = 1 + input.below(4) as u16;
                    chunk.extend_from_slice(&f.to_be_bytes());
                    let pd = if f == 4 { &[][..] } else { input.blob(520) };
                    chunk.extend_from_slice(pd);
                } else {
                    chunk.extend_from_slice(&segment(&mut input, &regions));
                }
                let r = a.on_chunk(&mem, sid, ppid, &chunk);
                if dead {
                    assert!(r.is_err(), "a failed association accepted a chunk");
                }
                if r.is_err() {
                    // The driver aborts the association (driver/connection.rs).
                    a.on_association_lost();
                    dead = true;
                }
            }
            6 => {
                // Every session is our stream (region 3 belongs to another).
                let _ = a.initiate(sid, STREAM, PD, input.blob(520));
            }
            7 => {
                let _ = match input.u8() % 3 {
                    0 => a.accept(sid, STREAM, PD, input.blob(520)),
                    1 => a.reject(sid, input.blob(520)),
                    _ => a.terminate(sid),
                };
            }
            8 => a.on_sender_dry(),
            9 => a.set_fragmentation_point(usize::from(input.u16())),
            10 => {
                a.on_association_lost();
                dead = true;
            }
            11 | 12 => {
                // The ULP uses an open session's DDP stream.
                let op = input.u8();
                let len = usize::from(input.u16() % 3000);
                let body = Bytes::from(payload(&mut input, len));
                let stag = regions.stag(&mut input);
                if let Some(st) = a.stream(sid) {
                    let _ = match op % 3 {
                        0 => st.post_recv(
                            0,
                            RecvBuffer {
                                id: u64::from(op),
                                data: vec![0; len],
                            },
                        ),
                        1 => st.send_tagged(RdmapControl::new(Opcode::RDMA_WRITE).0, stag, 0, body),
                        _ => {
                            let rsvd = [RdmapControl::new(Opcode::SEND).0, 0, 0, 0, 0];
                            st.send_untagged(0, rsvd, body).map(|_| ())
                        }
                    };
                    while st.poll_delivery().is_some() {
                        crate::reach::note(|r| r.delivered += 1);
                    }
                    while st.poll_event().is_some() {}
                }
            }
            _ => {}
        }
        // The driver sends everything the adaptation has.
        for _ in 0..64 {
            let Some(c) = a.poll_transmit() else { break };
            let s = usize::from(c.sid);
            assert!(s < n, "chunk on stream {s} of {n}");
            let octets = c.to_vec();
            let p = SctpPayload::parse(c.ppid, &octets).expect("our chunk parses");
            assert_eq!(p.ssn(), our_ssn[s], "DDP-SSN gap on stream {s}");
            our_ssn[s] = our_ssn[s].wrapping_add(1);
            if let SctpPayload::Segment(seg) = p {
                assert!(
                    seg.segment.len() <= a.max_segment(),
                    "segment above the maximum"
                );
                assert_eq!(a.session_state(c.sid), Some(SessionState::Established));
                crate::reach::note(|r| r.placed += 1);
            }
        }
        while let Some(e) = a.poll_event() {
            if matches!(e, rddp_sctp::Event::Accepted { .. }) {
                crate::reach::note(|r| r.established += 1);
            }
        }
        for sid in 0..cfg.streams {
            if a.session_state(sid) == Some(SessionState::Established) {
                crate::reach::note(|r| r.established += 1);
            }
            // The ULP takes what its open sessions delivered.
            if let Some(st) = a.stream(sid) {
                while st.poll_delivery().is_some() {
                    crate::reach::note(|r| r.delivered += 1);
                }
                while st.poll_event().is_some() {}
            }
        }
        assert!(a.pending_initiates() <= cfg.max_pending_initiates);
    }
    a.on_association_lost();
    assert!(
        a.poll_transmit().is_none(),
        "a lost association sends nothing"
    );
    regions.check(&mem, None);
}
