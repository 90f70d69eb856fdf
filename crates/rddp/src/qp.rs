//! Queue pairs: builder, then attach to a connected LLP; post work, get completions.
//!
//! Each connected queue pair runs two threads: one reads segments from the LLP and
//! feeds the RDMAP engine, one writes the segments the engine produces. The engine
//! is behind a mutex that is never held while a socket blocks.

use crate::cq::{CompletionQueue, WorkCompletion};
use crate::device::lock;
use crate::error::Error;
use crate::mr::{MemoryRegion, RemoteBuf};
use crate::pd::ProtectionDomain;
use crate::quota::Resource;
use crate::srq::{SharedReceiveQueue, SrqMode};
use crate::transport::{Connection, Inbound, LlpInfo, SegmentReader, SegmentWriter};
use bytes::Bytes;
use rddp_proto::cq::{CqReservation, CqSource};
use rddp_proto::ddp::BufferPool;
use rddp_proto::ddp::{DdpConfig, OutSegment};
use rddp_proto::mem::{Access, StreamId};
use rddp_proto::rdmap::{
    AsyncEvent, Completion, INTERNAL_WR_ID, RdmapConfig, RdmapStream, WcOpcode, WorkRequest,
};
use rddp_wire::rdmap::qn;
use rddp_wire::{DdpHeader, Opcode, RdmapControl};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

static NEXT_QP: AtomicU32 = AtomicU32::new(1);

/// Options of a Send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendFlags {
    /// Send with Solicited Event.
    pub solicited: bool,
    /// Send with Invalidate: the peer invalidates this STag of its own.
    pub invalidate: Option<u32>,
    /// Wait until every earlier RDMA Read has completed.
    pub fence: bool,
}

/// Builds a queue pair in a protection domain.
pub struct QueuePairBuilder {
    pd: ProtectionDomain,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    ird: u32,
    ord: u32,
    max_send_wr: u32,
    max_recv_wr: u32,
    srq: Option<(BufferPool, SrqMode, ProtectionDomain)>,
}

impl QueuePairBuilder {
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

    /// Most work requests outstanding on the send queue (reserved on the send CQ).
    pub fn max_send_wr(mut self, n: u32) -> Self {
        self.max_send_wr = n;
        self
    }

    /// Most receives posted at once (reserved on the receive CQ). With a credits
    /// shared receive queue: the most credits outstanding.
    pub fn max_recv_wr(mut self, n: u32) -> Self {
        self.max_recv_wr = n;
        self
    }

    /// Receive Sends from a shared receive queue instead of the QP's own.
    pub fn srq(mut self, srq: &SharedReceiveQueue) -> Self {
        self.srq = Some((srq.pool.clone(), srq.mode, srq.pd.clone()));
        self
    }

    /// Inbound RDMA Read queue depth offered to the peer.
    pub fn ird(mut self, n: u32) -> Self {
        self.ird = n;
        self
    }

    /// Outbound RDMA Read queue depth wanted.
    pub fn ord(mut self, n: u32) -> Self {
        self.ord = n;
        self
    }

