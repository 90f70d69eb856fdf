//! Queue pairs: builder, then attach to a connected LLP; post work, get completions.
//!
//! The RDMAP engine of a queue pair is behind one mutex (the QP lock), never held
//! while a socket blocks. How the LLP is driven:
//!
//! * MPA (`Llp::Mpa`): no thread of its own. One task on the process's event
//!   loop (`qp/task.rs`, rddp-io) reads the non-blocking socket header first and
//!   places each payload from it straight into its region or receive buffer
//!   (rddp-mpa's `FpduReceiver`, RDMAP deciding from the header); whoever pumps the engine (the posting thread, or that task after a
//!   read or on WRITABLE) writes its FPDUs with non-blocking `sendmsg` under the
//!   QP lock (rddp-mpa's `MpaOut`). What the socket refuses stays queued (at most
//!   about `TX_BUDGET` octets) and the task waits for WRITABLE.
//! * SCTP (`Llp::Sctp`): no thread of its own either. The association is a task
//!   on the same loop (`transport::sctp`, woken by usrsctp's upcall); the queue
//!   pair's task (`qp/sctp_task.rs`) feeds the engine what the association
//!   relays; whoever pumps hands segments to the relay (at most about
//!   `TX_BUDGET` octets), sends them to usrsctp itself when nothing waits
//!   ahead of them and the association's connection is free (else the
//!   association's task sends them), and hears which ones SCTP took.
//! * In memory (`Llp::Threads`): a reader thread feeding the engine and a writer
//!   thread writing what it produces, the writer's queue bounded the same way.
//!
//! Either way a Send or Write completes when the LLP accepted its last octet.
//!
//! By job: `builder` (settings, a prepared queue pair, attaching it to an LLP),
//! `wr` (what the posting verbs take), this file (the queue pair's state and
//! its verbs), `pump` (moving what the engine produced), `recv` (receives),
//! `task` and `sctp_task` (the event-loop tasks of MPA and SCTP queue pairs),
//! `busy` (a thread polling a CQ reads its queue pairs' sockets), `threads`
//! (the in-memory LLP's reader and writer).

use crate::cq::{CompletionQueue, WorkCompletion};
use crate::device::lock;
use crate::error::Error;
use crate::mr::{MemoryRegion, RemoteBuf};
use crate::pd::ProtectionDomain;
use crate::quota::Resource;
use crate::srq::{SharedReceiveQueue, SrqMode};
use crate::transport::{Connection, Inbound, Llp, LlpInfo, SegmentReader, SegmentWriter};
use bytes::Bytes;
use rddp_mpa::fpdu::{MpaOut, Sent};
use rddp_proto::ddp::{BufferPool, RegionSpan};
use rddp_proto::ddp::{DdpConfig, OutSegment, Payload, StreamState};
use rddp_proto::mem::{Access, StreamId};
use rddp_proto::rdmap::{AsyncEvent, Completion, RdmapConfig, RdmapStream, WcOpcode, WorkRequest};
use rddp_proto::wq::{Held, RecvPlan, Slots, WorkQueues};
use rddp_wire::rdmap::qn;
use rddp_wire::{DdpHeader, Opcode, RdmapControl};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

mod builder;
mod busy;
pub(crate) use busy::Driven;
mod pump;
mod recv;
mod threads;
mod wr;

pub use builder::{PreparedQueuePair, QueuePairBuilder};
pub use recv::RecvWr;
use threads::{read_loop, write_loop};
pub use wr::{PostListError, PostWr, ReadFlags, SendFlags, WriteFlags};
use wr::{send_wr, write_wr};
mod sctp_task;
mod task;

static NEXT_QP: AtomicU32 = AtomicU32::new(1);

/// Octets of DDP segments a queue pair hands its writer ahead of the socket: the
/// writer's queue stays this short, and the engine keeps the rest of the posted
/// work (bounded by the send queue depth and IRD).
const TX_BUDGET: usize = 2 << 20;

