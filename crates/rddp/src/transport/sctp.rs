//! DDP over SCTP (RFC 5043) as a queue pair's LLP.
//!
//! One association per queue pair, one DDP Stream Session on stream 0. The
//! session machinery is rddp-sctp's (Initiate/Accept, DDP-SSN, unordered chunks,
//! the adaptation indication checked at setup); the session's segments are relayed
//! to and from the queue pair's own RDMAP engine. A driver thread owns the
//! association: it hands queued segments to SCTP and feeds received ones, placed
//! in any order and delivered in DDP-SSN order by the queue pair's DDP sink.
//! usrsctp is loaded at run time; without it every call here says which package
//! to install.

use super::{Connection, Inbound, LlpInfo, SegmentReader, SegmentWriter};
use rddp_proto::ddp::{OutSegment, SegmentEndpoint, SenderSeq, SourceError, StreamError};
use rddp_proto::mem::MemoryTable;
use rddp_sctp::Event;
use rddp_sctp::driver::{DriverError, SctpConnection};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddrV4;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use rddp_sctp::driver::Options as SctpOptions;

/// Whether libusrsctp can be loaded here; the error says which package to install.
pub fn available() -> Result<(), String> {
    usrsctp_ffi::available().map_err(|e| e.to_string())
}

/// The session's stream number.
const SID: u16 = 0;

#[derive(Debug, Default)]
struct RelayState {
    inbound: VecDeque<Inbound>,
    outbound: VecDeque<OutSegment>,
    /// The queue pair asked to close: gracefully (session Terminate) or not.
    close: Option<bool>,
    /// The association is gone: the reader reports a lost connection.
    lost: bool,
}

#[derive(Debug, Default)]
struct Relay {
    st: Mutex<RelayState>,
    cv: Condvar,
}

impl Relay {
    fn lock(&self) -> MutexGuard<'_, RelayState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn push(&self, i: Inbound) {
        self.lock().inbound.push_back(i);
        self.cv.notify_all();
    }
    fn lose(&self) {
        self.lock().lost = true;
        self.cv.notify_all();
    }
}

/// The session's upper layer inside rddp-sctp: a relay to the queue pair.
#[derive(Debug)]
struct RelayEndpoint(Arc<Relay>);

impl SegmentEndpoint for RelayEndpoint {
    fn on_segment(
        &mut self,
        _mem: &mut MemoryTable,
        seq: SenderSeq,
        seg: &[u8],
    ) -> Result<(), StreamError> {
        self.0.push(Inbound::Segment {
            seq,
            bytes: seg.to_vec(),
        });
        Ok(())
    }
    fn poll_segment(&mut self) -> Option<OutSegment> {
        self.0.lock().outbound.pop_front()
    }
    fn drained(&self) -> bool {
        self.0.lock().outbound.is_empty()
    }
    fn set_mulpdu(&mut self, mulpdu: usize) -> Result<(), SourceError> {
        self.0.push(Inbound::Mulpdu(mulpdu));
        Ok(())
    }
    fn close(&mut self) {}
    fn on_llp_closed(&mut self, graceful: bool) {
        if graceful {
            self.0.push(Inbound::Closed);
        } else {
            self.0.lose();
        }
    }
}

fn err(e: DriverError) -> io::Error {
    io::Error::other(e.to_string())
}

/// Active side: an association to `addr` (SCTP port = UDP encapsulation port =
/// `addr`'s port), then a session on stream 0 with `private_data` in its Initiate.
pub fn connect(
    addr: SocketAddrV4,
    opts: SctpOptions,
    private_data: &[u8],
) -> io::Result<Connection> {
    let mut conn = rddp_sctp::driver::connect(addr, opts.clone()).map_err(err)?;
    let relay = Arc::new(Relay::default());
    conn.adaptation()
        .initiate_relay(SID, Box::new(RelayEndpoint(relay.clone())), private_data)
        .map_err(io::Error::other)?;
    let mut scratch = MemoryTable::new();
    let mut answer = None;
    conn.run_until(&mut scratch, opts.setup_timeout, |c| {
        while let Some(e) = c.poll_event() {
            match e {
                Event::Accepted { private_data, .. } => answer = Some(Ok(private_data)),
                Event::Closed { reason, .. } => {
                    answer = Some(Err(format!("session refused: {reason:?}")))
                }
                _ => {}
            }
        }
        answer.is_some()
    })
    .map_err(err)?;
    let peer_pd = answer
        .unwrap_or_else(|| Err("no answer".into()))
        .map_err(io::Error::other)?;
    Ok(start(conn, relay, peer_pd, Some(addr)))
}

/// Passive side: SCTP listening at `addr`.
pub struct Listener {
    inner: rddp_sctp::driver::Listener,
    timeout: Duration,
}

impl Listener {
    pub fn bind(addr: SocketAddrV4, opts: SctpOptions) -> io::Result<Self> {
        let timeout = opts.setup_timeout;
        Ok(Self {
            inner: rddp_sctp::driver::Listener::bind(addr, opts).map_err(err)?,
            timeout,
        })
    }

    /// The next association and its first session, accepted with `private_data`
    /// (waits up to `wait` for an association).
    pub fn accept(&self, wait: Duration, private_data: &[u8]) -> io::Result<Connection> {
        let pd = private_data.to_vec();
        self.accept_with(wait, move |_| Ok(pd))
    }

