//! The driver: the context every case runs in (where the peer is, the bounds,
//! the buffer), the standard connection, the read-back on a fresh connection,
//! and the loop over the selected cases.

use super::ConformTransport;
use super::catalogue::{self, Case};
use super::judge::Verdict;
use super::peer::{self, Buffer, Peer, SetupReply};
use super::sctp::{Assoc, Listening};
use rddp_wire::MpaFrame;
use rddp_wire::sctp::SessionFunction;
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// How long an advertisement is waited for on a new connection.
const ADVERT_WAIT: Duration = Duration::from_secs(1);

/// The stream of the standard SCTP session (any would do: RFC 5043 maps one
/// DDP Stream to each pair of like-numbered SCTP streams).
pub(super) const SCTP_SID: u16 = 1;

/// What every case knows.
pub(super) struct Ctx {
    pub addr: SocketAddr,
    pub transport: ConformTransport,
    /// Time a case may take.
    pub bound: Duration,
    /// Time a peer may take to give up on an initiator that never speaks.
    pub setup_wait: Duration,
    /// Octets a case may send.
    pub budget: usize,
    /// `--buffer`: the peer's buffer, instead of its advertisement.
    pub buffer: Option<Buffer>,
    /// `--role responder`: where the peer under test connects, and how long
    /// each of its connections is waited for.
    pub listener: Option<TcpListener>,
    /// `--role responder --transport sctp`: where the peer associates.
    pub sctp_listener: Option<Listening>,
    pub accept_wait: Duration,
}

/// A set-up connection and the buffer it may use.
pub(super) struct Conn {
    pub peer: Peer,
    pub buf: Option<Buffer>,
}

/// One case's result and how long it took.
pub(super) struct Outcome {
    pub case: &'static Case,
    pub verdict: Verdict,
    pub millis: u128,
}

impl Ctx {
    pub(super) fn deadline(&self) -> Instant {
        Instant::now() + self.bound
    }

    /// `--role responder`: the peer's next connection, within `accept_wait`.
    pub(super) fn accept(&self) -> Result<TcpStream, String> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let l = self.listener.as_ref().ok_or("not listening")?;
        let deadline = Instant::now() + self.accept_wait;
        loop {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).map_err(|e| e.to_string())?;
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("accept: {e}")),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "the peer did not connect within {:?} (--accept-wait)",
                    self.accept_wait
                ));
            }
            let t = Timespec::try_from(left).map_err(|e| e.to_string())?;
            let mut fds = [PollFd::new(l, PollFlags::IN)];
            // EINTR or readiness: either way, try accept again.
            let _ = poll(&mut fds, Some(&t));
        }
    }

    /// `--role responder --transport sctp`: the peer's next association
    /// (waited for within `accept_wait`) and the case's deadline, which runs
    /// from its arrival.
    pub(super) fn accept_sctp(&self) -> Result<(Assoc, Instant), String> {
        let l = self.sctp_listener.as_ref().ok_or("not listening")?;
        l.accept(self.accept_wait, self.bound, self.budget)
    }

    /// TCP connect, send the Request `req` (as octets: it may be a broken
    /// one), read the Reply.
    pub(super) fn open(
        &self,
        req: &[u8],
        deadline: Instant,
    ) -> Result<(TcpStream, SetupReply), String> {
        use std::io::Write;
        let mut sock = peer::dial(self.addr, deadline)?;
        if req.len() > self.budget {
            return Err("the Request is larger than the case's bound".into());
        }
        sock.write_all(req).map_err(|e| format!("write: {e}"))?;
        let r = peer::read_reply(&mut sock, deadline);
        Ok((sock, r))
    }

    /// FPDU mode after an accepting Reply; `Err` with what came otherwise.
    pub(super) fn accepted(
        &self,
        sock: TcpStream,
        req: &MpaFrame,
        reply: SetupReply,
        deadline: Instant,
    ) -> Result<Peer, String> {
        match reply {
            SetupReply::Reply(r) if !r.flags.reject() => {
                Ok(Peer::new(sock, req, r, deadline, self.budget))
            }
            SetupReply::Reply(r) => Err(format!(
                "a Reply with R=1 (Rev {}, {} octets of private data)",
                r.rev,
                r.private_data.len()
            )),
            SetupReply::Closed => Err("the peer closed without a Reply".into()),
            SetupReply::Silent => Err("no Reply in time".into()),
            SetupReply::Bad(e) => Err(format!("a bad Reply: {e}")),
        }
    }

    /// The standard Request: Rev 2 with the enhanced block (IRD 16, ORD 16, the
    /// Write and Read RTRs offered), CRC asked, no Markers.
    pub(super) fn standard_request() -> MpaFrame {
        peer::request(
            2,
            false,
            true,
            Some(peer::block(16, 16, false, true, true)),
            Vec::new(),
        )
    }

    /// The peer's SCTP address (IPv4: as usrsctp's UDP encapsulation reaches it).
    pub(super) fn sctp_addr(&self) -> Result<SocketAddrV4, String> {
        match self.addr {
            SocketAddr::V4(a) => Ok(a),
            SocketAddr::V6(a) => Err(format!("{a}: SCTP here needs an IPv4 address")),
        }
    }

    /// A new association to the peer, up before `deadline`.
    pub(super) fn associate(&self, deadline: Instant) -> Result<Assoc, String> {
        Assoc::connect(self.sctp_addr()?, deadline, self.budget)
    }

    /// An accepted DDP session on stream `sid` of `assoc` (Initiate, then the
    /// peer's Accept: RFC 5043), its private data `pd`; `Err` with what came
    /// otherwise.
    pub(super) fn initiate(
        &self,
        mut assoc: Assoc,
        sid: u16,
        pd: &[u8],
        deadline: Instant,
    ) -> Result<Peer, String> {
        assoc.control(sid, SessionFunction::Initiate.code(), pd)?;
        match assoc.next_on(sid, deadline) {
            Some(c) if c.control() == Some(SessionFunction::Accept) => {
                Ok(Peer::sctp(assoc, sid, deadline))
            }
            Some(c) => {
                let what = c
                    .control()
                    .map_or(format!("a chunk with PPID {}", c.ppid), |f| {
                        format!("Session {f:?}")
                    });
                assoc.close();
                Err(format!("{what} instead of an Accept"))
            }
            None if assoc.lost => Err("the association ended without an Accept".into()),
            None => {
                assoc.close();
                Err("no Accept in time".into())
            }
        }
    }

    /// A connection set up as a well-behaved initiator would (over MPA its
    /// first FPDU, the RTR, sent; over SCTP a session on [`SCTP_SID`] of a new
    /// association), and the buffer it may use (`--buffer`, else the
    /// advertisement, waited for briefly).
    pub(super) fn connect(&self, deadline: Instant) -> Result<Conn, String> {
        if self.transport == ConformTransport::Sctp {
            let assoc = self.associate(deadline)?;
            let mut p = self
                .initiate(assoc, SCTP_SID, &[], deadline)
                .map_err(|e| format!("the standard session failed: {e}"))?;
            let buf = match self.buffer {
                Some(b) => Some(b),
                None => p.advertisement((Instant::now() + ADVERT_WAIT).min(deadline))?,
            };
            p.seen.timed_out = false;
            return Ok(Conn { peer: p, buf });
        }
        let req = Self::standard_request();
        let bytes = req.to_vec().map_err(|e| e.to_string())?;
        let (sock, reply) = self.open(&bytes, deadline)?;
        let mut p = self
            .accepted(sock, &req, reply, deadline)
            .map_err(|e| format!("the standard setup failed: {e}"))?;
        p.start()?;
        let buf = match self.buffer {
            Some(b) => Some(b),
            None => p.advertisement((Instant::now() + ADVERT_WAIT).min(deadline))?,
        };
        p.seen.timed_out = false;
        Ok(Conn { peer: p, buf })
    }

    /// `n` octets at `off` in `buf`, read with an RDMA Read on a fresh
    /// connection; `Ok(None)` (and why) when that connection's buffer is
    /// another one (a peer that advertises a buffer per connection).
    pub(super) fn read_back(
        &self,
        buf: Buffer,
        off: u64,
        n: u32,
    ) -> Result<Result<Vec<u8>, String>, String> {
        let deadline = self.deadline();
        let mut c = self.connect(deadline)?;
        if c.buf != Some(buf) {
            c.peer.close();
            return Ok(Err(
                "not read back: a fresh connection is offered another buffer".into(),
            ));
        }
        c.peer.read_request(buf.stag, buf.to + off, n, 0)?;
        let len = n as usize;
        c.peer.read_until(deadline, |s| {
            s.terminate.is_some() || peer::read_data(&s.segments, len).is_some()
        })?;
        let data = c.peer.read_data(n as usize);
        let term = c.peer.seen.terminate.as_ref().map(|(_, t)| t.summary());
        c.peer.close();
        match (data, term) {
            (Some(d), _) => Ok(Ok(d)),
            (None, Some(t)) => Err(format!("the read-back was refused: Terminate {t}")),
            (None, None) => Err("the read-back got no Read Response in time".into()),
        }
    }
}

