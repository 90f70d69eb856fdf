//! Captures of MPA connections that Wireshark's MPA/DDP/RDMAP dissectors read
//! (docs/features.md, `--pcap`; and the independent wire check of tests/api/wire_check.rs).
//!
//! The octets are exactly what each side wrote or read; the TCP/IP framing around
//! them is synthesised (rddp-wire's `packet`): a SYN handshake first, then the
//! Request and the Reply, then every FPDU, with sequence numbers that follow the
//! octets, in a pcap file (pcap-file crate, raw IP link type) that many
//! connections and threads write into at once.
//!
//! An endpoint records what it sends, and what it receives unless the other end
//! of the connection is recorded in the same file (both ends in one process, as
//! in `rddp demo`): each octet appears once.

use crate::setup::Role;
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use rddp_wire::packet::{self, MAX_PAYLOAD, tcp_flags};
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

/// Shared record of what each endpoint wrote, one entry per write (a setup frame
/// or one whole FPDU), and of the setup octets each read. Clone it into both
/// endpoints' options.
#[derive(Debug, Clone, Default)]
pub struct Tap {
    written: Arc<Mutex<Vec<Record>>>,
    read: Arc<Mutex<Vec<u8>>>,
}

/// Who wrote, and the octets of one write.
pub type Record = (Role, Vec<u8>);

impl Tap {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }
    /// One write of `role`'s endpoint.
    pub fn record(&self, role: Role, octets: Vec<u8>) {
        if let Ok(mut v) = self.written.lock() {
            v.push((role, octets));
        }
    }
    /// Octets of the peer's setup frame, as they were read.
    pub fn record_received(&self, octets: &[u8]) {
        if let Ok(mut v) = self.read.lock() {
            v.extend_from_slice(octets);
        }
    }
    /// Every write so far, in order.
    pub fn records(&self) -> Vec<Record> {
        self.written.lock().map(|v| v.clone()).unwrap_or_default()
    }
    /// What [`Self::record_received`] gathered.
    pub fn received(&self) -> Vec<u8> {
        self.read.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// Initial sequence numbers: initiator, responder.
const ISN: [u32; 2] = [1000, 500_000];

/// One TCP connection as the file knows it.
#[derive(Debug)]
struct Flow {
    /// Initiator, responder.
    addr: [SocketAddr; 2],
    next_seq: [u32; 2],
    /// Ends of the connection recorded in this file (2: both in this process).
    ends: u8,
}

struct Inner {
    out: Option<PcapWriter<Box<dyn Write + Send>>>,
    flows: HashMap<(SocketAddr, SocketAddr), Flow>,
    packets: u64,
    /// The first write error; later writes are dropped.
    error: Option<io::Error>,
    /// IPv4 identification of the next packet.
    id: u16,
}

/// A capture file written by many connections at once. Cloning gives another
/// handle to the same file.
#[derive(Clone)]
pub struct PcapFile(Arc<Mutex<Inner>>);

impl std::fmt::Debug for PcapFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PcapFile")
    }
}

