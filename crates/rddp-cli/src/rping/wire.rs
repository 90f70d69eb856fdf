//! What both rping ends share: the 16-octet buffer advertisement, the ping
//! pattern, MPA options, and waiting for completions the way rping's CQ thread
//! sees them.

use super::args::{P2p, RpingArgs};
use rddp::{AsyncEvent, CompletionQueue, QueuePair, WcOpcode, WcStatus, WorkCompletion};
use rddp_mpa::{MpaOptions, RtrTypes};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// rping's `struct rping_rdma_info`: `be64 buf || be32 rkey || be32 size`. The
/// address is the tagged offset the peer uses (rddp regions start at TO 0).
pub(super) const INFO_LEN: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Info {
    pub addr: u64,
    pub rkey: u32,
    pub size: u32,
}

impl Info {
    pub(super) fn to_bytes(self) -> [u8; INFO_LEN] {
        let mut b = [0; INFO_LEN];
        b[..8].copy_from_slice(&self.addr.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    pub(super) fn parse(b: &[u8]) -> Option<Self> {
        let b: &[u8; INFO_LEN] = b.try_into().ok()?;
        let (addr, rest) = b.split_at(8);
        Some(Self {
            addr: u64::from_be_bytes(addr.try_into().ok()?),
            rkey: u32::from_be_bytes(rest[..4].try_into().ok()?),
            size: u32::from_be_bytes(rest[4..].try_into().ok()?),
        })
    }
}

/// rping's ping data: "rdma-ping-N: ", then ASCII 'A'..='z' cycling from `start`,
/// NUL in the last octet (rping_test_client).
pub(super) fn fill(buf: &mut [u8], ping: u64, start: u8) {
    let head = format!("rdma-ping-{ping}: ");
    let n = head.len().min(buf.len());
    buf[..n].copy_from_slice(&head.as_bytes()[..n]);
    let mut c = start;
    for b in &mut buf[n..] {
        *b = c;
        c = if c >= b'z' { b'A' } else { c + 1 };
    }
    if let Some(last) = buf.last_mut() {
        *last = 0;
    }
}

/// The next ping's first pattern character after `start`.
pub(super) fn next_start(start: u8) -> u8 {
    if start >= b'z' { b'A' } else { start + 1 }
}

/// The octets up to (not including) the first NUL, as rping prints them with %s.
pub(super) fn c_str(b: &[u8]) -> &[u8] {
    b.iter().position(|&x| x == 0).map_or(b, |i| &b[..i])
}

/// MPA options as rdma_cm sets them up on siw (Rev 2 with the enhanced block, CRC
/// and Markers off unless asked), changed by our long options.
pub(super) fn mpa_options(a: &RpingArgs) -> MpaOptions {
    let (p2p, rtr) = match (a.server, a.p2p) {
        // The responder accepts an RTR whenever the initiator offers one, as siw.
        (true, _) => (true, (true, true)),
        (false, P2p::None) => (false, (false, false)),
        (false, P2p::Write) => (true, (true, false)),
        (false, P2p::Read) => (true, (false, true)),
        (false, P2p::Both) => (true, (true, true)),
    };
    // rping's client asks for IRD 1 / ORD 1 (rping_init_conn_param); rping's
    // server accepts what the client asked, up to its limits.
    let (ird, ord) = if a.server { (16, 16) } else { (1, 1) };
    // A Reply is waited for as rdma_cm on siw waits (10 s), or --timeout if
    // shorter.
    let reply_timeout = MpaOptions::default()
        .reply_timeout
        .min(std::time::Duration::from_secs(a.timeout));
    MpaOptions {
        rev: a.mpa_rev,
        ird,
        ord,
        reply_timeout,
        crc: a.crc,
        markers: a.markers,
        p2p: p2p && a.mpa_rev == 2,
        rtr: RtrTypes {
            write: rtr.0,
            read: rtr.1,
        },
        ..MpaOptions::default()
    }
}

/// Why a wait ended without the completion asked for.
#[derive(Debug)]
pub(super) enum Stop {
    /// The peer closed the connection (rping's DISCONNECTED state).
    Disconnected,
    Failed(String),
}

/// One connected end: its queue pair and completions, seen one at a time.
pub(super) struct End {
    pub qp: QueuePair,
    pub cq: CompletionQueue,
    pub debug: bool,
    pub timeout: Duration,
    pending: VecDeque<WorkCompletion>,
}

impl End {
    pub(super) fn new(qp: QueuePair, cq: CompletionQueue, a: &RpingArgs) -> Self {
        Self {
            qp,
            cq,
            debug: a.debug,
            timeout: Duration::from_secs(a.timeout.max(1)),
            pending: VecDeque::new(),
        }
    }

    pub(super) fn debug(&self, line: &str) {
        if self.debug {
            say!("{line}");
        }
    }

    /// Wait for the next successful completion of `want` (Send completions are
    /// taken in passing, as rping's CQ handler does). A flushed request or a close
    /// is `Disconnected`; any other error status, a Terminate, or the timeout fails.
    pub(super) fn wait(&mut self, want: WcOpcode, what: &str) -> Result<WorkCompletion, Stop> {
        let deadline = Instant::now() + self.timeout;
        loop {
            while let Some(wc) = self.pending.pop_front() {
                match (wc.status, wc.opcode) {
                    (WcStatus::Success, op) if op == want => {
                        self.debug(match op {
                            WcOpcode::Recv => "recv completion",
                            WcOpcode::RdmaRead => "rdma read completion",
                            WcOpcode::RdmaWrite => "rdma write completion",
                            WcOpcode::Send => "send completion",
                        });
                        return Ok(wc);
                    }
                    (WcStatus::Success, WcOpcode::Send) => self.debug("send completion"),
                    (WcStatus::Success, op) => {
                        return Err(Stop::Failed(format!(
                            "unexpected {op:?} completion while waiting for {what}"
                        )));
                    }
                    (WcStatus::Flushed, _) => {
                        self.events()?;
                        return Err(Stop::Disconnected);
                    }
                    (status, op) => {
                        self.events()?;
                        return Err(Stop::Failed(format!(
                            "cq completion failed status {status:?} ({op:?}, waiting for {what})"
                        )));
                    }
                }
            }
            self.events()?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Stop::Failed(format!(
                    "timed out after {} s waiting for {what}",
                    self.timeout.as_secs()
                )));
            }
            self.pending
                .extend(self.cq.wait(16, left.min(Duration::from_millis(100))));
        }
    }

