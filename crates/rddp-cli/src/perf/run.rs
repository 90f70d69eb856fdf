//! Drives a whole run: establish the connections, one task per queue pair on the
//! tool's few worker threads ([`super::exec`]; sizes kept in step across them),
//! aggregate and print each size as it ends.

use super::args::{ClientArgs, OnOff, ServerArgs};
use super::client::Client;
use super::endpoint::Endpoint;
use super::link::{LinkOpts, Links, Role, Transport, establish};
use super::opts::{ClientOpts, Op, ServerOpts, Stop, sweep_sizes};
use super::report::{self, Measurement};
use super::server::{Server, ServerEnd};
use super::{exec, failure, plot, progress};
use rddp::AsyncEvent;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Barrier;
use tokio::task::JoinHandle;

fn link_opts(l: &super::args::LinkArgs, addr: Option<String>) -> LinkOpts {
    LinkOpts {
        transport: l.transport,
        addr,
        crc: l.crc == OnOff::On,
        qps: l.qps as usize,
        mem_mulpdu: l.mem_mulpdu as usize,
        recv_buffer: l.rcvbuf.map(|n| n as usize),
    }
}

/// The client options the command line asks for, or why they make no sense.
pub(crate) fn client_opts(a: &ClientArgs) -> Result<ClientOpts, String> {
    if a.pingpong && a.op == Op::Read {
        return Err(
            "--pingpong measures write or send latency (ib_write_lat, ib_send_lat); use --op write or --op send".into(),
        );
    }
    let sizes = if a.sweep {
        sweep_sizes()
    } else {
        vec![a.size.unwrap_or(65536)]
    };
    let stop = match (a.duration, a.iters) {
        (Some(d), _) => Stop::Duration(Duration::from_secs_f64(d)),
        (None, Some(n)) => Stop::Iters(n),
        (None, None) => Stop::Iters(if a.pingpong { 1000 } else { 5000 }),
    };
    let plant_write = match a.plant_wrong.as_deref() {
        None => false,
        Some("write") if a.op == Op::Write && a.verify && !a.pingpong => true,
        Some(p) => {
            return Err(format!(
                "--plant-wrong {p}: bandwidth takes write, with --op write --verify"
            ));
        }
    };
    Ok(ClientOpts {
        op: a.op,
        sizes,
        stop,
        pingpong: a.pingpong,
        verify: a.verify,
        tx_depth: a.tx_depth as usize,
        post_list: a.post_list as usize,
        plant_write,
    })
}

/// Serve one connection: a task on the worker threads.
fn spawn_server(server: Server) -> JoinHandle<ServerEnd> {
    exec::runtime().spawn(server.run())
}

/// `rddp perf client`.
pub(crate) fn client_main(a: &ClientArgs) -> Result<(), String> {
    super::chan::set_stall(a.link.stall_secs);
    super::chan::set_parallel(u64::from(a.link.qps));
    if a.op == Op::Mixed {
        return super::mixed::client_main(a);
    }
    let opts = client_opts(a)?;
    if a.link.transport != Transport::Mem && a.connect.is_none() {
        return Err("--connect ADDR is needed (the perf server's address)".into());
    }
    let links = establish(&link_opts(&a.link, a.connect.clone()), Role::Client)?;
    let dev = super::endpoint::device(2 * a.link.qps as usize);
    let mut servers = Vec::new();
    let mut eps = Vec::new();
    match links {
        Links::Loopback(pairs) => {
            let sopts = ServerOpts {
                rx_depth: a.rx_depth as usize,
            };
            for (i, (c, s)) in pairs.into_iter().enumerate() {
                // The server posts its receives before the client may send.
                let sep = Endpoint::attach(&dev, &format!("server-{i}"), s)?;
                servers.push(spawn_server(Server::new(sep, sopts)?));
                eps.push(Endpoint::attach(&dev, &format!("client-{i}"), c)?);
            }
        }
        Links::Remote(conns) => {
            for (i, c) in conns.into_iter().enumerate() {
                eps.push(Endpoint::attach(&dev, &format!("client-{i}"), c)?);
            }
        }
    }
    let ended_by = Mutex::new(None);
    let result = measure(a, &opts, eps, &ended_by);
    if let (Err(e), true) = (&result, a.json) {
        // One JSON line for the failure too: why it ended, CRC refusals.
        let ev = ended_by.lock().unwrap_or_else(|p| p.into_inner()).take();
        say!("{}", failure::json(e, ev.as_ref()));
    }
    // The in-process server's error, if any, is usually the cause of the client's.
    let mut server_err = None;
    for s in servers {
        let r = exec::block_on(s).map_or_else(
            |_| Some("the in-process server task failed".to_string()),
            |end| end.error,
        );
        if let Some(e) = r {
            server_err.get_or_insert(e);
        }
    }
    match (result, server_err) {
        (Ok(()), None) => Ok(()),
        (Ok(()), Some(s)) => Err(format!("server: {s}")),
        (Err(c), None) => Err(c),
        (Err(c), Some(s)) => Err(format!("{c} (server: {s})")),
    }
}

