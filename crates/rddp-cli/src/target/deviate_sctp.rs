//! `rddp target --transport sctp --deviate NAME`: the planted deviations of
//! `deviate.rs` over DDP over SCTP, for testing `rddp conform` only.
//!
//! usrsctp runs over UDP (RFC 6951), so the relay sits below SCTP: every UDP
//! datagram to `--listen` is passed to the real listener on 127.0.0.1 (from
//! one UDP socket per peer, so that the answers find their way back), its
//! SCTP destination port rewritten to the listener's, and every answer has
//! its source port rewritten back. In the answers, each whole DATA chunk that
//! carries a DDP Segment (PPID 16) holding an RDMAP Terminate is rewritten in
//! place as the deviation asks, its length unchanged, and the packet's CRC32c
//! computed again (RFC 4960 §6.8). For `reject-not-terminate`, a Session
//! Terminate (PPID 17) with DDP-SSN 0 becomes a Session Reject without private
//! data, the same four octets. A deviation that would drop or add a chunk
//! (`no-terminate`, `place-before-validate`) would break SCTP's TSN sequence
//! and is MPA only.
//!
//! With `--deviate-to` (`ssn-gap`, `wrong-adaptation`) the relay rewrites the
//! other direction, the packets of the initiator under test towards the
//! tester: the DDP-SSN of a whole DATA chunk (PPID 16 or 17), or the value of
//! the Adaptation Layer Indication parameter of its INIT, both in place.

use super::deviate::{Deviation, rewrite};
use rddp_wire::crc32c;
use rddp_wire::sctp::SessionFunction::{Reject, Terminate};
use rddp_wire::sctp::{PPID_DDP_SEGMENT, PPID_SESSION_CONTROL, SSN_LEN};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

/// SCTP common header: source port, destination port, verification tag, CRC32c.
const COMMON: usize = 12;
/// DATA chunk header: type, flags, length, TSN, stream, SSN, PPID.
const DATA_HDR: usize = 16;
const DATA: u8 = 0;
/// DATA flags B and E: the chunk is a whole message.
const WHOLE: u8 = 0x03;

/// Whether `d` can be made over SCTP by rewriting chunks in place.
pub(super) fn applies(d: Deviation) -> bool {
    matches!(
        d,
        Deviation::NoToWrapCheck
            | Deviation::WrongTerminateCode
            | Deviation::SiwTerminateLayout
            | Deviation::RejectNotTerminate
            | Deviation::SsnGap
            | Deviation::WrongAdaptation
    )
}

/// Whether `d` breaks the rules of the active side (the initiator under
/// test, `--deviate-to`) rather than the target's.
pub(super) fn initiator_side(d: Deviation) -> bool {
    matches!(d, Deviation::SsnGap | Deviation::WrongAdaptation)
}

/// Relay UDP datagrams at `listen` to the SCTP listener at `back` (whose UDP
/// encapsulation port is its SCTP port); the bound address.
pub(super) fn start(listen: &str, back: SocketAddr, d: Deviation) -> Result<String, String> {
    let front = UdpSocket::bind(listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let at = front.local_addr().map_err(|e| e.to_string())?;
    let front = Arc::new(front);
    std::thread::spawn(move || forward(&front, at.port(), back, d));
    Ok(at.to_string())
}

/// Peer to target: ports rewritten; a relay socket (and its thread back) per peer.
fn forward(front: &Arc<UdpSocket>, front_port: u16, back: SocketAddr, d: Deviation) {
    let mut relays: HashMap<SocketAddr, UdpSocket> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    loop {
        let Ok((n, from)) = front.recv_from(&mut buf) else {
            continue;
        };
        let pkt = &mut buf[..n];
        if !set_port(pkt, 2, back.port()) {
            continue;
        }
        if initiator_side(d) {
            deviate_initiator(pkt, d);
            seal(pkt);
        }
        let relay = match relays.entry(from) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let Ok(s) = UdpSocket::bind("127.0.0.1:0") else {
                    continue;
                };
                let Ok(r) = s.try_clone() else { continue };
                let f = front.clone();
                std::thread::spawn(move || backward(&r, &f, from, front_port, d));
                e.insert(s)
            }
        };
        let _ = relay.send_to(pkt, back);
    }
}

