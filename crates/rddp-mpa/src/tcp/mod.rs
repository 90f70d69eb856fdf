//! A `std::net` driver for the sans-IO MPA engine.
//!
//! * [`connect_raw`] / [`listen`] + [`MpaListener::accept_raw`] run connection
//!   setup with its deadlines and hand over the socket at the start of FPDU
//!   mode, with what was agreed and any octets that followed the frame (the
//!   verbs queue pair, `rddp::transport::mpa`, runs FPDU mode from there).
//!   Setup itself runs on the process's event loop (rddp-io: a few threads, each
//!   connection's deadline on the loop's timers); the calls block their caller
//!   until their connection's setup has ended.
//! * [`write_fpdu`], [`try_write_layout`], [`layout_rest`]: FPDUs onto the socket.

mod accept;
mod dial;
mod io;
mod liveness;
mod log;
mod mss;
mod nb;
mod setup;
mod window;

pub use io::{layout_rest, try_write_layout, write_fpdu};
pub use liveness::{dead_peer_bound, keepalive_for, set_dead_peer_timeout};
pub use mss::{FALLBACK_EMSS, effective_mss};
pub use setup::{MpaListener, connect_raw, listen};
pub use window::open_receive_window;