fn banner(a: &ClientArgs, opts: &ClientOpts) -> String {
    let what = match (opts.op, opts.pingpong) {
        (Op::Write, false) => "RDMA_Write BW Test",
        (Op::Read, _) => "RDMA_Read BW Test",
        (Op::Send, false) => "Send BW Test",
        (Op::Write, true) => "RDMA_Write Latency Test",
        (Op::Send, true) => "Send Latency Test",
        (Op::Mixed, _) => "Mixed Write/Read/Send Test",
    };
    let stop = match opts.stop {
        Stop::Iters(n) => format!("{n} iterations"),
        Stop::Duration(d) => format!("{} s", d.as_secs_f64()),
    };
    format!(
        " {what}\n transport {:?}, {} qp(s), tx depth {}, {stop} per size{}",
        a.link.transport,
        a.link.qps,
        opts.tx_depth,
        if opts.verify {
            ", payload verified"
        } else {
            ""
        }
    )
    .to_lowercase_first()
}

trait LowerFirst {
    fn to_lowercase_first(self) -> String;
}

impl LowerFirst for String {
    /// Transport names print as on the command line (mem, mpa, sctp).
    fn to_lowercase_first(self) -> String {
        self.replace("Mem", "mem")
            .replace("Mpa", "mpa")
            .replace("Sctp", "sctp")
    }
}

