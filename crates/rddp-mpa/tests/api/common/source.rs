//! An in-memory source for `FpduReceiver::drive_buffered` tests (reads,
//! vectored reads and peeks of a byte vector, with would-blocks on demand).

use rddp_mpa::fpdu::Peek;
use std::io::{self, Read};

/// An in-memory source: reads (and peeks) of at most `cut` octets, a
/// would-block once all is read, or (`budget` n > 0) after n - 1 reads (a
/// peek is free, and a read after a peek finds what it showed); counts the
/// reads and the peeks.
pub(crate) struct Source {
    pub data: Vec<u8>,
    pub at: usize,
    pub cut: usize,
    pub reads: usize,
    pub peeks: usize,
    pub budget: usize,
}

impl Source {
    pub(crate) fn new(data: Vec<u8>, cut: usize) -> Self {
        Self {
            data,
            at: 0,
            cut,
            reads: 0,
            peeks: 0,
            budget: 0,
        }
    }

    fn blocked(&mut self) -> bool {
        if self.at == self.data.len() || self.budget == 1 {
            self.budget = 0;
            return true;
        }
        false
    }
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_vectored(&mut [io::IoSliceMut::new(buf)])
    }

    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        if self.blocked() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        if self.budget > 1 {
            self.budget -= 1;
        }
        let mut n = self.cut.min(self.data.len() - self.at);
        let mut got = 0;
        for b in bufs.iter_mut() {
            let k = b.len().min(n);
            b[..k].copy_from_slice(&self.data[self.at..self.at + k]);
            (self.at, n, got) = (self.at + k, n - k, got + k);
        }
        self.reads += 1;
        Ok(got)
    }
}

impl Peek for Source {
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at == self.data.len() || self.budget == 1 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(self.cut).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.peeks += 1;
        Ok(n)
    }
}
