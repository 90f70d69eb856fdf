//! A pcap writer for the independent wire check: the exact octets each side sent,
//! wrapped in synthesised Ethernet/IPv4/TCP headers with correct sequence numbers
//! (a SYN handshake first), so Wireshark's MPA/DDP/RDMAP dissectors can read them.

use crate::setup::Role;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// Shared record of what each endpoint wrote, one entry per write (a setup frame
/// or one whole FPDU). Clone it into both endpoints' options.
#[derive(Debug, Clone, Default)]
pub struct Tap(Arc<Mutex<Vec<Record>>>);

/// Who wrote, and the octets of one write.
pub type Record = (Role, Vec<u8>);

impl Tap {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn record(&self, role: Role, octets: Vec<u8>) {
        if let Ok(mut v) = self.0.lock() {
            v.push((role, octets));
        }
    }
    pub fn records(&self) -> Vec<Record> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

const INITIATOR_PORT: u16 = 40000;
/// IANA has no MPA port; Wireshark finds MPA heuristically from the Request key.
const RESPONDER_PORT: u16 = 4791;
const ISN: [u32; 2] = [1000, 500_000];
/// Largest TCP payload in one synthesised IPv4 packet.
const MAX_SEG: usize = 65_495;

fn ip_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

struct Frames<W: Write> {
    out: W,
    next_seq: [u32; 2],
    n: u32,
}

impl<W: Write> Frames<W> {
    fn side(role: Role) -> usize {
        match role {
            Role::Initiator => 0,
            Role::Responder => 1,
        }
    }

    fn packet(&mut self, from: usize, flags: u8, payload: &[u8]) -> io::Result<()> {
        let to = 1 - from;
        let ports = [INITIATOR_PORT, RESPONDER_PORT];
        let ips = [[10, 0, 0, 1], [10, 0, 0, 2]];
        let mut f = Vec::with_capacity(54 + payload.len());
        f.extend_from_slice(&[2, 0, 0, 0, 0, to as u8 + 1]);
        f.extend_from_slice(&[2, 0, 0, 0, 0, from as u8 + 1]);
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let total = (40 + payload.len()) as u16;
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&total.to_be_bytes());
        ip.extend_from_slice(&(self.n as u16).to_be_bytes());
        ip.extend_from_slice(&[0x40, 0, 64, 6, 0, 0]);
        ip.extend_from_slice(&ips[from]);
        ip.extend_from_slice(&ips[to]);
        let c = ip_checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&ports[from].to_be_bytes());
        f.extend_from_slice(&ports[to].to_be_bytes());
        f.extend_from_slice(&self.next_seq[from].to_be_bytes());
        let ack = if flags & 0x10 != 0 {
            self.next_seq[to]
        } else {
            0
        };
        f.extend_from_slice(&ack.to_be_bytes());
        f.extend_from_slice(&[0x50, flags, 0xFF, 0xFF, 0, 0, 0, 0]);
        f.extend_from_slice(payload);
        let syn = u32::from(flags & 0x02 != 0);
        self.next_seq[from] = self.next_seq[from]
            .wrapping_add(payload.len() as u32)
            .wrapping_add(syn);
        // Record header: one packet per millisecond keeps the timestamps apart.
        let len = f.len() as u32;
        for v in [self.n / 1000, (self.n % 1000) * 1000, len, len] {
            self.out.write_all(&v.to_le_bytes())?;
        }
        self.n += 1;
        self.out.write_all(&f)
    }
}

/// Write `records` as a pcap (Ethernet link type) to `out`.
pub fn write_pcap<W: Write>(records: &[Record], out: W) -> io::Result<()> {
    let mut fr = Frames {
        out,
        next_seq: ISN,
        n: 0,
    };
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 262_144, 1] {
        // magic, version 2.4 (minor in the high half), zone, sigfigs, snaplen, link.
        fr.out.write_all(&v.to_le_bytes())?;
    }
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    const PSH_ACK: u8 = 0x18;
    fr.packet(0, SYN, &[])?;
    fr.packet(1, SYN | ACK, &[])?;
    fr.packet(0, ACK, &[])?;
    for (role, octets) in records {
        let from = Frames::<W>::side(*role);
        for seg in octets.chunks(MAX_SEG) {
            fr.packet(from, PSH_ACK, seg)?;
        }
    }
    Ok(())
}
