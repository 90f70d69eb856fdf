//! `rddp perf`: bandwidth and latency in the manner of perftest (ib_write_bw,
//! ib_read_bw, ib_send_bw, ib_write_lat) over any LLP.
//!
//! * [`link::establish`]: the only transport-aware code (where MPA/SCTP plug in).
//! * [`server::Server`], [`client::Client`]: the two sides on an attached queue
//!   pair ([`endpoint::Endpoint`]); [`proto`] is what they say to each other.
//! * [`exec`]: every queue pair's side is a task on a few worker threads.
//! * [`report`], [`plot`], [`progress`]: output.

pub(crate) mod args;
pub(crate) mod bw;
pub(crate) mod chan;
pub(crate) mod client;
pub(crate) mod copies;
pub(crate) mod endpoint;
pub(crate) mod exec;
pub(crate) mod failure;
pub(crate) mod forever;
pub(crate) mod lat;
pub(crate) mod link;
pub(crate) mod mixed;
pub(crate) mod opts;
pub(crate) mod pattern;
pub(crate) mod perftest;
pub(crate) mod plot;
pub(crate) mod progress;
pub(crate) mod proto;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod server;
pub(crate) mod signal;
pub(crate) mod stats;

pub(crate) use args::PerfCmd;

/// Run `rddp perf ...`.
pub(crate) fn main(cmd: &PerfCmd) -> Result<(), String> {
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
