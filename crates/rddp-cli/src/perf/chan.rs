//! One queue pair as the perf tool drives it: posts with a bounded number in
//! flight, receives kept posted, control messages, and receive credits.
//!
//! Credits: the client may only Send while the number of its Sends is below the
//! server's cumulative count of posted receives. The server tells that count in
//! its control messages and, during a run, by an RDMA Write of it (u64 BE) into
//! the client's mailbox, which needs no receive buffer and so cannot deadlock.
//! The first Send (Hello) is allowed by convention: the server posts its receives
//! before the client may connect.
//!
//! By job: [`recvs`] (receive buffers, receives handed out), [`credits`]
//! (grants and the wait for them), [`post`] (control and data messages, Writes,
//! Reads), [`reap`] (send-side completions), [`close`] (the connection's end).

use super::endpoint::Endpoint;
use super::exec::Look;
use super::proto::{CTRL_LEN, Msg};
use super::signal::Signaling;
use rddp::{
    Access, AsyncEvent, MemoryRegion, PostWr, RecvWr, RemoteBuf, SendFlags, WcStatus,
    WorkCompletion,
};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod close;
mod credits;
mod post;
mod reap;
mod recvs;

use credits::{Credits, Grant};

const CTRL: u64 = 1 << 63;
const GRANT: u64 = 1 << 62;
/// A one-octet RDMA Read that confirms the Writes posted before it (the low bits
/// say how many data work requests had been posted).
const SYNC: u64 = 1 << 61;
const FLAGS: u64 = CTRL | GRANT | SYNC;

/// Octets of receive buffers a side keeps posted at most (see `set_recv_len`).
pub(crate) const RECV_BUDGET: usize = 64 << 20;
/// Messages longer than this go into one buffer ([`Chan::one_buffer`]):
/// half of perftest's default cycle buffer (a page), as perftest decides.
pub(crate) const ONE_BUFFER_ABOVE: usize = 2048;
/// Receive buffers kept posted at least.
pub(crate) const MIN_RECVS: usize = 16;
/// Receive completions taken from the CQ at once, and given-back buffers kept.
const RECV_BATCH: usize = 64;

/// How long a side waits without any progress before it gives up, in seconds
/// (10; the hidden `--stall-secs` changes it, so tests need not wait that long).
static STALL_SECS: AtomicU64 = AtomicU64::new(10);

/// How long a side waits without any progress before it gives up.
pub(crate) fn stall() -> Duration {
    Duration::from_secs(STALL_SECS.load(Ordering::Relaxed))
}

pub(crate) fn set_stall(secs: u64) {
    STALL_SECS.store(secs.max(1), Ordering::Relaxed);
}

/// Connections this process drives at once (--qps): a task waiting for a
/// credit looks less often when there are many, so that thousands of waiting
/// tasks leave the workers to the ones with work.
static PARALLEL: AtomicU64 = AtomicU64::new(1);

pub(crate) fn set_parallel(n: u64) {
    PARALLEL.store(n.max(1), Ordering::Relaxed);
}

/// Connections this process drives at once (see [`set_parallel`]).
pub(crate) fn parallel() -> u64 {
    PARALLEL.load(Ordering::Relaxed)
}

/// What a receive brought.
pub(crate) enum Incoming {
    Ctrl(Msg),
    /// A data Send, exactly as long as it was.
    Data(Vec<u8>),
}

pub(crate) struct Chan {
    pub ep: Endpoint,
    ctrl_mr: MemoryRegion,
    recv_len: usize,
    /// How many receives to keep posted.
    target: usize,
    /// Length of each posted receive, oldest first, and the region it names
    /// if it was posted into one ([`Self::one_buffer`]).
    posted: VecDeque<(usize, Option<Arc<MemoryRegion>>)>,
    /// Receives posted from now on name this region's first `recv_len`
    /// octets, all the same ones ([`Self::one_buffer`]).
    one_buffer: Option<Arc<MemoryRegion>>,
    posted_total: u64,
    outstanding: usize,
    /// Data work requests completed so far.
    data_done: u64,
    /// Data work requests known to have reached the peer (see `sync`).
    confirmed: u64,
    next_id: u64,
    credits: Option<Credits>,
    grant: Option<Grant>,
    /// Receive completions taken from the CQ and not yet handed out (taken up
    /// to [`RECV_BATCH`] at a time: one CQ lock and one wait per batch).
    arrived: VecDeque<WorkCompletion>,
    /// Send-side completions just polled (kept: no allocation a poll).
    sent_wcs: Vec<WorkCompletion>,
    /// Buffers of handed-out receives, given back ([`Self::recycle`]) to be
    /// posted again: no allocation and zeroing per message.
    spare: Vec<Vec<u8>>,
    /// The list [`Self::post_recvs`] hands `post_recv_buffers` (its allocation
    /// reused; emptied before each use).
    post_list: Vec<(u64, Vec<u8>)>,
    /// The event that ended the connection, once `check_events` found one
    /// (reported by `--json` on failure: see [`super::failure`]).
    pub ended_by: Option<AsyncEvent>,
    /// When each control message but Pad was sent or received, once
    /// [`Self::log_ctrl`] asked for it (the client: `--json` tells how many
    /// fell inside the timed interval).
    ctrl_log: Option<Vec<Instant>>,
    /// A message went to the peer since the last receive completed: what
    /// comes next is likely its answer, a round trip away
    /// ([`Self::look_for_recv`]).
    answer_due: bool,
    /// Length of the last receive completed.
    last_len: u32,
    /// Which data Sends are signaled, and what a Send's completion covers.
    signals: Signaling,
}

