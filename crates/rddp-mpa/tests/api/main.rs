//! The rddp-mpa integration tests: one binary, one module per subject. Some
//! run endpoints over real loopback TCP (kernel-chosen ports) or against a raw
//! socket peer speaking crafted bytes, some drive the sans-IO engines and the
//! FPDU receiver in memory. Helpers shared by the modules live in `common`:
//! endpoint pairs and raw peers, a scripted byte source (`source`) and
//! encoded FPDU streams for the receiver (`wires`).

mod common;

mod errors;
mod loopback;
mod recv_buffer;
mod rx_app_direct;
mod rx_batch_diff;
mod rx_batched;
mod rx_continued;
mod rx_direct;
mod rx_leftover;
mod rx_lone;
mod sans_io;
mod stalled_setup;
mod tos;
mod wire_check;
