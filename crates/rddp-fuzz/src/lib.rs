//! The bodies of rddp's fuzz targets, as plain functions on stable Rust.
//!
//! `fuzz/` (outside the workspace, built with `cargo fuzz`) has one libFuzzer
//! target per function here; `tests/api/replay.rs` runs every file of
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` through the same
//! function, so a corpus input that once passed and now panics fails CI on
//! stable Rust. Each function panics (assert) when its oracle is violated.
#![warn(missing_docs)]

/// Print a trace line when RDDP_FUZZ_TRACE is set (for `run_input`).
#[macro_export]
macro_rules! trace {
    ($($a:tt)*) => {
        if $crate::tracing() {
            eprintln!($($a)*);
        }
    };
}

/// Whether RDDP_FUZZ_TRACE is set (read once).
pub fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("RDDP_FUZZ_TRACE").is_some())
}

/// `v`, traced with a label.
pub fn trace_val<T: std::fmt::Debug>(v: T, what: &str) -> T {
    trace!("{what}: {v:?}");
    v
}

pub mod ddp;
pub mod fixture;
pub mod input;
pub mod mpa_rx;
pub mod mpa_setup;
pub mod rdmap;
pub mod reach;
pub mod sctp;
pub mod seeds;
pub mod verbs;
pub mod wire;

pub use ddp::ddp_sink;
pub use mpa_rx::mpa_rx;
pub use mpa_setup::mpa_setup;
pub use rdmap::rdmap_stream;
pub use sctp::sctp_adaptation;
pub use verbs::verbs_ops;
pub use wire::wire_decoders;

/// A target's body: panics when the input breaks one of its oracles.
pub type Target = fn(&[u8]);

/// Every target: its name (the directory under `fuzz/corpus/`) and its body.
pub const TARGETS: &[(&str, Target)] = &[
    ("wire_decoders", wire_decoders),
    ("mpa_setup", mpa_setup),
    ("mpa_rx", mpa_rx),
    ("ddp_sink", ddp_sink),
    ("rdmap_stream", rdmap_stream),
    ("sctp_adaptation", sctp_adaptation),
    ("verbs_ops", verbs_ops),
];