struct State {
    rdmap: RdmapStream,
    /// Queue slots and the receives outstanding (rddp_proto::wq's rules).
    wq: WorkQueues,
    events: VecDeque<AsyncEvent>,
    close_sent: bool,
    /// Octets of segments handed to the writer and not yet written (at most
    /// about [`TX_BUDGET`]; the rest waits in the engine).
    tx_queued: usize,
    /// The writer thread has ended: nothing queued for it will be written.
    writer_gone: bool,
    /// MPA on the event loop: the transmit half and the task's bookkeeping.
    mpa: Option<LoopIo>,
    /// DDP over SCTP on the event loop: the session's relay.
    sctp: Option<SctpIo>,
}

impl State {
    /// The engine's counters with the transport's own (MPA: its system calls).
    fn stats(&self) -> crate::QpStats {
        let mut s = self.rdmap.stats();
        if let Some(io) = &self.mpa {
            s.llp_writes = io.out.writes();
            s.llp_reads = io.reads;
            s.tx_copied_octets += io.out.lease_copied();
            if let Some(h) = &io.rx {
                s.rx_copied_octets += h.input.rx.copied_octets();
            }
        }
        if let Some(io) = &self.sctp {
            let (rx, tx) = io.relay.copied();
            s.rx_copied_octets += rx;
            s.tx_copied_octets += tx;
        }
        s
    }
}

/// What the posting threads and the loop's task share of an SCTP session
/// (under the queue pair's lock).
struct SctpIo {
    relay: Arc<crate::transport::sctp::Relay>,
    /// The queue pair was dropped: the task ends by then at the latest.
    linger: Option<std::time::Instant>,
}

/// What the posting threads and the loop's task share of an MPA connection
/// (under the queue pair's lock).
struct LoopIo {
    out: MpaOut,
    sock: Arc<std::net::TcpStream>,
    /// The receive half (set once the task is spawned), read by the task or by
    /// a busy-polling thread (`busy`).
    rx: Option<busy::RxHalf>,
    /// Wakes the task (set once it is spawned).
    handle: Option<rddp_io::TaskHandle>,
    /// The task watches for WRITABLE (or was woken to): no need to wake it.
    armed: bool,
    /// The queue pair was dropped: the task gives queued output (a Terminate)
    /// until then to leave, then closes.
    linger: Option<std::time::Instant>,
    /// MULPDU follows TCP's EMSS (RFC 5044 §4), looked at as segments are cut.
    emss: Option<crate::transport::mpa::EmssWatch>,
    /// Receive calls that returned octets (`QpStats::llp_reads`).
    reads: u64,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled (with `state`) when the writer reported segments written or ended.
    written: Condvar,
    max_send_wr: u32,
    /// To the writer thread (threaded LLPs only).
    tx: Option<Mutex<Sender<TxCmd>>>,
    pd: ProtectionDomain,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    qp_num: u32,
    peer_private_data: Vec<u8>,
    info: LlpInfo,
    /// Told of each asynchronous event as it is queued
    /// ([`QueuePair::set_event_notify`]).
    event_notify: std::sync::OnceLock<EventNotify>,
}

/// What [`QueuePair::set_event_notify`] calls.
type EventNotify = Box<dyn Fn(&AsyncEvent) + Send + Sync>;

enum TxCmd {
    Segment(OutSegment),
    Close { abortive: bool },
}

/// A connected queue pair.
pub struct QueuePair {
    shared: Arc<Shared>,
    llp: QpLlp,
}

/// How a queue pair's LLP is driven.
enum QpLlp {
    /// A reader and a writer thread (in memory, `Llp::Threads`).
    Threads {
        threads: Option<(JoinHandle<()>, JoinHandle<()>)>,
        /// Signalled when the writer thread ends.
        writer_done: Receiver<()>,
        abort: Box<dyn FnMut() + Send>,
    },
    /// A task on the event loop (MPA, SCTP).
    Loop { handle: rddp_io::TaskHandle },
}

