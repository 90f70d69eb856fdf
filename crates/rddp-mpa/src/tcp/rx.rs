//! The receive side of [`MpaConnection`]: which octets go to the engine's
//! `on_bytes`, which partial tagged FPDU is placed directly from the socket, and
//! how much to ask the socket for (see the copy notes in `conn.rs`).

use super::conn::{MpaConnection, READ_BUF};
use crate::fpdu::{DIRECT_HEAD, DirectRead, DirectStart};
use rddp_proto::mem::MemoryTable;
use std::io::{self, Read};

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

    /// Hand octets to the engine: whole FPDUs through `on_bytes`, a partial tagged
    /// FPDU to direct placement; keep a partial header (< 16 octets) pending.
    /// Before the responder has absorbed the RTR, `mem` is a scratch table: stop
    /// right after it and keep the rest for the ULP's table.
    fn process(&mut self, mem: &MemoryTable, mut data: &[u8]) {
        let scratch = !self.conn.is_established();
        loop {
            let rtr_absorbed = scratch && self.conn.is_established();
            if data.is_empty() || self.conn.is_dead() || rtr_absorbed {
                break;
            }
            let used = if !(self.direct && self.conn.direct_capable()) {
                self.conn.on_bytes(mem, data)
            } else {
                match self.conn.whole_prefix(data) {
                    0 if data.len() < DIRECT_HEAD => 0,
                    0 => match self.conn.direct_begin(mem, data) {
                        DirectStart::No => self.conn.on_bytes(mem, data),
                        DirectStart::Failed => data.len(),
                        DirectStart::Read { consumed, read } => {
                            self.direct_read(mem, read);
                            consumed
                        }
                    },
                    whole => self.conn.on_bytes(mem, &data[..whole]),
                }
            };
            if used == 0 {
                break;
            }
            data = &data[used..];
        }
        if !self.conn.is_dead() {
            self.pending.extend_from_slice(data);
        }
    }

    /// Read a tagged payload straight into its region, then PAD + CRC.
    fn direct_read(&mut self, mem: &MemoryTable, r: DirectRead) {
        let mut trailer = [0u8; 7];
        let got = self.sock.set_read_timeout(None).and_then(|_| {
            // The region's own lock is held for the read (this blocking driver
            // only; docs/data-path.md: the event loop reads non-blocking).
            let region = mem
                .region(r.stag)
                .ok_or_else(|| io::Error::other("region vanished"))?;
            self.sock
                .read_exact(&mut region.data_mut()[r.start..r.end])?;
            self.sock.read_exact(&mut trailer[..r.trailer])
        });
        match got {
            Ok(()) => self.conn.direct_finish(mem, &trailer[..r.trailer]),
            Err(e) => self
                .conn
                .on_llp_closed(e.kind() == io::ErrorKind::UnexpectedEof),
        }
    }

    /// Octets to ask the socket for: just the next FPDU's head when it may be
    /// placed directly, else a full buffer.
    pub(super) fn read_len(&self) -> usize {
        if self.direct && self.conn.direct_capable() && self.pending.len() < DIRECT_HEAD {
            DIRECT_HEAD - self.pending.len()
        } else {
            READ_BUF
        }
    }
}
