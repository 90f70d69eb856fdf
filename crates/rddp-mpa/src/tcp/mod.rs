//! A `std::net` driver for the sans-IO MPA engine.
//!
//! * [`connect`] / [`listen`] + [`MpaListener::accept`] run connection setup with
//!   its deadlines and return an [`MpaConnection`] in FPDU mode, ready for the ULP.
//!   Setup itself runs on the process's event loop (rddp-io: a few threads, each
//!   connection's deadline on the loop's timers); the calls block their caller
//!   until their connection's setup has ended.
//! * [`MpaConnection`] sends with vectored writes straight from the message
//!   payload and receives into one read buffer that the DDP sink places from.
//!
//! In FPDU mode the socket is blocking again: one thread owns a connection; a
//! test or ULP that sends and receives at once uses one thread per endpoint.

mod accept;
mod conn;
mod dial;
mod io;
mod liveness;
mod log;
mod mss;
mod nb;
mod rx;
mod setup;
mod window;

pub use conn::MpaConnection;
pub use io::{layout_rest, try_write_layout, write_fpdu};
pub use liveness::{dead_peer_bound, keepalive_for, set_dead_peer_timeout};
pub use mss::{FALLBACK_EMSS, effective_mss};
pub use setup::{MpaListener, connect, connect_raw, listen};
pub use window::open_receive_window;
