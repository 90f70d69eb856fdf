//! IP packets synthesised around octets a connection sent or received, for
//! captures that Wireshark's dissectors read (`--pcap`, docs/tool.md). Raw IP
//! (pcap link type 101): an IPv4 or IPv6 header, then TCP carrying MPA, or UDP
//! carrying SCTP (RFC 6951 encapsulation) with one DATA chunk carrying DDP.
//!
//! Only what a dissector checks is filled in: lengths, the IPv4 header checksum,
//! sequence numbers, and SCTP's CRC32c (RFC 4960 §6.8, Appendix B). TCP and UDP
//! checksums are left 0 (UDP: "none", RFC 768; TCP: Wireshark does not verify
//! by default).

use crate::crc::crc32c;
use std::net::{IpAddr, SocketAddr};

/// TCP flags.
pub mod tcp_flags {
    /// FIN: the sender's last octet.
    pub const FIN: u8 = 0x01;
    /// SYN: opens the connection.
    pub const SYN: u8 = 0x02;
    /// PSH: push the data to the application.
    pub const PSH: u8 = 0x08;
    /// ACK: the acknowledgment number is valid.
    pub const ACK: u8 = 0x10;
}

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// Largest transport payload put in one synthesised packet (fits a 16-bit IPv4
/// total length with every header).
pub const MAX_PAYLOAD: usize = 65_000;

fn ones_complement(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IP header for `len` octets of `proto` from `src` to `dst`, then `body`.
/// Mixed families cannot be one packet: an IPv4 side meets an IPv6 one as its
/// IPv4-mapped address.
fn ip(src: IpAddr, dst: IpAddr, proto: u8, id: u16, body: &[u8]) -> Vec<u8> {
    let v6 = |a: IpAddr| match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    };
    let mut p = Vec::with_capacity(40 + body.len());
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = (20 + body.len()) as u16;
            p.extend_from_slice(&[0x45, 0]);
            p.extend_from_slice(&total.to_be_bytes());
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&[0x40, 0, 64, proto, 0, 0]);
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            let c = ones_complement(&p[..20]);
            p[10..12].copy_from_slice(&c.to_be_bytes());
        }
        (s, d) => {
            p.extend_from_slice(&[0x60, 0, 0, 0]);
            p.extend_from_slice(&(body.len() as u16).to_be_bytes());
            p.extend_from_slice(&[proto, 64]);
            p.extend_from_slice(&v6(s).octets());
            p.extend_from_slice(&v6(d).octets());
        }
    }
    p.extend_from_slice(body);
    p
}

/// One TCP segment from `src` to `dst` (`id`: the IPv4 identification).
pub fn tcp(
    src: SocketAddr,
    dst: SocketAddr,
    seq: u32,
    ack: u32,
    flags: u8,
    id: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut t = Vec::with_capacity(20 + payload.len());
    t.extend_from_slice(&src.port().to_be_bytes());
    t.extend_from_slice(&dst.port().to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&[0x50, flags, 0xFF, 0xFF, 0, 0, 0, 0]);
    t.extend_from_slice(payload);
    ip(src.ip(), dst.ip(), PROTO_TCP, id, &t)
}

/// One SCTP DATA chunk (RFC 4960 §3.3.1) as the message of a DDP/SCTP session.
#[derive(Debug, Clone, Copy)]
pub struct DataChunk<'a> {
    /// Transmission Sequence Number.
    pub tsn: u32,
    /// Stream Identifier: for DDP, the DDP stream's number.
    pub sid: u16,
    /// Stream Sequence Number (not meaningful on an unordered chunk).
    pub ssn: u16,
    /// Payload Protocol Identifier: 16 for a DDP segment, 17 for session control (RFC 5043).
    pub ppid: u32,
    /// U bit (DDP over SCTP sends every chunk unordered, RFC 5043).
    pub unordered: bool,
    /// The chunk's user data: for DDP, the DDP-SSN and then the segment or control message.
    pub payload: &'a [u8],
}

/// An SCTP packet with one whole DATA chunk (B=E=1), SCTP ports `sctp`
/// (source, destination) and verification tag `vtag`, in UDP from `src` to `dst`
/// (RFC 6951: the UDP ports are the encapsulation ports).
pub fn udp_sctp(
    src: SocketAddr,
    dst: SocketAddr,
    sctp: (u16, u16),
    vtag: u32,
    id: u16,
    c: &DataChunk<'_>,
) -> Vec<u8> {
    let mut s = Vec::with_capacity(12 + 16 + c.payload.len() + 3);
    s.extend_from_slice(&sctp.0.to_be_bytes());
    s.extend_from_slice(&sctp.1.to_be_bytes());
    s.extend_from_slice(&vtag.to_be_bytes());
    s.extend_from_slice(&[0; 4]);
    let flags = 0x03 | if c.unordered { 0x04 } else { 0 };
    s.extend_from_slice(&[0, flags]);
    s.extend_from_slice(&((16 + c.payload.len()) as u16).to_be_bytes());
    s.extend_from_slice(&c.tsn.to_be_bytes());
    s.extend_from_slice(&c.sid.to_be_bytes());
    s.extend_from_slice(&c.ssn.to_be_bytes());
    s.extend_from_slice(&c.ppid.to_be_bytes());
    s.extend_from_slice(c.payload);
    s.resize(s.len().next_multiple_of(4), 0);
    // RFC 4960 Appendix B: CRC32c over the packet with the field 0, sent as
    // iSCSI sends its digests (least significant octet first).
    let crc = crc32c(&s);
    s[8..12].copy_from_slice(&crc.to_le_bytes());
    let mut u = Vec::with_capacity(8 + s.len());
    u.extend_from_slice(&src.port().to_be_bytes());
    u.extend_from_slice(&dst.port().to_be_bytes());
    u.extend_from_slice(&((8 + s.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(&s);
    ip(src.ip(), dst.ip(), PROTO_UDP, id, &u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_header_checksum_verifies() {
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let p = tcp(a, b, 1, 2, tcp_flags::ACK, 7, b"xyz");
        assert_eq!(p.len(), 20 + 20 + 3);
        assert_eq!(u16::from_be_bytes([p[2], p[3]]), 43);
        // A header whose checksum is right sums to 0xFFFF (complement 0).
        assert_eq!(ones_complement(&p[..20]), 0);
        assert_eq!(&p[40..], b"xyz");
    }

    #[test]
    fn sctp_crc_covers_the_padded_packet() {
        let a: SocketAddr = "127.0.0.1:9899".parse().unwrap();
        let c = DataChunk {
            tsn: 1,
            sid: 0,
            ssn: 0,
            ppid: 16,
            unordered: true,
            payload: b"abcde",
        };
        let p = udp_sctp(a, a, (5000, 6000), 0, 1, &c);
        let sctp = &p[28..];
        assert_eq!(sctp.len() % 4, 0);
        let mut zeroed = sctp.to_vec();
        zeroed[8..12].fill(0);
        let want = crc32c(&zeroed).to_le_bytes();
        assert_eq!(&sctp[8..12], &want);
        // U=1, B=1, E=1.
        assert_eq!(sctp[13], 0x07);
        // IPv6 when either side is.
        let v6: SocketAddr = "[::1]:9899".parse().unwrap();
        assert_eq!(udp_sctp(a, v6, (1, 2), 0, 1, &c)[0] >> 4, 6);
    }
}
