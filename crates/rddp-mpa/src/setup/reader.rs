//! Collects one Request/Reply frame from the byte stream, with bounded memory
//! (at most 20 + 512 octets) and the checks of RFC 5044 §7.1.1 in the order that decides
//! the answer: key (not MPA: close), Rev, PD_Length.

use rddp_wire::mpa::frame::{KEY_REP, KEY_REQ};
use rddp_wire::mpa::{MPA_MAX_PD, MPA_RR_HDR_LEN};
use rddp_wire::{FrameKind, MpaFlags, MpaFrame};

/// Why the collected octets are not an acceptable frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// Neither key, or the other side's key.
    BadKey,
    /// Rev other than 1 or 2 (`rev`), with the frame's flags.
    BadRev(u8),
    /// PD_Length above 512.
    PdTooLong(usize),
    /// Anything else (e.g. Rev 2 + E with fewer than 4 octets of private data).
    Invalid(String),
}

#[derive(Debug)]
pub(crate) struct FrameReader {
    want: FrameKind,
    buf: Vec<u8>,
    total: Option<usize>,
}

impl FrameReader {
    pub(super) fn new(want: FrameKind) -> Self {
        Self {
            want,
            buf: Vec::with_capacity(MPA_RR_HDR_LEN),
            total: None,
        }
    }

    /// The flags and Rev octets of the frame once its header has arrived.
    pub(super) fn flags_rev(&self) -> Option<(MpaFlags, u8)> {
        (self.buf.len() >= MPA_RR_HDR_LEN).then(|| (MpaFlags(self.buf[16]), self.buf[17]))
    }

    /// Take octets; returns those consumed and the frame once complete.
    pub(super) fn push(&mut self, input: &[u8]) -> Result<(usize, Option<MpaFrame>), Problem> {
        let mut used = 0;
        if self.total.is_none() {
            let n = (MPA_RR_HDR_LEN - self.buf.len()).min(input.len());
            self.buf.extend_from_slice(&input[..n]);
            used = n;
            // A wrong key is known from its first differing octet: do not wait.
            let key = match self.want {
                FrameKind::Request => &KEY_REQ,
                FrameKind::Reply => &KEY_REP,
            };
            let k = self.buf.len().min(16);
            if self.buf[..k] != key[..k] {
                return Err(Problem::BadKey);
            }
            if self.buf.len() < MPA_RR_HDR_LEN {
                return Ok((used, None));
            }
            let rev = self.buf[17];
            if !(1..=2).contains(&rev) {
                return Err(Problem::BadRev(rev));
            }
            let pd = usize::from(u16::from_be_bytes([self.buf[18], self.buf[19]]));
            if pd > MPA_MAX_PD {
                return Err(Problem::PdTooLong(pd));
            }
            self.total = Some(MPA_RR_HDR_LEN + pd);
        }
        let total = self.total.unwrap_or(MPA_RR_HDR_LEN);
        let rest = &input[used..];
        let n = (total - self.buf.len()).min(rest.len());
        self.buf.extend_from_slice(&rest[..n]);
        used += n;
        if self.buf.len() < total {
            return Ok((used, None));
        }
        MpaFrame::parse(&self.buf)
            .map(|f| (used, Some(f)))
            .map_err(|e| Problem::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(flags: u8, rev: u8, pd: &[u8]) -> Vec<u8> {
        let mut b = KEY_REQ.to_vec();
        b.extend_from_slice(&[flags, rev]);
        b.extend_from_slice(&(pd.len() as u16).to_be_bytes());
        b.extend_from_slice(pd);
        b
    }

    #[test]
    fn byte_at_a_time_and_leftover() {
        let mut b = req(0x40, 1, b"hello");
        b.extend_from_slice(b"rest");
        let mut r = FrameReader::new(FrameKind::Request);
        let mut got = None;
        let mut i = 0;
        while got.is_none() {
            let (n, f) = r.push(&b[i..i + 1]).unwrap();
            i += n;
            got = f;
        }
        assert_eq!(i, b.len() - 4);
        assert_eq!(got.unwrap().private_data, b"hello");
    }

    #[test]
    fn problems() {
        let mut r = FrameReader::new(FrameKind::Reply);
        assert_eq!(r.push(&req(0, 1, &[])), Err(Problem::BadKey));
        let mut r = FrameReader::new(FrameKind::Request);
        assert_eq!(r.push(&req(0, 3, &[])), Err(Problem::BadRev(3)));
        assert_eq!(r.flags_rev(), Some((MpaFlags(0), 3)));
        let mut r = FrameReader::new(FrameKind::Request);
        assert_eq!(r.push(&req(0, 0, &[])), Err(Problem::BadRev(0)));
        let mut r = FrameReader::new(FrameKind::Request);
        let mut b = req(0, 1, &[]);
        b[18..20].copy_from_slice(&513u16.to_be_bytes());
        assert_eq!(r.push(&b), Err(Problem::PdTooLong(513)));
        let mut r = FrameReader::new(FrameKind::Request);
        assert!(matches!(
            r.push(&req(0x10, 2, &[1])),
            Err(Problem::Invalid(_))
        ));
        let mut r = FrameReader::new(FrameKind::Request);
        assert_eq!(r.push(b"MPA ID Rex"), Err(Problem::BadKey));
    }
}
