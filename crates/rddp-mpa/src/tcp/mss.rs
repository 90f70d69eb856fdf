//! TCP's effective MSS, the input of MULPDU (RFC 5044 §4.5).
//!
//! Read with `getsockopt(TCP_MAXSEG)` through `socket2` (no `unsafe` here). Where
//! that fails (a platform without the option), [`FALLBACK_EMSS`] is used: the EMSS
//! of a 1500-octet Ethernet path with TCP timestamps, small enough for any path
//! a loopback or LAN test meets.

use std::net::TcpStream;

/// EMSS used when TCP_MAXSEG cannot be read: 1500 - 20 (IPv4) - 20 (TCP) - 12
/// (timestamps).
pub const FALLBACK_EMSS: usize = 1448;

/// The connection's current MSS as the kernel reports it, or the fallback.
pub fn effective_mss(sock: &TcpStream) -> usize {
    match socket2::SockRef::from(sock).tcp_mss() {
        Ok(m) if m > 0 => m as usize,
        _ => FALLBACK_EMSS,
    }
}
