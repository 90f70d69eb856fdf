//! perftest's control connection over rdma_cm: one 56-octet receive kept
//! posted, every item one signaled Send of exactly its size, the client sending
//! first and the server answering (ctx_xchg_data_rdma, rdma_read_data).

use super::dest::DEST_LEN;
use rddp::transport::Connection;
use rddp::{AsyncEvent, CompletionQueue, ProtectionDomain, QueuePair, QueuePairBuilder};
use rddp::{SendFlags, WcOpcode, WcStatus, WorkCompletion};
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// Completions of a queue pair, with Terminates and closes turned into errors.
pub(super) struct Waiter {
    pub qp: QueuePair,
    pub cq: CompletionQueue,
    pub what: &'static str,
}

impl Waiter {
    /// The next completion (any opcode) within `t`; a failed one, a Terminate or
    /// a close is an error.
    pub(super) fn next(&self, t: Duration) -> Result<WorkCompletion, String> {
        let deadline = Instant::now() + t;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Some(wc) = self.cq.wait(1, left.min(Duration::from_millis(100))).pop() {
                if wc.status != WcStatus::Success {
                    let why = self.events().err().unwrap_or_default();
                    return Err(format!(
                        "{}: {:?} completed with {:?} {why}",
                        self.what, wc.opcode, wc.status
                    ));
                }
                return Ok(wc);
            }
            self.events()?;
            if left.is_zero() {
                return Err(format!(
                    "{}: nothing from the peer for {} s",
                    self.what,
                    t.as_secs()
                ));
            }
        }
    }

    /// A Terminate either way, or a close, as an error (the first one: each
    /// ends the stream).
    pub(super) fn events(&self) -> Result<(), String> {
        let Some(e) = self.qp.async_events().into_iter().next() else {
            return Ok(());
        };
        Err(match e {
            AsyncEvent::TerminateSent { code, detail } => {
                format!("{}: sent Terminate {code}: {detail}", self.what)
            }
            AsyncEvent::TerminateReceived { received, .. } => {
                format!(
                    "{}: the peer sent Terminate {}",
                    self.what,
                    received.summary()
                )
            }
            AsyncEvent::Closed { .. } => format!("{}: the peer closed the connection", self.what),
        })
    }
}

pub(super) struct Ctrl {
    w: Waiter,
    client: bool,
    timeout: Duration,
    /// The peer's answer when its receive completed before our Send did (a Send
    /// completes once the socket took its last octet, which may come later).
    early: RefCell<Option<WorkCompletion>>,
}

impl Ctrl {
    /// The control queue pair on `conn`, its receive posted before attaching.
    pub(super) fn attach(
        pd: &ProtectionDomain,
        conn: Connection,
        client: bool,
    ) -> Result<Self, String> {
        let cq = CompletionQueue::new(8);
        let mut qp = QueuePairBuilder::new(pd, &cq, &cq)
            .max_send_wr(2)
            .max_recv_wr(1)
            .build()
            .map_err(|e| e.to_string())?;
        qp.post_recv(0, DEST_LEN).map_err(|e| e.to_string())?;
        let qp = qp.attach(conn).map_err(|e| e.to_string())?;
        Ok(Self {
            w: Waiter {
                qp,
                cq,
                what: "perftest control connection",
            },
            client,
            timeout: Duration::from_secs(60),
            early: RefCell::new(None),
        })
    }

    /// How long to wait for the peer's next item (the test phase needs longer).
    pub(super) fn set_timeout(&mut self, t: Duration) {
        self.timeout = t;
    }

    fn send(&self, data: &[u8]) -> Result<(), String> {
        self.w
            .qp
            .post_send_inline(5, data, SendFlags::default())
            .map_err(|e| {
                // Why the stream ended, if it did (a close, a Terminate).
                let why = self.w.events().err().unwrap_or_default();
                format!("control: posting our Send: {e} {why}")
            })?;
        loop {
            match self.w.next(self.timeout)? {
                wc if wc.opcode == WcOpcode::Send => return Ok(()),
                wc if wc.opcode == WcOpcode::Recv && self.early.borrow().is_none() => {
                    *self.early.borrow_mut() = Some(wc);
                }
                wc => {
                    return Err(format!(
                        "control: a {:?} completion before our Send's",
                        wc.opcode
                    ));
                }
            }
        }
    }

    fn recv(&self) -> Result<Vec<u8>, String> {
        let early = self.early.borrow_mut().take();
        let wc = match early {
            Some(wc) => wc,
            None => self.w.next(self.timeout)?,
        };
        if wc.opcode != WcOpcode::Recv {
            return Err(format!(
                "control: a {:?} completion instead of a receive",
                wc.opcode
            ));
        }
        let data = wc.buffer.clone().unwrap_or_default();
        let data = data[..(wc.byte_len as usize).min(data.len())].to_vec();
        self.w
            .qp
            .post_recv(0, DEST_LEN)
            .map_err(|e| e.to_string())?;
        Ok(data)
    }

    /// One exchange: ours for theirs, in perftest's order.
    pub(super) fn xchg(&self, mine: &[u8]) -> Result<Vec<u8>, String> {
        if self.client {
            self.send(mine)?;
            self.recv()
        } else {
            let theirs = self.recv()?;
            self.send(mine)?;
            Ok(theirs)
        }
    }

    /// An exchange whose answer must have `len` octets.
    pub(super) fn xchg_len(&self, mine: &[u8], len: usize, what: &str) -> Result<Vec<u8>, String> {
        let theirs = self.xchg(mine)?;
        if theirs.len() != len {
            return Err(format!(
                "perftest exchange ({what}): the peer sent {} octets, {len} expected",
                theirs.len()
            ));
        }
        Ok(theirs)
    }

    pub(super) fn disconnect(&self) {
        self.w.qp.disconnect();
    }
}

/// Steps 1 to 4: version, page size, cache line, MTU. Returns the cycle buffer
/// (the larger page size) and the peer's version.
pub(super) fn preamble(c: &Ctrl) -> Result<(u32, String), String> {
    let mut v = [0u8; 16];
    v[..super::VERSION.len()].copy_from_slice(super::VERSION.as_bytes());
    let theirs = c.xchg_len(&v, 16, "version")?;
    let version: String = theirs
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    let num: f64 = version
        .trim()
        .parse()
        .map_err(|_| format!("the peer's perftest version {version:?} is not a number"))?;
    if num < super::MIN_VERSION {
        return Err(format!(
            "the peer's perftest {version} is older than {} (perftest refuses those too)",
            super::MIN_VERSION
        ));
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let page = be(&c.xchg_len(&super::PAGE.to_be_bytes(), 4, "page size")?);
    let _line = be(&c.xchg_len(&super::CACHE_LINE.to_be_bytes(), 4, "cache line")?);
    // IBV_MTU_1024 (3), what siw reports; the smaller is used, and nothing on
    // iWARP depends on it.
    c.xchg_len(b"3\0", 2, "MTU")?;
    Ok((page.max(super::PAGE), version))
}
