//! `rddp perf`: bandwidth and latency in the manner of perftest (ib_write_bw,
//! ib_read_bw, ib_send_bw, ib_write_lat) over any LLP.
//!
//! * [`link::establish`]: the only transport-aware code (where MPA/SCTP plug in).
//! * [`server::Server`], [`client::Client`]: the two sides on an attached queue
//!   pair ([`endpoint::Endpoint`]); [`proto`] is what they say to each other.
//! * [`exec`]: every queue pair's side is a task on a few worker threads.
//! * [`report`], [`plot`], [`progress`]: output.

pub mod args;
pub mod bw;
pub mod chan;
pub mod client;
pub mod copies;
pub mod endpoint;
pub mod exec;
pub mod failure;
pub mod forever;
pub mod lat;
pub mod link;
pub mod mixed;
pub mod opts;
pub mod pattern;
pub mod perftest;
pub mod plot;
pub mod progress;
pub mod proto;
pub mod report;
pub mod run;
pub mod server;
pub mod signal;
pub mod stats;

pub use args::PerfCmd;

/// Run `rddp perf ...`.
pub fn main(cmd: &PerfCmd) -> Result<(), String> {
    match cmd {
        PerfCmd::Server(a) => {
            let _cap = a.link.capture.start()?;
            if a.perftest.perftest {
                return perftest::server(a);
            }
            run::server_main(a)
        }
        PerfCmd::Client(a) => {
            let _cap = a.link.capture.start()?;
            if a.perftest.perftest {
                if a.op == opts::Op::Mixed {
                    return Err("--perftest takes --op write, read or send, not mixed".into());
                }
                return perftest::client(a);
            }
            run::client_main(a)
        }
    }
}