/// Run every size on every queue pair; print as sizes complete. The first
/// failed queue pair's ending event goes into `ended_by`.
fn measure(
    a: &ClientArgs,
    opts: &ClientOpts,
    eps: Vec<Endpoint>,
    ended_by: &Mutex<Option<AsyncEvent>>,
) -> Result<(), String> {
    let n = eps.len();
    let sizes = opts.sizes.clone();
    let barrier = Arc::new(Barrier::new(n));
    let failed = Arc::new(AtomicBool::new(false));
    let (tx, rx) = channel::<(usize, Result<Measurement, String>)>();
    let (ev_tx, ev_rx) = channel::<AsyncEvent>();
    let mut tasks = Vec::new();
    for ep in eps {
        let (tx, barrier, failed) = (tx.clone(), barrier.clone(), failed.clone());
        let ev_tx = ev_tx.clone();
        let (opts, sizes) = (opts.clone(), sizes.clone());
        tasks.push(exec::runtime().spawn(async move {
            let mut client = match Client::connect(ep, &opts).await {
                Ok(c) => Some(c),
                Err(e) => {
                    failed.store(true, Ordering::SeqCst);
                    let _ = tx.send((0, Err(e)));
                    None
                }
            };
            for (i, &size) in sizes.iter().enumerate() {
                let prepared = client.as_mut().map(|c| c.prepare(size));
                // Every queue pair starts a size together (and skips it together
                // once one has failed).
                barrier.wait().await;
                let mut begun = None;
                match (client.as_mut(), prepared) {
                    (_, Some(Err(e))) => {
                        failed.store(true, Ordering::SeqCst);
                        let _ = tx.send((i, Err(e)));
                    }
                    (Some(c), _) if !failed.load(Ordering::SeqCst) => {
                        let r = c.begin(size).await;
                        if r.is_err() {
                            failed.store(true, Ordering::SeqCst);
                        }
                        begun = Some(r);
                    }
                    _ => {}
                }
                // Every queue pair has begun (Begin, Ack) before any data phase
                // starts: no queue pair's setup is in another's timed interval.
                barrier.wait().await;
                let (Some(begun), Some(c)) = (begun, client.as_mut()) else {
                    continue;
                };
                let r = match begun {
                    Err(e) => Err(e),
                    Ok(()) if failed.load(Ordering::SeqCst) => continue,
                    Ok(()) => c.data(size).await,
                };
                if r.is_err() {
                    failed.store(true, Ordering::SeqCst);
                    if let Some(ev) = c.end_event() {
                        let _ = ev_tx.send(ev);
                    }
                }
                let _ = tx.send((i, r));
            }
            if let Some(c) = client.as_mut()
                && !failed.load(Ordering::SeqCst)
                && let Err(e) = c.finish().await
            {
                if let Some(ev) = c.end_event() {
                    let _ = ev_tx.send(ev);
                }
                let _ = tx.send((usize::MAX, Err(e)));
            }
        }));
    }
    drop(tx);
    drop(ev_tx);

    let bar = progress::bar(sizes.len() as u64, a.json);
    let out = |line: String| progress::println(&bar, line);
    if !a.json {
        out(banner(a, opts));
        out(report::RULE.to_string());
        out(report::header(opts.pingpong));
    }
    let mut parts: Vec<Vec<Measurement>> = vec![Vec::new(); sizes.len()];
    let mut done = Vec::new();
    let mut first_err = None;
    for (i, r) in rx {
        match r {
            Err(e) => {
                first_err.get_or_insert(e);
            }
            Ok(m) => {
                let Some(slot) = parts.get_mut(i) else {
                    continue;
                };
                slot.push(m);
                if slot.len() == n
                    && let Some(m) = Measurement::aggregate(std::mem::take(slot))
                {
                    out(if a.json {
                        report::json_line(&m)
                    } else {
                        report::row(&m)
                    });
                    bar.inc(1);
                    done.push(m);
                }
            }
        }
    }
    bar.finish_and_clear();
    for t in tasks {
        exec::block_on(t).map_err(|_| "a client task failed".to_string())?;
    }
    if let Some(ev) = ev_rx.try_iter().next() {
        *ended_by.lock().unwrap_or_else(|p| p.into_inner()) = Some(ev);
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if !a.json {
        say!("{}", report::RULE);
    }
    if let Some(path) = &a.plot {
        plot::write_svg(path, &done)?;
        if !a.json {
            say!(" chart written to {}", path.display());
        }
    }
    Ok(())
}

/// `rddp perf server`.
pub(crate) fn server_main(a: &ServerArgs) -> Result<(), String> {
    super::chan::set_stall(a.link.stall_secs);
    super::chan::set_parallel(u64::from(a.link.qps));
    if a.forever {
        return super::forever::server_main(a);
    }
    if a.link.transport != Transport::Mem && a.listen.is_none() {
        return Err("--listen ADDR is needed (e.g. --listen 0.0.0.0:18515)".into());
    }
    let links = establish(&link_opts(&a.link, a.listen.clone()), Role::Server)?;
    let Links::Remote(conns) = links else {
        return Err("the server side got both ends of a connection".into());
    };
    let dev = super::endpoint::device(a.link.qps as usize);
    let sopts = ServerOpts {
        rx_depth: a.rx_depth as usize,
    };
    let mut tasks = Vec::new();
    for (i, c) in conns.into_iter().enumerate() {
        let ep = Endpoint::attach(&dev, &format!("server-{i}"), c)?;
        tasks.push(spawn_server(Server::new(ep, sopts)?));
    }
    let mut err = None;
    for (i, t) in tasks.into_iter().enumerate() {
        let Ok(end) = exec::block_on(t) else {
            err.get_or_insert(format!("connection {i}: the server task failed"));
            continue;
        };
        let s = &end.summary;
        if a.json {
            say!("{}", server_json(i, &end));
        } else {
            say!(
                " connection {i}: {}{} sizes, {} messages, {} corrupt bytes",
                if end.error.is_some() {
                    "failed after "
                } else {
                    ""
                },
                s.sizes,
                s.messages,
                s.corrupt
            );
        }
        if let Some(e) = end.error {
            err.get_or_insert(format!("connection {i}: {e}"));
        }
    }
    err.map_or(Ok(()), Err)
}

/// `rddp perf server --json`: one line per connection, also for a failed one
/// (what it had taken and verified until then, why it ended).
fn server_json(i: usize, end: &ServerEnd) -> serde_json::Value {
    let mut o = match &end.error {
        Some(e) => failure::json(e, end.event.as_ref()),
        None => serde_json::json!({ "crc_refused": 0 }),
    };
    o["conn"] = i.into();
    o["ok"] = end.error.is_none().into();
    o["sizes"] = end.summary.sizes.into();
    o["messages"] = end.summary.messages.into();
    o["corrupt_bytes"] = end.summary.corrupt.into();
    o
}
