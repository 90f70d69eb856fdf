//! `rddp perf client --perftest --op write|read|send`: drive a stock perftest
//! server (`ib_write_bw -R`, `ib_read_bw -R`, `ib_send_bw -R`).

use super::ctrl::{Ctrl, Waiter, preamble};
use super::dest::{DEST_LEN, Dest};
use super::report::{BwReport, HEADER, RULE, banner};
use super::{default_iters, test_name};
use crate::perf::args::{ClientArgs, OnOff};
use crate::perf::link::Transport;
use crate::perf::opts::Op;
use rddp::transport::{Connection, mpa};
use rddp::{Access, CompletionQueue, Device, MemoryRegion, QueuePairBuilder, Quota, RemoteBuf};
use rddp::{SendFlags, WcOpcode};
use rddp_mpa::{MpaError, MpaOptions};
use std::time::{Duration, Instant};

/// siw 6.1 hands the socket to its queue pair only after sending the MPA Reply;
/// an FPDU arriving in between waits unread (docs/interop.md). perftest's own
/// client is slow enough not to hit that; we wait as long before speaking first.
const FIRST_SEND_DELAY: Duration = Duration::from_millis(100);

pub(crate) fn run(a: &ClientArgs) -> Result<(), String> {
    if a.sweep || a.pingpong || a.duration.is_some() || a.link.qps != 1 {
        return Err(
            "--perftest runs one size, by iterations, on one queue pair (perftest's -s, -n, -q 1)"
                .into(),
        );
    }
    if a.link.transport != Transport::Mpa {
        return Err("--perftest speaks to perftest over rdma_cm: --transport mpa".into());
    }
    let at = a
        .connect
        .clone()
        .ok_or("--connect ADDR is needed (where `ib_*_bw -R` listens, port 18515 by default)")?;
    let op = a.op;
    let size = a.size.unwrap_or(65536);
    let iters = a.iters.unwrap_or(default_iters(op));
    let depth = a
        .tx_depth
        .min(u32::try_from(iters).unwrap_or(u32::MAX))
        .max(1);
    // ib_read_bw asks for siw's maximum IRD/ORD; the others for none.
    let reads = if op == Op::Read { 128 } else { 1 };
    let opts = MpaOptions {
        rev: 2,
        crc: a.link.crc == OnOff::On,
        p2p: false,
        ird: reads,
        ord: reads,
        ..MpaOptions::default()
    };
    let pd = Device::new()
        .consumer("perftest", Quota::default())
        .and_then(|c| c.alloc_pd())
        .map_err(|e| e.to_string())?;

    let ctrl = Ctrl::attach(&pd, connect(&at, &opts, 1)?, true)?;
    std::thread::sleep(FIRST_SEND_DELAY);
    let (cycle, version) = preamble(&ctrl)?;
    ctrl.xchg_len(&[0; DEST_LEN], DEST_LEN, "sync before the test connection")?;
    // The server listens again only after answering: give it a moment, retry as
    // perftest does (10 times, 100 ms apart).
    std::thread::sleep(Duration::from_millis(100));
    let conn = connect(&at, &opts, 10)?;
    crate::rping::report_mpa("rddp perf client", &conn);
    let cq = CompletionQueue::new((depth + 9) as usize);
    let test = Waiter {
        // Room for `depth` operations and the Read that confirms them.
        qp: QueuePairBuilder::new(&pd, &cq, &cq)
            .max_send_wr(depth + 1)
            .max_recv_wr(1)
            .ird(u32::from(reads))
            .ord(u32::from(reads))
            .build()
            .and_then(|q| q.attach(conn))
            .map_err(|e| e.to_string())?,
        cq,
        what: "perftest test connection",
    };
    ctrl.xchg_len(&[0; DEST_LEN], DEST_LEN, "sync after the test connection")?;

    // Write: the source. Read: the sink (remote write: a Read Response is a
    // tagged placement). Send: the source, plus the credit word the server writes.
    let buf = test
        .qp
        .register_bound(vec![0; size as usize], Access::REMOTE_WRITE)
        .map_err(|e| e.to_string())?;
    let credit = test
        .qp
        .register_bound(vec![0; 8], Access::REMOTE_WRITE)
        .map_err(|e| e.to_string())?;
    // The sink of the confirming one-octet Reads (see `run_test`).
    let sync_sink = test
        .qp
        .register_bound(vec![0; 1], Access::REMOTE_WRITE)
        .map_err(|e| e.to_string())?;
    let my = Dest {
        out_reads: u32::from(reads),
        qpn: test.qp.qp_num(),
        psn: 0,
        rkey: if op == Op::Send {
            credit.stag()
        } else {
            buf.stag()
        },
        vaddr: 0,
    };
    let mine = my.to_bytes();
    let rem = Dest::parse(&ctrl.xchg(&mine)?)?;
    if op == Op::Send {
        ctrl.xchg(&mine)?;
    }
    ctrl.xchg(&mine)?;
    ctrl.xchg(&mine)?;
    for l in banner(test_name(op), "client") {
        say!("{l}");
    }
    say!(" peer perftest version {version}, cycle buffer {cycle} B, tx depth {depth}");
    say!(
        " remote address: rkey 0x{:08x} vaddr 0x{:x}",
        rem.rkey,
        rem.vaddr
    );
    say!("{RULE}");
    say!("{HEADER}");
    std::thread::sleep(FIRST_SEND_DELAY);
    let remote = RemoteBuf {
        stag: rem.rkey,
        to: rem.vaddr,
        len: u64::from(size),
    };
    let rx_depth = u64::from(a.rx_depth);
    let report = run_test(
        &test, op, &buf, &credit, &sync_sink, remote, size, iters, depth, rx_depth,
    )?;
    say!("{}", report.line());
    say!("{RULE}");
    if op != Op::Send {
        ctrl.xchg(&mine)?;
        report.exchange(&ctrl)?;
    }
    ctrl.xchg(&mine)?;
    test.qp.disconnect();
    std::thread::sleep(Duration::from_millis(100));
    ctrl.disconnect();
    std::thread::sleep(Duration::from_millis(100));
    Ok(())
}

