//! The control protocol between perf client and server, carried in Sends with
//! Solicited Event (data Sends go without it, which is how the two are told apart).
//!
//! Order of a run: the client sends Hello; the server grants receive credits (RDMA
//! Write of its cumulative posted-receive count into the client's mailbox) and sends
//! the 16-octet advertisement of its buffer (`RemoteBuf::to_bytes`) as its first
//! Send. Then per size: Begin -> Ack, [Pads], data, End -> Result. Finally Bye.

use super::opts::Op;
use rddp::RemoteBuf;

/// The largest control message; receive buffers are at least this long.
pub(crate) const CTRL_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    /// Client -> server, first message: what the whole run does, and where the
    /// server may write (the client's buffer and its credit mailbox).
    Hello {
        op: Op,
        pingpong: bool,
        verify: bool,
        max_size: u32,
        buf: RemoteBuf,
        mailbox: RemoteBuf,
        /// The connection's id in the keys of --verify's pattern (`--op
        /// mixed`; 0 otherwise).
        conn: u64,
    },
    /// Client -> server: the next size. `iters` 0 means "until End".
    Begin { size: u32, iters: u64 },
    /// Server -> client: ready; the client first sends `pad` Pads to use up
    /// receive buffers posted too small for this size.
    Ack { granted: u64, pad: u32 },
    /// Client -> server: the size is done after `iters` messages.
    End { iters: u64 },
    /// Server -> client: what the server saw of the size, and the payload
    /// octets its process copied in user space meanwhile (receive, transmit).
    Result {
        corrupt: u64,
        received: u64,
        granted: u64,
        rx_copied: u64,
        tx_copied: u64,
    },
    /// Client -> server: uses up one receive buffer; nothing else.
    Pad,
    /// Client -> server: the run is over.
    Bye,
    /// Client -> server, Write bandwidth with --verify: the next Write (in
    /// posting order) went to offset `at` of the server's buffer. Sent after
    /// that Write, so it is placed before this arrives (RFC 5040 §5.5).
    Written { at: u64 },
}

fn op_code(op: Op) -> u8 {
    match op {
        Op::Write => 1,
        Op::Read => 2,
        Op::Send => 3,
        Op::Mixed => 4,
    }
}

impl Msg {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(CTRL_LEN);
        match self {
            Self::Hello {
                op,
                pingpong,
                verify,
                max_size,
                buf,
                mailbox,
                conn,
            } => {
                b.push(1);
                b.push(op_code(*op));
                b.push(u8::from(*pingpong) | u8::from(*verify) << 1);
                b.extend_from_slice(&max_size.to_be_bytes());
                b.extend_from_slice(&buf.to_bytes());
                b.extend_from_slice(&mailbox.to_bytes());
                b.extend_from_slice(&conn.to_be_bytes());
            }
            Self::Begin { size, iters } => {
                b.push(2);
                b.extend_from_slice(&size.to_be_bytes());
                b.extend_from_slice(&iters.to_be_bytes());
            }
            Self::Ack { granted, pad } => {
                b.push(3);
                b.extend_from_slice(&granted.to_be_bytes());
                b.extend_from_slice(&pad.to_be_bytes());
            }
            Self::End { iters } => {
                b.push(4);
                b.extend_from_slice(&iters.to_be_bytes());
            }
            Self::Result {
                corrupt,
                received,
                granted,
                rx_copied,
                tx_copied,
            } => {
                b.push(5);
                for v in [corrupt, received, granted, rx_copied, tx_copied] {
                    b.extend_from_slice(&v.to_be_bytes());
                }
            }
            Self::Pad => b.push(6),
            Self::Bye => b.push(7),
            Self::Written { at } => {
                b.push(8);
                b.extend_from_slice(&at.to_be_bytes());
            }
        }
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Result<Self, String> {
        let bad = || format!("malformed control message ({} octets)", b.len());
        let u32_at = |i: usize| -> Result<u32, String> {
            let s: [u8; 4] = b
                .get(i..i + 4)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?;
            Ok(u32::from_be_bytes(s))
        };
        let u64_at = |i: usize| -> Result<u64, String> {
            let s: [u8; 8] = b
                .get(i..i + 8)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?;
            Ok(u64::from_be_bytes(s))
        };
        let buf_at = |i: usize| b.get(i..).and_then(RemoteBuf::from_bytes).ok_or_else(bad);
        Ok(match b.first().copied().ok_or_else(bad)? {
            1 => {
                let op = match b.get(1) {
                    Some(1) => Op::Write,
                    Some(2) => Op::Read,
                    Some(3) => Op::Send,
                    Some(4) => Op::Mixed,
                    _ => return Err(bad()),
                };
                let flags = *b.get(2).ok_or_else(bad)?;
                Self::Hello {
                    op,
                    pingpong: flags & 1 != 0,
                    verify: flags & 2 != 0,
                    max_size: u32_at(3)?,
                    buf: buf_at(7)?,
                    mailbox: buf_at(23)?,
                    conn: u64_at(39)?,
                }
            }
            2 => Self::Begin {
                size: u32_at(1)?,
                iters: u64_at(5)?,
            },
            3 => Self::Ack {
                granted: u64_at(1)?,
                pad: u32_at(9)?,
            },
            4 => Self::End { iters: u64_at(1)? },
            5 => Self::Result {
                corrupt: u64_at(1)?,
                received: u64_at(9)?,
                granted: u64_at(17)?,
                rx_copied: u64_at(25)?,
                tx_copied: u64_at(33)?,
            },
            6 => Self::Pad,
            7 => Self::Bye,
            8 => Self::Written { at: u64_at(1)? },
            _ => return Err(bad()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips_and_fits() {
        let buf = RemoteBuf {
            stag: 0x1234_5678,
            to: 42,
            len: 4 << 20,
        };
        let all = [
            Msg::Hello {
                op: Op::Send,
                pingpong: true,
                verify: true,
                max_size: 1 << 22,
                buf,
                mailbox: RemoteBuf { len: 8, ..buf },
                conn: 3 << 32 | 7,
            },
            Msg::Begin {
                size: 65536,
                iters: 0,
            },
            Msg::Ack { granted: 9, pad: 3 },
            Msg::End { iters: 1000 },
            Msg::Result {
                corrupt: 1,
                received: 2,
                granted: 3,
                rx_copied: 4,
                tx_copied: 5,
            },
            Msg::Pad,
            Msg::Bye,
            Msg::Written { at: 3 << 40 | 5 },
        ];
        for m in all {
            let b = m.encode();
            assert!(b.len() <= CTRL_LEN);
            assert_eq!(Msg::decode(&b), Ok(m));
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for b in [&[][..], &[0], &[1, 9], &[2, 0, 0], &[99; 64]] {
            assert!(Msg::decode(b).is_err(), "{b:?}");
        }
    }
}