    /// Reserve the queue pair (charged to the consumer's quota).
    pub fn build(self) -> Result<PreparedQueuePair, Error> {
        if let Some((_, _, pd)) = &self.srq
            && pd.id() != self.pd.id()
        {
            return Err(Error::SrqWrongPd);
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

/// A queue pair not yet connected. Dropping it returns the quota.
pub struct PreparedQueuePair {
    b: QueuePairBuilder,
    qp_num: u32,
    /// Receives posted before attach, posted before the LLP is read at all.
    early_recvs: Vec<(u64, usize)>,
    /// Credits granted before attach (credits-mode shared receive queue).
    early_credits: u32,
    /// Attached: the quota charge now belongs to the connected queue pair.
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
    pub fn qp_num(&self) -> u32 {
        self.qp_num
    }

    /// Post a receive before the queue pair is attached, so that a Send the peer
    /// issues as soon as the connection is up finds a buffer.
    pub fn post_recv(&mut self, wr_id: u64, len: usize) -> Result<(), Error> {
        self.b
            .pd
            .inner
            .consumer
            .charge(Resource::ReceiveBuffers, 1)?;
        self.early_recvs.push((wr_id, len));
        Ok(())
    }

    /// Grant the first `n` MSNs before the queue pair is attached (credits-mode
    /// shared receive queue), so that the peer's first Sends are already valid.
    pub fn grant_credits(&mut self, n: u32) -> Result<(), Error> {
        match &self.b.srq {
            Some((_, SrqMode::Credits, _)) => {
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

    /// The IRD/ORD this queue pair asks for at connection setup.
    pub fn ird_ord(&self) -> (u32, u32) {
        (self.b.ird, self.b.ord)
    }

    /// Run the queue pair over a connected LLP (MPA/TCP, SCTP or in memory).
    pub fn attach(mut self, conn: Connection) -> Result<QueuePair, Error> {
        let cfg = RdmapConfig {
            ddp: DdpConfig {
                mulpdu: conn.mulpdu,
                ..DdpConfig::default()
            },
            ird: conn.ird,
            ord: conn.ord,
        };
        let mut rdmap =
            RdmapStream::new(StreamId(self.qp_num), self.b.pd.id(), cfg).map_err(Error::Setup)?;
        // Segments wait in a channel for the writer thread: a Read Response keeps its
        // IRD slot until the writer takes its last segment (see write_loop).
        rdmap.hold_ird_until_sent();
        // Seed 003: a CQ refuses what it could not hold. The send side reserves its
        // depth; the receive side its depth, its credit limit, or its whole SRQ pool.
        let send_reservation = self.b.send_cq.as_ref().reserve(
            CqSource::Ulp(u64::from(self.qp_num)),
            self.b.max_send_wr as usize,
        )?;
        if let Some((pool, _, _)) = &self.b.srq {
            rdmap.ddp_mut().set_recv_pool(qn::SEND, pool)?;
        }
        rdmap
            .ddp_mut()
            .bind_cq(qn::SEND, &self.b.recv_cq, u64::from(self.b.max_recv_wr))?;
        for (wr_id, len) in std::mem::take(&mut self.early_recvs) {
            rdmap.post_recv(wr_id, vec![0; len])?;
        }
        if self.early_credits > 0 && !rdmap.ddp_mut().grant_credits(qn::SEND, self.early_credits) {
            return Err(Error::NotCredits);
        }
        let send_read_rtr = conn.send_read_rtr;
        if send_read_rtr {
            // RFC 6581: the initiator's first message is a zero-length RDMA Read.
            let mem = self.b.pd.inner.consumer.device().mem();
            rdmap.post(
                &mem,
                WorkRequest::Read {
                    wr_id: INTERNAL_WR_ID,
                    local_stag: 1,
                    local_to: 0,
                    len: 0,
                    remote_stag: 1,
                    remote_to: 0,
                    fence: false,
                },
            );
        }
        let (tx, rx) = channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                rdmap,
                events: VecDeque::new(),
                close_sent: false,
                send_outstanding: 0,
                rtr_read_pending: send_read_rtr,
            }),
            max_send_wr: self.b.max_send_wr,
            max_recv_wr: self.b.max_recv_wr,
            srq: self.b.srq.is_some(),
            _send_reservation: send_reservation,
            tx: Mutex::new(tx),
            pd: self.b.pd.clone(),
            send_cq: self.b.send_cq.clone(),
            recv_cq: self.b.recv_cq.clone(),
            qp_num: self.qp_num,
            peer_private_data: conn.peer_private_data,
            info: conn.info,
        });
        // Whatever attach queued (the Read RTR) goes out now, not with the next post.
        shared.pump(&mut lock(&shared.state));
        let Connection {
            reader,
            writer,
            abort,
            ..
        } = conn;
        let s1 = shared.clone();
        let (wdone_tx, wdone) = channel::<()>();
        let w = std::thread::spawn(move || {
            write_loop(writer, rx, &s1);
            let _ = wdone_tx.send(());
        });
        let s2 = shared.clone();
        let r = std::thread::spawn(move || read_loop(reader, &s2));
        // The quota charge moves to the connected queue pair (not forget(self):
        // that leaked the builder's PD and CQ handles, and with them the device).
        self.attached = true;
        Ok(QueuePair {
            shared,
            threads: Some((r, w)),
            writer_done: wdone,
            abort,
        })
    }
}

struct State {
    rdmap: RdmapStream,
    events: VecDeque<AsyncEvent>,
    close_sent: bool,
    /// Send-queue work requests posted and not yet completed.
    send_outstanding: u32,
    /// The RFC 6581 Read RTR has not completed yet.
    rtr_read_pending: bool,
}

struct Shared {
    state: Mutex<State>,
    max_send_wr: u32,
    max_recv_wr: u32,
    /// Receives come from a shared receive queue (its pool bounds them).
    srq: bool,
    _send_reservation: CqReservation,
    tx: Mutex<Sender<TxCmd>>,
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
    threads: Option<(JoinHandle<()>, JoinHandle<()>)>,
    /// Signalled when the writer thread ends.
    writer_done: Receiver<()>,
    abort: Box<dyn FnMut() + Send>,
}

impl QueuePair {
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
        self.post(WorkRequest::Send {
            wr_id,
            payload: Bytes::copy_from_slice(data),
            solicited: flags.solicited,
            invalidate: flags.invalidate,
            fence: flags.fence,
        })
    }

    /// IRD and ORD in force.
    pub fn ird_ord(&self) -> (u32, u32) {
        let st = lock(&self.shared.state);
        (st.rdmap.config().ird, st.rdmap.config().ord)
    }

    /// Send `len` octets of `mr` from `offset`. The payload is copied at posting.
    pub fn post_send(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
        flags: SendFlags,
    ) -> Result<(), Error> {
        let payload = self.payload(mr, offset, len)?;
        self.post(WorkRequest::Send {
            wr_id,
            payload,
            solicited: flags.solicited,
            invalidate: flags.invalidate,
            fence: flags.fence,
        })
    }

    /// RDMA Write `len` octets of `mr` from `offset` to the peer's `remote` at
    /// `remote_offset`.
    pub fn post_write(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
        remote: RemoteBuf,
        remote_offset: u64,
    ) -> Result<(), Error> {
        let payload = self.payload(mr, offset, len)?;
        self.post(WorkRequest::Write {
            wr_id,
            payload,
            remote_stag: remote.stag,
            remote_to: remote.to.wrapping_add(remote_offset),
            fence: false,
        })
    }

    /// RDMA Read `len` octets of the peer's `remote` at `remote_offset` into `mr`
    /// at `offset`. `mr` needs remote write access: the Read Response is a tagged
    /// placement (RFC 5040; unlike InfiniBand).
    pub fn post_read(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u32,
        remote: RemoteBuf,
        remote_offset: u64,
    ) -> Result<(), Error> {
        self.same_pd(mr)?;
        let consumer = &self.shared.pd.inner.consumer;
        consumer.charge(Resource::OutstandingReads, 1)?;
        self.post(WorkRequest::Read {
            wr_id,
            local_stag: mr.stag(),
            local_to: mr.remote().to.wrapping_add(offset),
            len,
            remote_stag: remote.stag,
            remote_to: remote.to.wrapping_add(remote_offset),
            fence: false,
        })
    }

    /// Post a receive buffer of `len` octets for one incoming Send; the completion
    /// hands it back filled.
    pub fn post_recv(&self, wr_id: u64, len: usize) -> Result<(), Error> {
        let consumer = &self.shared.pd.inner.consumer;
        let mut st = lock(&self.shared.state);
        // A receive holds its slot until its completion is polled (see cq.rs).
        let waiting = self.shared.recv_cq.unpolled(self.shared.qp_num, false);
        let posted = st.rdmap.ddp().sink().posted(qn::SEND) as u64;
        if !self.shared.srq && posted + u64::from(waiting) >= u64::from(self.shared.max_recv_wr) {
            return Err(Error::Stream(rddp_proto::ddp::StreamError::Source(
                rddp_proto::ddp::SourceError::RecvQueueFull {
                    qn: qn::SEND,
                    limit: self.shared.max_recv_wr as usize,
                },
            )));
        }
        consumer.charge(Resource::ReceiveBuffers, 1)?;
        if let Err(e) = st.rdmap.post_recv(wr_id, vec![0; len]) {
            consumer.refund(Resource::ReceiveBuffers, 1);
            return Err(Error::Stream(e));
        }
        self.shared.pump(&mut st);
        Ok(())
    }

    /// Enable the next `n` MSNs of incoming Sends (credits-mode shared receive
    /// queue, seed 003 strategy 3). Tell the peer how many it may send.
    pub fn grant_credits(&self, n: u32) -> Result<(), Error> {
        let mut st = lock(&self.shared.state);
        if st.rdmap.ddp_mut().grant_credits(qn::SEND, n) {
            Ok(())
        } else {
            Err(Error::NotCredits)
        }
    }

    /// Asynchronous events so far (Terminate sent or received, close).
    pub fn async_events(&self) -> Vec<AsyncEvent> {
        lock(&self.shared.state).events.drain(..).collect()
    }

    /// Graceful disconnect: posted work finishes, then the LLP closes.
    pub fn disconnect(&self) {
        let mut st = lock(&self.shared.state);
        st.rdmap.ddp_mut().close();
        self.shared.pump(&mut st);
        if !st.close_sent && st.rdmap.ddp().drained() {
            st.close_sent = true;
            let _ = lock(&self.shared.tx).send(TxCmd::Close { abortive: false });
        }
    }

    fn same_pd(&self, mr: &MemoryRegion) -> Result<(), Error> {
        if mr.pd().id() != self.shared.pd.id() {
            return Err(Error::WrongPd);
        }
        Ok(())
    }

    fn payload(&self, mr: &MemoryRegion, offset: u64, len: u64) -> Result<Bytes, Error> {
        self.same_pd(mr)?;
        Ok(Bytes::from(mr.read(offset, len)?))
    }

    fn post(&self, wr: WorkRequest) -> Result<(), Error> {
        let mut st = lock(&self.shared.state);
        // A work request holds its slot until its completion is polled (cq.rs).
        let waiting = self.shared.send_cq.unpolled(self.shared.qp_num, true);
        if st.send_outstanding + waiting >= self.shared.max_send_wr {
            if let WorkRequest::Read { .. } = wr {
                self.shared
                    .pd
                    .inner
                    .consumer
                    .refund(Resource::OutstandingReads, 1);
            }
            return Err(Error::SendQueueFull {
                depth: self.shared.max_send_wr,
            });
        }
        st.send_outstanding += 1;
        {
            let mem = self.shared.pd.inner.consumer.device().mem();
            st.rdmap.post(&mem, wr);
        }
        self.shared.pump(&mut st);
        Ok(())
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        {
            let mut st = lock(&self.shared.state);
            st.rdmap.abort();
            self.shared.pump(&mut st);
            if !st.close_sent {
                st.close_sent = true;
                let _ = lock(&self.shared.tx).send(TxCmd::Close { abortive: true });
            }
        }
        if let Some((r, w)) = self.threads.take() {
            // Let the writer hand over what is queued (a Terminate), but not
            // forever: a responder whose peer never spoke waits at its gate.
            let _ = self.writer_done.recv_timeout(Duration::from_secs(2));
            // Whatever the peer does, our reader and writer must return.
            (self.abort)();
            let _ = w.join();
            let _ = r.join();
        }
        self.shared
            .pd
            .inner
            .consumer
            .refund(Resource::QueuePairs, 1);
    }
}

impl Shared {
    /// Move what the engine produced: segments to the writer, completions to the
    /// CQs (returning quota), events to the ULP; close once a Terminate has left.
    fn pump(&self, st: &mut State) {
        let tx = lock(&self.tx);
        while let Some(seg) = st.rdmap.poll_segment() {
            let _ = tx.send(TxCmd::Segment(seg));
        }
        if st.rdmap.should_close() && !st.close_sent {
            st.close_sent = true;
            let _ = tx.send(TxCmd::Close { abortive: true });
        }
        drop(tx);
        while let Some(c) = st.rdmap.poll_completion() {
            // The RTR's completion is the LLP's business, not the ULP's: it is the
            // first Read to complete, as it was posted before any of the ULP's.
            if st.rtr_read_pending && c.opcode == WcOpcode::RdmaRead {
                st.rtr_read_pending = false;
                continue;
            }
            if c.opcode != WcOpcode::Recv {
                st.send_outstanding = st.send_outstanding.saturating_sub(1);
            }
            self.complete(c);
        }
        while let Some(e) = st.rdmap.poll_event() {
            st.events.push_back(e);
        }
    }

