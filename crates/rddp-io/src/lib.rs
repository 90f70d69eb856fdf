//! The rddp event loop: a small fixed pool of I/O threads, each one `mio::Poll`
//! (epoll on Linux), driving sans-IO engines over non-blocking sockets.
//!
//! * A [`Task`] owns one socket (or none) and its engine. The loop calls
//!   [`Task::run`] when the socket is ready, when the task's deadline has passed,
//!   when another thread [woke](TaskHandle::wake) it, and once when it is spawned;
//!   the task does its non-blocking I/O until `WouldBlock` and answers with
//!   [`Next`]: what to wait for and until when, or that it is done.
//! * Deadlines are the loop's timers: one heap per thread, no thread per timer.
//! * [`Driver::spawn`] places a task on one of the threads (round robin); a task
//!   stays on its thread for its life. [`Cx::spawn`] adds one to the current thread
//!   (a listener spawning a task per accepted connection).
//!
//! Nothing here knows a protocol. Its users: MPA connection setup (rddp-mpa),
//! every MPA queue pair's data path, and every DDP over SCTP association and
//! its queue pairs (rddp); docs/event-loop.md says what runs where.

#![warn(missing_docs)]

mod driver;
mod task;
mod timers;
mod worker;

pub use driver::{Driver, TaskHandle};
pub use mio::Interest;
pub use task::{Cx, Next, Task};