impl QueuePair {
    /// The queue pair's number, as in each [`crate::WorkCompletion`] it gives
    /// (`ibv_qp::qp_num`).
    pub fn qp_num(&self) -> u32 {
        self.shared.qp_num
    }

    /// Private data the peer sent at connection setup.
    pub fn peer_private_data(&self) -> &[u8] {
        &self.shared.peer_private_data
    }

    /// What the LLP's setup agreed (transport, MPA revision, CRC, Markers, peer).
    pub fn llp_info(&self) -> &LlpInfo {
        &self.shared.info
    }

    /// Register `buf` with an STag bound to this queue pair's stream only (RFC 5042:
    /// stream association): no other queue pair, even in the same PD, can use it.
    pub fn register_bound(&self, buf: Vec<u8>, access: Access) -> Result<MemoryRegion, Error> {
        MemoryRegion::register(
            &self.shared.pd,
            buf,
            access,
            Some(StreamId(self.shared.qp_num)),
        )
    }

    /// Send `data` without a memory region (like ibverbs' IBV_SEND_INLINE): the
    /// octets are copied at posting.
    pub fn post_send_inline(&self, wr_id: u64, data: &[u8], flags: SendFlags) -> Result<(), Error> {
        let (wr, signaled) = send_wr(wr_id, Bytes::copy_from_slice(data).into(), flags);
        self.post_as(wr, signaled)
    }

    /// RDMA Write `data` to the peer's `remote` at `remote_offset` without a
    /// memory region (like ibverbs' IBV_SEND_INLINE, or a gather of several
    /// regions' octets): the octets are copied at posting.
    pub fn post_write_inline(
        &self,
        wr_id: u64,
        data: &[u8],
        remote: RemoteBuf,
        remote_offset: u64,
        flags: WriteFlags,
    ) -> Result<(), Error> {
        let payload = Bytes::copy_from_slice(data).into();
        let (wr, signaled) = write_wr(wr_id, payload, remote, remote_offset, flags);
        self.post_as(wr, signaled)
    }

    /// This queue pair's counters (docs/features.md): octets and segments sent and placed,
    /// messages delivered, refusals, Terminates by class, CRC errors, completions.
    pub fn stats(&self) -> crate::QpStats {
        lock(&self.shared.state).stats()
    }

    /// MULPDU in force: the largest ULPDU the next segments are cut to. Over
    /// MPA it follows TCP's EMSS (RFC 5044 §4), looked at after segments 1, 2,
    /// 4, ... 32 were cut, then after every 64th.
    pub fn mulpdu(&self) -> usize {
        lock(&self.shared.state).rdmap.ddp().mulpdu()
    }

    /// Over MPA: TCP's EMSS now (TCP_MAXSEG), the input of [`Self::mulpdu`].
    pub fn llp_emss(&self) -> Option<usize> {
        let st = lock(&self.shared.state);
        st.mpa
            .as_ref()
            .map(|io| rddp_mpa::tcp::effective_mss(&io.sock))
    }

    /// Over MPA: output waits for the socket to drain (the socket took less
    /// than it was offered, and the event loop watches for it to become
    /// writable again). False otherwise, and over other LLPs. An observation
    /// only: it lets a caller, say a test, wait until the socket is full.
    pub fn llp_full(&self) -> bool {
        let st = lock(&self.shared.state);
        st.mpa.as_ref().is_some_and(|io| io.out.wants_writable())
    }

    /// IRD and ORD in force.
    pub fn ird_ord(&self) -> (u32, u32) {
        let st = lock(&self.shared.state);
        (st.rdmap.config().ird, st.rdmap.config().ord)
    }

    /// Send `len` octets of `mr` from `offset` (`ibv_post_send` with
    /// `IBV_WR_SEND`, RFC 5040 §5.3). The octets are read from the region
    /// when they are written to the LLP (over MPA: straight from the region).
    ///
    /// Refused, with nothing posted: [`Error::WrongPd`] (`mr` of another
    /// protection domain), [`Error::OutOfRange`], [`Error::SendQueueFull`]
    /// (`max_send_wr` outstanding), [`Error::Disconnecting`]. What fails after
    /// posting completes with a [`crate::WcStatus`] instead.
    pub fn post_send(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
        flags: SendFlags,
    ) -> Result<(), Error> {
        let payload = self.payload(mr, offset, len)?;
        let (wr, signaled) = send_wr(wr_id, payload, flags);
        self.post_as(wr, signaled)
    }

