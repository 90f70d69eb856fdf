//! `rddp perf server --perftest`: serve one stock perftest client
//! (`ib_write_bw -R`, `ib_read_bw -R`, `ib_send_bw -R`) and print its report.

use super::ctrl::{Ctrl, Waiter, preamble};
use super::dest::{DEST_LEN, Dest};
use super::report::{BwReport, HEADER, RULE, banner};
use super::{default_iters, test_name};
use crate::perf::args::{OnOff, ServerArgs};
use crate::perf::opts::Op;
use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, Quota, WcOpcode};
use rddp_mpa::{MpaOptions, RtrTypes};
use std::time::{Duration, Instant};

/// perftest's default port.
const PORT: u16 = 18515;
/// Credit writes in flight at most (perftest: tx_depth).
const CREDIT_DEPTH: u32 = 128;

pub(crate) fn run(a: &ServerArgs) -> Result<(), String> {
    let p = &a.perftest;
    let op = p.op.unwrap_or(Op::Write);
    let size = p.size.unwrap_or(65536);
    let iters = p.iters.unwrap_or(default_iters(op));
    let at = a
        .listen
        .clone()
        .unwrap_or_else(|| format!("0.0.0.0:{PORT}"));
    // As rdma_cm on siw answers: Rev 2 with the IRD/ORD block, an RTR if asked,
    // IRD/ORD up to 128 (ib_read_bw asks for siw's maximum).
    let opts = MpaOptions {
        rev: 2,
        crc: a.link.crc == OnOff::On,
        p2p: true,
        rtr: RtrTypes {
            write: true,
            read: true,
        },
        ird: 128,
        ord: 128,
        ..MpaOptions::default()
    };
    let listener = Listener::bind(&at, opts).map_err(|e| format!("cannot listen on {at}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!(
        "rddp perf server: listening on {local} (perftest mode, {} {size} B x {iters})",
        op.name()
    );
    let pd = Device::new()
        .consumer("perftest", Quota::default())
        .and_then(|c| c.alloc_pd())
        .map_err(|e| e.to_string())?;

    let mut ctrl = Ctrl::attach(&pd, listener.accept().map_err(|e| e.to_string())?, false)?;
    let (cycle, version) = preamble(&ctrl)?;
    ctrl.xchg_len(&[0; DEST_LEN], DEST_LEN, "sync before the test connection")?;

    // The test connection, on the same port. For send, every receive is posted
    // before it is attached: on iWARP a Send without one ends the stream.
    let rx_depth = a
        .rx_depth
        .min(u32::try_from(iters).unwrap_or(u32::MAX))
        .max(1);
    let cq = CompletionQueue::new((rx_depth + CREDIT_DEPTH + 8) as usize);
    let mut prepared = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(CREDIT_DEPTH)
        .max_recv_wr(rx_depth)
        .ird(128)
        .ord(128)
        .build()
        .map_err(|e| e.to_string())?;
    let mut posted = 0u64;
    if op == Op::Send {
        for i in 0..rx_depth {
            prepared
                .post_recv(u64::from(i), size as usize)
                .map_err(|e| e.to_string())?;
            posted += 1;
        }
    }
    let conn = listener
        .accept()
        .map_err(|e| format!("test connection: {e}"))?;
    crate::rping::report_mpa("rddp perf server", &conn);
    let test = Waiter {
        qp: prepared.attach(conn).map_err(|e| e.to_string())?,
        cq,
        what: "perftest test connection",
    };
    ctrl.xchg_len(&[0; DEST_LEN], DEST_LEN, "sync after the test connection")?;

    // Write and read: the client's target, at least max(size, cycle buffer).
    // Send: our credit word (perftest's server advertises one too; unused).
    let len = if op == Op::Send {
        8
    } else {
        (size.max(cycle)) as usize
    };
    let buf = test
        .qp
        .register_bound(vec![0; len], Access::REMOTE_READ | Access::REMOTE_WRITE)
        .map_err(|e| e.to_string())?;
    let my = Dest {
        out_reads: if op == Op::Read { 128 } else { 0 },
        qpn: test.qp.qp_num(),
        psn: 0,
        rkey: buf.stag(),
        vaddr: 0,
    };
    let mine = my.to_bytes();
    let rem = Dest::parse(&ctrl.xchg(&mine)?)?;
    if op == Op::Send {
        ctrl.xchg(&mine)?;
    }
    ctrl.xchg(&mine)?;
    ctrl.xchg(&mine)?;
    for l in banner(test_name(op), "server") {
        say!("{l}");
    }
    say!(" peer perftest version {version}, cycle buffer {cycle} B, {size} B x {iters}");
    say!(
        " remote address: rkey 0x{:08x} vaddr 0x{:x}; local: rkey 0x{:08x} vaddr 0x0",
        rem.rkey,
        rem.vaddr,
        my.rkey
    );
    say!("{RULE}");
    say!("{HEADER}");
    let report = if op == Op::Send {
        serve_sends(&test, &pd, rem, size, iters, rx_depth, posted)?
    } else {
        // The client writes or reads on its own; we wait for its end of test
        // (step 10), then take its report (step 11).
        ctrl.set_timeout(Duration::from_secs(3600));
        ctrl.xchg(&mine)?;
        ctrl.set_timeout(Duration::from_secs(60));
        BwReport::default().exchange(&ctrl)?
    };
    say!("{}", report.line());
    say!("{RULE}");
    ctrl.xchg(&mine)?;
    test.qp.disconnect();
    std::thread::sleep(Duration::from_millis(100));
    ctrl.disconnect();
    std::thread::sleep(Duration::from_millis(100));
    Ok(())
}

/// ib_send_bw's server (run_iter_bw_server): take `iters` Sends, keep receives
/// posted, and RDMA Write the count received (u32, host order as perftest on
/// x86 writes it) to the client's credit word every rx_depth/3 messages.
fn serve_sends(
    test: &Waiter,
    pd: &rddp::ProtectionDomain,
    credit: Dest,
    size: u32,
    iters: u64,
    rx_depth: u32,
    mut posted: u64,
) -> Result<BwReport, String> {
    let credit_cnt = u64::from((rx_depth / 3).max(1));
    let word = pd
        .register(vec![0; 4], Access::NONE)
        .map_err(|e| e.to_string())?;
    let remote = rddp::RemoteBuf {
        stag: credit.rkey,
        to: credit.vaddr,
        len: 4,
    };
    let (mut rcnt, mut writes) = (0u64, 0u32);
    let mut done = Vec::with_capacity(iters as usize);
    let mut start = None;
    while rcnt < iters {
        let wc = test.next(Duration::from_secs(60))?;
        match wc.opcode {
            WcOpcode::RdmaWrite => writes -= 1,
            WcOpcode::Recv => {
                let now = Instant::now();
                start.get_or_insert(now);
                done.push(now);
                rcnt += 1;
                if posted < iters {
                    test.qp
                        .post_recv(wc.wr_id, size as usize)
                        .map_err(|e| e.to_string())?;
                    posted += 1;
                }
                if (rcnt % u64::from(rx_depth)) % credit_cnt == 0 {
                    while writes >= CREDIT_DEPTH {
                        if test.next(Duration::from_secs(60))?.opcode == WcOpcode::RdmaWrite {
                            writes -= 1;
                        }
                    }
                    word.write(0, &(rcnt as u32).to_le_bytes())
                        .map_err(|e| e.to_string())?;
                    test.qp
                        .post_write(1 << 32, &word, 0, 4, remote, 0)
                        .map_err(|e| e.to_string())?;
                    writes += 1;
                }
            }
            other => {
                return Err(format!(
                    "unexpected {other:?} completion on the test connection"
                ));
            }
        }
    }
    let start = start.unwrap_or_else(Instant::now);
    Ok(BwReport::measure(u64::from(size), start, &done))
}
