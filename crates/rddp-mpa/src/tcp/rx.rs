//! The receive side of [`MpaConnection`]: a thin driver over the engine's
//! header-first receiver ([`crate::fpdu::FpduReceiver`], through
//! [`crate::FpduConn::drive`]): payloads are read from the socket straight into
//! their region or receive buffer. Octets read before FPDU mode (the setup's
//! leftover) and, with direct placement off, every read go through `on_bytes`
//! (copied into place, counted).

use super::conn::MpaConnection;
use super::io::read_until;
use crate::fpdu::Progress;
use rddp_proto::mem::MemoryTable;
use std::io;
use std::time::Instant;

impl MpaConnection {
    /// Process `n` fresh octets in `rbuf` after whatever is pending.
    pub(super) fn ingest(&mut self, mem: &MemoryTable, n: usize) {
        let rbuf = std::mem::take(&mut self.rbuf);
        if self.pending.is_empty() {
            self.process(mem, &rbuf[..n]);
        } else {
            let mut p = std::mem::take(&mut self.pending);
            p.extend_from_slice(&rbuf[..n]);
            self.process(mem, &p);
        }
        self.rbuf = rbuf;
    }

    pub(super) fn drain_pending(&mut self, mem: &MemoryTable) {
        if !self.pending.is_empty() {
            let p = std::mem::take(&mut self.pending);
            self.process(mem, &p);
        }
    }

    /// Hand buffered octets to the engine. Before the responder has absorbed the
    /// RTR, `mem` is a scratch table: the engine stops right after it and the
    /// rest is kept for the ULP's table.
    fn process(&mut self, mem: &MemoryTable, data: &[u8]) {
        let used = self.conn.on_bytes(mem, data);
        if !self.conn.is_dead() {
            self.pending.extend_from_slice(&data[used..]);
        }
    }

    /// One read (bounded by `deadline`) and its processing. `Ok(false)`: timed
    /// out. With direct placement the engine reads from the socket itself.
    pub(super) fn read_step(
        &mut self,
        mem: &MemoryTable,
        deadline: Option<Instant>,
    ) -> io::Result<bool> {
        if !self.direct || !self.pending.is_empty() {
            return match read_until(&mut self.sock, &mut self.rbuf, deadline) {
                Ok(None) => Ok(false),
                Ok(Some(0)) => {
                    self.conn.on_llp_closed(true);
                    Ok(true)
                }
                Ok(Some(n)) => {
                    self.ingest(mem, n);
                    Ok(true)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
                Err(_) => {
                    self.conn.on_llp_closed(false);
                    Ok(true)
                }
            };
        }
        let wait = match deadline {
            None => None,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(w) if !w.is_zero() => Some(w),
                _ => return Ok(false),
            },
        };
        if self.sock.set_read_timeout(wait).is_err() {
            self.conn.on_llp_closed(false);
            return Ok(true);
        }
        // The region's own lock is held for each read into it: on this blocking
        // socket a peer stalling mid-payload holds that one region (the event
        // loop reads non-blocking: docs/data-path.md).
        match self.conn.drive(mem, &mut self.sock) {
            // A blocking socket "would block" only when its timeout passed.
            Ok(Progress::WouldBlock) => Ok(deadline.is_none_or(|d| Instant::now() < d)),
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => Ok(false),
            Err(_) => Ok(true),
        }
    }
}
