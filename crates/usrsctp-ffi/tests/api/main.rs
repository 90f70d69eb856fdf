//! The usrsctp-ffi integration tests against the real library: one binary,
//! one module per subject. Tests share the process's one stack (on a free
//! UDP port, `common::port`) and connect socket pairs over it, each test on
//! SCTP ports of its own; a test that starts a stack of its own, counts the
//! sockets of the process-wide reaper, or measures the stack's threads runs
//! in a child process of its own (`common::own_process`).

mod common;

mod chain;
mod close;
mod gather;
mod send_wake;
mod smoke;