    /// Terminates and closes so far: a Terminate is a failure (with what it
    /// meant), a close is `Disconnected` once no completion is left to take.
    fn events(&mut self) -> Result<(), Stop> {
        for e in self.qp.async_events() {
            match e {
                AsyncEvent::TerminateSent { code, detail } => {
                    return Err(Stop::Failed(format!("sent Terminate {code}: {detail}")));
                }
                AsyncEvent::TerminateReceived { received, .. } => {
                    return Err(Stop::Failed(format!(
                        "the peer sent Terminate {}",
                        received.summary()
                    )));
                }
                AsyncEvent::Closed { graceful } => {
                    self.pending.extend(self.cq.poll(usize::MAX));
                    if self.pending.iter().any(|w| w.status == WcStatus::Success) {
                        continue;
                    }
                    if graceful {
                        return Err(Stop::Disconnected);
                    }
                    return Err(Stop::Failed("the connection was lost".into()));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_layout_is_rpings() {
        let i = Info {
            addr: 0x0000_55ec_e5cf_2d50,
            rkey: 0x52bd_8100,
            size: 64,
        };
        let b = i.to_bytes();
        assert_eq!(b[..8], [0, 0, 0x55, 0xec, 0xe5, 0xcf, 0x2d, 0x50]);
        assert_eq!(b[8..12], [0x52, 0xbd, 0x81, 0x00]);
        assert_eq!(b[12..], [0, 0, 0, 64]);
        assert_eq!(Info::parse(&b), Some(i));
        assert_eq!(Info::parse(&b[..15]), None);
    }

    #[test]
    fn pattern_is_rpings() {
        // rping -S 64, ping 0, as siw's rping prints it.
        let mut b = [0u8; 64];
        fill(&mut b, 0, b'A');
        assert_eq!(
            c_str(&b),
            b"rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"
        );
        fill(&mut b, 1, next_start(b'A'));
        assert!(c_str(&b).starts_with(b"rdma-ping-1: BCD"));
        assert_eq!(b[63], 0);
        assert_eq!(next_start(b'z'), b'A');
        // The smallest size still holds the header and its NUL.
        let mut small = [0u8; 23];
        fill(&mut small, 99, b'A');
        assert_eq!(c_str(&small), b"rdma-ping-99: ABCDEFGH");
    }
}
