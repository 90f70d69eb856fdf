//! The one place the tool turns an address into connected LLPs (MPA/TCP, SCTP).

use rddp::transport::Connection;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Mpa,
    Sctp,
}

/// Responder-side policies.
#[expect(
    dead_code,
    reason = "read by the MPA and SCTP listeners as they are wired in"
)]
#[derive(Debug, Clone)]
pub struct ListenOpts {
    pub crc_required: bool,
    pub refuse_markers: bool,
    pub sctp_max_pending: usize,
    pub sctp_accept_delay: Duration,
    pub sctp_reject: bool,
}

pub trait Listener: Send {
    fn local_addr(&self) -> String;
    /// The next connection, set up and ready to attach; a refused or failed setup
    /// is an error for that connection only.
    fn accept(&self) -> Result<Connection, String>;
}

pub fn listen(t: Transport, addr: &str, _opts: &ListenOpts) -> Result<Box<dyn Listener>, String> {
    match t {
        Transport::Mpa => Err(format!(
            "cannot listen on {addr}: MPA over TCP is not wired into the tool yet"
        )),
        Transport::Sctp => Err(format!(
            "cannot listen on {addr}: DDP over SCTP is not wired into the tool yet"
        )),
    }
}