    /// RDMA Write `len` octets of `mr` from `offset` to the peer's `remote` at
    /// `remote_offset` (`ibv_post_send` with `IBV_WR_RDMA_WRITE`, RFC 5040
    /// §5.1; signaled, no fence: [`Self::post_write_with`]). Refused as
    /// [`Self::post_send`] is. A check of `remote` that fails at the peer
    /// (its STag, rights or bounds) ends the stream with a Terminate (RFC 5040
    /// §5.4) rather than refusing the posting.
    pub fn post_write(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
        remote: RemoteBuf,
        remote_offset: u64,
    ) -> Result<(), Error> {
        self.post_write_with(
            wr_id,
            mr,
            offset,
            len,
            remote,
            remote_offset,
            WriteFlags::default(),
        )
    }

    /// [`Self::post_write`] with `flags`: fenced behind earlier Reads, or
    /// unsignaled.
    #[allow(clippy::too_many_arguments)] // ibv_post_send's fields of a Write
    pub fn post_write_with(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
        remote: RemoteBuf,
        remote_offset: u64,
        flags: WriteFlags,
    ) -> Result<(), Error> {
        let payload = self.payload(mr, offset, len)?;
        let (wr, signaled) = write_wr(wr_id, payload, remote, remote_offset, flags);
        self.post_as(wr, signaled)
    }

    /// RDMA Read `len` octets of the peer's `remote` at `remote_offset` into `mr`
    /// at `offset` (`ibv_post_send` with `IBV_WR_RDMA_READ`). `mr` needs
    /// remote write access: the Read Response is a tagged placement (RFC 5040
    /// §5.2; unlike InfiniBand).
    ///
    /// Refused, with nothing posted: [`Error::WrongPd`], [`Error::OrdZero`]
    /// (the connection agreed ORD 0), [`Error::Quota`] (the consumer's
    /// outstanding Reads), [`Error::SendQueueFull`], [`Error::Disconnecting`].
    /// A Read beyond ORD waits on the send queue until a response frees a slot.
    pub fn post_read(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u32,
        remote: RemoteBuf,
        remote_offset: u64,
    ) -> Result<(), Error> {
        self.post_read_with(
            wr_id,
            mr,
            offset,
            len,
            remote,
            remote_offset,
            ReadFlags::default(),
        )
    }

    /// [`Self::post_read`] with `flags`: fenced behind earlier Reads,
    /// unsignaled.
    #[allow(clippy::too_many_arguments)] // ibv_post_send's fields of a Read
    pub fn post_read_with(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u32,
        remote: RemoteBuf,
        remote_offset: u64,
        flags: ReadFlags,
    ) -> Result<(), Error> {
        self.same_pd(mr)?;
        // ORD 0 agreed (RFC 6581): no Read can ever leave; refuse it now.
        if self.ird_ord().1 == 0 {
            return Err(Error::OrdZero);
        }
        let consumer = &self.shared.pd.inner.consumer;
        consumer.charge(Resource::OutstandingReads, 1)?;
        self.post_as(
            WorkRequest::Read {
                wr_id,
                local_stag: mr.stag(),
                local_to: mr.remote().to.wrapping_add(offset),
                len,
                remote_stag: remote.stag,
                remote_to: remote.to.wrapping_add(remote_offset),
                fence: flags.fence,
            },
            !flags.unsignaled,
        )
    }

