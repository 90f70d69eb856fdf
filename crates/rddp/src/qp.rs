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
//!   QP lock (`transport::mpa_out`). What the socket refuses stays queued (at most
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

use crate::cq::{CompletionQueue, WorkCompletion};
use crate::device::lock;
use crate::error::Error;
use crate::mr::{MemoryRegion, RemoteBuf};
use crate::pd::ProtectionDomain;
use crate::quota::Resource;
use crate::srq::{SharedReceiveQueue, SrqMode};
use crate::transport::mpa_out::{MpaOut, Sent};
use crate::transport::{Connection, Inbound, Llp, LlpInfo, SegmentReader, SegmentWriter};
use bytes::Bytes;
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

mod busy;
pub(crate) use busy::Driven;
mod recv;
pub use recv::RecvWr;
mod sctp_task;
mod task;

static NEXT_QP: AtomicU32 = AtomicU32::new(1);

/// Octets of DDP segments a queue pair hands its writer ahead of the socket: the
/// writer's queue stays this short, and the engine keeps the rest of the posted
/// work (bounded by the send queue depth and IRD).
const TX_BUDGET: usize = 2 << 20;

/// Options of a Send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendFlags {
    /// Send with Solicited Event.
    pub solicited: bool,
    /// Send with Invalidate: the peer invalidates this STag of its own.
    pub invalidate: Option<u32>,
    /// Wait until every earlier RDMA Read has completed.
    pub fence: bool,
    /// No completion when it succeeds (a work request without
    /// `IBV_SEND_SIGNALED` on a queue pair created with `sq_sig_all` 0): its
    /// send-queue slot is free again once its last octet was accepted by the
    /// LLP. A failed or flushed one still completes, with its `wr_id`. Sends
    /// complete in posting order, so a signaled one's completion says every
    /// Send posted before it has completed too.
    pub unsignaled: bool,
}

/// Options of an RDMA Write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteFlags {
    /// Wait until every earlier RDMA Read has completed (RFC 5040 §5.5: a
    /// Write posted after a Read of the same remote octets may otherwise be
    /// placed before the peer has read them for the Read Response).
    pub fence: bool,
    /// No completion when it succeeds, as [`SendFlags::unsignaled`]: its
    /// send-queue slot is free again once its last octet was accepted by the
    /// LLP; a failed or flushed one still completes. A send queue completes
    /// in posting order, so a later signaled request's completion covers it.
    pub unsignaled: bool,
}

/// Options of an RDMA Read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadFlags {
    /// Its Read Request leaves only once every earlier Read has its
    /// response (IBV_SEND_FENCE).
    pub fence: bool,
    /// No completion when it succeeds (a Read without IBV_SEND_SIGNALED):
    /// its send-queue slot and its outstanding-Read charge come back once
    /// its response was placed; a failed or flushed one still completes. A
    /// send queue completes in posting order, so a later signaled request's
    /// completion says the Read's data is in place.
    pub unsignaled: bool,
}

/// One Send or RDMA Write of a list posted at once ([`QueuePair::post_list`]).
#[derive(Clone, Copy)]
pub enum PostWr<'a> {
    /// [`QueuePair::post_send`]'s arguments.
    Send {
        /// Returned in the completion (`Completion::wr_id`).
        wr_id: u64,
        /// The region the payload is taken from.
        mr: &'a MemoryRegion,
        /// Where in `mr` the payload starts.
        offset: u64,
        /// Payload octets.
        len: u64,
        /// Solicited Event, Invalidate, fence, unsignaled.
        flags: SendFlags,
    },
    /// [`QueuePair::post_write`]'s arguments.
    Write {
        /// Returned in the completion (`Completion::wr_id`).
        wr_id: u64,
        /// The region the payload is taken from.
        mr: &'a MemoryRegion,
        /// Where in `mr` the payload starts.
        offset: u64,
        /// Payload octets.
        len: u64,
        /// The peer's advertised buffer.
        remote: RemoteBuf,
        /// Where in `remote` the payload lands.
        remote_offset: u64,
        /// Fence, unsignaled.
        flags: WriteFlags,
    },
}