fn verbs(what: &str) -> impl Fn(rddp::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Chan {
    /// Take over `ep`, post `recvs` receive buffers of `recv_len` octets, then let
    /// the LLP's segments in (see [`Endpoint::open`]).
    pub(crate) fn new(ep: Endpoint, recv_len: usize, recvs: usize) -> Result<Self, String> {
        let ctrl_mr = ep
            .pd
            .register(vec![0; CTRL_LEN], Access::NONE)
            .map_err(verbs("registering the control buffer"))?;
        let mut c = Self {
            ep,
            ctrl_mr,
            recv_len: recv_len.max(CTRL_LEN),
            target: recvs,
            posted: VecDeque::new(),
            one_buffer: None,
            posted_total: 0,
            outstanding: 0,
            data_done: 0,
            confirmed: 0,
            next_id: 0,
            credits: None,
            grant: None,
            arrived: VecDeque::new(),
            sent_wcs: Vec::new(),
            spare: Vec::new(),
            post_list: Vec::new(),
            ended_by: None,
            ctrl_log: None,
            answer_due: false,
            last_len: 0,
            signals: Signaling::default(),
        };
        c.post_recvs(recvs)?;
        c.ep.open();
        Ok(c)
    }

    /// Note from now on when each control message is sent or received.
    pub(crate) fn log_ctrl(&mut self) {
        self.ctrl_log.get_or_insert_with(Vec::new);
    }

    /// The instants noted since the last call (see [`Self::log_ctrl`]).
    pub(crate) fn take_ctrl_log(&mut self) -> Vec<Instant> {
        self.ctrl_log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn note_ctrl(&mut self) {
        if let Some(l) = &mut self.ctrl_log {
            l.push(Instant::now());
        }
    }
}

fn check_status(wc: &WorkCompletion) -> Result<(), String> {
    if wc.status == WcStatus::Success {
        Ok(())
    } else {
        Err(format!(
            "{:?} work request completed with {:?}",
            wc.opcode, wc.status
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::recvs::SPIN_FOR_LEN;
    use super::*;
    use crate::perf::exec;
    use rddp::Device;
    use rddp::transport::memory_pair;

    /// (client, server) channels over the in-memory LLP.
    fn pair(dev: &Device) -> (Chan, Chan) {
        let (a, b) = memory_pair(4096);
        let c = Endpoint::attach(dev, "client", a).unwrap();
        let s = Endpoint::attach(dev, "server", b).unwrap();
        (
            Chan::new(c, CTRL_LEN, 4).unwrap(),
            Chan::new(s, CTRL_LEN, 4).unwrap(),
        )
    }

    /// Regions that the posted receives name, each once.
    fn regions(c: &Chan) -> Vec<Arc<MemoryRegion>> {
        let mut out: Vec<Arc<MemoryRegion>> = Vec::new();
        for r in c.posted.iter().filter_map(|(_, r)| r.as_ref()) {
            if !out.iter().any(|o| Arc::ptr_eq(o, r)) {
                out.push(r.clone());
            }
        }
        out
    }

    #[test]
    fn large_sends_go_into_one_buffer_and_control_messages_are_read_from_it() {
        let dev = Device::new();
        let (mut client, mut server) = pair(&dev);
        let size = 64 * 1024;
        server.set_recv_len(size, 512, true).unwrap();
        // Every receive posted for the size names the same octets of one region.
        let named = regions(&server);
        assert_eq!(named.len(), 1);
        let in_region = server.posted.iter().filter(|(_, r)| r.is_some()).count();
        assert_eq!(in_region, server.target - 4, "the four earlier ones stay");
        // The four earlier (control-sized) receives: used up by Pads first.
        let src = client.ep.pd.register(vec![7; size], Access::NONE).unwrap();
        // (Each sent before the next reuses the client's control buffer.)
        for _ in 0..4 {
            exec::block_on(client.send_ctrl(&Msg::Pad)).unwrap();
            exec::block_on(client.drain()).unwrap();
        }
        exec::block_on(client.send_data(&src, size as u64)).unwrap();
        exec::block_on(client.drain()).unwrap();
        for _ in 0..4 {
            assert!(matches!(
                exec::block_on(server.recv("Pad")).unwrap(),
                Incoming::Ctrl(Msg::Pad)
            ));
        }
        assert!(matches!(
            exec::block_on(server.recv("data")).unwrap(),
            Incoming::Data(_)
        ));
        assert_eq!(named[0].read(0, size as u64).unwrap(), vec![7; size]);
        // The End lands on the same octets and is read from there.
        exec::block_on(client.send_ctrl(&Msg::End { iters: 1 })).unwrap();
        exec::block_on(client.drain()).unwrap();
        assert!(matches!(
            exec::block_on(server.recv("End")).unwrap(),
            Incoming::Ctrl(Msg::End { iters: 1 })
        ));
    }

    #[test]
    fn a_stream_of_sends_asks_for_a_completion_every_so_often_and_counts_all() {
        let dev = Device::new();
        let (mut client, mut server) = pair(&dev);
        server.set_recv_len(64, 16, false).unwrap();
        let src = client.ep.pd.register(vec![3; 64], Access::NONE).unwrap();
        client.signal_every(4);
        for i in 0..10 {
            exec::block_on(client.send_data_as(&src, 64, i == 9)).unwrap();
        }
        for _ in 0..10 {
            assert!(matches!(
                exec::block_on(server.recv("data")).unwrap(),
                Incoming::Data(_)
            ));
        }
        // The 4th, the 8th and the last asked for one; nothing else came.
        std::thread::sleep(Duration::from_millis(20));
        let got = client.ep.send_cq.poll(64);
        assert_eq!(
            got.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
            [4, 8, 10],
            "signaled Sends' completions"
        );
        assert_eq!(client.take(got).unwrap(), 10, "each covers those before it");
        assert_eq!((client.outstanding(), client.data_done()), (0, 10));
    }

    #[test]
    fn a_wait_for_a_receive_spins_when_an_answer_is_due_or_messages_are_large() {
        let dev = Device::new();
        let (mut client, mut server) = pair(&dev);
        server
            .set_recv_len(SPIN_FOR_LEN as usize, 8, false)
            .unwrap();
        let big = vec![1; SPIN_FOR_LEN as usize];
        let src = client.ep.pd.register(big.clone(), Access::NONE).unwrap();
        let answer = server.ep.pd.register(big, Access::NONE).unwrap();
        assert_eq!(
            server.look_for_recv(),
            Look::Sleep,
            "nothing sent, nothing received"
        );
        // A small message: the next wait leaves the stream to the I/O thread.
        exec::block_on(client.send_data(&src, 64)).unwrap();
        assert_eq!(
            client.look_for_recv(),
            Look::Answer,
            "the client awaits an answer"
        );
        exec::block_on(server.recv("small")).unwrap();
        assert_eq!(server.look_for_recv(), Look::Sleep);
        // The server answers: its next wait spins (a ping-pong).
        exec::block_on(server.send_data(&answer, 64)).unwrap();
        assert_eq!(server.look_for_recv(), Look::Answer);
        exec::block_on(client.recv("answer")).unwrap();
        assert_eq!(client.look_for_recv(), Look::Sleep, "the answer came");
        // Answered by a list of Sends (here one): as after one Send.
        exec::block_on(client.send_data(&src, 64)).unwrap();
        exec::block_on(server.recv("small")).unwrap();
        assert_eq!(server.look_for_recv(), Look::Sleep);
        exec::block_on(server.send_data_list(&answer, 64, 1, true)).unwrap();
        assert_eq!(server.look_for_recv(), Look::Answer, "after a posted list");
        exec::block_on(client.recv("listed")).unwrap();
        // Two more small ones use up the server's control-sized receives.
        for _ in 0..2 {
            exec::block_on(client.send_data(&src, 64)).unwrap();
            exec::block_on(client.drain()).unwrap();
            exec::block_on(server.recv("small")).unwrap();
            assert_eq!(server.look_for_recv(), Look::Sleep);
        }
        // A large message: the next wait spins, reading is the copy's work.
        exec::block_on(client.send_data(&src, u64::from(SPIN_FOR_LEN))).unwrap();
        exec::block_on(client.drain()).unwrap();
        match exec::block_on(server.recv("large")).unwrap() {
            Incoming::Data(d) => assert_eq!(d.len(), SPIN_FOR_LEN as usize),
            Incoming::Ctrl(m) => panic!("expected the large message, got {m:?}"),
        }
        assert_eq!(server.look_for_recv(), Look::Spin, "after a large message");
        exec::block_on(client.send_data(&src, 64)).unwrap();
        exec::block_on(server.recv("small")).unwrap();
        assert_eq!(
            server.look_for_recv(),
            Look::Sleep,
            "after a small one again"
        );
    }

    #[test]
    fn small_sends_and_verified_runs_keep_buffers_of_their_own() {
        let dev = Device::new();
        let (_client, mut server) = pair(&dev);
        server.set_recv_len(ONE_BUFFER_ABOVE, 512, true).unwrap();
        assert!(regions(&server).is_empty());
        server.set_recv_len(64 * 1024, 512, false).unwrap();
        assert!(regions(&server).is_empty());
    }
}
