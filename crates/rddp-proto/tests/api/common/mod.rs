//! Helpers shared by the engine's integration tests.

pub(crate) mod host;
pub(crate) mod hosts;

use rddp_proto::ddp::{DdpConfig, DdpStream, StreamError};
use rddp_proto::mem::{Access, MemoryTable, PdId, Stag, StagScope, StreamId};
use rddp_wire::{TaggedHeader, TerminateCode, UntaggedHeader};

pub(crate) const PD: PdId = PdId(1);
pub(crate) const STREAM: StreamId = StreamId(7);

pub(crate) fn stream() -> DdpStream {
    DdpStream::new(STREAM, PD, DdpConfig::default()).unwrap()
}

pub(crate) fn rw() -> Access {
    Access::REMOTE_READ | Access::REMOTE_WRITE
}

/// A 64-octet zeroed region at TO 0x1000 in PD, scoped to the PD.
pub(crate) fn region(mem: &MemoryTable) -> Stag {
    mem.register(PD, StagScope::Pd, rw(), 0x1000, vec![0; 64])
        .unwrap()
}

pub(crate) fn tagged(last: bool, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = TaggedHeader::new(last, 0x40, stag, to).to_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

pub(crate) fn untagged(last: bool, qn: u32, msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = UntaggedHeader::new(last, [0x43, 0, 0, 0, 0], qn, msn, mo)
        .to_bytes()
        .to_vec();
    v.extend_from_slice(payload);
    v
}

/// Feed one segment at `seq`; return the Terminate code if it was refused.
pub(crate) fn feed(
    s: &mut DdpStream,
    mem: &MemoryTable,
    seq: u64,
    seg: &[u8],
) -> Option<TerminateCode> {
    match s.on_segment(mem, seq, seg) {
        Ok(()) => None,
        Err(StreamError::Erroneous(c)) => Some(c),
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// Whether to run the test `test` of module `module` (`module_path!()`)
/// here: for a test that must be alone in its process (it counts what the
/// whole process allocates), run in a child process of its own
/// (`rddp_testkit::own_process`); `false` in the parent.
pub(crate) fn own_process(module: &str, test: &str) -> bool {
    rddp_testkit::own_process(module, test, || true)
}