    /// As [`Self::accept`], the ULP deciding from the Initiate's private data:
    /// `Ok(private data)` accepts, `Err(private data)` rejects (Session Reject,
    /// only ever at the ULP's direction). Times out as `ErrorKind::TimedOut`.
    pub fn accept_with(
        &self,
        wait: Duration,
        decide: impl FnOnce(&[u8]) -> Result<Vec<u8>, Vec<u8>>,
    ) -> io::Result<Connection> {
        let mut conn = self.inner.accept(wait).map_err(|e| match e {
            DriverError::Sctp(t @ usrsctp_ffi::Error::Timeout(_)) => {
                io::Error::new(io::ErrorKind::TimedOut, t.to_string())
            }
            e => err(e),
        })?;
        let mut scratch = MemoryTable::new();
        let mut request = None;
        conn.run_until(&mut scratch, self.timeout, |c| {
            while let Some(e) = c.poll_event() {
                if let Event::InitiateRequest { sid, private_data } = e {
                    request = Some((sid, private_data));
                }
            }
            request.is_some()
        })
        .map_err(err)?;
        let (sid, peer_pd) = request.ok_or_else(|| io::Error::other("no session Initiate"))?;
        let private_data = match decide(&peer_pd) {
            Ok(pd) => pd,
            Err(pd) => {
                let _ = conn.adaptation().reject(sid, &pd);
                let _ = conn.flush();
                let _ = conn.poll(&mut scratch, Duration::from_millis(50));
                let _ = conn.shutdown();
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "session rejected by the ULP",
                ));
            }
        };
        let relay = Arc::new(Relay::default());
        conn.adaptation()
            .accept_relay(sid, Box::new(RelayEndpoint(relay.clone())), &private_data)
            .map_err(io::Error::other)?;
        Ok(start(conn, relay, peer_pd, None))
    }
}

fn start(
    conn: SctpConnection,
    relay: Arc<Relay>,
    peer_pd: Vec<u8>,
    peer: Option<SocketAddrV4>,
) -> Connection {
    let mut conn = conn;
    let mulpdu = conn.adaptation().max_segment();
    let driver = relay.clone();
    std::thread::spawn(move || drive(conn, &driver));
    let abort = relay.clone();
    Connection {
        reader: Box::new(Reader(relay.clone())),
        writer: Box::new(Writer(relay)),
        mulpdu,
        ird: 16,
        ord: 16,
        peer_private_data: peer_pd,
        info: LlpInfo {
            transport: "sctp",
            peer: peer.map(Into::into),
            ..LlpInfo::default()
        },
        send_read_rtr: false,
        abort: Box::new(move || {
            abort.lock().close = Some(false);
            abort.lose();
        }),
    }
}

/// The association's thread: segments out, chunks in, close when asked.
fn drive(mut conn: SctpConnection, relay: &Relay) {
    let mut scratch = MemoryTable::new();
    let mut terminated = false;
    loop {
        let close = relay.lock().close;
        match close {
            Some(false) => {
                // Abortive close: what the queue pair already handed over (its
                // Terminate, say) still leaves, briefly, then the association ends.
                linger(&mut conn, relay, &mut scratch);
                let _ = conn.shutdown();
                relay.lose();
                return;
            }
            Some(true) if !terminated => {
                terminated = true;
                let _ = conn.adaptation().terminate(SID);
            }
            _ => {}
        }
        if conn.flush().is_err() {
            relay.lose();
            return;
        }
        let busy = !relay.lock().outbound.is_empty();
        let wait = if busy {
            Duration::ZERO
        } else {
            Duration::from_millis(2)
        };
        if conn.poll(&mut scratch, wait).is_err() {
            relay.lose();
            return;
        }
        while let Some(e) = conn.poll_event() {
            if let Event::Closed { .. } = e {
                relay.push(Inbound::Closed);
                linger(&mut conn, relay, &mut scratch);
                let _ = conn.shutdown();
                return;
            }
        }
    }
}

/// Hand what is queued to SCTP, for at most 2 s (SHUTDOWN then delivers it).
fn linger(conn: &mut SctpConnection, relay: &Relay, scratch: &mut MemoryTable) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match conn.flush() {
            Ok(true) if relay.lock().outbound.is_empty() => return,
            Ok(_) => {}
            Err(_) => return,
        }
        if conn.poll(scratch, Duration::from_millis(1)).is_err() {
            return;
        }
    }
}

struct Reader(Arc<Relay>);

impl SegmentReader for Reader {
    fn read(&mut self) -> io::Result<Inbound> {
        let mut st = self.0.lock();
        loop {
            if let Some(i) = st.inbound.pop_front() {
                return Ok(i);
            }
            if st.lost {
                return Err(io::ErrorKind::ConnectionReset.into());
            }
            st = self.0.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

struct Writer(Arc<Relay>);

impl SegmentWriter for Writer {
    fn write_segment(&mut self, seg: &OutSegment) -> io::Result<()> {
        let mut st = self.0.lock();
        if st.lost {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        st.outbound.push_back(seg.clone());
        Ok(())
    }

    fn close(&mut self, abortive: bool) {
        let mut st = self.0.lock();
        if st.close != Some(false) {
            st.close = Some(!abortive);
        }
    }
}