/// Run `cases` one after the other against `ctx`.
pub(super) fn run_all(
    ctx: &Ctx,
    cases: &[&'static Case],
    mut each: impl FnMut(&Outcome),
) -> Vec<Outcome> {
    let mut out = Vec::new();
    for case in cases {
        let t0 = Instant::now();
        let verdict = match case.applies(ctx.transport) {
            Err(why) => Verdict::na(why),
            Ok(()) => match (case.run)(ctx) {
                Ok(v) => v,
                Err(e) => Verdict::fail(case.expect, format!("the case could not run: {e}")),
            },
        };
        let o = Outcome {
            case,
            verdict,
            millis: t0.elapsed().as_millis(),
        };
        each(&o);
        out.push(o);
    }
    out
}

/// The cases of a role's catalogue that `--only` names (ids or prefixes such
/// as `ddp.`; all without it) and `--skip` does not, in catalogue order.
pub(super) fn select(
    responder: bool,
    only: Option<&str>,
    skip: Option<&str>,
) -> Result<Vec<&'static Case>, String> {
    let all: &[Case] = if responder {
        super::responder::CASES
    } else {
        catalogue::CASES
    };
    let list = |what: &str, v: Option<&str>| -> Result<Option<Vec<String>>, String> {
        let Some(v) = v else { return Ok(None) };
        let names: Vec<String> = v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        for w in &names {
            if !all.iter().any(|c| c.id.starts_with(w.as_str())) {
                return Err(format!(
                    "{what}: no case {w:?} (cases: {})",
                    all.iter().map(|c| c.id).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Ok(Some(names))
    };
    let (only, skip) = (list("--only", only)?, list("--skip", skip)?);
    let named = |c: &Case, l: &[String]| l.iter().any(|w| c.id.starts_with(w.as_str()));
    Ok(all
        .iter()
        .filter(|c| only.as_deref().is_none_or(|l| named(c, l)))
        .filter(|c| !skip.as_deref().is_some_and(|l| named(c, l)))
        .collect())
}
