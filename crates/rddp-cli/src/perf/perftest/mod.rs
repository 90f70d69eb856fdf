//! `rddp perf --perftest`: either end of stock perftest's `ib_write_bw`,
//! `ib_read_bw` and `ib_send_bw` run with `-R` (rdma_cm), over MPA/TCP, so that
//! perftest scripts can measure rddp against a kernel iWARP stack (siw).
//!
//! perftest -R opens two connections to the same port: a control connection that
//! carries its exchange (each item one Send of exactly its size, the client
//! first, the server answering with the same size; see [`ctrl`]), and the test
//! connection, opened after the fifth exchange. The sequence (perftest 4.5,
//! perftest_communication.c, write_bw.c, send_bw.c):
//!
//! 1. version, 16 octets ("6.06"; the peer needs 5.70 or later)
//! 2. page size and 3. cache line size, be32 each (the larger is used)
//! 4. active MTU as ASCII digit + NUL (ibv_mtu enum)
//! 5. a zeroed 56-octet `pingpong_dest`; then the test connection
//! 6. a zeroed `pingpong_dest`
//! 7. the real `pingpong_dest` (rkey and vaddr of the buffer; for send, of the
//!    credit word), then for send an extra one
//! 8. the real one again, 9. once more (send: after the server posts its receives)
//! 10. after the test (write, read): a `pingpong_dest`, 11. the report (be64 size,
//!     be64 iterations, BE doubles peak, average, message rate), each as its own
//!     exchange
//! 12. a closing `pingpong_dest`.

mod client;
mod ctrl;
mod dest;
mod report;
mod server;

use super::opts::Op;
use clap::Args;

pub(crate) use client::run as client;
pub(crate) use server::run as server;

/// The version we announce (Debian 12's perftest 4.5-0.17 says "6.06").
pub(crate) const VERSION: &str = "6.06";
/// perftest refuses peers older than this (check_version_compatibility).
pub(crate) const MIN_VERSION: f64 = 5.70;
/// Our page size and cache line, as perftest exchanges them.
pub(crate) const PAGE: u32 = 4096;
pub(crate) const CACHE_LINE: u32 = 64;

/// `rddp perf server` options for perftest mode.
#[derive(Args, Debug, Clone)]
pub(crate) struct PerftestServerArgs {
    /// Serve stock perftest clients (`ib_write_bw -R`, `ib_read_bw -R`,
    /// `ib_send_bw -R`) instead of `rddp perf client`.
    #[arg(long)]
    pub perftest: bool,
    /// The perftest tool that will connect: write and read are served alike; send
    /// posts receives and returns credits (ib_send_bw).
    #[arg(long = "op", value_enum, requires = "perftest")]
    pub op: Option<Op>,
    /// Message size the client uses (perftest's -s; it is not exchanged).
    #[arg(long = "size", value_parser = super::opts::parse_size, requires = "perftest")]
    pub size: Option<u32>,
    /// Iterations the client runs (perftest's -n; send counts them).
    #[arg(long = "iters", requires = "perftest")]
    pub iters: Option<u64>,
}

/// `rddp perf client` option for perftest mode.
#[derive(Args, Debug, Clone)]
pub(crate) struct PerftestClientArgs {
    /// Drive a stock perftest server (`ib_write_bw -R`, `ib_read_bw -R`,
    /// `ib_send_bw -R` on the other host) with --op write|read|send.
    #[arg(long)]
    pub perftest: bool,
}

/// perftest's default iterations: 5000 for write, 1000 for read and send.
pub(crate) fn default_iters(op: Op) -> u64 {
    if op == Op::Write { 5000 } else { 1000 }
}

/// The name perftest prints for the test.
pub(crate) fn test_name(op: Op) -> &'static str {
    match op {
        Op::Write => "RDMA_Write BW Test",
        Op::Read => "RDMA_Read BW Test",
        Op::Send => "Send BW Test",
        // Refused before a perftest run starts (perf/mod.rs).
        Op::Mixed => "Mixed BW Test",
    }
}
