//! Every connection of the target served from one thread: no thread per
//! connection (docs/data-path.md). The queue pairs' octets move on the event
//! loop (rddp-io); this thread only echoes what arrived and reports events.
//!
//! Each connection's CQ is armed (`CompletionQueue::arm`): its next completion
//! sends the connection's id here. A sweep every [`SWEEP`] also looks at every
//! connection, for events that come without a completion (a close with no
//! receive outstanding).

use super::conn::Served;
use super::events::{Events, Streams};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

/// How often every connection is looked at, completions or not.
const SWEEP: Duration = Duration::from_millis(100);

enum Msg {
    New(Box<Served>),
    Ready(u64),
}

/// Where acceptors hand set-up connections.
#[derive(Clone)]
pub(super) struct Service {
    tx: Sender<Msg>,
}

impl Service {
    pub(super) fn start(streams: Arc<Streams>, ev: Arc<Events>) -> Self {
        let (tx, rx) = channel();
        let me = tx.clone();
        std::thread::Builder::new()
            .name("target-service".into())
            .spawn(move || run(&rx, &me, &streams, &ev))
            .expect("start the target's service thread");
        Self { tx }
    }

    /// Serve `s` until it closes.
    pub(super) fn add(&self, s: Served) {
        let _ = self.tx.send(Msg::New(Box::new(s)));
    }
}

fn run(rx: &Receiver<Msg>, tx: &Sender<Msg>, streams: &Streams, ev: &Events) {
    let mut conns: HashMap<u64, Box<Served>> = HashMap::new();
    let mut swept = Instant::now();
    loop {
        match rx.recv_timeout(SWEEP) {
            Ok(Msg::New(s)) => {
                let id = s.id;
                let tx = tx.clone();
                s.cq.set_notify(move || {
                    let _ = tx.send(Msg::Ready(id));
                });
                conns.insert(id, s);
                serve(&mut conns, id, streams, ev);
            }
            Ok(Msg::Ready(id)) => serve(&mut conns, id, streams, ev),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if swept.elapsed() >= SWEEP {
            let ids: Vec<u64> = conns.keys().copied().collect();
            for id in ids {
                serve(&mut conns, id, streams, ev);
            }
            swept = Instant::now();
        }
    }
}

/// Serve connection `id` until it has nothing to do; its CQ armed again.
fn serve(conns: &mut HashMap<u64, Box<Served>>, id: u64, streams: &Streams, ev: &Events) {
    let Some(s) = conns.get_mut(&id) else {
        return;
    };
    loop {
        if let Some(reason) = s.step(ev) {
            if let Some(s) = conns.remove(&id) {
                s.finish(reason, streams, ev);
            }
            return;
        }
        s.cq.arm();
        // A completion that came between the last poll and the arm calls no one.
        if s.cq.is_empty() {
            return;
        }
    }
}
