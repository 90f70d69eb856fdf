//! An in-process AF_CONN link between two usrsctp endpoints, with an optional
//! deterministic reordering (per direction, packet 2k is held until packet 2k+1 has
//! been delivered, or 5 ms pass), an optional loss (a filter that drops the
//! packets it picks) and a capture of every packet for pcap files.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use usrsctp_ffi::ConnAddress;
use usrsctp_ffi::stack::conn_input;

pub(crate) type Capture = Arc<Mutex<Vec<(SystemTime, Vec<u8>)>>>;

pub(crate) struct Link {
    pub a: ConnAddress,
    pub b: ConnAddress,
    pub capture: Capture,
    pub swaps: Arc<Mutex<u64>>,
    stop: Arc<AtomicBool>,
    pump: Option<JoinHandle<()>>,
}

/// Picks the packets a link drops (each SCTP packet, common header first).
pub(crate) type Loss = Box<dyn FnMut(&[u8]) -> bool + Send>;

impl Link {
    pub(crate) fn new(reorder: bool) -> Self {
        Self::dropping(reorder, Box::new(|_| false))
    }

    /// A link that loses the packets `drop` picks (they are still captured).
    pub(crate) fn dropping(reorder: bool, drop: Loss) -> Self {
        let (tx, rx) = channel::<(usize, Vec<u8>)>();
        let capture: Capture = Default::default();
        let ends = [Arc::new(Mutex::new(0usize)), Arc::new(Mutex::new(0usize))];
        let mk = |far: Arc<Mutex<usize>>| {
            let (tx, cap) = (tx.clone(), capture.clone());
            ConnAddress::register(move |p| {
                cap.lock().unwrap().push((SystemTime::now(), p.to_vec()));
                let _ = tx.send((*far.lock().unwrap(), p.to_vec()));
            })
            .unwrap()
        };
        let a = mk(ends[0].clone());
        let b = mk(ends[1].clone());
        *ends[0].lock().unwrap() = b.id();
        *ends[1].lock().unwrap() = a.id();
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(Mutex::new(0));
        let pump = {
            let (stop, swaps) = (stop.clone(), swaps.clone());
            std::thread::spawn(move || pump(rx, reorder, drop, &stop, &swaps))
        };
        Self {
            a,
            b,
            capture,
            swaps,
            stop,
            pump: Some(pump),
        }
    }

    /// The capture as a pcap file (link type 248: SCTP packets, no lower layers).
    pub(crate) fn pcap(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 248] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for (t, p) in self.capture.lock().unwrap().iter() {
            let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
            for v in [
                d.as_secs() as u32,
                d.subsec_micros(),
                p.len() as u32,
                p.len() as u32,
            ] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(p);
        }
        out
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.pump.take() {
            let _ = h.join();
        }
    }
}

fn pump(
    rx: Receiver<(usize, Vec<u8>)>,
    reorder: bool,
    mut drop: Loss,
    stop: &AtomicBool,
    swaps: &Mutex<u64>,
) {
    let mut held: HashMap<usize, (Vec<u8>, Instant)> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(Duration::from_millis(1)) {
            Ok((_, pkt)) if drop(&pkt) => {}
            Ok((to, pkt)) if !reorder => {
                let _ = conn_input(to, &pkt);
            }
            Ok((to, pkt)) => match held.remove(&to) {
                None => {
                    held.insert(to, (pkt, Instant::now()));
                }
                Some((first, _)) => {
                    let _ = conn_input(to, &pkt);
                    let _ = conn_input(to, &first);
                    *swaps.lock().unwrap() += 1;
                }
            },
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let late: Vec<usize> = held
            .iter()
            .filter(|(_, (_, t))| t.elapsed() > Duration::from_millis(5))
            .map(|(k, _)| *k)
            .collect();
        for to in late {
            if let Some((p, _)) = held.remove(&to) {
                let _ = conn_input(to, &p);
            }
        }
    }
}
