//! Seeing what happens (docs/features.md): logs on stderr (`-v`/`-q`, `RUST_LOG`), a
//! capture of every connection (`--pcap FILE`), counters as JSON.
//!
//! A command that connects gets `--pcap` by flattening [`CaptureArgs`] into its
//! arguments and holding [`CaptureArgs::start`]'s guard while it runs.

use clap::Args;
use rddp::QpStats;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use tracing_subscriber::EnvFilter;

/// Send logs to stderr (stdout stays for results and `--json`). Level: `warn`;
/// each `-v` one more (info, debug, trace), each `-q` one less (error, off).
/// Without `-v`/`-q`, `RUST_LOG` (tracing-subscriber's filter syntax, e.g.
/// `RUST_LOG=rddp=debug,rddp_mpa=info`) is used when set.
pub(crate) fn init_logging(verbose: u8, quiet: u8) {
    let level = match i16::from(verbose) - i16::from(quiet) {
        ..=-2 => "off",
        -1 => "error",
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if verbose == 0 && quiet == 0 && !v.is_empty() => EnvFilter::try_new(&v)
            .unwrap_or_else(|e| {
                eprintln!("rddp: RUST_LOG={v:?} is not a filter ({e}); using {level}");
                EnvFilter::new(level)
            }),
        _ => EnvFilter::new(level),
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

/// `--pcap FILE` for a command that makes connections.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct CaptureArgs {
    /// Write what this process sends and receives on every connection to FILE, a
    /// pcap that Wireshark decodes (MPA: its iWARP dissectors; SCTP: UDP
    /// encapsulation, see the README).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
}

/// While alive, connections are recorded; dropping it closes the file.
pub(crate) struct CaptureGuard(bool);

impl CaptureArgs {
    /// Start the capture if `--pcap` was given (before any connection is made).
    pub(crate) fn start(&self) -> Result<CaptureGuard, String> {
        let Some(path) = &self.pcap else {
            return Ok(CaptureGuard(false));
        };
        rddp::capture::start(path)
            .map_err(|e| format!("cannot write the capture {}: {e}", path.display()))?;
        tracing::info!("capturing every connection to {}", path.display());
        Ok(CaptureGuard(true))
    }
}

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        if self.0 {
            let packets = rddp::capture::packets();
            match rddp::capture::finish() {
                Ok(()) => tracing::info!("capture closed: {packets} packets"),
                Err(e) => eprintln!("rddp: the capture is incomplete: {e}"),
            }
        }
    }
}

/// A queue pair's counters as one JSON object (field names as in `QpStats`).
pub(crate) fn stats_json(s: &QpStats) -> Value {
    let mut o = Map::new();
    for (k, v) in s.fields() {
        o.insert(k.into(), v.into());
    }
    let classes = |t: &rddp::TerminateClasses| {
        Value::Object(
            t.fields()
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| (k.to_string(), json!(n)))
                .collect(),
        )
    };
    o.insert("terminates_sent".into(), classes(&s.terminates_sent));
    o.insert(
        "terminates_received".into(),
        classes(&s.terminates_received),
    );
    o.insert(
        "completions".into(),
        Value::Object(
            s.completions
                .fields()
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| (k.to_string(), json!(n)))
                .collect(),
        ),
    );
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_print_every_plain_field_and_nonzero_classes() {
        let mut s = QpStats {
            octets_sent: 5,
            ..QpStats::default()
        };
        s.terminates_sent.ddp_tagged = 1;
        s.completions.flushed = 2;
        let v = stats_json(&s);
        assert_eq!(v["octets_sent"], 5);
        assert_eq!(v["segments_refused"], 0);
        assert_eq!(v["terminates_sent"], json!({ "ddp_tagged": 1 }));
        assert_eq!(v["terminates_received"], json!({}));
        assert_eq!(v["completions"], json!({ "flushed": 2 }));
    }
}
