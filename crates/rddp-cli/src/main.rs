//! The `rddp` tool. `demo` runs with no setup; `perf` measures (its MPA/SCTP
//! connection setup arrives with the MPA work); `target` answers as a conformance
//! responder over MPA/TCP.

/// Print a line to stdout; a closed stdout (`rddp demo | head`) is not an error
/// worth a panic, so the line is dropped.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

mod conform;
mod demo;
mod exec;
mod hostile;
mod llp;
mod observe;
mod perf;
mod rping;
mod target;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "rddp",
    version,
    about = "Remote Direct Data Placement (iWARP) in Rust"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// More log lines on stderr: -v info, -vv debug, -vvv trace (default: warnings).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Fewer log lines on stderr: -q errors only, -qq none. Without -v/-q,
    /// RUST_LOG is honoured (e.g. RUST_LOG=rddp=debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    quiet: u8,
}

#[derive(Subcommand)]
enum Cmd {
    /// Show RDMA over loopback MPA/TCP, step by step (no setup needed).
    Demo {
        /// Lower layer: mpa (MPA over TCP) or sctp (DDP over SCTP).
        #[arg(long, default_value = "mpa", value_parser = ["mpa", "sctp"])]
        transport: String,
        #[command(flatten)]
        capture: observe::CaptureArgs,
    },
    /// A conformance responder: registered buffer, echo, Reads, events.
    Target(target::TargetArgs),
    /// Measure bandwidth and latency like perftest (server and client).
    #[command(subcommand)]
    Perf(perf::PerfCmd),
    /// Hostile MPA peers against `rddp target`: slowloris, slow octets, floods.
    Hostile(hostile::HostileArgs),
    /// rdma-core's rping on the wire: interoperates with `rping` over siw.
    Rping(rping::RpingArgs),
    /// Run an unmodified rdma-core application (ibv_devinfo, ...) over rddp.
    Exec(exec::ExecArgs),
    /// Test an iWARP peer against the RFCs; exit 1 if it breaks any case.
    Conform(conform::ConformArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    // Before the logging and the raised descriptor limit, which the command
    // would otherwise inherit.
    if let Cmd::Exec(a) = &cli.cmd {
        eprintln!("rddp: {}", exec::run(a).unwrap_err());
        return ExitCode::FAILURE;
    }
    observe::init_logging(cli.verbose, cli.quiet);
    // Every connection holds a descriptor: `rddp target` and `rddp perf --qps`
    // serve thousands.
    if let Err(w) = rddp::raise_open_file_limit() {
        tracing::warn!("{w}");
    }
    let result = match &cli.cmd {
        Cmd::Demo { transport, capture } => capture.start().and_then(|_cap| demo::run(transport)),
        Cmd::Target(a) => target::run(a.clone()),
        Cmd::Perf(p) => perf::main(p),
        Cmd::Hostile(a) => hostile::run(a),
        Cmd::Exec(_) => unreachable!("handled above"),
        // rping's -v (display ping data) is the global -v.
        Cmd::Rping(a) => rping::run(&rping::RpingArgs {
            verbose: cli.verbose > 0,
            ..a.clone()
        }),
        Cmd::Conform(a) => match conform::run(a) {
            Ok(true) => Ok(()),
            // The table or the JSON said which cases failed.
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rddp: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Help and version print as usual; a wrong command line gives one line.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            // The first paragraph of clap's message, on one line.
            let text = e.render().to_string();
            let first: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let first = first.join(" ");
            let first = first.strip_prefix("error: ").unwrap_or(&first);
            eprintln!("rddp: {first} (see --help)");
            ExitCode::from(2)
        }
    }
}