/// A Send's work request, and whether it is signaled.
fn send_wr(wr_id: u64, payload: Payload, flags: SendFlags) -> (WorkRequest, bool) {
    let wr = WorkRequest::Send {
        wr_id,
        payload,
        solicited: flags.solicited,
        invalidate: flags.invalidate,
        fence: flags.fence,
    };
    (wr, !flags.unsignaled)
}

/// An RDMA Write's work request, and whether it is signaled.
fn write_wr(
    wr_id: u64,
    payload: Payload,
    remote: RemoteBuf,
    remote_offset: u64,
    flags: WriteFlags,
) -> (WorkRequest, bool) {
    let wr = WorkRequest::Write {
        wr_id,
        payload,
        remote_stag: remote.stag,
        remote_to: remote.to.wrapping_add(remote_offset),
        fence: flags.fence,
    };
    (wr, !flags.unsignaled)
}

/// A list stopped at a refused work request ([`QueuePair::post_list`]), as
/// `ibv_post_send`'s `bad_wr`: the ones before it are posted, it and the rest
/// are not.
#[derive(Debug, thiserror::Error)]
#[error("work request {posted} of the list refused: {error}")]
pub struct PostListError {
    /// How many of the list were posted (the index of the refused one).
    pub posted: usize,
    /// Why the refused one was refused.
    pub error: Box<Error>,
}

/// Builds a queue pair in a protection domain: `ibv_create_qp`, its
/// `ibv_qp_init_attr` given call by call.
#[must_use = "a builder does nothing until `build` is called"]
pub struct QueuePairBuilder {
    pd: ProtectionDomain,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    ird: u32,
    ord: u32,
    max_send_wr: u32,
    max_recv_wr: u32,
    srq: Option<SrqLink>,
}

/// What a queue pair keeps of its shared receive queue.
struct SrqLink {
    pool: BufferPool,
    mode: SrqMode,
    pd: ProtectionDomain,
    slots: Slots,
}

impl QueuePairBuilder {
    /// A queue pair in `pd` completing to `send_cq` and `recv_cq` (they may be
    /// the same queue): 16 send and 16 receive slots, IRD and ORD 16 until the
    /// builder's other calls change them; [`Self::build`] charges the quota.
    pub fn new(
        pd: &ProtectionDomain,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
    ) -> Self {
        Self {
            pd: pd.clone(),
            send_cq: send_cq.clone(),
            recv_cq: recv_cq.clone(),
            ird: 16,
            ord: 16,
            max_send_wr: 16,
            max_recv_wr: 16,
            srq: None,
        }
    }

    /// Most work requests outstanding on the send queue (`cap.max_send_wr`,
    /// reserved on the send CQ). A request counts from its posting until its
    /// completion is polled.
    pub fn max_send_wr(mut self, n: u32) -> Self {
        self.max_send_wr = n;
        self
    }

    /// Most receives posted at once (`cap.max_recv_wr`, reserved on the
    /// receive CQ); a receive counts until its completion is polled. With a
    /// credits shared receive queue: the most credits outstanding, each until
    /// the completion it enabled is polled.
    pub fn max_recv_wr(mut self, n: u32) -> Self {
        self.max_recv_wr = n;
        self
    }

    /// Receive Sends from a shared receive queue instead of the QP's own
    /// (`ibv_qp_init_attr::srq`); it must be of the same protection domain
    /// ([`Self::build`] refuses another's with [`Error::SrqWrongPd`]).
    pub fn srq(mut self, srq: &SharedReceiveQueue) -> Self {
        self.srq = Some(SrqLink {
            pool: srq.pool.clone(),
            mode: srq.mode,
            pd: srq.pd.clone(),
            slots: srq.slots.clone(),
        });
        self
    }

    /// Inbound RDMA Read queue depth offered to the peer (at most 16383, the
    /// 14-bit MPA field; negotiated by `connect_mpa` and `accept_mpa`).
    pub fn ird(mut self, n: u32) -> Self {
        self.ird = n;
        self
    }

    /// Outbound RDMA Read queue depth wanted (at most 16383). If the peer's IRD
    /// leaves it at 0, every RDMA Read is refused at posting ([`Error::OrdZero`]).
    pub fn ord(mut self, n: u32) -> Self {
        self.ord = n;
        self
    }

