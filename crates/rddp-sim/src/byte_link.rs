//! One direction of a simulated TCP connection on the virtual clock: octets
//! put on it are cut into chunks ([`Chunking`]), each due at the tick it was
//! sent plus the link's delay, and handed to the receiver chunk by chunk
//! through [`Socket`], a non-blocking socket's view (`Read` and `Peek`) of
//! what has arrived. Always in order, like TCP: a later chunk is never due
//! before an earlier one, whatever the delay was when it was sent.
//!
//! Our own, not a network simulator crate: those run async sockets on a
//! runtime of their own, while the product's reader takes any `Read + Peek`
//! and a test here must choose every chunk boundary and every arrival tick,
//! which is all this module does.

use crate::pair::{Chunking, cut};
use rand_chacha::ChaCha8Rng;
use rddp_mpa::fpdu::Peek;
use std::collections::VecDeque;
use std::io::{self, IoSliceMut, Read};

/// Octets on the way, and what has arrived and is not yet read.
#[derive(Debug, Default)]
pub(crate) struct ByteLink {
    /// Ticks from sending to arrival.
    pub(crate) delay: u64,
    /// Chunks on the way with the tick they arrive, oldest first.
    in_flight: VecDeque<(u64, Vec<u8>)>,
    /// The sender's FIN: arrives at this tick, after every chunk.
    fin: Option<u64>,
    /// Octets the receiver has not read yet (`arrived[read..]`).
    arrived: Vec<u8>,
    read: usize,
    /// The FIN arrived: once `arrived` is read, reads see end of stream.
    eof: bool,
    /// Octets ever put on the link (the stream offset of the next one).
    pub(crate) sent_octets: u64,
}

impl ByteLink {
    /// A link whose octets arrive `delay` ticks after they are sent.
    pub(crate) fn new(delay: u64) -> Self {
        Self {
            delay,
            ..Self::default()
        }
    }

    /// Put `octets` on the link at tick `now`, cut as `chunking` says.
    pub(crate) fn send(
        &mut self,
        now: u64,
        octets: &[u8],
        chunking: Chunking,
        rng: &mut ChaCha8Rng,
    ) {
        if octets.is_empty() || self.fin.is_some() {
            return;
        }
        self.sent_octets += octets.len() as u64;
        let due = self.next_due(now);
        for c in cut(octets, chunking, rng) {
            if !c.is_empty() {
                self.in_flight.push_back((due, c.to_vec()));
            }
        }
    }

    /// Close the sending side (a FIN after everything sent); once only.
    pub(crate) fn close(&mut self, now: u64) {
        if self.fin.is_none() {
            self.fin = Some(self.next_due(now));
        }
    }

    /// In order: never before what was sent earlier.
    fn next_due(&self, now: u64) -> u64 {
        let due = now.saturating_add(self.delay);
        self.in_flight.back().map_or(due, |&(d, _)| d.max(due))
    }

    /// The earliest tick at which something (octets or the FIN) arrives.
    pub(crate) fn next_arrival(&self) -> Option<u64> {
        match self.in_flight.front() {
            Some(&(d, _)) => Some(d),
            None if !self.eof => self.fin,
            None => None,
        }
    }

    /// Hand the next chunk due by `now` to the receiver's side; false if none
    /// is due (the FIN counts as one, after the last chunk).
    pub(crate) fn arrive_one(&mut self, now: u64) -> bool {
        if let Some(&(due, _)) = self.in_flight.front() {
            if due > now {
                return false;
            }
            if let Some((_, c)) = self.in_flight.pop_front() {
                if self.read == self.arrived.len() {
                    self.arrived.clear();
                    self.read = 0;
                }
                self.arrived.extend_from_slice(&c);
            }
            return true;
        }
        if !self.eof && self.fin.is_some_and(|d| d <= now) {
            self.eof = true;
            return true;
        }
        false
    }

    /// Octets on the way, in order, for a test to change: `f` sees them as
    /// one buffer of the same length; the chunks keep their boundaries.
    pub(crate) fn tamper_in_flight(&mut self, f: impl FnOnce(&mut [u8])) {
        let mut all: Vec<u8> = self.in_flight.iter().flat_map(|(_, c)| c.clone()).collect();
        f(&mut all);
        let mut at = 0;
        for (_, c) in &mut self.in_flight {
            let n = c.len();
            c.copy_from_slice(&all[at..at + n]);
            at += n;
        }
    }

    /// What the receiver reads from.
    pub(crate) fn socket(&mut self) -> Socket<'_> {
        Socket { link: self }
    }
}

/// The receiving end as a non-blocking stream socket: reads and peeks see
/// what has arrived, `WouldBlock` when it is all read, end of stream after
/// the FIN.
pub(crate) struct Socket<'a> {
    link: &'a mut ByteLink,
}

impl Socket<'_> {
    fn empty(&self) -> io::Result<usize> {
        if self.link.eof {
            Ok(0)
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }
}

impl Read for Socket<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_vectored(&mut [IoSliceMut::new(buf)])
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        let l = &mut *self.link;
        if l.read == l.arrived.len() {
            return self.empty();
        }
        let mut got = 0;
        for b in bufs.iter_mut() {
            let k = b.len().min(l.arrived.len() - l.read);
            b[..k].copy_from_slice(&l.arrived[l.read..l.read + k]);
            l.read += k;
            got += k;
        }
        Ok(got)
    }
}

impl Peek for Socket<'_> {
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let l = &*self.link;
        if l.read == l.arrived.len() {
            return self.empty();
        }
        let n = buf.len().min(l.arrived.len() - l.read);
        buf[..n].copy_from_slice(&l.arrived[l.read..l.read + n]);
        Ok(n)
    }
}
