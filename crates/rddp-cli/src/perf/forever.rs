//! `rddp perf server --forever`: serve perf connections as they come, each a
//! task on the tool's few worker threads ([`super::exec`]), until the process is killed; one line per connection as it
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

pub(crate) fn server_main(a: &ServerArgs) -> Result<(), String> {
    let t = match a.link.transport {
        Transport::Mpa => llp::Transport::Mpa,
        Transport::Sctp => llp::Transport::Sctp,
        Transport::Mem => return Err("--forever serves remote clients (mpa or sctp)".into()),
    };
    let addr = a.listen.as_deref().ok_or("--listen ADDR is needed")?;
    let lopts = llp::ListenOpts {
        crc_required: a.link.crc == OnOff::On,
        recv_buffer: a.link.rcvbuf.map(|n| n as usize),
        ..llp::ListenOpts::default()
    };
    let l: Arc<dyn llp::Listener> = Arc::from(llp::listen(t, addr, &lopts)?);
    eprintln!(
        "rddp perf server: listening on {} (forever)",
        l.local_addr()
    );
    let sopts = ServerOpts {
        rx_depth: a.rx_depth as usize,
    };
    serve(&l, &Device::new(), sopts, Arc::new(report));
    Err("the listener stopped".into())
}

/// How a connection ended: its number and its summary or error.
pub(crate) type Report = Arc<dyn Fn(u64, Result<ServerSummary, String>) + Send + Sync>;

/// Serve perf connections from `l` until the listener stops, each a task on the
/// worker threads, `report` called as each ends (also `rddp target --perf-listen`).
pub(crate) fn serve(l: &Arc<dyn llp::Listener>, dev: &Device, sopts: ServerOpts, report: Report) {
    super::exec::serve_open_ended();
    let next = Arc::new(AtomicU64::new(0));
    let acceptors: Vec<_> = (0..ACCEPTORS)
        .map(|_| {
            let (l, dev, next) = (l.clone(), dev.clone(), next.clone());
            let report = report.clone();
            std::thread::spawn(move || {
                loop {
                    let conn = l.accept();
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let served = conn
                        .and_then(|c| Endpoint::attach(&dev, &format!("server-{i}"), c))
                        .and_then(|ep| Server::new(ep, sopts));
                    match served {
                        Ok(s) => {
                            let report = report.clone();
                            let live = super::exec::Live::start();
                            super::exec::runtime().spawn(async move {
                                let _live = live;
                                report(i, s.run().await.into_result())
                            });
                        }
                        Err(e) => report(i, Err(e)),
                    }
                }
            })
        })
        .collect();
    for t in acceptors {
        let _ = t.join();
    }
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
