//! The rping server (rping_test_server): per ping, RDMA Read the client's start
//! buffer, go-ahead, RDMA Write it into the client's sink, go-ahead; until the
//! client disconnects.

use super::args::{Fault, RpingArgs};
use super::wire::{self, End, INFO_LEN, Info, Stop};
use rddp::transport::mpa::Listener;
use rddp::{Access, CompletionQueue, Device, QueuePairBuilder, Quota, RemoteBuf, SendFlags};
use rddp::{ProtectionDomain, WcOpcode};

/// rping's send queue depth (RPING_SQ_DEPTH) and CQ size.
const SQ_DEPTH: u32 = 16;

pub(super) fn run(a: &RpingArgs) -> Result<(), String> {
    let at = a.endpoint();
    let listener = Listener::bind(&at, wire::mpa_options(a))
        .map_err(|e| format!("cannot listen on {at}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("rddp rping: listening on {local}");
    let pd = Device::new()
        .consumer("rping", Quota::default())
        .and_then(|c| c.alloc_pd())
        .map_err(|e| e.to_string())?;
    loop {
        let res = serve_one(a, &listener, &pd);
        if !a.persistent {
            return res;
        }
        if let Err(e) = res {
            eprintln!("rddp rping: {e}");
        }
    }
}

fn serve_one(a: &RpingArgs, listener: &Listener, pd: &ProtectionDomain) -> Result<(), String> {
    let cq = CompletionQueue::new(2 * SQ_DEPTH as usize);
    let mut qp = QueuePairBuilder::new(pd, &cq, &cq)
        .max_send_wr(SQ_DEPTH)
        .max_recv_wr(2)
        .build()
        .map_err(|e| e.to_string())?;
    // The receive is posted before the Reply goes out, as rping does before
    // rdma_accept.
    qp.post_recv(0, INFO_LEN).map_err(|e| e.to_string())?;
    let conn = listener
        .accept()
        .map_err(|e| format!("connect error: {e}"))?;
    super::client::report_connected(&conn);
    let qp = qp.attach(conn).map_err(|e| e.to_string())?;
    let rdma = pd
        .register(
            vec![0; a.size as usize],
            Access::REMOTE_READ | Access::REMOTE_WRITE,
        )
        .map_err(|e| e.to_string())?;
    let mut end = End::new(qp, cq, a);
    let mut done = 0u64;
    match pings(a, &mut end, &rdma, &mut done) {
        // rping's server returns 0 when the client disconnected ("wait for
        // RDMA_READ_ADV state 10").
        // A client gone before its first message refused what we agreed to: say
        // so instead of ending as if all went well.
        Err(Stop::Disconnected) if done == 0 && a.markers => Err(
            "the client closed right after the MPA Reply: it refuses the Markers we asked \
             for (siw does); serve it without --markers"
                .into(),
        ),
        Err(Stop::Disconnected) if done == 0 && a.crc => Err(
            "the client closed right after the MPA Reply: it may refuse the CRC we asked \
             for (siw built with mpa_crc_strict does); serve it without --crc"
                .into(),
        ),
        Err(Stop::Disconnected) if done == 0 => {
            Err("the client closed the connection before its first message".into())
        }
        Err(Stop::Disconnected) => {
            eprintln!("server DISCONNECT EVENT...");
            eprintln!("rddp rping: served {done} pings");
            Ok(())
        }
        Err(Stop::Failed(e)) => {
            end.qp.disconnect();
            Err(format!("rping server failed: {e}"))
        }
        Ok(()) => Ok(()),
    }
}

/// The next advertisement: a 16-octet receive, the receive posted again at once.
fn advert(a: &RpingArgs, end: &mut End, first: bool, what: &str) -> Result<Info, Stop> {
    let wc = end.wait(WcOpcode::Recv, what)?;
    let data = wc.buffer.as_deref().unwrap_or_default();
    let data = &data[..(wc.byte_len as usize).min(data.len())];
    let info = Info::parse(data)
        .ok_or_else(|| Stop::Failed(format!("Received bogus data, size {}", wc.byte_len)))?;
    end.debug(&format!(
        "Received rkey {:x} addr {:x} len {} from peer",
        info.rkey, info.addr, info.size
    ));
    if a.fault != Some(Fault::NoRecv) || first {
        end.qp
            .post_recv(0, INFO_LEN)
            .map_err(|e| Stop::Failed(format!("post recv error: {e}")))?;
    }
    Ok(info)
}

/// The peer's STag, or with `--fault f` one it never registered (key flipped).
fn wrong_if(a: &RpingArgs, f: Fault, stag: u32) -> u32 {
    if a.fault == Some(f) {
        stag ^ 0xFF
    } else {
        stag
    }
}

/// Copies of the first message `--fault extra-send` sends.
pub(super) const BURST: usize = 8;

/// The go-ahead Send; with `burst` ([`BURST`] of them from its first
/// octets, for `--fault extra-send`) posted as one list, so that they leave
/// together: the copies after the first must find the client's receive
/// queue empty, which a client quick to repost could otherwise refill
/// between two separate writes.
fn go_ahead(end: &mut End, burst: Option<&rddp::MemoryRegion>) -> Result<(), Stop> {
    let err = |e: String| Stop::Failed(format!("post send error: {e}"));
    match burst {
        None => end
            .qp
            .post_send_inline(1, &[0; INFO_LEN], SendFlags::default())
            .map_err(|e| err(e.to_string()))?,
        Some(mr) => {
            let send = rddp::PostWr::Send {
                wr_id: 1,
                mr,
                offset: 0,
                len: INFO_LEN as u64,
                flags: SendFlags::default(),
            };
            end.qp
                .post_list(&[send; BURST])
                .map_err(|e| err(e.to_string()))?;
        }
    }
    end.debug("server posted go ahead");
    Ok(())
}

fn pings(
    a: &RpingArgs,
    end: &mut End,
    rdma: &rddp::MemoryRegion,
    done: &mut u64,
) -> Result<(), Stop> {
    let mut first = true;
    loop {
        let src = advert(a, end, first, "the client's start buffer (RDMA_READ_ADV)")?;
        end.debug("server received sink adv");
        if src.size > a.size {
            return Err(Stop::Failed(format!(
                "the client's size {} is larger than ours ({}; use -S)",
                src.size, a.size
            )));
        }
        let remote = RemoteBuf {
            stag: wrong_if(a, Fault::ReadStag, src.rkey),
            to: src.addr,
            len: u64::from(src.size),
        };
        end.qp
            .post_read(2, rdma, 0, src.size, remote, 0)
            .map_err(|e| Stop::Failed(format!("post send error: {e}")))?;
        end.debug("server posted rdma read req ");
        end.wait(WcOpcode::RdmaRead, "the RDMA Read (RDMA_READ_COMPLETE)")?;
        end.debug("server received read complete");
        let data = rdma
            .read(0, u64::from(src.size))
            .map_err(|e| Stop::Failed(e.to_string()))?;
        if a.verbose {
            say!(
                "server ping data: {}",
                String::from_utf8_lossy(wire::c_str(&data))
            );
        }
        let burst = (first && a.fault == Some(Fault::ExtraSend)).then_some(rdma);
        go_ahead(end, burst)?;
        let sink = advert(a, end, false, "the client's sink (RDMA_WRITE_ADV)")?;
        end.debug("server received sink adv");
        // rping writes strlen + 1: the data up to and including its NUL.
        let len = (wire::c_str(&data).len() + 1).min(data.len()) as u64;
        let remote = RemoteBuf {
            stag: wrong_if(a, Fault::WriteStag, sink.rkey),
            to: sink.addr,
            len: u64::from(sink.size),
        };
        end.debug(&format!(
            "rdma write from lkey {:x} laddr 0 len {len}",
            rdma.stag()
        ));
        end.qp
            .post_write(3, rdma, 0, len, remote, 0)
            .map_err(|e| Stop::Failed(format!("post send error: {e}")))?;
        end.wait(WcOpcode::RdmaWrite, "the RDMA Write (RDMA_WRITE_COMPLETE)")?;
        end.debug("server rdma write complete ");
        go_ahead(end, None)?;
        first = false;
        *done += 1;
    }
}