    fn complete(&self, c: Completion) {
        let consumer = &self.pd.inner.consumer;
        let cq = match c.opcode {
            WcOpcode::Recv => {
                consumer.refund(Resource::ReceiveBuffers, 1);
                &self.recv_cq
            }
            WcOpcode::RdmaRead => {
                consumer.refund(Resource::OutstandingReads, 1);
                &self.send_cq
            }
            WcOpcode::Send | WcOpcode::RdmaWrite => &self.send_cq,
        };
        cq.push(WorkCompletion {
            qp_num: self.qp_num,
            c,
        });
    }
}

fn write_loop(mut w: Box<dyn SegmentWriter>, rx: Receiver<TxCmd>, shared: &Shared) {
    for cmd in rx {
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
                    w.close(true);
                    return;
                }
            }
            TxCmd::Close { abortive } => {
                w.close(abortive);
                return;
            }
        }
    }
    w.close(true);
}

fn read_loop(mut r: Box<dyn SegmentReader>, shared: &Shared) {
    loop {
        let got = r.read();
        let mut st = lock(&shared.state);
        let done = match got {
            Ok(Inbound::Segment { seq, bytes }) => {
                {
                    let mut mem = shared.pd.inner.consumer.device().mem();
                    // Refusals are handled inside the engine (Terminate, events).
                    let _ = st.rdmap.on_segment(&mut mem, seq, &bytes);
                }
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
            Err(_) => {
                st.rdmap.on_llp_closed(false);
                true
            }
        };
        shared.pump(&mut st);
        if done {
            // The LLP is gone or the peer closed: close our side too.
            if !st.close_sent {
                st.close_sent = true;
                let _ = lock(&shared.tx).send(TxCmd::Close { abortive: false });
            }
            return;
        }
    }
}
