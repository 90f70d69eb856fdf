//! `rddp hostile`: a load generator of hostile MPA peers (docs/reliability.md),
//! thousands of connections on one thread (mio): slowloris peers that open TCP
//! and never send their Request, slow peers that set up and then send a bogus
//! FPDU (a Write to an invalid STag) one octet per interval, and flooding peers
//! that send Sends past every buffer posted. Each kind is kept at its count for
//! --duration (an ended connection is replaced), then every connection is
//! waited for until it ends; how each ended is counted per kind.

mod peer;
mod wire;

use clap::Args;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use peer::{Ended, Kind, Peer, Step};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A connect not answered by then has failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Timers (the slow octets, connect deadlines) are looked at this often.
const TICK: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Args)]
pub(crate) struct HostileArgs {
    /// The `rddp target` (MPA) to attack.
    #[arg(long, value_name = "ADDR")]
    pub target: String,
    /// Every other slowloris connection goes here instead (e.g. the target's
    /// --perf-listen address, so the honest client's listener is held too).
    #[arg(long, value_name = "ADDR")]
    pub also: Option<String>,
    /// Connections kept open that never send their MPA Request.
    #[arg(long, default_value_t = 0)]
    pub slowloris: usize,
    /// Connections kept open that set up, then send one octet per --byte-interval-ms.
    #[arg(long, default_value_t = 0)]
    pub slow_bytes: usize,
    /// Connections kept open that flood Sends past the target's buffers.
    #[arg(long, default_value_t = 0)]
    pub flood: usize,
    /// Seconds the counts are kept up (ended connections replaced).
    #[arg(long, default_value_t = 30.0)]
    pub duration: f64,
    /// Stop opening (as at the end of --duration) once this file exists.
    #[arg(long, value_name = "PATH")]
    pub stop_file: Option<std::path::PathBuf>,
    /// Seconds after --duration to wait for the last connections to end.
    #[arg(long, default_value_t = 60.0)]
    pub drain: f64,
    #[arg(long, default_value_t = 1000)]
    pub byte_interval_ms: u64,
    /// The target's --setup-timeout: a slowloris closed at least this long after
    /// its connect call counts as "setup timeout", earlier as "closed early".
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub setup_timeout: f64,
    /// Milliseconds before an ended flood connection is replaced (one peer
    /// flooding, not a storm of connections).
    #[arg(long, default_value_t = 100)]
    pub flood_pause_ms: u64,
    /// TCP connects in flight at most.
    #[arg(long, default_value_t = 256)]
    pub max_connecting: usize,
    /// One JSON object at the end instead of the table.
    #[arg(long)]
    pub json: bool,
}

const KINDS: [Kind; 3] = [Kind::Slowloris, Kind::SlowBytes, Kind::Flood];

fn idx(k: Kind) -> usize {
    k as usize
}

/// What happened to one kind.
#[derive(Default)]
struct Tally {
    opened: u64,
    /// Connections of this kind, connecting or established.
    open: usize,
    /// Established (TCP) now, and at most at once.
    est: usize,
    peak_est: usize,
    outcomes: BTreeMap<String, u64>,
    /// Lifetime (TCP established to end) of each ended connection: min, max.
    life: Option<(f64, f64)>,
    sends: u64,
    echoes: u64,
    /// SlowBytes: octets of the bogus FPDU sent when it ended: min, max.
    bogus: Option<(usize, usize)>,
}

impl Tally {
    fn add(&mut self, e: &Ended, setup_timeout: f64) {
        let mut outcome = e.outcome.clone();
        let life = e.lifetime.map(|d| d.as_secs_f64());
        if e.kind == Kind::Slowloris && outcome == "closed" {
            let at_timeout = e.since_connect.as_secs_f64() >= setup_timeout;
            outcome = if at_timeout {
                "setup timeout"
            } else {
                "closed early"
            }
            .into();
        }
        *self.outcomes.entry(outcome).or_default() += 1;
        if let Some(l) = life {
            self.life = Some(self.life.map_or((l, l), |(a, b)| (a.min(l), b.max(l))));
        }
        self.sends += e.sends;
        self.echoes += e.echoes;
        if e.kind == Kind::SlowBytes {
            let n = e.bogus_sent;
            self.bogus = Some(self.bogus.map_or((n, n), |(a, b)| (a.min(n), b.max(n))));
        }
    }

