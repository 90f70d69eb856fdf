//! The `rddp` tool's tests: one binary, one module per subject. Most run the
//! real `rddp` binary as a process (`CARGO_BIN_EXE_rddp`) and talk to it over
//! loopback; `interop_*` drive the siw guest of scripts/interop/; `peer_death`
//! kills and cuts off peers between network namespaces.
//!
//! Tests that load the whole machine (a QEMU guest, a soak, thousands of
//! connections, the fault and IPsec namespaces) take turns through
//! [`common::heavy`]; the others run beside them.

mod common;
mod interop;

mod conform;
mod demo;
mod exec;
mod faults;
mod hostile;
mod interop_conform;
mod interop_siw;
mod ipsec;
mod observe;
mod peer_death;
mod perf;
mod perf_many_qps;
mod perf_verify;
mod perftest;
mod rping;
mod soak;
mod target;
mod target_errors;
mod target_idle_qps;
mod target_sctp;
mod target_sctp_sessions;
mod target_sctp_threads;
mod target_silent_peers;
mod target_terminates;

/// Every allocation of the binary counted: `peer_death::cycles` reads the heap
/// in use (its test runs in a process of its own, so the count is its own).
#[global_allocator]
static GLOBAL: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;
