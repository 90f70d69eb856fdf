//! `rddp target`: a conformance responder (issue: the rddp tool, point 3).

mod args;
mod conn;
mod deviate;
mod deviate_sctp;
mod events;
mod service;
mod term_json;

pub(crate) use args::TargetArgs;

use crate::llp;
use args::{CrcPolicy, MarkerPolicy, Rq};
use events::{Events, Streams};
use rddp::{BufferOrdering, Device, PoolEvent, Quota, SharedReceiveQueue, SrqMode};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Threads taking set-up connections from the listener. MPA setup itself runs on
/// the event loop (rddp-io), so a silent peer holds none of them.
const ACCEPTORS: usize = 2;

/// `--deviate-to ADDR`: no target, only the relay from --listen to ADDR that
/// deviates for the initiator under test; runs until killed.
fn deviate_to(args: &TargetArgs, to: &str, ev: &Events) -> Result<(), String> {
    let d = args.deviate.ok_or("--deviate-to needs --deviate NAME")?;
    if args.transport != args::TargetTransport::Sctp || !deviate_sctp::initiator_side(d) {
        return Err(format!(
            "--deviate-to: only over SCTP, with a deviation of the initiator's side \
             (ssn-gap, wrong-adaptation), not {d:?}"
        ));
    }
    let back = to.parse().map_err(|e| format!("--deviate-to {to}: {e}"))?;
    let front = deviate_sctp::start(&args.listen, back, d)?;
    eprintln!(
        "rddp target: relaying to {to}, deviating from the RFCs on purpose ({d:?}) for \
         the initiator, for testing only"
    );
    ev.emit(
        "listening",
        json!({ "addr": front, "deviation": format!("{d:?}"), "to": to }),
    );
    loop {
        std::thread::park();
    }
}

pub(crate) fn run(args: TargetArgs) -> Result<(), String> {
    if let Err(w) = rddp::raise_open_file_limit() {
        eprintln!("rddp target: {w}");
    }
    let _cap = args.capture.start()?;
    let ev = Arc::new(Events::new(args.events.is_some()));
    let opts = llp::ListenOpts {
        crc_required: args.crc == CrcPolicy::Required,
        refuse_markers: args.markers == MarkerPolicy::Refuse,
        sctp_max_pending: args.sctp_max_pending,
        sctp_accept_delay: Duration::from_millis(args.sctp_accept_delay),
        sctp_reject: args.sctp_reject,
        setup_timeout: Duration::from_secs_f64(args.setup_timeout),
        recv_buffer: None,
    };
    if let Some(to) = &args.deviate_to {
        return deviate_to(&args, to, &ev);
    }
    let listener = match args.deviate {
        None => {
            let l = llp::listen(args.transport.into(), &args.listen, &opts)?;
            ev.emit("listening", json!({ "addr": l.local_addr() }));
            l
        }
        Some(d) => {
            let sctp = args.transport == args::TargetTransport::Sctp;
            if sctp && !deviate_sctp::applies(d) {
                return Err(format!("--deviate {d:?}: MPA only"));
            }
            if !sctp && d == deviate::Deviation::RejectNotTerminate {
                return Err(format!("--deviate {d:?}: SCTP only"));
            }
            if deviate_sctp::initiator_side(d) {
                return Err(format!(
                    "--deviate {d:?} deviates for an initiator: give --deviate-to ADDR"
                ));
            }
            // The real listener on loopback, the deviating relay in front of it.
            let l = llp::listen(args.transport.into(), "127.0.0.1:0", &opts)?;
            let back = l.local_addr().parse().map_err(|e| format!("{e}"))?;
            let front = if sctp {
                deviate_sctp::start(&args.listen, back, d)?
            } else {
                deviate::start(&args.listen, back, d)?
            };
            eprintln!("rddp target: deviating from the RFCs on purpose ({d:?}), for testing only");
            ev.emit(
                "listening",
                json!({ "addr": front, "deviation": format!("{d:?}") }),
            );
            l
        }
    };
    if let Some(addr) = &args.perf_listen {
        perf_listen(addr, &opts, ev.clone())?;
    }

    let dev = Device::new();
    let quota = Quota {
        queue_pairs: 16_000,
        receive_buffers: 1 << 20,
        ..Quota::default()
    };
    let pd = dev
        .consumer("target", quota)
        .map_err(|e| e.to_string())?
        .alloc_pd()
        .map_err(|e| e.to_string())?;
    let streams = Arc::new(Streams::default());
    let shared_buf = if args.shared_buffer {
        let access = rddp::Access::REMOTE_READ | rddp::Access::REMOTE_WRITE;
        let mr = pd
            .register(vec![0; args.buffer_size], access)
            .map_err(|e| e.to_string())?;
        Some(Arc::new(mr))
    } else {
        None
    };
    let shared = if args.rq == Rq::Shared {
        let soft = args.soft_limit.unwrap_or(args.recv_count / 2).max(1);
        let srq = Arc::new(SharedReceiveQueue::new(
            &pd,
            SrqMode::Shared { soft_limit: soft },
            BufferOrdering::Arrival,
            args.recv_count,
        ));
        for i in 0..args.recv_count {
            srq.post_recv(i as u64, args.recv_size)
                .map_err(|e| e.to_string())?;
        }
        watch_srq(srq.clone(), streams.clone(), ev.clone());
        Some(srq)
    } else {
        None
    };
    // Each accepted connection is set up by the acceptor that took it, then
    // served by the one service thread (its octets move on the event loop).
    let service = service::Service::start(streams.clone(), ev.clone());
    let listener: Arc<dyn llp::Listener> = Arc::from(listener);
    let next = Arc::new(AtomicU64::new(1));
    let acceptors: Vec<_> = (0..ACCEPTORS)
        .map(|_| {
            let (listener, next) = (listener.clone(), next.clone());
            let (pd, args) = (pd.clone(), args.clone());
            let shared = conn::Shared {
                srq: shared.clone(),
                buf: shared_buf.clone(),
            };
            let (streams, ev, service) = (streams.clone(), ev.clone(), service.clone());
            std::thread::spawn(move || {
                loop {
                    match listener.accept() {
                        Ok(conn) => {
                            let id = next.fetch_add(1, Ordering::Relaxed);
                            let sh = shared.clone();
                            if let Some(s) = conn::setup(id, conn, &pd, &args, sh, &streams, &ev) {
                                service.add(s);
                            }
                        }
                        // A refused or failed setup ends that connection only.
                        Err(e) => ev.emit("closed", json!({ "conn": null, "reason": e })),
                    }
                }
            })
        })
        .collect();
    for a in acceptors {
        let _ = a.join();
    }
    Err("the listener stopped".into())
}