    fn json(&self) -> Value {
        let mut v = json!({
            "opened": self.opened,
            "peak_established": self.peak_est,
            "outcomes": self.outcomes,
            "lifetime_s": self.life.map(|(a, b)| json!({ "min": a, "max": b })),
        });
        if self.sends > 0 {
            v["sends"] = json!(self.sends);
            v["echoes"] = json!(self.echoes);
        }
        if let Some((a, b)) = self.bogus {
            v["bogus_octets_sent"] = json!({ "min": a, "max": b });
        }
        v
    }
}

fn resolve(a: &str) -> Result<SocketAddr, String> {
    a.to_socket_addrs()
        .map_err(|e| format!("bad address {a}: {e}"))?
        .next()
        .ok_or_else(|| format!("bad address {a}"))
}

pub(crate) fn run(a: &HostileArgs) -> Result<(), String> {
    if let Err(w) = rddp::raise_open_file_limit() {
        eprintln!("rddp hostile: {w}");
    }
    let target = resolve(&a.target)?;
    let also = a.also.as_deref().map(resolve).transpose()?;
    let want = [a.slowloris, a.slow_bytes, a.flood];
    let interval = Duration::from_millis(a.byte_interval_ms);
    let mut poll = Poll::new().map_err(|e| e.to_string())?;
    let mut events = Events::with_capacity(4096);
    let mut peers: Vec<Option<Peer>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut tally: [Tally; 3] = Default::default();
    let mut connecting = 0usize;
    let mut loris_n = 0u64;
    let t0 = Instant::now();
    let mut stop_at = t0 + Duration::from_secs_f64(a.duration);
    let mut give_up = stop_at + Duration::from_secs_f64(a.drain);
    let mut all_open = false;
    let (mut next_tick, mut next_report) = (t0, t0 + Duration::from_secs(5));
    let mut connect_errors = 0u64;
    let flood_pause = Duration::from_millis(a.flood_pause_ms);
    let mut flood_at = t0;
    let mut floods: Vec<usize> = Vec::new();

    loop {
        let now = Instant::now();
        let live: usize = tally.iter().map(|t| t.open).sum();
        if now >= stop_at && live == 0 {
            break;
        }
        if now >= give_up {
            for p in peers.iter().flatten() {
                let e = p.end("still open at the end", now);
                if let Step::Ended(e) = e {
                    tally[idx(e.kind)].add(&e, a.setup_timeout);
                }
            }
            break;
        }
        // Open what is missing, a bounded number of connects at a time.
        'open: while now < stop_at && connecting < a.max_connecting {
            let Some(k) = KINDS
                .into_iter()
                .filter(|&k| tally[idx(k)].open < want[idx(k)])
                .filter(|&k| k != Kind::Flood || now >= flood_at)
                .min_by_key(|&k| tally[idx(k)].open * 1000 / want[idx(k)].max(1))
            else {
                break 'open;
            };
            let to = match (k, also) {
                (Kind::Slowloris, Some(b)) => {
                    loris_n += 1;
                    if loris_n.is_multiple_of(2) { b } else { target }
                }
                _ => target,
            };
            let mut sock = match TcpStream::connect(to) {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors or ports: counted, tried again next turn.
                    connect_errors += 1;
                    if connect_errors <= 3 {
                        eprintln!("rddp hostile: connect: {e}");
                    }
                    break 'open;
                }
            };
            let i = free.pop().unwrap_or_else(|| {
                peers.push(None);
                peers.len() - 1
            });
            if let Err(e) = poll.registry().register(
                &mut sock,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            ) {
                free.push(i);
                return Err(format!("cannot register a socket: {e}"));
            }
            peers[i] = Some(Peer::new(k, sock, now, interval));
            if k == Kind::Flood {
                floods.push(i);
            }
            tally[idx(k)].open += 1;
            connecting += 1;
        }
        // Only flood peers can be busy: look at those, not at every peer.
        floods.retain(|&i| peers[i].as_ref().is_some_and(|p| p.kind == Kind::Flood));
        let busy: Vec<usize> = floods
            .iter()
            .copied()
            .filter(|&i| peers[i].as_ref().is_some_and(Peer::busy))
            .collect();
        let wait = if busy.is_empty() {
            next_tick.saturating_duration_since(now).min(TICK)
        } else {
            Duration::ZERO
        };
        if let Err(e) = poll.poll(&mut events, Some(wait))
            && e.kind() != std::io::ErrorKind::Interrupted
        {
            return Err(format!("poll: {e}"));
        }
        let now = Instant::now();
        let mut ready: Vec<usize> = events.iter().map(|e| e.token().0).collect();
        ready.extend(busy);
        if now >= next_tick {
            next_tick = now + TICK;
            if now < stop_at && a.stop_file.as_ref().is_some_and(|f| f.exists()) {
                stop_at = now;
                give_up = now + Duration::from_secs_f64(a.drain);
                eprintln!(
                    "rddp hostile: stop file seen after {:.1} s",
                    (now - t0).as_secs_f64()
                );
            }
            // Every slowloris and slow peer established at once (a flood peer
            // lives milliseconds: it counts once it has been).
            let full = |k: Kind| match k {
                Kind::Flood => tally[idx(k)].opened as usize >= want[idx(k)],
                _ => tally[idx(k)].est >= want[idx(k)],
            };
            if !all_open && KINDS.into_iter().all(full) {
                all_open = true;
                let open: usize = tally.iter().map(|t| t.est).sum();
                eprintln!(
                    "rddp hostile: all open after {:.1} s ({open} connections)",
                    (now - t0).as_secs_f64()
                );
            }
            ready.extend(peers.iter().enumerate().filter_map(|(i, p)| {
                let p = p.as_ref()?;
                let due = p.kind == Kind::SlowBytes && now >= p.next_byte;
                let late = p.is_connecting() && now - p.started > CONNECT_TIMEOUT;
                (due || late).then_some(i)
            }));
        }
        for i in ready {
            let Some(p) = peers.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            let was_connecting = p.is_connecting();
            let mut step = p.poke(now);
            if p.is_connecting() && now - p.started > CONNECT_TIMEOUT {
                step = p.end("connect timed out", now);
            }
            if was_connecting && (!p.is_connecting() || matches!(step, Step::Ended(_))) {
                connecting -= 1;
                if p.opened.is_some() {
                    let t = &mut tally[idx(p.kind)];
                    t.opened += 1;
                    t.est += 1;
                    t.peak_est = t.peak_est.max(t.est);
                }
            }
            if let Step::Ended(e) = step {
                if let Some(mut p) = peers[i].take() {
                    let _ = poll.registry().deregister(&mut p.sock);
                }
                free.push(i);
                if e.kind == Kind::Flood {
                    flood_at = now + flood_pause;
                }
                let t = &mut tally[idx(e.kind)];
                t.open -= 1;
                if e.lifetime.is_some() {
                    t.est -= 1;
                }
                t.add(&e, a.setup_timeout);
            }
        }
        if now >= next_report {
            next_report = now + Duration::from_secs(5);
            let open: Vec<String> = KINDS
                .iter()
                .map(|&k| format!("{} {}", k.name(), tally[idx(k)].open))
                .collect();
            eprintln!(
                "rddp hostile: {:.0} s, open: {}",
                (now - t0).as_secs_f64(),
                open.join(", ")
            );
        }
    }
    let mut out =
        json!({ "seconds": t0.elapsed().as_secs_f64(), "connect_errors": connect_errors });
    for k in KINDS {
        out[k.name()] = tally[idx(k)].json();
    }
    if a.json {
        say!("{out}");
    } else {
        say!(
            "rddp hostile: {:.1} s against {}",
            t0.elapsed().as_secs_f64(),
            a.target
        );
        for k in KINDS {
            let t = &tally[idx(k)];
            say!(
                "  {:<10} opened {:>7}, at most {:>6} at once; ended: {}",
                k.name(),
                t.opened,
                t.peak_est,
                serde_json::to_string(&t.outcomes).unwrap_or_default()
            );
        }
    }
    Ok(())
}
