//! Latency by ping-pong. Write: each side RDMA-writes the other's buffer and polls
//! its own last octet for the iteration's marker (ib_write_lat). Send: the client
//! Sends, the server answers with a Send of the same size (ib_send_lat). One-way
//! latency is half the round trip.
//!
//! Both ends post their Sends unsignaled but every [`SIGNAL_EVERY`]th (as
//! ib_send_lat asks for a completion every `cq_mod`): the answer says the
//! Send left, so a completion a message would only be work to poll.

use super::chan::{Chan, Incoming, stall};
use super::pattern;
use super::proto::Msg;
use rddp::{MemoryRegion, RemoteBuf};
use std::time::Instant;

/// A ping-pong's Sends are signaled every this many (and the control
/// message after them, always signaled, covers the rest).
pub(crate) const SIGNAL_EVERY: u64 = 64;

/// The marker of iteration `i` (never 0, the value the buffer starts with).
pub(crate) fn marker(i: u64) -> u8 {
    (i % 255) as u8 + 1
}

fn last_octet(mr: &MemoryRegion, size: u32) -> Result<u8, String> {
    mr.read(u64::from(size) - 1, 1)
        .map_err(|e| format!("polling the buffer: {e}"))
        .map(|v| v.first().copied().unwrap_or(0))
}

/// Wait until the last octet of `mine` holds `want`; on the server, an End from the
/// client ends the wait (`Ok(false)`).
async fn wait_marker(
    chan: &mut Chan,
    mine: &MemoryRegion,
    size: u32,
    want: u8,
) -> Result<bool, String> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        // The peer's Write is read from the socket by this thread (busy
        // polling, with few connections): no hand-over from the I/O thread.
        chan.reap_busy()?;
        if last_octet(mine, size)? == want {
            return Ok(true);
        }
        spins += 1;
        if spins.is_multiple_of(64) {
            if let Some(Incoming::Ctrl(Msg::End { .. })) = chan.try_recv()? {
                return Ok(false);
            }
            chan.check_events("the peer's ping-pong write")?;
            if start.elapsed() > stall() {
                return Err(format!(
                    "no ping-pong write from the peer for {} s",
                    stall().as_secs()
                ));
            }
        }
        super::exec::yield_now().await;
    }
}

/// The client's write ping-pong of one iteration: write marker `i`, wait for it
/// back; returns the one-way latency in microseconds.
pub(crate) async fn client_write(
    chan: &mut Chan,
    src: &MemoryRegion,
    mine: &MemoryRegion,
    remote: RemoteBuf,
    size: u32,
    i: u64,
) -> Result<f64, String> {
    let m = marker(i);
    let t0 = Instant::now();
    src.write(u64::from(size) - 1, &[m])
        .map_err(|e| e.to_string())?;
    chan.write(src, u64::from(size), remote)?;
    if !wait_marker(chan, mine, size, m).await? {
        return Err("the server ended the ping-pong early".into());
    }
    let us = t0.elapsed().as_secs_f64() * 1e6 / 2.0;
    chan.reap_ready()?;
    Ok(us)
}

/// The server's side of write ping-pong until the client's End; returns the
/// number of round trips.
pub(crate) async fn server_write(
    chan: &mut Chan,
    src: &MemoryRegion,
    mine: &MemoryRegion,
    remote: RemoteBuf,
    size: u32,
) -> Result<u64, String> {
    let mut i = 0;
    loop {
        let m = marker(i);
        if !wait_marker(chan, mine, size, m).await? {
            chan.end_busy();
            return Ok(i);
        }
        src.write(u64::from(size) - 1, &[m])
            .map_err(|e| e.to_string())?;
        chan.write(src, u64::from(size), remote)?;
        i += 1;
    }
}

/// The client's Send ping-pong of one iteration; returns the one-way latency in
/// microseconds and the corrupt octets of the answer (when `verify`). `last`:
/// the run's last, signaled.
pub(crate) async fn client_send(
    chan: &mut Chan,
    src: &MemoryRegion,
    size: u32,
    verify: bool,
    last: bool,
) -> Result<(f64, u64), String> {
    let t0 = Instant::now();
    chan.send_data_as(src, u64::from(size), last).await?;
    let got = match chan.recv("the server's ping-pong Send").await? {
        Incoming::Data(d) => d,
        Incoming::Ctrl(m) => return Err(format!("expected a ping-pong Send, got {m:?}")),
    };
    let us = t0.elapsed().as_secs_f64() * 1e6 / 2.0;
    chan.reap_ready()?;
    let bad = if verify { corrupt_msg(size, &got) } else { 0 };
    // The next receive posted reuses the buffer (no allocation a message).
    chan.recycle(got);
    Ok((us, bad))
}

/// Corrupt octets of a received message that should be `size` octets of pattern.
pub(crate) fn corrupt_msg(size: u32, got: &[u8]) -> u64 {
    pattern::corrupt(size, got) + (size as u64).abs_diff(got.len() as u64)
}
