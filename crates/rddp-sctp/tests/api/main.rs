//! The rddp-sctp integration tests: one binary, one module per subject. The
//! session rules run sans-IO, two adaptation layers joined by chunk queues
//! the test controls (`common::sides`); the rest run real usrsctp, over UDP
//! encapsulation, raw IP, or an in-process AF_CONN link (`common::link`),
//! and the wire checks read captures back with tshark (`common::wire`).
//!
//! A process runs one usrsctp stack on one UDP port, which is also the SCTP
//! port of its one listener: every test that starts the stack runs in a child
//! process of its own (`common::own_process`).

mod common;

mod non_ddp;
mod path;
mod poll_mixed;
mod raw_ip;
mod refusal;
mod relisten;
mod reorder;
mod session_rules;
mod sessions;
mod setup_loss;
mod two_processes;
mod wire;
mod wire_udp;
