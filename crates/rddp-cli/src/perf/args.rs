//! The command line of `rddp perf`.

use super::link::Transport;
use super::opts::{Op, parse_size};
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub(crate) enum PerfCmd {
    /// Answer perf clients: accept --qps connections, serve them, exit.
    Server(ServerArgs),
    /// Measure bandwidth or latency against a perf server (perftest's ib_*_bw/lat).
    Client(ClientArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnOff {
    On,
    Off,
}

/// How the connections are made.
#[derive(Args, Debug)]
pub(crate) struct LinkArgs {
    /// Lower layer: MPA over TCP, SCTP, or `mem` (test only: both ends in one
    /// process, run by the client).
    #[arg(long, value_enum, default_value = "mpa")]
    pub transport: Transport,
    /// MPA CRC32c on every FPDU.
    #[arg(long, value_enum, default_value = "on")]
    pub crc: OnOff,
    /// Parallel connections (queue pairs); figures are the aggregate. All are
    /// driven from min(cores, 4) worker threads, not a thread each. Many need
    /// as many file descriptors (raised to the hard limit at start).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub qps: u32,
    /// MPA: SO_RCVBUF of every connection's socket, in octets, set before the
    /// handshake (iperf3's -w); default: the kernel's autotuning. Many
    /// connections that each move little do better with a fixed buffer (give
    /// it to both ends).
    #[arg(long, value_name = "BYTES",
          value_parser = clap::value_parser!(u32).range(4096..=1 << 30))]
    pub rcvbuf: Option<u32>,
    #[command(flatten)]
    pub capture: crate::observe::CaptureArgs,
    /// Seconds without progress before a side gives up (tests shorten it).
    #[arg(long, default_value_t = 10, hide = true,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub stall_secs: u64,
    /// MULPDU of the in-memory LLP (--transport mem).
    #[arg(long, default_value_t = 16384, hide = true,
          value_parser = clap::value_parser!(u32).range(64..=1 << 20))]
    pub mem_mulpdu: u32,
}

#[derive(Args, Debug)]
pub(crate) struct ServerArgs {
    /// Address to listen on, e.g. 0.0.0.0:18515.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    #[command(flatten)]
    pub link: LinkArgs,
    /// Receive buffers kept posted per connection (perftest's -r).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(2..=4096))]
    pub rx_depth: u32,
    /// One JSON object per connection at the end (also for a failed one: what
    /// it verified, the Terminate that ended it, FPDUs refused by the CRC).
    #[arg(long)]
    pub json: bool,
    /// Serve connections as they come until killed, each as it ends on one line
    /// (for clients that reconnect, e.g. `--op mixed --reconnect`); --qps is ignored.
    #[arg(long)]
    pub forever: bool,
    #[command(flatten)]
    pub perftest: super::perftest::PerftestServerArgs,
}

#[derive(Args, Debug)]
pub(crate) struct ClientArgs {
    /// The server's address, e.g. 192.0.2.1:18515.
    #[arg(long, value_name = "ADDR")]
    pub connect: Option<String>,
    #[command(flatten)]
    pub link: LinkArgs,
    /// Operation measured.
    #[arg(long, value_enum, default_value = "write")]
    pub op: Op,
    /// Message size in octets (64K and 4M work too); default 65536.
    #[arg(long, value_parser = parse_size, conflicts_with = "sweep", allow_negative_numbers = true)]
    pub size: Option<u32>,
    /// Every power of two from 64 B to 4 MiB.
    #[arg(long)]
    pub sweep: bool,
    /// Messages per size (default 5000, 1000 with --pingpong).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "duration")]
    pub iters: Option<u64>,
    /// Seconds per size instead of a message count.
    #[arg(long, value_name = "SECS", value_parser = parse_secs, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Latency by ping-pong (write: ib_write_lat; send: ib_send_lat).
    #[arg(long)]
    pub pingpong: bool,
    /// Patterned payload checked byte for byte at the receiving side.
    #[arg(long)]
    pub verify: bool,
    /// One JSON object per size per line instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Draw Gbit/s and messages/s against size into this SVG file.
    #[arg(long, value_name = "FILE.svg", requires = "sweep")]
    pub plot: Option<PathBuf>,
    /// Work requests in flight at most (perftest's -t).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub tx_depth: u32,
    /// --op send: post up to N Sends as one list (perftest's --post_list): their
    /// FPDUs leave gathered in one sendmsg. 1: each Send is written as posted.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub post_list: u32,
    /// Receive buffers per connection of the in-process server (--transport mem);
    /// with --perftest, the server's receive depth (perftest's -r, for send).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(2..=4096))]
    pub rx_depth: u32,
    /// --op mixed: seed of the random operations and sizes (a run repeats with it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// --op mixed: each queue pair disconnects and connects anew about every SECS
    /// (the first time after a random share of it, so they do not all at once).
    #[arg(long, value_name = "SECS", value_parser = parse_secs, allow_negative_numbers = true)]
    pub reconnect: Option<f64>,
    /// Tests of --verify: plant one wrong octet in every connection (--op
    /// mixed: write, send, read or late; --op write: write, in a Write in the
    /// middle of each size), which the checks must find.
    #[arg(long, value_name = "WHERE", hide = true)]
    pub plant_wrong: Option<String>,
    #[command(flatten)]
    pub perftest: super::perftest::PerftestClientArgs,
}

fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a duration in seconds (0 < SECS <= 86400)"
        )),
    }
}
