//! The receive window a connection starts with.
//!
//! The receiver reads FPDU by FPDU (its header first, then its payload
//! straight into place), so one read takes at most 64 KiB. Linux's autotuning
//! grows the receive buffer to about twice what the reader took in one round
//! trip (`tcp_rcv_space_adjust`), and it measures that round trip from the
//! window updates each read sends: on a fast link the measure is a few
//! microseconds and the buffer stays below one burst of the sender. The window
//! then closes whenever the reader is late (1 MiB Writes on loopback: up to
//! 2,000 zero windows in 4,000 MiB, the sender window-limited half of the time).
//!
//! Setting `SO_RCVLOWAT` makes Linux raise the buffer to hold that many octets
//! (`tcp_set_rcvlowat`, since Linux 4.18) without locking it, as SO_RCVBUF
//! would: autotuning goes on from there. The mark is put back to 1 at once,
//! so a single octet still wakes the reader.

use rddp_sockopt::set_rcvlowat;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsFd;

/// Raise the receive buffer of `sock` to hold `window` octets, keeping
/// autotuning on. Nothing when the user fixed SO_RCVBUF (`recv_buffer`).
pub fn open_receive_window(
    sock: &TcpStream,
    window: Option<u32>,
    recv_buffer: Option<usize>,
) -> io::Result<()> {
    let (Some(w), None) = (window, recv_buffer) else {
        return Ok(());
    };
    let w = i32::try_from(w).unwrap_or(i32::MAX);
    set_rcvlowat(sock.as_fd(), w)?;
    set_rcvlowat(sock.as_fd(), 1)
}
