//! The rping client (rping_test_client): per ping, fill the start buffer,
//! advertise it, wait for the go-ahead, advertise the sink, wait for the go-ahead,
//! compare (-V).

use super::args::{Fault, RpingArgs};
use super::wire::{self, End, INFO_LEN, Info, Stop};
use rddp::transport::Connection;
use rddp::{Access, CompletionQueue, Device, MemoryRegion, QueuePairBuilder, Quota, SendFlags};
use rddp::{Error, WcOpcode};
use rddp_mpa::MpaError;

const SQ_DEPTH: u32 = 16;

/// One line on stderr saying what MPA setup agreed.
pub(super) fn report_connected(c: &Connection) {
    super::report_mpa("rddp rping", c);
}

pub(super) fn run(a: &RpingArgs) -> Result<(), String> {
    let pd = Device::new()
        .consumer("rping", Quota::default())
        .and_then(|c| c.alloc_pd())
        .map_err(|e| e.to_string())?;
    let cq = CompletionQueue::new(2 * SQ_DEPTH as usize);
    let mut opts = wire::mpa_options(a);
    let at = a.endpoint();
    let conn = match rddp::transport::mpa::connect(&at, &opts) {
        // A peer that refuses Markers (siw does: MPA Reply with R=1) gets a second
        // try without them.
        Err(MpaError::Rejected { .. }) if opts.markers => {
            eprintln!(
                "rddp rping: {at} refused the MPA Request with Markers (R=1); retrying without Markers"
            );
            opts.markers = false;
            rddp::transport::mpa::connect(&at, &opts)
        }
        other => other,
    }
    .map_err(|e| format!("connect error: {e} (is `rping -s` listening on {at}?)"))?;
    report_connected(&conn);
    // rping's client asks for IRD 1 / ORD 1; the Connection carries what was agreed.
    let mut qp = QueuePairBuilder::new(&pd, &cq, &cq)
        .max_send_wr(SQ_DEPTH)
        .max_recv_wr(2)
        .build()
        .map_err(|e| e.to_string())?;
    qp.post_recv(0, INFO_LEN).map_err(|e| e.to_string())?;
    let qp = qp.attach(conn).map_err(|e: Error| e.to_string())?;
    let size = a.size as usize;
    let access = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let start = pd
        .register(vec![0; size], access)
        .map_err(|e| e.to_string())?;
    let sink = pd
        .register(vec![0; size], access)
        .map_err(|e| e.to_string())?;
    let mut end = End::new(qp, cq, a);
    end.debug("rdma_connect successful");
    std::thread::sleep(std::time::Duration::from_millis(a.first_send_delay));
    let res = pings(a, &mut end, &start, &sink);
    end.qp.disconnect();
    // Let the FIN leave before the queue pair goes (a peer waits for it).
    let _ = end.cq.wait(1, std::time::Duration::from_millis(200));
    match res {
        Ok(()) => Ok(()),
        Err(Stop::Disconnected) => {
            Err("rping client failed: the server disconnected (DISCONNECT EVENT)".into())
        }
        Err(Stop::Failed(e)) => Err(format!("rping client failed: {e}")),
    }
}

fn advertise(end: &mut End, mr: &MemoryRegion, size: u32, bad_stag: bool) -> Result<(), Stop> {
    let r = mr.remote();
    // An STag this side never registered: its key byte is flipped.
    let rkey = if bad_stag { r.stag ^ 0xFF } else { r.stag };
    let info = Info {
        addr: r.to,
        rkey,
        size,
    };
    end.debug(&format!(
        "RDMA addr {:x} rkey {:x} len {}",
        info.addr, info.rkey, info.size
    ));
    end.qp
        .post_send_inline(1, &info.to_bytes(), SendFlags::default())
        .map_err(|e| Stop::Failed(format!("post send error {e}")))
}

fn go_ahead(a: &RpingArgs, end: &mut End, ping: u64, what: &str) -> Result<(), Stop> {
    let wc = end.wait(WcOpcode::Recv, what)?;
    if wc.byte_len as usize != INFO_LEN {
        return Err(Stop::Failed(format!(
            "Received bogus data, size {}",
            wc.byte_len
        )));
    }
    if a.fault != Some(Fault::NoRecv) || ping != 0 {
        end.qp
            .post_recv(0, INFO_LEN)
            .map_err(|e| Stop::Failed(format!("post recv error: {e}")))?;
    }
    Ok(())
}

fn pings(
    a: &RpingArgs,
    end: &mut End,
    start: &MemoryRegion,
    sink: &MemoryRegion,
) -> Result<(), Stop> {
    let size = a.size as usize;
    let mut first = b'A';
    let mut ping = 0u64;
    while a.count == 0 || ping < a.count {
        let mut data = vec![0u8; size];
        wire::fill(&mut data, ping, first);
        first = wire::next_start(first);
        start
            .write(0, &data)
            .map_err(|e| Stop::Failed(e.to_string()))?;
        advertise(end, start, a.size, a.fault == Some(Fault::ReadStag))?;
        if ping == 0 && a.fault == Some(Fault::ExtraSend) {
            for _ in 1..super::server::BURST {
                advertise(end, start, a.size, false)?;
            }
        }
        go_ahead(
            a,
            end,
            ping,
            "the go-ahead after the RDMA Read (RDMA_WRITE_ADV)",
        )?;
        advertise(end, sink, a.size, a.fault == Some(Fault::WriteStag))?;
        go_ahead(
            a,
            end,
            ping,
            "the go-ahead after the RDMA Write (RDMA_WRITE_COMPLETE)",
        )?;
        let got = sink
            .read(0, size as u64)
            .map_err(|e| Stop::Failed(e.to_string()))?;
        if a.validate && got != data {
            let at = got.iter().zip(&data).position(|(x, y)| x != y).unwrap_or(0);
            return Err(Stop::Failed(format!(
                "data mismatch! (ping {ping}, first at octet {at})"
            )));
        }
        if a.verbose {
            say!("ping data: {}", String::from_utf8_lossy(wire::c_str(&got)));
        }
        ping += 1;
    }
    eprintln!(
        "rddp rping: {ping} pings of {size} octets{}",
        if a.validate { ", each validated" } else { "" }
    );
    Ok(())
}
