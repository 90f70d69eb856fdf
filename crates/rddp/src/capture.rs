//! `--pcap`: what this process sends and receives on each connection, as a pcap
//! file that Wireshark reads (docs/features.md).
//!
//! [`start`] names the file; every MPA or SCTP connection set up after it is
//! recorded there (one file for the process: a tool calls it once, before it
//! connects or listens). The octets are exactly those sent and received; the
//! IP, TCP, UDP and SCTP headers around them are synthesised:
//!
//! * MPA/TCP: a SYN handshake, the Request and the Reply, every FPDU, a FIN at
//!   close, with the connection's real addresses. Wireshark's MPA, DDP and RDMAP
//!   dissectors decode it (`tshark -r FILE -V -O iwarp_mpa`).
//! * DDP/SCTP: one UDP-encapsulated SCTP packet (RFC 6951) per message, a DATA
//!   chunk with the message's stream and PPID, and a correct CRC32c. The UDP ports
//!   are the encapsulation ports (this process's, and the peer's where known);
//!   SACKs and the association's own chunks are not shown. Wireshark decodes it
//!   with `-d udp.port==PORT,sctp -o sctp.checksum:CRC-32C` and the project's Lua
//!   dissector for DDP over SCTP, crates/rddp-sctp/tests/wire/rddp_sctp.lua.
//!
//! With both ends of a connection in this process (`rddp demo`) each octet is in
//! the file once: an end records what it receives only when its peer is not
//! recorded here too.

use rddp_mpa::pcap::PcapFile;
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddrV4;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

struct Current {
    file: Option<PcapFile>,
    /// SCTP: listeners of this process, and how many of this process's own
    /// associations to each are not yet claimed by its accepting side.
    sctp_local_clients: BTreeMap<SocketAddrV4, u32>,
}

fn current_lock() -> MutexGuard<'static, Current> {
    static C: Mutex<Current> = Mutex::new(Current {
        file: None,
        sctp_local_clients: BTreeMap::new(),
    });
    C.lock().unwrap_or_else(|p| p.into_inner())
}

/// Record every connection set up from now on into a new pcap file at `path`.
pub fn start(path: impl AsRef<Path>) -> io::Result<()> {
    let f = PcapFile::create(path)?;
    current_lock().file = Some(f);
    Ok(())
}

/// Stop recording and close the file; reports the first write error, if any.
/// Connections still open record nothing more.
pub fn finish() -> io::Result<()> {
    let f = current_lock().file.take();
    f.map_or(Ok(()), |f| f.finish())
}

/// Packets written to the capture so far (0 when none is running).
pub fn packets() -> u64 {
    current().map_or(0, |f| f.packets())
}

pub(crate) fn current() -> Option<PcapFile> {
    current_lock().file.clone()
}

/// SCTP listener at `at` in this process (a client of this process connecting
/// there has its peer here).
pub(crate) fn sctp_listener(at: SocketAddrV4) {
    current_lock().sctp_local_clients.entry(at).or_insert(0);
}

/// A client of this process connects to `at`: whether its peer is in this
/// process (then the listener's side will claim it).
pub(crate) fn sctp_client(at: SocketAddrV4) -> bool {
    let mut c = current_lock();
    match c.sctp_local_clients.get_mut(&at) {
        Some(n) => {
            *n += 1;
            true
        }
        None => false,
    }
}

/// The listener at `at` accepted an association: whether it is one of this
/// process's own clients.
pub(crate) fn sctp_accepted(at: SocketAddrV4) -> bool {
    let mut c = current_lock();
    match c.sctp_local_clients.get_mut(&at) {
        Some(n) if *n > 0 => {
            *n -= 1;
            true
        }
        _ => false,
    }
}