    /// Reserve the queue pair (charged to the consumer's quota). Refused with
    /// [`Error::SrqWrongPd`], [`Error::IrdOrdTooLarge`] (above 16383, the
    /// 14-bit fields of RFC 6581) or [`Error::Quota`] (the consumer's queue
    /// pairs).
    pub fn build(self) -> Result<PreparedQueuePair, Error> {
        if let Some(link) = &self.srq
            && !link.pd.same(&self.pd)
        {
            return Err(Error::SrqWrongPd);
        }
        // RFC 6581: IRD and ORD travel in 14-bit fields; what we use is what we say.
        let max = u32::from(rddp_wire::EnhancedBlock::IRD_ORD_MAX);
        for (what, value) in [("IRD", self.ird), ("ORD", self.ord)] {
            if value > max {
                return Err(Error::IrdOrdTooLarge { what, value });
            }
        }
        self.pd.inner.consumer.charge(Resource::QueuePairs, 1)?;
        Ok(PreparedQueuePair {
            b: self,
            qp_num: NEXT_QP.fetch_add(1, Ordering::Relaxed),
            early_recvs: Vec::new(),
            early_credits: 0,
            attached: false,
        })
    }
}

/// A receive posted before attach.
enum EarlyRecv {
    /// A buffer of this many octets, allocated at attach.
    Len(usize),
    /// Octets of a registered region (`post_recv_mr`).
    Region(RegionSpan),
}

/// A queue pair not yet connected. Dropping it returns the quota.
pub struct PreparedQueuePair {
    b: QueuePairBuilder,
    qp_num: u32,
    /// Receives posted before attach, posted before the LLP is read at all.
    early_recvs: Vec<(u64, EarlyRecv)>,
    /// Credits granted before attach (credits-mode shared receive queue).
    early_credits: u32,
    /// Attached: its quota charges belong to the queue pair now.
    attached: bool,
}

impl Drop for PreparedQueuePair {
    fn drop(&mut self) {
        if self.attached {
            return;
        }
        let consumer = &self.b.pd.inner.consumer;
        consumer.refund(Resource::QueuePairs, 1);
        consumer.refund(Resource::ReceiveBuffers, self.early_recvs.len() as u64);
    }
}

impl PreparedQueuePair {
    /// The queue pair's number, as in each [`crate::WorkCompletion`] it gives.
    pub fn qp_num(&self) -> u32 {
        self.qp_num
    }

    /// Post a receive before the queue pair is attached, so that a Send the peer
    /// issues as soon as the connection is up finds a buffer. Charged to the
    /// consumer's receive buffers ([`Error::Quota`]).
    pub fn post_recv(&mut self, wr_id: u64, len: usize) -> Result<(), Error> {
        self.post_early(wr_id, EarlyRecv::Len(len))
    }

    /// Post a receive into `len` octets of `mr` at `offset` before the queue
    /// pair is attached (see [`QueuePair::post_recv_mr`]); the span is checked
    /// now, and goes to the receive queue (or its pool) at attach.
    pub fn post_recv_mr(
        &mut self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
    ) -> Result<(), Error> {
        let place = mr.span(&self.b.pd, offset, len)?;
        self.post_early(wr_id, EarlyRecv::Region(place))
    }

    fn post_early(&mut self, wr_id: u64, recv: EarlyRecv) -> Result<(), Error> {
        self.b
            .pd
            .inner
            .consumer
            .charge(Resource::ReceiveBuffers, 1)?;
        self.early_recvs.push((wr_id, recv));
        Ok(())
    }

    /// Grant the first `n` MSNs before the queue pair is attached (credits-mode
    /// shared receive queue), so that the peer's first Sends are already valid.
    pub fn grant_credits(&mut self, n: u32) -> Result<(), Error> {
        match &self.b.srq {
            Some(SrqLink {
                mode: SrqMode::Credits,
                ..
            }) => {
                self.early_credits = self.early_credits.saturating_add(n);
                Ok(())
            }
            _ => Err(Error::NotCredits),
        }
    }

