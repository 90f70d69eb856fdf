//! The one place that knows transports: how each side of a run gets its connected
//! LLPs. Everything else in `perf` works on attached queue pairs and never asks how
//! they were connected. MPA/TCP and SCTP plug in here.

use rddp::transport::{Connection, memory_pair};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The lower-layer protocol of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Transport {
    /// MPA over TCP (RFC 5044, 6581).
    Mpa,
    /// DDP over SCTP (RFC 5043).
    Sctp,
    /// Test only: both ends in this process over the in-memory LLP
    /// (`rddp perf client --transport mem` runs the server too).
    Mem,
}

/// Which end of a run this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Server,
    Client,
}

/// What `establish` needs to know.
#[derive(Debug, Clone)]
pub(crate) struct LinkOpts {
    pub transport: Transport,
    /// `--listen` for the server, `--connect` for the client.
    pub addr: Option<String>,
    /// MPA: use CRC32c on FPDUs.
    pub crc: bool,
    /// Parallel connections.
    pub qps: usize,
    /// MULPDU of the in-memory LLP.
    pub mem_mulpdu: usize,
    /// MPA: SO_RCVBUF of every connection (`--rcvbuf`).
    pub recv_buffer: Option<usize>,
}

/// The connections of one side, ready to attach.
pub(crate) enum Links {
    /// Both ends here: (client end, server end) per connection.
    Loopback(Vec<(Connection, Connection)>),
    /// This process's ends; the other ends are in the peer process.
    Remote(Vec<Connection>),
}

/// Connect (client) or accept (server) `opts.qps` LLP connections.
///
/// This is the only function to extend when MPA over TCP lands: for `Mpa` the
/// client connects `qps` times to `addr` and the server listens on `addr` and
/// accepts `qps` connections (CRC per `crc`), each returning `Links::Remote`.
pub(crate) fn establish(opts: &LinkOpts, role: Role) -> Result<Links, String> {
    match (opts.transport, role) {
        (Transport::Mem, Role::Client) => Ok(Links::Loopback(
            (0..opts.qps).map(|_| memory_pair(opts.mem_mulpdu)).collect(),
        )),
        (Transport::Mem, Role::Server) => Err(
            "--transport mem runs both ends inside `rddp perf client`; a separate server is not needed".into(),
        ),
        (t, Role::Client) => {
            let addr = opts.addr.as_deref().ok_or("the client needs --connect ADDR")?;
            let t = llp_transport(t);
            set_up(opts.qps, || crate::llp::connect(t, addr, opts.crc, opts.recv_buffer)).map(Links::Remote)
        }
        (t, Role::Server) => {
            let addr = opts.addr.as_deref().ok_or("the server needs --listen ADDR")?;
            let lopts = crate::llp::ListenOpts {
                crc_required: opts.crc,
                recv_buffer: opts.recv_buffer,
                ..crate::llp::ListenOpts::default()
            };
            let l = crate::llp::listen(llp_transport(t), addr, &lopts)?;
            eprintln!("rddp perf server: listening on {}", l.local_addr());
            set_up(opts.qps, || l.accept()).map(Links::Remote)
        }
    }
}

/// Connections set up at once. A setup (TCP handshake and MPA Request/Reply,
/// or an SCTP session) blocks its thread for a round trip or two; one after
/// the other, thousands of them take seconds. These threads end once all are
/// set up.
const SETUP_THREADS: usize = 4;

/// `n` connections from `one`, called from up to [`SETUP_THREADS`] threads at
/// once; the first error, if any (the others still finish their setups).
fn set_up(
    n: usize,
    one: impl Fn() -> Result<Connection, String> + Sync,
) -> Result<Vec<Connection>, String> {
    let next = AtomicUsize::new(0);
    let work = || {
        let mut got = Vec::new();
        while next.fetch_add(1, Ordering::Relaxed) < n {
            got.push(one()?);
        }
        Ok::<_, String>(got)
    };
    let parts: Vec<Result<Vec<Connection>, String>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..SETUP_THREADS.min(n).max(1))
            .map(|_| s.spawn(work))
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("a connection setup thread panicked".into()))
            })
            .collect()
    });
    let mut all = Vec::with_capacity(n);
    for p in parts {
        all.extend(p?);
    }
    Ok(all)
}

fn llp_transport(t: Transport) -> crate::llp::Transport {
    match t {
        Transport::Sctp => crate::llp::Transport::Sctp,
        _ => crate::llp::Transport::Mpa,
    }
}
