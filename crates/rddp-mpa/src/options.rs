//! What the ULP asks of MPA for one connection (RFC 5044 §7.1.1, §7.1.2; RFC 6581).

use std::time::Duration;

/// RTR message types (RFC 6581). The zero-length Send (B) is never
/// offered or accepted (siw does not support it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RtrTypes {
    /// C: zero-length RDMA Write.
    pub write: bool,
    /// D: zero-length RDMA Read (Request answered by a zero-length Read Response).
    pub read: bool,
}

/// Default of [`MpaOptions::dead_peer_timeout`].
pub const DEAD_PEER_TIMEOUT: Duration = Duration::from_secs(30);

/// The default [`MpaOptions::initial_receive_window`]: about one burst of a
/// sender that keeps a full socket buffer (tcp_wmem's largest, 4 MiB, holds
/// two of these once the kernel's overhead is counted).
pub const INITIAL_RECEIVE_WINDOW: u32 = 2 << 20;

/// Connection options. The same struct serves both roles; fields name the role
/// they matter to.
#[derive(Debug, Clone)]
pub struct MpaOptions {
    /// MPA revision to speak: 1 (RFC 5044) or 2 (RFC 6581, enhanced block).
    pub rev: u8,
    /// C bit: we want CRC (in use if either side asks, RFC 5044 §7.1.1).
    pub crc: bool,
    /// M bit: we want Markers in the FPDUs we receive (RFC 5044 §7.1.1).
    pub markers: bool,
    /// Private data for the ULP peer (Request or Reply): at most 512 octets with
    /// Rev 1, 508 with Rev 2 (the RFC 6581 enhanced block takes 4 of RFC 5044
    /// §7.1.1's 512).
    pub private_data: Vec<u8>,
    /// Rev 2: Inbound RDMA Read queue depth we can serve (14 bits).
    pub ird: u16,
    /// Rev 2: Outbound RDMA Read queue depth we want (14 bits).
    pub ord: u16,
    /// Rev 2 peer-to-peer mode: exchange an RTR so the responder may send first.
    pub p2p: bool,
    /// Initiator: RTR types offered. Responder: RTR types accepted (Write is
    /// preferred when both are possible, as in siw).
    pub rtr: RtrTypes,
    /// Initiator: fail with Terminate 2/0/0x06 instead of lowering ORD when the
    /// responder's IRD is smaller (RFC 6581 "strict"); default relaxed.
    pub strict_ird: bool,
    /// Initiator: how long to wait for the Reply (siw: 10 s, RFC 5044 §7.1.2).
    pub reply_timeout: Duration,
    /// Initiator: how long after the Reply the Write RTR leaves (RFC 6581
    /// lets it leave at once). For responders that install their RTR
    /// callback only after sending the Reply and leave an RTR that lands in
    /// between unread (siw, docs/interop.md difference 5). Default zero.
    pub rtr_delay: Duration,
    /// Responder: how long to wait for the Request, and then for the first FPDU or
    /// RTR (siw: 5 s for the Request).
    pub request_timeout: Duration,
    /// Use this EMSS instead of the socket's TCP_MAXSEG (tests, or platforms where
    /// it cannot be read).
    pub emss: Option<usize>,
    /// SO_RCVBUF of the connection's socket (a listener's: of every socket it
    /// accepts), set before the handshake; `None` leaves the kernel's receive
    /// buffer autotuning on. A fixed buffer helps many connections that each
    /// move little (autotuning never grows their windows; docs/perf.md, "Many
    /// queue pairs"), at the price of a window capped at about half of it.
    pub recv_buffer: Option<usize>,
    /// With autotuning on (no `recv_buffer`): the receive window, in octets, a
    /// connection starts from once it is set up, autotuning going on from there
    /// ([`crate::tcp::open_receive_window`]). The receiver reads one FPDU (at
    /// most 64 KiB) a call, so Linux's autotuning, which measures what the
    /// reader took per round trip, keeps the window below one burst of a fast
    /// sender and the window closes (docs/journal.md, "The receive window").
    /// `None`: the kernel's initial window (tcp_rmem). Default 2 MiB.
    pub initial_receive_window: Option<u32>,
    /// Record every octet written (tests: feeds [`crate::pcap::write_pcap`]).
    pub tap: Option<crate::pcap::Tap>,
    /// A dead peer or a cut link is noticed within this much time (plus one
    /// keepalive interval, [`crate::tcp::dead_peer_bound`]): TCP_USER_TIMEOUT and
    /// keepalive on the socket (see [`crate::tcp::set_dead_peer_timeout`]). The
    /// connection then fails and every posted work request completes. `None`
    /// leaves the kernel's defaults (about 15 minutes with data unacknowledged,
    /// never on an idle connection). Default 30 s.
    pub dead_peer_timeout: Option<Duration>,
    /// The IP type of service of the connection's packets, DSCP and ECN bits
    /// (IP_TOS, or IPV6_TCLASS over IPv6; a listener's: of every socket it
    /// accepts, which inherit it), as rdma_cm's RDMA_OPTION_ID_TOS sets it.
    /// `None` leaves the system's (0).
    pub tos: Option<u8>,
}

impl Default for MpaOptions {
    fn default() -> Self {
        Self {
            rev: 2,
            crc: true,
            markers: false,
            private_data: Vec::new(),
            ird: 16,
            ord: 16,
            p2p: true,
            rtr: RtrTypes {
                write: true,
                read: true,
            },
            strict_ird: false,
            reply_timeout: Duration::from_secs(10),
            rtr_delay: Duration::ZERO,
            request_timeout: Duration::from_secs(5),
            emss: None,
            recv_buffer: None,
            initial_receive_window: Some(INITIAL_RECEIVE_WINDOW),
            tap: None,
            dead_peer_timeout: Some(DEAD_PEER_TIMEOUT),
            tos: None,
        }
    }
}

impl MpaOptions {
    /// Rev 1 (RFC 5044): no enhanced block, no RTR.
    pub fn rev1() -> Self {
        Self {
            rev: 1,
            p2p: false,
            ..Self::default()
        }
    }
}