    /// Enable the next `n` MSNs of incoming Sends (credits-mode shared receive
    /// queue, docs/receive-strategies.md strategy 3). Tell the peer how many it may send. A credit
    /// counts against `max_recv_wr` until the completion it enabled is polled.
    pub fn grant_credits(&self, n: u32) -> Result<(), Error> {
        let mut st = lock(&self.shared.state);
        st.wq.grant(n)?;
        if st.rdmap.ddp_mut().grant_credits(qn::SEND, n) {
            Ok(())
        } else {
            st.wq.ungrant(n);
            Err(Error::NotCredits)
        }
    }

    /// Take the asynchronous events queued since the last call (Terminate
    /// sent or received, close), oldest first; as `ibv_get_async_event`
    /// returns them, without waiting.
    #[must_use]
    pub fn async_events(&self) -> Vec<AsyncEvent> {
        lock(&self.shared.state).events.drain(..).collect()
    }

    /// Have `f` told of each asynchronous event as it is queued (those queued
    /// already first), e.g. to raise an `ibv_get_async_event` event or wake a
    /// connection manager; [`Self::async_events`] still returns them all. `f`
    /// runs under the queue pair's lock, on whichever thread queued the
    /// event: it must be short and must not call into this queue pair. Set
    /// once: `false` if a function was set before.
    pub fn set_event_notify(&self, f: impl Fn(&AsyncEvent) + Send + Sync + 'static) -> bool {
        let st = lock(&self.shared.state);
        if self.shared.event_notify.set(Box::new(f)).is_err() {
            return false;
        }
        if let Some(f) = self.shared.event_notify.get() {
            st.events.iter().for_each(f);
        }
        true
    }

    /// Graceful disconnect (`rdma_disconnect`; RFC 5041: in-progress messages
    /// complete before the LLP closes). Everything posted before finishes
    /// first, work that ORD or a fence holds back and Reads awaiting their
    /// responses included; then the LLP closes.
    /// Later work requests are refused ([`Error::Disconnecting`]); receives may
    /// still be posted until the peer closes. Once the stream is closed, work
    /// posted is taken and completes at once as flushed, as on a dead stream
    /// (a verbs queue pair in its error state).
    pub fn disconnect(&self) {
        let mut st = lock(&self.shared.state);
        st.rdmap.close();
        self.shared.pump(&mut st);
    }

    fn same_pd(&self, mr: &MemoryRegion) -> Result<(), Error> {
        if !mr.pd().same(&self.shared.pd) {
            return Err(Error::WrongPd);
        }
        Ok(())
    }

    /// A lease on the range: the LLP reads it from the region when it writes the
    /// segments (no copy at posting; the octets sent are those in the region then).
    fn payload(&self, mr: &MemoryRegion, offset: u64, len: u64) -> Result<Payload, Error> {
        self.same_pd(mr)?;
        mr.lease(offset, len)
    }

