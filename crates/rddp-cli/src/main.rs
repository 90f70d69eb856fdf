//! The `rddp` tool. `demo` runs with no setup; `perf` and `target` arrive with the
//! MPA and verbs work (see the README's status table).

mod demo;
mod llp;
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
}

#[derive(Subcommand)]
enum Cmd {
    /// Show DDP at work between two in-memory endpoints, step by step.
    Demo,
    /// A conformance responder: registered buffer, echo, Reads, events.
    Target(target::TargetArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Demo => demo::run(),
        Cmd::Target(a) => target::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rddp: {e}");
            ExitCode::FAILURE
        }
    }
}
