//! Two hosts, each with its memory and one RDMAP stream, over an in-order link
//! (for rdmap_ops.rs and completion_rules.rs; each adds its own `region` and
//! `completions` by a trait of its own).

use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_proto::rdmap::{AsyncEvent, RdmapConfig, RdmapStream, WorkRequest};

pub(crate) struct Hosts {
    pub mem: [MemoryTable; 2],
    pub s: [RdmapStream; 2],
    pub seq: [u64; 2],
    /// Segments each side refused.
    pub refused: [usize; 2],
}

impl Hosts {
    pub(crate) fn new(cfg: RdmapConfig) -> Self {
        Self {
            mem: [MemoryTable::with_seed(1), MemoryTable::with_seed(2)],
            s: [
                RdmapStream::new(StreamId(1), PdId(1), cfg).unwrap(),
                RdmapStream::new(StreamId(2), PdId(1), cfg).unwrap(),
            ],
            seq: [0, 0],
            refused: [0, 0],
        }
    }

    /// Move segments both ways until nothing moves.
    pub(crate) fn run(&mut self) {
        loop {
            let mut moved = false;
            for from in 0..2 {
                let to = 1 - from;
                while let Some(seg) = self.s[from].poll_segment() {
                    moved = true;
                    let bytes = seg.to_vec();
                    let seq = self.seq[to];
                    self.seq[to] += 1;
                    let (a, b) = self.mem.split_at_mut(1);
                    let mem = if to == 0 { &mut a[0] } else { &mut b[0] };
                    if self.s[to].on_segment(mem, seq, &bytes).is_err() {
                        self.refused[to] += 1;
                    }
                }
            }
            if !moved {
                return;
            }
        }
    }

    pub(crate) fn events(&mut self, i: usize) -> Vec<AsyncEvent> {
        std::iter::from_fn(|| self.s[i].poll_event()).collect()
    }

    pub(crate) fn post(&mut self, i: usize, wr: WorkRequest) {
        let mem = &self.mem[i];
        self.s[i].post(mem, wr);
    }
}
