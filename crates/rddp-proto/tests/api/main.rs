//! The rddp-proto integration tests: one binary, one module per subject, all
//! sans-IO (segments handed to the engines by hand). Helpers shared by the
//! modules live in `common`: crafted DDP segments for one stream, one RDMAP
//! stream fed by a hostile peer (`host`), two RDMAP hosts over an in-order
//! link (`hosts`), and `own_process` for the one test that counts the
//! allocations of its whole process (`idle_memory`, whose instrumented
//! allocator is this binary's global allocator).

mod common;

mod abusive_stream;
mod completion_rules;
mod cq;
mod credit_isolation;
mod direct;
mod fuzz_findings;
mod hostile;
mod idle_memory;
mod invalidate_and_respond;
mod mem;
mod mem_app;
mod mem_shared;
mod pool_threads;
mod rdmap_ops;
mod rdmap_ord;
mod recv_in_region;
mod recv_strategies;
mod rx_header_first;
mod sink_errors;
mod source;
mod teardown;
mod tx_sent;
mod whole_or_refused;