/// Target to peer: ports rewritten back, Terminates as the deviation sends them.
fn backward(relay: &UdpSocket, front: &UdpSocket, peer: SocketAddr, front_port: u16, d: Deviation) {
    let mut buf = vec![0u8; 65536];
    loop {
        let Ok(n) = relay.recv(&mut buf) else {
            return;
        };
        let pkt = &mut buf[..n];
        if !set_port(pkt, 0, front_port) {
            continue;
        }
        if !initiator_side(d) {
            deviate_chunks(pkt, d);
            seal(pkt);
        }
        let _ = front.send_to(pkt, peer);
    }
}

/// Set the port at `at` (0: source, 2: destination) and the CRC32c again.
fn set_port(pkt: &mut [u8], at: usize, port: u16) -> bool {
    if pkt.len() < COMMON {
        return false;
    }
    pkt[at..at + 2].copy_from_slice(&port.to_be_bytes());
    seal(pkt);
    true
}

/// The packet's CRC32c over it with the field zero, least significant octet
/// first (RFC 4960 Appendix B).
fn seal(pkt: &mut [u8]) {
    pkt[8..12].fill(0);
    let c = crc32c(pkt);
    pkt[8..12].copy_from_slice(&c.to_le_bytes());
}

/// Rewrite, in place, every whole DATA chunk whose DDP Segment is an RDMAP
/// Terminate the deviation changes (only when its length stays the same).
fn deviate_chunks(pkt: &mut [u8], d: Deviation) {
    let mut at = COMMON;
    while at + 4 <= pkt.len() {
        let len = usize::from(u16::from_be_bytes([pkt[at + 2], pkt[at + 3]]));
        if len < 4 || at + len > pkt.len() {
            return;
        }
        let ppid = pkt
            .get(at + 12..at + 16)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let whole = pkt[at] == DATA && pkt[at + 1] & WHOLE == WHOLE;
        if whole
            && d == Deviation::RejectNotTerminate
            && ppid == Some(PPID_SESSION_CONTROL)
            && len == DATA_HDR + 4
        {
            let c = &mut pkt[at + DATA_HDR..at + len];
            if c[..2] == [0, 0] && c[2..4] == Terminate.code().to_be_bytes() {
                c[2..4].copy_from_slice(&Reject.code().to_be_bytes());
            }
        } else if whole && ppid == Some(PPID_DDP_SEGMENT) && len > DATA_HDR + SSN_LEN {
            let seg = &mut pkt[at + DATA_HDR + SSN_LEN..at + len];
            if let Some(new) = rewrite(seg.to_vec(), d)
                && new.len() == seg.len()
            {
                seg.copy_from_slice(&new);
            }
        }
        at += len.next_multiple_of(4);
    }
}

/// INIT chunk type, its fixed part (header, initiate tag, a_rwnd, streams,
/// initial TSN), and the Adaptation Layer Indication parameter (RFC 5061).
const INIT: u8 = 1;
const INIT_FIXED: usize = 20;
const ADAPTATION_PARAM: u16 = 0xC006;

