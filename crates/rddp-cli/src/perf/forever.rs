//! `rddp perf server --forever`: serve perf connections as they come, each on
//! its own thread, until the process is killed; one line per connection as it
//! ends. For clients that reconnect (`rddp perf client --op mixed --reconnect`,
//! scripts/soak.sh).

use super::args::{OnOff, ServerArgs};
use super::endpoint::Endpoint;
use super::link::Transport;
use super::opts::ServerOpts;
use super::server::{Server, ServerSummary};
use crate::llp;
use rddp::Device;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Threads accepting (and setting up) connections at once: one silent peer's
/// MPA setup must not hold up the others.
const ACCEPTORS: usize = 4;

pub fn server_main(a: &ServerArgs) -> Result<(), String> {
    let t = match a.link.transport {
        Transport::Mpa => llp::Transport::Mpa,
        Transport::Sctp => llp::Transport::Sctp,
        Transport::Mem => return Err("--forever serves remote clients (mpa or sctp)".into()),
    };
    let addr = a.listen.as_deref().ok_or("--listen ADDR is needed")?;
    let lopts = llp::ListenOpts {
        crc_required: a.link.crc == OnOff::On,
        refuse_markers: false,
        sctp_max_pending: 16,
        sctp_accept_delay: std::time::Duration::ZERO,
        sctp_reject: false,
    };
    let l: Arc<dyn llp::Listener> = Arc::from(llp::listen(t, addr, &lopts)?);
    eprintln!(
        "rddp perf server: listening on {} (forever)",
        l.local_addr()
    );
    let dev = Device::new();
    let sopts = ServerOpts {
        rx_depth: a.rx_depth as usize,
    };
    let next = Arc::new(AtomicU64::new(0));
    let acceptors: Vec<_> = (0..ACCEPTORS)
        .map(|_| {
            let (l, dev, next) = (l.clone(), dev.clone(), next.clone());
            std::thread::spawn(move || {
                loop {
                    let conn = l.accept();
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let served = conn
                        .and_then(|c| Endpoint::attach(&dev, &format!("server-{i}"), c))
                        .and_then(|ep| Server::new(ep, sopts));
                    match served {
                        Ok(s) => {
                            std::thread::spawn(move || report(i, s.run().into_result()));
                        }
                        Err(e) => eprintln!("rddp perf server: connection {i}: {e}"),
                    }
                }
            })
        })
        .collect();
    for t in acceptors {
        let _ = t.join();
    }
    Err("the listener stopped".into())
}

/// One line per connection: its summary, or its error on stderr.
fn report(i: u64, r: Result<ServerSummary, String>) {
    match r {
        Ok(s) => say!(
            " connection {i}: {} sizes, {} messages, {} corrupt bytes",
            s.sizes,
            s.messages,
            s.corrupt
        ),
        Err(e) => eprintln!("rddp perf server: connection {i}: {e}"),
    }
}
