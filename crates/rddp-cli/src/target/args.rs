//! The `rddp target` contract (issue: the rddp tool, point 3), as clap arguments.

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TargetTransport {
    Mpa,
    Sctp,
}

/// Receive strategy for Sends (docs/receive-strategies.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Rq {
    /// Each buffer pre-assigned to one of the next --recv-count MSNs.
    Ordered,
    /// One pool shared by all connections, --soft-limit per stream.
    Shared,
    /// Per-connection pool; --credits grants the next N MSNs.
    Pool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CrcPolicy {
    Required,
    Optional,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MarkerPolicy {
    Allow,
    Refuse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EventFormat {
    Json,
}

/// A conformance responder: answers every connection with a registered buffer,
/// echoes Sends, serves RDMA Reads, and reports every event.
#[derive(Debug, Clone, Args)]
pub(crate) struct TargetArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long)]
    pub listen: String,
    #[arg(long, value_enum, default_value = "mpa")]
    pub transport: TargetTransport,
    #[arg(long, value_enum, default_value = "ordered")]
    pub rq: Rq,
    /// Octets of the per-connection buffer registered with remote read and write.
    #[arg(long, default_value_t = 1_048_576)]
    pub buffer_size: usize,
    /// One buffer for every connection (registered on the protection domain,
    /// advertised to each) instead of one per connection: what one connection
    /// placed, another can read back (`rddp conform` checks that nothing was
    /// placed by a refused segment).
    #[arg(long)]
    pub shared_buffer: bool,
    /// Receive buffers per connection (ordered, pool) or in the shared pool.
    #[arg(long, default_value_t = 8)]
    pub recv_count: usize,
    #[arg(long, default_value_t = 4096)]
    pub recv_size: usize,
    /// Pool only: MSNs granted (default: --recv-count).
    #[arg(long)]
    pub credits: Option<u32>,
    /// Shared only: per-stream soft limit (default: --recv-count / 2).
    #[arg(long)]
    pub soft_limit: Option<usize>,
    #[arg(long, value_enum, default_value = "optional")]
    pub crc: CrcPolicy,
    #[arg(long, value_enum, default_value = "allow")]
    pub markers: MarkerPolicy,
    /// Print every event as one JSON object per line.
    #[arg(long, value_enum)]
    pub events: Option<EventFormat>,
    #[arg(long, default_value_t = 16)]
    pub sctp_max_pending: usize,
    #[arg(long, default_value_t = 0)]
    pub sctp_accept_delay: u64,
    #[arg(long)]
    pub sctp_reject: bool,
    /// MPA: seconds a connection may take to send its Request (and its RTR)
    /// before it is closed (a `closed` event with `conn: null`).
    #[arg(long, value_name = "SECS", default_value_t = 5.0,
          value_parser = parse_timeout)]
    pub setup_timeout: f64,
    /// Also answer `rddp perf client` connections on this address, in this
    /// process (MPA; its connections end as `perf` events).
    #[arg(long, value_name = "ADDR")]
    pub perf_listen: Option<String>,
    /// For testing a conformance tester only: break the RFCs on purpose, on the
    /// wire, in front of the target (see `target/deviate.rs`).
    #[arg(long, value_enum, value_name = "NAME", hide = true)]
    pub deviate: Option<super::deviate::Deviation>,
    /// With `--deviate ssn-gap|wrong-adaptation` (SCTP): no target; relay
    /// what associates with --listen (the initiator under test) to ADDR (a
    /// conformance tester listening as responder), deviating on its behalf.
    #[arg(long, value_name = "ADDR", hide = true, requires = "deviate")]
    pub deviate_to: Option<String>,
    #[command(flatten)]
    pub capture: crate::observe::CaptureArgs,
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a timeout in seconds (0 < SECS <= 3600)"
        )),
    }
}