/// `--perf-listen`: a perf server in this process (the honest client of a
/// hostile-load run shares the process, its event loop and its memory with
/// every hostile connection); each connection's end is a `perf` event.
fn perf_listen(addr: &str, opts: &llp::ListenOpts, ev: Arc<Events>) -> Result<(), String> {
    let lopts = llp::ListenOpts {
        crc_required: false,
        ..opts.clone()
    };
    let l: Arc<dyn llp::Listener> = Arc::from(llp::listen(llp::Transport::Mpa, addr, &lopts)?);
    ev.emit("perf_listening", json!({ "addr": l.local_addr() }));
    let report: crate::perf::forever::Report = Arc::new(move |i, r| {
        match r {
        Ok(s) => ev.emit(
            "perf",
            json!({ "perf_conn": i, "sizes": s.sizes, "messages": s.messages, "corrupt": s.corrupt }),
        ),
        // A setup that failed (a silent peer past its deadline) is reported as
        // the target's own listener reports it.
        Err(e) if e.starts_with("connection setup failed") => ev.emit(
            "closed",
            json!({ "conn": null, "listener": "perf", "reason": e }),
        ),
        Err(e) => ev.emit("perf", json!({ "perf_conn": i, "error": e })),
    }
    });
    let sopts = crate::perf::opts::ServerOpts { rx_depth: 512 };
    std::thread::spawn(move || crate::perf::forever::serve(&l, &Device::new(), sopts, report));
    Ok(())
}

/// Report the shared pool's asynchronous events (soft limit crossed, a stream whose
/// oldest message can no longer get a buffer).
fn watch_srq(srq: Arc<SharedReceiveQueue>, streams: Arc<Streams>, ev: Arc<Events>) {
    std::thread::spawn(move || {
        loop {
            while let Some(e) = srq.poll_event() {
                let (kind, stream) = match e {
                    PoolEvent::SoftLimit { stream, .. } => ("srq_limit_reached", Some(stream.0)),
                    PoolEvent::Stranded { stream, .. } => ("srq_stranded", Some(stream.0)),
                    PoolEvent::LowWater { .. } => ("srq_low_water", None),
                    PoolEvent::Lost(_) => ("srq_events_lost", None),
                };
                let conn = stream.and_then(|s| streams.conn(s));
                ev.emit("async", json!({ "conn": conn, "kind": kind }));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}

impl From<args::TargetTransport> for llp::Transport {
    fn from(t: args::TargetTransport) -> Self {
        match t {
            args::TargetTransport::Mpa => llp::Transport::Mpa,
            args::TargetTransport::Sctp => llp::Transport::Sctp,
        }
    }
}
