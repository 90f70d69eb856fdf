//! rping's command line (rdma-core 44's `rping -s|-c [-vVd] [-S size] [-C count]
//! [-a addr] [-p port] [-P]`), plus MPA and fault options of our own.

use clap::{Args, ValueEnum};

/// rping's size limits: the message format plus the longest count must fit, and
/// the data must stay under RPING_BUFSIZE (64 KiB).
pub(super) const MIN_SIZE: u32 = 23;
pub(super) const MAX_SIZE: u32 = 65535;

/// Which RTRs a peer-to-peer (RFC 6581) initiator offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum P2p {
    None,
    Write,
    Read,
    Both,
}

/// A deliberate protocol fault, so either side's Terminate handling can be tested.
/// As client, rddp is the side that finds the error and sends the Terminate; as
/// server, the peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Fault {
    /// Client: advertise the start buffer under an STag never registered, so the
    /// server's RDMA Read draws our RDMAP remote protection Terminate (0/1/0x00).
    /// Server: RDMA Read the client's buffer under a wrong STag (its Terminate).
    ReadStag,
    /// Client: advertise the sink under an STag never registered, so the server's
    /// RDMA Write draws our DDP tagged Terminate (1/1/0x00). Server: RDMA Write the
    /// client's sink under a wrong STag (its Terminate).
    WriteStag,
    /// Do not repost the receive after the first message; the peer's next Send
    /// draws our DDP untagged Terminate (1/2/0x02, no buffer).
    NoRecv,
    /// Send the first message 8 times in a burst: rping keeps one receive posted
    /// and reposts it from a thread, so one of the extra copies finds none and
    /// draws the peer's DDP untagged Terminate (1/2/0x02, no buffer).
    ExtraSend,
}

/// Talk rdma-core's rping protocol over MPA/TCP, as server (-s) or client (-c).
#[derive(Args, Debug, Clone)]
#[command(disable_version_flag = true)]
pub(crate) struct RpingArgs {
    /// Server side.
    #[arg(
        short = 's',
        conflicts_with = "client",
        required_unless_present = "client"
    )]
    pub server: bool,
    /// Client side.
    #[arg(short = 'c')]
    pub client: bool,
    /// Address: the server's to connect to, or to listen on (default 0.0.0.0).
    #[arg(short = 'a', value_name = "ADDR")]
    pub addr: Option<String>,
    /// Port (0 for the server: any free one, printed on stderr).
    #[arg(short = 'p', value_name = "PORT", default_value_t = 7174)]
    pub port: u16,
    /// Ping count (0: until the peer disconnects; the client then runs forever).
    #[arg(short = 'C', value_name = "COUNT", default_value_t = 0)]
    pub count: u64,
    /// Ping data size (23 to 65535 octets, as rping).
    #[arg(short = 'S', value_name = "SIZE", default_value_t = 64)]
    pub size: u32,
    /// Display ping data on stdout: rping's -v, which is the tool's global -v
    /// (it also turns on info logs on stderr).
    #[arg(skip)]
    pub verbose: bool,
    /// Validate ping data (client; the server's -V does nothing, as in rping).
    #[arg(short = 'V')]
    pub validate: bool,
    /// Debug lines on stdout (rping's DEBUG_LOG).
    #[arg(short = 'd')]
    pub debug: bool,
    /// Persistent server: serve one connection after another.
    #[arg(short = 'P', requires = "server")]
    pub persistent: bool,
    /// MPA revision: 2 (RFC 6581 enhanced block, as rdma_cm on siw) or 1.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub mpa_rev: u8,
    /// Ask for CRC32c (client: C=1 in the Request; server: C=1 in the Reply, which
    /// turns it on). Without it, CRC is used only if the peer asks.
    #[arg(long)]
    pub crc: bool,
    /// Ask for Markers in what we receive. A client whose peer refuses them (siw
    /// does) reconnects without them and says so.
    #[arg(long)]
    pub markers: bool,
    /// Client, Rev 2: peer-to-peer mode offering these RTRs (the server always
    /// accepts Write or Read RTRs, Write preferred, as siw).
    #[arg(long, value_enum, default_value = "none")]
    pub p2p: P2p,
    #[command(flatten)]
    pub capture: crate::observe::CaptureArgs,
    /// Inject a protocol fault (interop tests of the peer's Terminate handling).
    #[arg(long, value_enum)]
    pub fault: Option<Fault>,
    /// Client: milliseconds between the MPA Reply and the first Send. siw 6.1
    /// sends its Reply before it hands the socket to the queue pair, and an FPDU
    /// that lands in between waits unread (docs/interop.md); rping's own client
    /// is slow enough never to hit that.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub first_send_delay: u64,
    /// Seconds to wait for the peer at each step (for the MPA Reply: at most 10).
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

impl RpingArgs {
    pub(crate) fn check(&self) -> Result<(), String> {
        if !(MIN_SIZE..=MAX_SIZE).contains(&self.size) {
            return Err(format!(
                "invalid size {} (valid range is {MIN_SIZE} to {MAX_SIZE})",
                self.size
            ));
        }
        if self.client && self.addr.is_none() {
            return Err("the client needs the server's address (-a ADDR)".into());
        }
        if self.mpa_rev == 1 && self.p2p != P2p::None {
            return Err("--p2p needs --mpa-rev 2 (RFC 6581)".into());
        }
        Ok(())
    }

    /// host:port to connect to or listen on.
    pub(crate) fn endpoint(&self) -> String {
        let host = self.addr.as_deref().unwrap_or("0.0.0.0");
        if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{}", self.port)
        } else {
            format!("{host}:{}", self.port)
        }
    }
}