    /// Post Sends and RDMA Writes as one list (as `ibv_post_send` takes a
    /// chain): one lock of the queue pair for all of them, and their FPDUs
    /// leave together, gathered into as few `sendmsg` calls as the socket takes
    /// (up to 64 FPDUs or 1 MiB each over MPA), where posting them one by one
    /// writes each as it is posted. Each counts and completes as if posted
    /// alone. On a refused one, those before it stay posted (and are sent).
    pub fn post_list(&self, wrs: &[PostWr<'_>]) -> Result<(), PostListError> {
        let mut reqs = Vec::with_capacity(wrs.len());
        let mut bad = None;
        for (i, wr) in wrs.iter().enumerate() {
            let req = match *wr {
                PostWr::Send {
                    wr_id,
                    mr,
                    offset,
                    len,
                    flags,
                } => self
                    .payload(mr, offset, len)
                    .map(|payload| send_wr(wr_id, payload, flags)),
                PostWr::Write {
                    wr_id,
                    mr,
                    offset,
                    len,
                    remote,
                    remote_offset,
                    flags,
                } => self
                    .payload(mr, offset, len)
                    .map(|payload| write_wr(wr_id, payload, remote, remote_offset, flags)),
            };
            match req {
                Ok(r) => reqs.push(r),
                Err(e) => {
                    bad = Some((i, e));
                    break;
                }
            }
        }
        let mut st = lock(&self.shared.state);
        let mut posted = 0;
        for (wr, signaled) in reqs {
            if let Err(e) = self.admit(&mut st, &wr) {
                bad = Some((posted, e));
                break;
            }
            st.rdmap
                .post_as(self.shared.pd.inner.consumer.device().mem(), wr, signaled);
            posted += 1;
        }
        if posted > 0 {
            self.shared.pump(&mut st);
        }
        match bad {
            None => Ok(()),
            Some((posted, e)) => Err(PostListError {
                posted,
                error: Box::new(e),
            }),
        }
    }

    /// May `wr` go on the send queue now (not disconnecting, a slot free)? Takes
    /// the slot; a refused Read gives its outstanding-Read charge back.
    fn admit(&self, st: &mut State, wr: &WorkRequest) -> Result<(), Error> {
        let refused = if st.rdmap.is_closing() {
            Some(Error::Disconnecting)
        } else if st.wq.post_send().is_err() {
            Some(Error::SendQueueFull {
                depth: self.shared.max_send_wr,
            })
        } else {
            None
        };
        if let Some(e) = refused {
            if let WorkRequest::Read { .. } = wr {
                self.shared
                    .pd
                    .inner
                    .consumer
                    .refund(Resource::OutstandingReads, 1);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Post `wr` to the send queue; `signaled`: see [`SendFlags::unsignaled`].
    fn post_as(&self, wr: WorkRequest, signaled: bool) -> Result<(), Error> {
        let mut st = lock(&self.shared.state);
        self.admit(&mut st, &wr)?;
        st.rdmap
            .post_as(self.shared.pd.inner.consumer.device().mem(), wr, signaled);
        self.shared.pump(&mut st);
        Ok(())
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        match &mut self.llp {
            QpLlp::Threads {
                threads,
                writer_done,
                abort,
            } => {
                {
                    let mut st = lock(&self.shared.state);
                    st.rdmap.abort();
                    self.shared.pump(&mut st);
                    if !st.close_sent {
                        st.close_sent = true;
                        self.shared.send_cmd(TxCmd::Close { abortive: true });
                    }
                }
                if let Some((r, w)) = threads.take() {
                    // Let the writer hand over what is queued (a Terminate), but not
                    // forever: a responder whose peer never spoke waits at its gate.
                    let _ = writer_done.recv_timeout(LINGER);
                    // Whatever the peer does, our reader and writer must return.
                    abort();
                    let _ = w.join();
                    let _ = r.join();
                }
            }
            QpLlp::Loop { handle } => {
                // Never waits for the peer: the task lets what is queued (a
                // Terminate) leave for at most LINGER, then closes the socket.
                let mut st = lock(&self.shared.state);
                st.rdmap.abort();
                if st.sctp.is_some() {
                    // The Terminate goes to the relay first, then the close.
                    self.shared.pump(&mut st);
                }
                if !st.close_sent {
                    st.close_sent = true;
                    if let Some(io) = &mut st.mpa {
                        io.out.close = Some(true);
                    }
                    if let Some(io) = &st.sctp {
                        io.relay.close(true);
                    }
                }
                self.shared.pump(&mut st);
                if let Some(io) = &mut st.mpa {
                    io.linger = Some(std::time::Instant::now() + LINGER);
                }
                if let Some(io) = &mut st.sctp {
                    io.linger = Some(std::time::Instant::now() + LINGER);
                }
                drop(st);
                handle.wake();
            }
        }
        let last = self.stats();
        crate::trace::dropped(self.shared.qp_num, &last);
        let device = self.shared.pd.inner.consumer.device();
        device.inner.stats.retire(self.shared.qp_num, &last);
        self.shared
            .pd
            .inner
            .consumer
            .refund(Resource::QueuePairs, 1);
    }
}

/// How long a dropped queue pair's queued output (a Terminate) may take to leave.
const LINGER: Duration = Duration::from_secs(2);
