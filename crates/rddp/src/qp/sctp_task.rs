//! A queue pair's DDP over SCTP session on the event loop: one rddp-io task per
//! queue pair, with no descriptor of its own. The association's task (in
//! `transport::sctp`, woken by usrsctp's upcall) places the session's segments
//! itself through [`QpPlacer`] (header first, under the queue pair's lock), or
//! relays them while the queue pair's reads are held; this task is woken when
//! some were relayed or handed to SCTP, and feeds the engine under the queue
//! pair's lock. The transmit half is `Shared::pump_sctp`,
//! run by whoever pumps (the posting thread or this task).

use super::{Shared, State};
use crate::device::lock;
use crate::error::Error;
use crate::transport::sctp::{Placer, Relay};
use crate::transport::{HoldInner, Inbound};
use rddp_io::{Cx, Next, Task, TaskHandle};
use rddp_proto::ddp::{Begin, SenderSeq, StreamError, Target, fill_target};
use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Weak};

/// Relayed items fed per run before the task lets the thread's other tasks go.
const ITEMS_PER_RUN: usize = 256;

/// Start the task of a queue pair whose relay is already in `shared`.
pub(super) fn spawn(
    shared: Arc<Shared>,
    relay: Arc<Relay>,
    hold: Option<Arc<HoldInner>>,
) -> Result<TaskHandle, Error> {
    let driver = rddp_io::Driver::global().map_err(Error::EventLoop)?;
    let task = SctpQpTask {
        shared: shared.clone(),
        relay: relay.clone(),
        hold: hold.clone(),
        read_done: false,
        lost: false,
    };
    relay.set_placer(Arc::new(QpPlacer {
        shared: Arc::downgrade(&shared),
        hold: hold.clone(),
    }));
    // On its association's thread: the two wake each other per message.
    let h = match relay.assoc() {
        Some(a) => driver.spawn_near(Box::new(task), &a),
        None => driver.spawn(Box::new(task)),
    }
    .map_err(Error::EventLoop)?;
    relay.set_qp(h.clone());
    // What arrived before the handle was known is looked at now.
    h.wake();
    if let Some(hold) = hold {
        let w = h.clone();
        hold.on_release(Box::new(move || w.wake()));
    }
    Ok(h)
}

/// Places the session's segments into the queue pair from the association's
/// task, header first: RDMAP decides where the payload goes
/// (`RdmapStream::begin_segment`), usrsctp's read puts it there, and only then
/// is it delivered (`finish_segment`; SCTP's own CRC32c was checked below).
/// Lock order: the association's connection, then the queue pair (a posting
/// thread holding the queue pair only ever `try_lock`s the connection).
struct QpPlacer {
    shared: Weak<Shared>,
    hold: Option<Arc<HoldInner>>,
}

impl Placer for QpPlacer {
    fn place(
        &self,
        seq: SenderSeq,
        head: &[u8],
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Option<Result<(), StreamError>> {
        if self.hold.as_ref().is_some_and(|h| !h.is_released()) {
            return None;
        }
        let shared = self.shared.upgrade()?;
        let mut guard = lock(&shared.state);
        let st = &mut *guard;
        let mem = shared.pd.inner.consumer.device().mem();
        let r = match st
            .rdmap
            .begin_segment(mem, seq, head, payload_len, Begin::Alone)
        {
            // Refused: reported now (SCTP checked the segment below); the
            // driver drains the payload.
            Err(e) => match st.rdmap.finish_segment(mem, true) {
                Err(StreamError::Closed) | Ok(()) => Err(e),
                Err(settled) => Err(settled),
            },
            Ok(t) => {
                let rdmap = &mut st.rdmap;
                let filled = match t {
                    Target::Buffer { .. } => rdmap
                        .segment_buffers(|b| {
                            fill_target(&t, payload_len, fill, || b.first_mut().map(|s| &mut **s))
                        })
                        .unwrap_or(false),
                    _ => fill_target(&t, payload_len, fill, || None),
                };
                if filled {
                    st.rdmap.finish_segment(mem, true)
                } else {
                    // usrsctp failed mid-message: the association is lost.
                    Err(StreamError::Closed)
                }
            }
        };
        // Completions, events, answers (a Read Response goes to the relay).
        shared.pump_in(st, false);
        Some(r)
    }
}

struct SctpQpTask {
    shared: Arc<Shared>,
    relay: Arc<Relay>,
    hold: Option<Arc<HoldInner>>,
    /// The peer closed, or the association is lost: nothing more comes.
    read_done: bool,
    /// The engine was told the session ended.
    lost: bool,
}

impl SctpQpTask {
    /// The session ended: tell the engine (once), close our side too. What SCTP
    /// took before is reported first, so that work whose octets left completes
    /// as sent.
    fn ended(&mut self, st: &mut State, graceful: bool, err: Option<io::Error>) {
        self.read_done = true;
        if self.lost {
            return;
        }
        self.lost = true;
        self.shared.pump_in(st, true);
        if let Some(e) = &err {
            crate::trace::llp_lost(self.shared.qp_num, e);
        }
        st.rdmap.on_llp_closed(graceful);
        if !st.close_sent {
            st.close_sent = true;
            self.relay.close(!graceful);
        }
    }

    /// Feed what the relay holds (at most [`ITEMS_PER_RUN`]); true if more may
    /// be there.
    fn receive(&mut self, st: &mut State) -> bool {
        let mem = self.shared.pd.inner.consumer.device().mem();
        for _ in 0..ITEMS_PER_RUN {
            let Some(got) = self.relay.pop() else {
                return false;
            };
            match got {
                Ok(Inbound::Segment { seq, bytes }) => {
                    // Refusals are handled inside the engine (Terminate, events).
                    let _ = st.rdmap.on_segment(mem, seq, &bytes);
                }
                Ok(Inbound::Mulpdu(n)) => {
                    let _ = st.rdmap.ddp_mut().set_mulpdu(n);
                }
                Ok(Inbound::Error { code, detail }) => st.rdmap.llp_error(code, detail),
                Ok(Inbound::Closed) => {
                    self.ended(st, true, None);
                    return false;
                }
                Err(e) => {
                    self.ended(st, false, Some(e));
                    return false;
                }
            }
        }
        true
    }
}

impl Task for SctpQpTask {
    fn fd(&self) -> Option<RawFd> {
        None
    }

    fn run(&mut self, cx: &mut Cx<'_>) -> Next {
        let held = self.hold.as_ref().is_some_and(|h| !h.is_released());
        let shared = self.shared.clone();
        let mut guard = lock(&shared.state);
        let st = &mut *guard;
        let mut more = false;
        if !self.read_done && !held {
            self.hold = None;
            more = self.receive(st);
        }
        // Answers (a Read Response, an echo) go to the relay at once.
        shared.pump_in(st, true);
        let Some(io) = &st.sctp else {
            return Next::Done;
        };
        let linger = io.linger;
        let idle = self.relay.is_lost() || (st.close_sent && io.relay.outbound_idle());
        if linger.is_some_and(|t| cx.now >= t || idle) || (self.read_done && st.close_sent) {
            if !self.lost {
                // Dropped: whatever was still posted is flushed.
                self.ended(st, false, None);
                shared.pump_in(st, true);
            }
            return Next::Done;
        }
        if more {
            cx.handle().wake();
        }
        Next::Wait {
            interest: None,
            deadline: linger,
        }
    }
}
