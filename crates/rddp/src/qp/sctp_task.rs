//! A queue pair's DDP over SCTP session on the event loop: one rddp-io task per
//! queue pair, with no descriptor of its own. The association's task (in
//! `transport::sctp`, woken by usrsctp's upcall) relays the session's segments;
//! this task is woken when some arrived or were handed to SCTP, and feeds the
//! engine under the queue pair's lock. The transmit half is `Shared::pump_sctp`,
//! run by whoever pumps (the posting thread or this task).

use super::{Shared, State};
use crate::device::lock;
use crate::error::Error;
use crate::transport::sctp::Relay;
use crate::transport::{HoldInner, Inbound};
use rddp_io::{Cx, Next, Task, TaskHandle};
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

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
        shared,
        relay: relay.clone(),
        hold: hold.clone(),
        read_done: false,
        lost: false,
    };
    let h = driver.spawn(Box::new(task)).map_err(Error::EventLoop)?;
    relay.set_qp(h.clone());
    // What arrived before the handle was known is looked at now.
    h.wake();
    if let Some(hold) = hold {
        let w = h.clone();
        hold.on_release(Box::new(move || w.wake()));
    }
    Ok(h)
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
