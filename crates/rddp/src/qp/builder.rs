//! Building a queue pair (`ibv_create_qp`): its settings call by call, then
//! a prepared queue pair that receives may be posted to before it is attached
//! to a connected LLP (`attach`, `connect_mpa`, ...).

use super::*;

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
                out: MpaOut::new(sock.clone(), m.enc, !m.input.gate_closed, m.wire),
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
            event_notify: std::sync::OnceLock::new(),
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