impl PcapFile {
    /// Create (truncate) `path` and write the pcap header. Packets go to the
    /// file as they are written (no buffer), so a process stopped by a signal
    /// leaves a whole capture.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        Self::to_writer(std::fs::File::create(path)?)
    }

    /// A capture into any writer (tests: a `Vec<u8>`).
    pub fn to_writer(w: impl Write + Send + 'static) -> io::Result<Self> {
        let header = PcapHeader {
            datalink: DataLink::RAW,
            snaplen: 65_535,
            ..PcapHeader::default()
        };
        let boxed: Box<dyn Write + Send> = Box::new(w);
        let out = PcapWriter::with_header(boxed, header).map_err(io::Error::other)?;
        Ok(Self(Arc::new(Mutex::new(Inner {
            out: Some(out),
            flows: HashMap::new(),
            packets: 0,
            error: None,
            id: 0,
        }))))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Append one IP packet (raw IP link type) stamped now.
    pub fn write_packet(&self, ip: &[u8]) {
        self.lock().write(ip);
    }

    /// The IPv4 identification for the next synthesised packet.
    pub fn next_id(&self) -> u16 {
        let mut g = self.lock();
        g.id = g.id.wrapping_add(1);
        g.id
    }

    /// Packets written so far.
    pub fn packets(&self) -> u64 {
        self.lock().packets
    }

    /// Flush and close the file; later writes are dropped.
    pub fn finish(&self) -> io::Result<()> {
        let mut g = self.lock();
        if let Some(w) = g.out.take() {
            w.into_writer().flush()?;
        }
        match g.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// One end of an MPA connection, after its setup: `request` and `reply` are
    /// the two setup frames as they crossed the wire (the initiator's and the
    /// responder's). The first end of a connection to register writes the
    /// handshake and both frames; the second (the other end, in this process)
    /// finds them written.
    pub fn mpa_endpoint(
        &self,
        local: SocketAddr,
        peer: SocketAddr,
        role: Role,
        request: &[u8],
        reply: &[u8],
    ) -> TcpEndpoint {
        let key = match role {
            Role::Initiator => (local, peer),
            Role::Responder => (peer, local),
        };
        let mut g = self.lock();
        let first = !g.flows.contains_key(&key);
        let flow = g.flows.entry(key).or_insert(Flow {
            addr: [key.0, key.1],
            next_seq: ISN,
            ends: 0,
        });
        flow.ends += 1;
        if first {
            g.syn(key);
            g.tcp(key, 0, request);
            g.tcp(key, 1, reply);
        }
        drop(g);
        TcpEndpoint {
            file: self.clone(),
            key,
            side: side(role),
        }
    }
}

fn side(r: Role) -> usize {
    match r {
        Role::Initiator => 0,
        Role::Responder => 1,
    }
}

impl Inner {
    fn write(&mut self, ip: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let Some(out) = self.out.as_mut() else {
            return;
        };
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let p = PcapPacket::new(ts, ip.len() as u32, ip);
        match out.write_packet(&p) {
            Ok(_) => self.packets += 1,
            Err(e) => self.error = Some(io::Error::other(e)),
        }
    }

    fn next_id(&mut self) -> u16 {
        self.id = self.id.wrapping_add(1);
        self.id
    }

    /// SYN, SYN-ACK, ACK: Wireshark then sees the stream from its start.
    fn syn(&mut self, key: (SocketAddr, SocketAddr)) {
        use tcp_flags::{ACK, SYN};
        for (from, flags) in [(0, SYN), (1, SYN | ACK), (0, ACK)] {
            self.segment(key, from, flags, &[]);
        }
    }

    /// `octets` from side `from` (0 initiator, 1 responder), cut to packet size.
    fn tcp(&mut self, key: (SocketAddr, SocketAddr), from: usize, octets: &[u8]) {
        for chunk in octets.chunks(MAX_PAYLOAD) {
            self.segment(key, from, tcp_flags::PSH | tcp_flags::ACK, chunk);
        }
    }

    fn segment(&mut self, key: (SocketAddr, SocketAddr), from: usize, flags: u8, payload: &[u8]) {
        let id = self.next_id();
        let Some(f) = self.flows.get_mut(&key) else {
            return;
        };
        let to = 1 - from;
        let ack = if flags & tcp_flags::ACK != 0 {
            f.next_seq[to]
        } else {
            0
        };
        let seq = f.next_seq[from];
        let pkt = packet::tcp(f.addr[from], f.addr[to], seq, ack, flags, id, payload);
        let syn_fin = u32::from(flags & (tcp_flags::SYN | tcp_flags::FIN) != 0);
        f.next_seq[from] = seq.wrapping_add(payload.len() as u32).wrapping_add(syn_fin);
        self.write(&pkt);
    }
}

/// One end of a captured MPA connection.
#[derive(Debug, Clone)]
pub struct TcpEndpoint {
    file: PcapFile,
    key: (SocketAddr, SocketAddr),
    /// 0: we are the initiator; 1: the responder.
    side: usize,
}

impl TcpEndpoint {
    /// Octets we wrote to the socket.
    pub fn sent(&self, octets: &[u8]) {
        self.file.lock().tcp(self.key, self.side, octets);
    }

    /// Octets we read from the socket (dropped when the other end is recorded in
    /// this file too: it recorded them as sent).
    pub fn received(&self, octets: &[u8]) {
        let mut g = self.file.lock();
        if g.flows.get(&self.key).is_some_and(|f| f.ends < 2) {
            g.tcp(self.key, 1 - self.side, octets);
        }
    }

    /// We closed our sending direction: a FIN.
    pub fn closed(&self) {
        self.file
            .lock()
            .segment(self.key, self.side, tcp_flags::FIN | tcp_flags::ACK, &[]);
    }
}

/// Write `records` (what each side wrote, in order, as gathered by a [`Tap`]
/// shared by both endpoints) as a pcap to `out`: the first record of each role
/// is its setup frame.
pub fn write_pcap<W: Write + Send + 'static>(records: &[Record], out: W) -> io::Result<()> {
    let file = PcapFile::to_writer(out)?;
    let frame = |r: Role| {
        records
            .iter()
            .find(|(role, _)| *role == r)
            .map(|(_, o)| o.as_slice())
            .unwrap_or_default()
    };
    let i: SocketAddr = ([10, 0, 0, 1], 40000).into();
    // IANA has no MPA port; Wireshark finds MPA heuristically from the Request key.
    let r: SocketAddr = ([10, 0, 0, 2], 4791).into();
    let ends = [
        file.mpa_endpoint(
            i,
            r,
            Role::Initiator,
            frame(Role::Initiator),
            frame(Role::Responder),
        ),
        file.mpa_endpoint(r, i, Role::Responder, &[], &[]),
    ];
    let mut seen = [false; 2];
    for (role, octets) in records {
        let s = side(*role);
        if std::mem::replace(&mut seen[s], true) {
            ends[s].sent(octets);
        }
    }
    file.finish()
}
