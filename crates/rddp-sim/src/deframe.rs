//! Length-prefixed framing for the simulated byte-stream LLP.
//!
//! Not MPA: just enough framing to carry whole segments over a byte stream, so
//! DDP can be tested apart from MPA. Each frame is a 4-octet big-endian length then
//! the segment.

/// Append `seg` as one frame to `out`.
pub fn frame(seg: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(seg.len() as u32).to_be_bytes());
    out.extend_from_slice(seg);
}

/// Why a byte stream could not be deframed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A frame announced more octets than the receiver accepts.
    TooLong {
        /// The length announced.
        len: usize,
        /// The most the receiver accepts.
        max: usize,
    },
}

/// Reassembles frames from chunks split anywhere. Holds at most one frame.
#[derive(Debug)]
pub struct Deframer {
    max: usize,
    buf: Vec<u8>,
}

impl Deframer {
    /// A deframer taking frames of at most `max` octets.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            buf: Vec::new(),
        }
    }

    /// Feed a chunk; call `f` with every segment it completes, in order.
    pub fn feed(&mut self, mut chunk: &[u8], mut f: impl FnMut(&[u8])) -> Result<(), FrameError> {
        while !chunk.is_empty() {
            // Fill the 4-octet length first, then exactly that many octets.
            let want = if self.buf.len() < 4 {
                4 - self.buf.len()
            } else {
                let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                    as usize;
                if len > self.max {
                    return Err(FrameError::TooLong { len, max: self.max });
                }
                4 + len - self.buf.len()
            };
            let n = want.min(chunk.len());
            self.buf.extend_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
            if self.buf.len() >= 4 {
                let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                    as usize;
                if len > self.max {
                    return Err(FrameError::TooLong { len, max: self.max });
                }
                if self.buf.len() == 4 + len {
                    f(&self.buf[4..]);
                    self.buf.clear();
                }
            }
        }
        Ok(())
    }
}