/// Rewrite, in place, the initiator's INIT (`wrong-adaptation`) or the
/// DDP-SSN 1 of its whole DATA chunks of the DDP adaptation (`ssn-gap`).
fn deviate_initiator(pkt: &mut [u8], d: Deviation) {
    let mut at = COMMON;
    while at + 4 <= pkt.len() {
        let len = usize::from(u16::from_be_bytes([pkt[at + 2], pkt[at + 3]]));
        if len < 4 || at + len > pkt.len() {
            return;
        }
        let chunk = &mut pkt[at..at + len];
        match d {
            Deviation::WrongAdaptation if chunk[0] == INIT && len >= INIT_FIXED => {
                let mut p = INIT_FIXED;
                while p + 4 <= len {
                    let t = u16::from_be_bytes([chunk[p], chunk[p + 1]]);
                    let plen = usize::from(u16::from_be_bytes([chunk[p + 2], chunk[p + 3]]));
                    if plen < 4 || p + plen > len {
                        break;
                    }
                    if t == ADAPTATION_PARAM && plen == 8 {
                        chunk[p + 4..p + 8].copy_from_slice(&2u32.to_be_bytes());
                    }
                    p += plen.next_multiple_of(4);
                }
            }
            Deviation::SsnGap
                if chunk[0] == DATA
                    && chunk[1] & WHOLE == WHOLE
                    && len >= DATA_HDR + SSN_LEN
                    && matches!(
                        u32::from_be_bytes([chunk[12], chunk[13], chunk[14], chunk[15]]),
                        PPID_DDP_SEGMENT | PPID_SESSION_CONTROL
                    )
                    && chunk[DATA_HDR..DATA_HDR + SSN_LEN] == [0, 1] =>
            {
                chunk[DATA_HDR..DATA_HDR + SSN_LEN].copy_from_slice(&[0, 2]);
            }
            _ => {}
        }
        at += len.next_multiple_of(4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rddp_wire::{DdpHeader, TaggedHeader, Terminate, TerminateCode};

    #[test]
    fn the_initiators_adaptation_and_ddp_ssn_1_are_rewritten() {
        // An INIT: fixed part, a Supported Extensions parameter, the indication.
        let mut pkt = vec![0u8; COMMON];
        let len = INIT_FIXED + 8 + 8;
        pkt.extend_from_slice(&[INIT, 0]);
        pkt.extend_from_slice(&(len as u16).to_be_bytes());
        pkt.extend_from_slice(&[0; INIT_FIXED - 4]);
        pkt.extend_from_slice(&[0x80, 0x08, 0, 7, 0xC0, 0x82, 0x0F, 0]);
        pkt.extend_from_slice(&[0xC0, 0x06, 0, 8, 0, 0, 0, 1]);
        deviate_initiator(&mut pkt, Deviation::WrongAdaptation);
        assert_eq!(pkt[COMMON + len - 4..], [0, 0, 0, 2]);
        assert_eq!(
            pkt[COMMON + INIT_FIXED + 4..COMMON + INIT_FIXED + 7],
            [0xC0, 0x82, 0x0F]
        );
        // A whole DATA chunk of PPID 16 with DDP-SSN 1, and one with 3.
        let data = |ssn: u8| {
            let mut c = vec![DATA, WHOLE, 0, (DATA_HDR + 4) as u8];
            c.extend_from_slice(&[0; 8]);
            c.extend_from_slice(&PPID_DDP_SEGMENT.to_be_bytes());
            c.extend_from_slice(&[0, ssn, 0xAA, 0xBB]);
            c
        };
        let mut pkt = vec![0u8; COMMON];
        pkt.extend(data(1));
        pkt.extend(data(3));
        deviate_initiator(&mut pkt, Deviation::SsnGap);
        let second = COMMON + DATA_HDR + 4;
        assert_eq!(pkt[COMMON + DATA_HDR..COMMON + DATA_HDR + 2], [0, 2]);
        assert_eq!(pkt[second + DATA_HDR..second + DATA_HDR + 2], [0, 3]);
    }

    #[test]
    fn a_terminate_in_a_data_chunk_is_rewritten_and_the_crc_holds() {
        let h = DdpHeader::Tagged(TaggedHeader::new(true, 0, 7, 0));
        let seg = Terminate::with_headers(TerminateCode::DDP_BASE_BOUNDS, 30, h, None)
            .to_segment()
            .unwrap();
        let mut pkt = vec![0u8; COMMON];
        let len = DATA_HDR + SSN_LEN + seg.len();
        pkt.extend_from_slice(&[DATA, 0x07]);
        pkt.extend_from_slice(&(len as u16).to_be_bytes());
        pkt.extend_from_slice(&[0; 8]);
        pkt.extend_from_slice(&PPID_DDP_SEGMENT.to_be_bytes());
        pkt.extend_from_slice(&[0, 3]);
        pkt.extend_from_slice(&seg);
        pkt.resize(COMMON + len.next_multiple_of(4), 0);
        deviate_chunks(&mut pkt, Deviation::WrongTerminateCode);
        assert!(set_port(&mut pkt, 0, 4242));
        let body = &pkt[COMMON + DATA_HDR + SSN_LEN + 18..];
        let t = Terminate::parse(&body[..seg.len() - 18]).unwrap();
        assert_eq!(t.code, TerminateCode::DDP_INVALID_STAG);
        let mut check = pkt.clone();
        check[8..12].fill(0);
        assert_eq!(pkt[8..12], crc32c(&check).to_le_bytes());
        assert_eq!(pkt[0..2], 4242u16.to_be_bytes());
    }
}