/// Connect, retrying a refused connection `tries` times 100 ms apart.
fn connect(at: &str, opts: &MpaOptions, tries: u32) -> Result<Connection, String> {
    let mut last = String::new();
    for _ in 0..tries {
        match mpa::connect(at, opts) {
            Ok(c) => return Ok(c),
            Err(MpaError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                last = e.to_string();
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(format!("cannot connect to {at}: {e}")),
        }
    }
    Err(format!(
        "cannot connect to {at}: {last} (is `ib_*_bw -R` listening there?)"
    ))
}

/// run_iter_bw: `iters` operations of `size` octets, at most `depth` in flight;
/// for send, at most `rx_depth` beyond the count the server wrote to `credit`.
///
/// A Write or Send completes here once the LLP has taken it, long before the
/// peer has it; so a one-octet RDMA Read of the peer's buffer into `sync_sink`
/// (answered after everything before it on the stream) confirms them, at least
/// every half window and once at the end, and a message counts when confirmed.
/// perftest's peer never sees these Reads. Not zero-length: siw (Linux 6.1)
/// now and then answered a zero-length Read with a Read Response of 4 octets,
/// which the Read's sink cannot take (Terminate 1/1/0x01; docs/interop.md).
#[allow(clippy::too_many_arguments)]
fn run_test(
    test: &Waiter,
    op: Op,
    buf: &MemoryRegion,
    credit: &MemoryRegion,
    sync_sink: &MemoryRegion,
    remote: RemoteBuf,
    size: u32,
    iters: u64,
    depth: u32,
    rx_depth: u64,
) -> Result<BwReport, String> {
    const SYNC: u64 = u64::MAX;
    let confirm = op != Op::Read;
    let window = (2 * u64::from(depth))
        .min((64u64 << 20) / u64::from(size.max(1)))
        .max(2);
    let credit_now = || -> u64 {
        credit
            .read(0, 4)
            .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .unwrap_or(0)
    };
    // posted: work requests out; local: completed here; confirmed: known at the peer.
    let (mut posted, mut local, mut confirmed) = (0u64, 0u64, 0u64);
    let mut sync: Option<u64> = None;
    let mut done = Vec::with_capacity(iters as usize);
    let start = Instant::now();
    while confirmed < iters {
        while posted < iters
            && posted - local < u64::from(depth)
            && (!confirm || posted - confirmed < window)
            && (op != Op::Send || posted + 1 < rx_depth + credit_now())
        {
            let r = match op {
                Op::Write => test
                    .qp
                    .post_write(posted, buf, 0, u64::from(size), remote, 0),
                Op::Read => test.qp.post_read(posted, buf, 0, size, remote, 0),
                Op::Send => {
                    test.qp
                        .post_send(posted, buf, 0, u64::from(size), SendFlags::default())
                }
                Op::Mixed => return Err("--perftest takes --op write, read or send".into()),
            };
            r.map_err(|e| format!("post: {e}"))?;
            posted += 1;
        }
        if confirm
            && sync.is_none()
            && posted > confirmed
            && (posted - confirmed >= window / 2 || posted == iters)
        {
            test.qp
                .post_read(SYNC, sync_sink, 0, 1, remote, 0)
                .map_err(|e| format!("post: {e}"))?;
            sync = Some(posted);
        }
        if posted == local && sync.is_none() {
            // Held back by the credit: nothing in flight to complete.
            test.events()?;
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        let wc = test.next(Duration::from_secs(60))?;
        match (wc.opcode, wc.wr_id) {
            (WcOpcode::RdmaRead, SYNC) => {
                let upto = sync.take().unwrap_or(confirmed);
                let now = Instant::now();
                done.extend(std::iter::repeat_n(now, (upto - confirmed) as usize));
                confirmed = upto;
            }
            (WcOpcode::RdmaRead, _) if op == Op::Read => {
                local += 1;
                confirmed += 1;
                done.push(Instant::now());
            }
            (WcOpcode::RdmaWrite, _) if op == Op::Write => local += 1,
            (WcOpcode::Send, _) if op == Op::Send => local += 1,
            (other, _) => return Err(format!("unexpected {other:?} completion")),
        }
    }
    Ok(BwReport::measure(u64::from(size), start, &done))
}