    /// Connect over MPA/TCP to `addr` (this queue pair's IRD/ORD go into `opts`)
    /// and attach.
    pub fn connect_mpa(
        self,
        addr: impl std::net::ToSocketAddrs,
        mut opts: rddp_mpa::MpaOptions,
    ) -> Result<QueuePair, Error> {
        opts.ird = u16::try_from(self.b.ird).unwrap_or(u16::MAX);
        opts.ord = u16::try_from(self.b.ord).unwrap_or(u16::MAX);
        let conn = crate::transport::mpa::connect(addr, &opts)?;
        self.attach(conn)
    }

    /// Take the queue slots of the early receives and credits, all or none.
    fn take_early_slots(&self, wq: &mut WorkQueues) -> Result<(), Error> {
        wq.grant(self.early_credits)?;
        for (i, &(wr_id, _)) in self.early_recvs.iter().enumerate() {
            if let Err(e) = wq.post_recv(wr_id) {
                for &(id, _) in &self.early_recvs[..i] {
                    wq.unpost_recv(id);
                }
                wq.ungrant(self.early_credits);
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// Undo [`Self::take_early_slots`] after the first `posted` early receives went
    /// to the engine. With a shared receive queue those are in its pool now, and
    /// their slots and quota stay with it.
    fn untake_early_slots(&mut self, wq: &mut WorkQueues, posted: usize) {
        let kept = if self.b.srq.is_some() { posted } else { 0 };
        for &(id, _) in &self.early_recvs[kept..] {
            wq.unpost_recv(id);
        }
        self.early_recvs.drain(..kept);
        wq.ungrant(self.early_credits);
    }

    /// The IRD/ORD this queue pair asks for at connection setup.
    pub fn ird_ord(&self) -> (u32, u32) {
        (self.b.ird, self.b.ord)
    }

    /// Run the queue pair over a connected LLP (MPA/TCP, SCTP or in memory). IRD
    /// and ORD: those the LLP's setup agreed, or this builder's where the LLP
    /// negotiates none (SCTP). On failure every quota and reservation it was
    /// charged is returned, the early receives' included.
    pub fn attach(mut self, conn: Connection) -> Result<QueuePair, Error> {
        let (ird, ord) = if conn.ird_ord_negotiated {
            (conn.ird, conn.ord)
        } else {
            (self.b.ird, self.b.ord)
        };
        let cfg = RdmapConfig {
            ddp: DdpConfig {
                mulpdu: conn.mulpdu,
                ..DdpConfig::default()
            },
            ird,
            ord,
        };
        let mut rdmap =
            RdmapStream::new(StreamId(self.qp_num), self.b.pd.id(), cfg).map_err(Error::Setup)?;
        // A Read Response keeps its IRD slot until its last segment goes to the
        // LLP: the writer thread takes it from a channel (see write_loop), MPA's
        // writer reports it under this queue pair's lock. Over SCTP the relay's
        // report comes from another thread, later than the peer's next Read
        // Request may: the slot is freed as the engine hands the segment to the
        // relay (which holds at most TX_BUDGET octets), the engine's default.
        if !matches!(conn.llp, Llp::Sctp(_)) {
            rdmap.hold_ird_until_sent();
        }
        // A Send or Write completes when the LLP accepted its last octet (the
        // writer reports each segment written), not when it was queued.
        rdmap.complete_when_sent();
        // A CQ refuses what it could not hold (docs/receive-strategies.md). The send side reserves its
        // depth; the receive side its depth, its credit limit, or its whole SRQ pool.
        // The DDP sink's binding below shares the receive reservation.
        let max_recv_wr = self.b.max_recv_wr as usize;
        let plan = match &self.b.srq {
            None => RecvPlan::Own { depth: max_recv_wr },
            Some(l) if l.mode == SrqMode::Credits => RecvPlan::Credits {
                slots: l.slots.clone(),
                limit: max_recv_wr,
            },
            Some(l) => RecvPlan::Pool {
                pool: l.pool.id(),
                slots: l.slots.clone(),
            },
        };
        let mut wq = WorkQueues::reserve(
            self.b.send_cq.as_ref(),
            self.b.recv_cq.as_ref(),
            StreamId(self.qp_num),
            u64::from(self.qp_num),
            self.b.max_send_wr as usize,
            plan,
        )?;
        if let Some(l) = &self.b.srq {
            rdmap.ddp_mut().set_recv_pool(qn::SEND, &l.pool)?;
        }
        rdmap
            .ddp_mut()
            .bind_cq(qn::SEND, &self.b.recv_cq, u64::from(self.b.max_recv_wr))?;
        if conn.send_read_rtr {
            // RFC 6581: the initiator's first message is a zero-length RDMA Read.
            rdmap.post_read_rtr()?;
        }
        self.take_early_slots(&mut wq)?;
        // The slots taken leave room for every early receive and credit.
        for i in 0..self.early_recvs.len() {
            let (wr_id, recv) = &self.early_recvs[i];
            let posted = match recv {
                EarlyRecv::Len(len) => rdmap.post_recv(*wr_id, vec![0; *len]),
                EarlyRecv::Region(place) => rdmap.post_recv_in_region(*wr_id, place.clone()),
            };
            if let Err(e) = posted {
                self.untake_early_slots(&mut wq, i);
                return Err(e.into());
            }
        }
        if self.early_credits > 0 && !rdmap.ddp_mut().grant_credits(qn::SEND, self.early_credits) {
            self.untake_early_slots(&mut wq, self.early_recvs.len());
            return Err(Error::NotCredits);
        }
        let (mut mpa, mut sctp, mut threads) = (None, None, None);
        match conn.llp {
            Llp::Threads {
                reader,
                writer,
                abort,
            } => threads = Some((reader, writer, abort)),
            Llp::Mpa(m) => mpa = Some(m),
            Llp::Sctp(s) => sctp = Some(s),
        }
        let (tx, rx) = channel();
        let mut state = State {
            rdmap,
            wq,
            events: VecDeque::new(),
            close_sent: false,
            tx_queued: 0,
            writer_gone: false,
            mpa: None,
            sctp: None,
        };
        let mut task = None;
        if let Some(m) = mpa {
            let sock = Arc::new(m.sock);
            state.mpa = Some(LoopIo {
                out: MpaOut::new(sock.clone(), m.enc, m.initiator, m.wire),
                sock: sock.clone(),
                rx: None,
                handle: None,
                armed: false,
                linger: None,
                emss: m.emss,
                reads: 0,
            });
            task = Some((sock, m.input, m.hold));
        }
        let mut sctp_task = None;
        if let Some(s) = sctp {
            state.sctp = Some(SctpIo {
                relay: s.relay.clone(),
                linger: None,
            });
            sctp_task = Some((s.relay, s.hold));
        }
        let shared = Arc::new(Shared {
            written: Condvar::new(),
            state: Mutex::new(state),
            max_send_wr: self.b.max_send_wr,
            tx: threads.is_some().then(|| Mutex::new(tx)),
            pd: self.b.pd.clone(),
            send_cq: self.b.send_cq.clone(),
            recv_cq: self.b.recv_cq.clone(),
            qp_num: self.qp_num,
            peer_private_data: conn.peer_private_data,
            info: conn.info,
        });
        // Whatever attach queued (the Read RTR) goes out now, not with the next post.
        shared.pump(&mut lock(&shared.state));
        crate::trace::attached(self.qp_num, &shared.info, conn.ird, conn.ord, conn.mulpdu);
        let weak: std::sync::Weak<dyn crate::stats::StatsSource> = Arc::downgrade(&shared) as _;
        let device = self.b.pd.inner.consumer.device();
        device.inner.stats.attach(self.qp_num, weak);
        let llp = match (threads, task, sctp_task) {
            (Some((reader, writer, abort)), _, _) => {
                let s1 = shared.clone();
                let (wdone_tx, wdone) = channel::<()>();
                let w = std::thread::spawn(move || {
                    write_loop(writer, rx, &s1);
                    let _ = wdone_tx.send(());
                });
                let s2 = shared.clone();
                let r = std::thread::spawn(move || read_loop(reader, &s2));
                QpLlp::Threads {
                    threads: Some((r, w)),
                    writer_done: wdone,
                    abort,
                }
            }
            (None, Some((sock, input, hold)), _) => {
                // One task on the process's event loop (a fixed pool of threads).
                let handle = task::spawn(shared.clone(), sock, input, hold)?;
                // A thread busy-polling either CQ may read the socket itself.
                let driven = Arc::downgrade(&shared) as std::sync::Weak<dyn busy::Driven>;
                self.b.send_cq.add_driven(driven.clone());
                if !self.b.recv_cq.same(&self.b.send_cq) {
                    self.b.recv_cq.add_driven(driven);
                }
                QpLlp::Loop { handle }
            }
            (None, None, Some((relay, hold))) => {
                // The same loop; the association's task moves the chunks.
                let handle = sctp_task::spawn(shared.clone(), relay, hold)?;
                QpLlp::Loop { handle }
            }
            (None, None, None) => unreachable!("a connection is one of the kinds"),
        };
        // The quota charges (the early receives' too) move to the connected queue pair.
        self.attached = true;
        Ok(QueuePair { shared, llp })
    }
}

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
}

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

impl crate::stats::StatsSource for Shared {
    fn stats(&self) -> crate::QpStats {
        lock(&self.state).stats()
    }
}

impl Shared {
    /// Move what the engine produced: segments to the writer, completions to the
    /// CQs (returning quota), events to the ULP; close once a Terminate has left,
    /// or once a graceful disconnect has nothing left to finish.
    fn pump(&self, st: &mut State) {
        self.pump_in(st, false);
    }

    /// [`Self::pump`]; `in_task`: called by the loop's own task (which decides
    /// itself what to wait for, so it is not woken).
    fn pump_in(&self, st: &mut State, in_task: bool) {
        if st.mpa.is_some() {
            self.pump_mpa(st, in_task);
        } else if st.sctp.is_some() {
            Self::pump_sctp(st);
        } else {
            self.pump_channel(st);
        }
        while let Some(c) = st.rdmap.poll_completion() {
            // A receive that is not outstanding is never passed on (none invented
            // or doubled).
            // An unsignaled success gives its send-queue slot back here and
            // the ULP hears nothing of it. A Read, signaled or not, is no
            // longer outstanding.
            if c.opcode == WcOpcode::RdmaRead {
                self.pd.inner.consumer.refund(Resource::OutstandingReads, 1);
            }
            if let Some(held) = st.wq.completed(&c) {
                self.complete(c, held);
            }
        }
        if *st.rdmap.ddp().state() == StreamState::Closed {
            // Nothing more comes back from a closed stream: a receive still
            // outstanding completes as flushed (none lost).
            for (c, held) in st.wq.flush_unreturned() {
                self.complete(c, held);
            }
        }
        while let Some(e) = st.rdmap.poll_event() {
            crate::trace::event(self.qp_num, &e);
            st.events.push_back(e);
        }
    }

    /// Segments to the writer thread; close once a Terminate has left, or once a
    /// graceful disconnect has nothing left to finish.
    fn pump_channel(&self, st: &mut State) {
        let Some(tx) = &self.tx else {
            return;
        };
        let tx = lock(tx);
        while st.tx_queued < TX_BUDGET
            && let Some(seg) = st.rdmap.poll_segment()
        {
            st.tx_queued += seg.len();
            let _ = tx.send(TxCmd::Segment(seg));
        }
        if st.rdmap.should_close() && !st.close_sent {
            st.close_sent = true;
            let _ = tx.send(TxCmd::Close { abortive: true });
        }
        if st.rdmap.poll_close() && !st.close_sent {
            st.close_sent = true;
            let _ = tx.send(TxCmd::Close { abortive: false });
        }
    }

    /// Over MPA on the loop: segments into the connection's queue (bounded by
    /// TX_BUDGET), written now as far as the socket takes them (by this thread:
    /// no hop to another); what it refuses waits for the task's WRITABLE.
    fn pump_mpa(&self, st: &mut State, in_task: bool) {
        let State {
            rdmap,
            tx_queued,
            close_sent,
            mpa,
            ..
        } = st;
        let Some(io) = mpa else {
            return;
        };
        loop {
            // The engine had nothing more (not stopped by the budget).
            let mut exhausted = false;
            while *tx_queued < TX_BUDGET {
                let Some(seg) = rdmap.poll_segment() else {
                    exhausted = true;
                    break;
                };
                // MULPDU follows TCP's EMSS (RFC 5044 §4) from the next segment
                // on; segments are cut as they are taken here, so this covers
                // Read Responses too.
                if let Some(w) = &mut io.emss
                    && let Some(n) = w.on_segment(&io.sock)
                {
                    let _ = rdmap.ddp_mut().set_mulpdu(n);
                }
                *tx_queued += seg.len();
                io.out.push(seg);
            }
            if rdmap.should_close() && !*close_sent {
                *close_sent = true;
                io.out.close = Some(true);
            }
            if rdmap.poll_close() && !*close_sent {
                *close_sent = true;
                io.out.close = Some(false);
            }
            let before = *tx_queued;
            io.out.flush(&mut |s: Sent| {
                *tx_queued = tx_queued.saturating_sub(s.len);
                if s.read_response {
                    rdmap.read_response_sent();
                }
                rdmap.segment_sent(s.last);
            });
            // Written up to the budget: the engine may have more now.
            if *tx_queued == before || io.out.failed.is_some() || io.out.wants_writable() {
                break;
            }
            // What was written gives the engine no new segment (it only
            // completes work): look again only if the budget stopped it, or
            // if a close may be due now (our Terminate left, a graceful close
            // whose last work went). Saves a round of empty polls and an empty
            // flush per post.
            if exhausted && !rdmap.should_close() && !rdmap.is_closing() && !rdmap.is_terminated() {
                break;
            }
        }
        let wake = io.out.wants_writable() || io.out.failed.is_some() || io.out.shut.is_some();
        if !in_task
            && wake
            && !io.armed
            && let Some(h) = &io.handle
        {
            io.armed = true;
            h.wake();
        }
    }

    /// Over SCTP on the loop: what the association handed to SCTP is reported
    /// (completions, budget, IRD), then segments to the relay (bounded by
    /// TX_BUDGET), which hands them to usrsctp from this thread when nothing
    /// waits ahead of them (else the association's task sends them), and
    /// again while usrsctp takes them; then a close.
    fn pump_sctp(st: &mut State) {
        let State {
            rdmap,
            tx_queued,
            close_sent,
            sctp,
            ..
        } = st;
        let Some(io) = sctp else {
            return;
        };
        let mut sent = Vec::new();
        let mut segs = Vec::new();
        loop {
            io.relay.take_sent(&mut sent);
            for s in sent.drain(..) {
                *tx_queued = tx_queued.saturating_sub(s.len);
                rdmap.segment_sent(s.last);
            }
            // A Read Response's IRD slot is freed as the engine hands out its
            // last segment (no hold_ird_until_sent over SCTP, see attach).
            while *tx_queued < TX_BUDGET
                && let Some(seg) = rdmap.poll_segment()
            {
                *tx_queued += seg.len();
                segs.push(seg);
            }
            if segs.is_empty() {
                break;
            }
            // A lost association: the task reads the loss and the engine
            // flushes the work.
            if !io.relay.send(segs.drain(..)) {
                break;
            }
            io.relay.take_sent(&mut sent);
            // Nothing taken (left to the association's task): stop here.
            if sent.is_empty() {
                break;
            }
        }
        if rdmap.should_close() && !*close_sent {
            *close_sent = true;
            io.relay.close(true);
        }
        if rdmap.poll_close() && !*close_sent {
            *close_sent = true;
            io.relay.close(false);
        }
    }

    fn send_cmd(&self, cmd: TxCmd) {
        if let Some(tx) = &self.tx {
            let _ = lock(tx).send(cmd);
        }
    }

    fn complete(&self, c: Completion, held: Held) {
        let consumer = &self.pd.inner.consumer;
        let cq = match c.opcode {
            WcOpcode::Recv => {
                consumer.refund(Resource::ReceiveBuffers, 1);
                &self.recv_cq
            }
            WcOpcode::Send | WcOpcode::RdmaWrite | WcOpcode::RdmaRead => &self.send_cq,
        };
        cq.push(
            WorkCompletion {
                qp_num: self.qp_num,
                c,
            },
            held,
        );
    }
}

fn write_loop(w: Box<dyn SegmentWriter>, rx: Receiver<TxCmd>, shared: &Shared) {
    write_all(w, rx, shared);
    lock(&shared.state).writer_gone = true;
    shared.written.notify_all();
}

/// Segments written before the writer reports them (one QP lock for all).
const REPORT_EVERY: usize = 64;

fn write_all(mut w: Box<dyn SegmentWriter>, rx: Receiver<TxCmd>, shared: &Shared) {
    // Segments written and not yet reported: (octets, L flag), in order.
    let mut written: Vec<(usize, bool)> = Vec::new();
    let mut next = None;
    loop {
        let cmd = match next.take() {
            Some(c) => c,
            None => match rx.recv() {
                Ok(c) => c,
                Err(_) => break,
            },
        };
        match cmd {
            TxCmd::Segment(seg) => {
                // A Read Response frees its IRD slot as its last segment goes out
                // (before the write, so a peer answering at once finds it free).
                if let DdpHeader::Tagged(h) = seg.header
                    && h.ctrl.last()
                    && RdmapControl(h.rsvd_ulp).opcode() == Opcode::READ_RESPONSE
                {
                    lock(&shared.state).rdmap.read_response_sent();
                }
                if w.write_segment(&seg).is_err() {
                    report(shared, &mut written);
                    w.close(true);
                    return;
                }
                written.push((seg.len(), seg.header.last()));
                // More already queued: write it before reporting, so a stream of
                // small messages takes the QP lock once per batch, not per segment.
                if let Ok(c) = rx.try_recv() {
                    next = Some(c);
                    if written.len() < REPORT_EVERY {
                        continue;
                    }
                }
                report(shared, &mut written);
            }
            TxCmd::Close { abortive } => {
                report(shared, &mut written);
                w.close(abortive);
                return;
            }
        }
    }
    report(shared, &mut written);
    w.close(true);
}

/// The LLP took these segments whole: the Sends and Writes they end complete,
/// and the budget they used lets the next segments through.
fn report(shared: &Shared, written: &mut Vec<(usize, bool)>) {
    if written.is_empty() {
        return;
    }
    let mut st = lock(&shared.state);
    for (len, last) in written.drain(..) {
        st.tx_queued = st.tx_queued.saturating_sub(len);
        st.rdmap.segment_sent(last);
    }
    shared.pump(&mut st);
    drop(st);
    shared.written.notify_all();
}

/// How long a closed LLP's reader waits for the writer to report what it was
/// writing, so that work whose octets the LLP accepted completes as sent.
const WRITER_SETTLE: Duration = Duration::from_secs(1);

fn read_loop(mut r: Box<dyn SegmentReader>, shared: &Shared) {
    loop {
        let got = r.read();
        let mut st = lock(&shared.state);
        if matches!(got, Ok(Inbound::Closed) | Err(_)) {
            // The writer may have handed the last segments to the LLP and not yet
            // said so: let it, before the close flushes what is still in flight.
            let deadline = std::time::Instant::now() + WRITER_SETTLE;
            while st.tx_queued > 0 && !st.writer_gone {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                st = shared
                    .written
                    .wait_timeout(st, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        let done = match got {
            Ok(Inbound::Segment { seq, bytes }) => {
                // Refusals are handled inside the engine (Terminate, events). The
                // placement locks only the region it writes.
                let mem = shared.pd.inner.consumer.device().mem();
                let _ = st.rdmap.on_segment(mem, seq, &bytes);
                false
            }
            Ok(Inbound::Mulpdu(n)) => {
                let _ = st.rdmap.ddp_mut().set_mulpdu(n);
                false
            }
            Ok(Inbound::Error { code, detail }) => {
                st.rdmap.llp_error(code, detail);
                false
            }
            Ok(Inbound::Closed) => {
                st.rdmap.on_llp_closed(true);
                true
            }
            Err(e) => {
                crate::trace::llp_lost(shared.qp_num, &e);
                st.rdmap.on_llp_closed(false);
                true
            }
        };
        shared.pump(&mut st);
        if done {
            // The LLP is gone or the peer closed: close our side too.
            if !st.close_sent {
                st.close_sent = true;
                shared.send_cmd(TxCmd::Close { abortive: false });
            }
            return;
        }
    }
}
