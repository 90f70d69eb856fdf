//! `rddp conform` (docs/conform.md): test an iWARP peer against the RFCs as a scripted
//! peer and report what it breaks. Each case of the catalogue (`catalogue`)
//! cites its RFC section, is bounded in time and in the octets it sends, and
//! closes its connection cleanly; `run` drives them, `judge` decides (no I/O),
//! `report` prints the table or the JSON.
//!
//! Over MPA/TCP as the initiator (the peer under test is the MPA responder)
//! or as the responder (`--role responder`: the peer connects to us, once per
//! case); over SCTP (`--transport sctp`, RFC 5043, through usrsctp) as the
//! active side of each DDP session or, with `--role responder`, the passive
//! one (the peer opens an association and a session per case). Cases that do
//! not apply to the transport are reported not applicable.

mod catalogue;
mod judge;
mod peer;
mod report;
mod responder;
mod run;
mod sctp;
mod sctp_responder;
mod sessions;

use clap::{Args, ValueEnum};
use peer::Buffer;
use std::net::ToSocketAddrs;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ConformTransport {
    Mpa,
    Sctp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Role {
    /// We connect to the peer (it is the MPA responder, or over SCTP the
    /// passive side of each session).
    Initiator,
    /// The peer connects to us (and over SCTP opens the sessions).
    Responder,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct ConformArgs {
    /// The peer under test (HOST:PORT); with `--role responder`, where we
    /// listen for it (port 0: any free one, printed on stderr).
    pub addr: String,
    #[arg(long, value_enum, default_value = "mpa")]
    pub transport: ConformTransport,
    /// Our role in connection setup.
    #[arg(long, value_enum, default_value = "initiator")]
    pub role: Role,
    /// Run only these cases: ids or prefixes, comma-separated (e.g. `mpa.,ddp.to-wrap`).
    #[arg(long, value_name = "CASES")]
    pub only: Option<String>,
    /// Leave these cases out (ids or prefixes, comma-separated): e.g. one
    /// known to crash the peer.
    #[arg(long, value_name = "CASES")]
    pub skip: Option<String>,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// A buffer of the peer's we may write and read (instead of `rddp target`'s
    /// advertisement): STag, TO and length, e.g. 0x1234:0:4096.
    #[arg(long, value_name = "STAG:TO:LEN", value_parser = parse_buffer)]
    pub buffer: Option<Buffer>,
    /// Seconds a case may take.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub case_timeout: f64,
    /// Seconds the peer may keep an initiator that never sends its Request
    /// (mpa.no-request).
    #[arg(long, value_name = "SECS", default_value_t = 15.0)]
    pub setup_wait: f64,
    /// Octets a case may send at most.
    #[arg(long, value_name = "OCTETS", default_value_t = 256 * 1024)]
    pub max_send: usize,
    /// `--role responder`: seconds to wait for each of the peer's connections.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub accept_wait: f64,
    /// List the cases and exit.
    #[arg(long)]
    pub list: bool,
}

fn parse_num<N: TryFrom<u64>>(s: &str) -> Result<N, String> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse::<u64>(),
    }
    .map_err(|e| format!("{s:?}: {e}"))?;
    N::try_from(v).map_err(|_| format!("{s:?} is out of range"))
}

fn parse_buffer(s: &str) -> Result<Buffer, String> {
    let p: Vec<&str> = s.split(':').collect();
    let [stag, to, len] = p[..] else {
        return Err(format!("{s:?} is not STAG:TO:LEN"));
    };
    Ok(Buffer {
        stag: parse_num(stag)?,
        to: parse_num(to)?,
        len: parse_num(len)?,
    })
}

fn secs(v: f64, what: &str) -> Result<Duration, String> {
    if v > 0.0 && v <= 3600.0 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(format!("{what}: {v} is not 0 < SECS <= 3600"))
    }
}

/// `Ok(true)` when every selected case passed or did not apply.
pub(crate) fn run(a: &ConformArgs) -> Result<bool, String> {
    let responder = a.role == Role::Responder;
    let cases = run::select(responder, a.only.as_deref(), a.skip.as_deref())?;
    if a.list {
        for c in &cases {
            say!("{:<30} {:<28} {}", c.id, c.rfc, c.expect);
        }
        return Ok(true);
    }
    let sctp = a.transport == ConformTransport::Sctp;
    if sctp {
        usrsctp_ffi::available().map_err(|e| format!("--transport sctp needs libusrsctp: {e}"))?;
    }
    let addr = a
        .addr
        .to_socket_addrs()
        .map_err(|e| format!("bad address {}: {e}", a.addr))?
        .next()
        .ok_or_else(|| format!("bad address {}", a.addr))?;
    let (listener, sctp_listener) = match (responder, sctp) {
        (false, _) => (None, None),
        (true, false) => {
            let l = std::net::TcpListener::bind(addr)
                .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            (Some(l), None)
        }
        (true, true) => {
            let std::net::SocketAddr::V4(at) = addr else {
                return Err(format!("{addr}: SCTP here needs an IPv4 address"));
            };
            (None, Some(sctp::Listening::bind(at)?))
        }
    };
    let addr = match (&listener, &sctp_listener) {
        (Some(l), _) => l.local_addr().map_err(|e| e.to_string())?,
        (_, Some(l)) => std::net::SocketAddr::V4(l.addr),
        _ => addr,
    };
    let ctx = run::Ctx {
        addr,
        transport: a.transport,
        bound: secs(a.case_timeout, "--case-timeout")?,
        setup_wait: secs(a.setup_wait, "--setup-wait")?,
        budget: a.max_send,
        buffer: a.buffer,
        listener,
        sctp_listener,
        accept_wait: secs(a.accept_wait, "--accept-wait")?,
    };
    let role = if responder { "responder" } else { "initiator" };
    if responder {
        let how = if sctp {
            "open an SCTP association (UDP encapsulation to the same port) and a DDP \
             session on it"
        } else {
            "connect the peer under test as MPA initiator"
        };
        eprintln!(
            "rddp conform: listening on {addr}: {how}, once per case ({} cases)",
            cases.len()
        );
    }
    eprintln!(
        "rddp conform: WARNING: {} cases will send malformed and hostile messages to the \
         peer at {addr} and write into any buffer it offers (each case: at most {} octets, \
         {:?}, then a close). Point it only at a peer you may disturb.",
        cases.len(),
        ctx.budget,
        ctx.bound
    );
    let (llp, tname) = if sctp {
        ("DDP over SCTP (usrsctp, UDP encapsulation)", "sctp")
    } else {
        ("MPA/TCP", "mpa")
    };
    if !a.json {
        say!("rddp conform: {addr} over {llp}, as {role}");
        say!("{}", report::header());
    }
    let all = run::run_all(&ctx, &cases, |o| {
        if a.json {
            // Progress where a person (or a log) sees it, the JSON at the end.
            eprintln!("{}", report::row(o));
        } else {
            say!("{}", report::row(o));
        }
    });
    if a.json {
        say!("{}", report::json(&addr.to_string(), tname, role, &all));
    } else {
        say!("{}", report::summary(&all));
    }
    Ok(report::counts(&all).1 == 0)
}
