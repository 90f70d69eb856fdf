//! What the RDMAP pair's tests share: settings drawn from a seed, regions
//! with known octets around them, work requests.

use bytes::Bytes;
use rddp_proto::ddp::Payload;
use rddp_proto::mem::{Access, MemoryTable, PdId, Stag, StagScope};
use rddp_proto::rdmap::WorkRequest;
use rddp_sim::{Chunking, Llp, PairConfig, RdmapPair, Reader};

/// Base TO of every region the tests register.
pub(crate) const BASE: u64 = 0x1000;

/// Octets of `n` that differ from position to position and from `salt` to
/// `salt`.
pub(crate) fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) ^ (i >> 8) as u8)
        .collect()
}

/// A pair over MPA with `crc` and `markers`; reader, EMSS and chunking
/// drawn from `seed`.
pub(crate) fn mpa_pair(crc: bool, markers: bool, seed: u64) -> RdmapPair {
    let mut cfg = PairConfig::mpa(crc, markers);
    if let Llp::Mpa(m) = &mut cfg.llp {
        m.reader = [
            Reader::HeaderFirst,
            Reader::Buffered,
            Reader::BufferedStream,
        ][(seed % 3) as usize];
        m.emss = [1460, 536, 9000, 700][(seed / 3 % 4) as usize];
        m.chunking = Chunking::Random {
            max: 1 + (seed as usize * 37) % 700,
        };
    }
    RdmapPair::new(cfg, seed).expect("valid settings")
}

/// A region of `data` at [`BASE`] in PD 1 with `access`.
pub(crate) fn region(mem: &MemoryTable, access: Access, data: Vec<u8>) -> Stag {
    mem.register(PdId(1), StagScope::Pd, access, BASE, data)
        .expect("registered")
}

/// The octets of region `stag`.
pub(crate) fn octets(mem: &MemoryTable, stag: Stag) -> Vec<u8> {
    mem.region(stag).expect("registered").data().to_vec()
}

/// An RDMA Write of `data` to the peer's `stag` at `off` octets past [`BASE`].
pub(crate) fn write(wr_id: u64, data: &[u8], stag: Stag, off: u64) -> WorkRequest {
    WorkRequest::Write {
        wr_id,
        payload: Payload::Bytes(Bytes::copy_from_slice(data)),
        remote_stag: stag.0,
        remote_to: BASE + off,
        fence: false,
    }
}

/// An RDMA Read of `len` octets of the peer's `remote` into our `local`,
/// both at `off` octets past [`BASE`].
pub(crate) fn read(wr_id: u64, local: Stag, remote: Stag, off: u64, len: u32) -> WorkRequest {
    WorkRequest::Read {
        wr_id,
        local_stag: local.0,
        local_to: BASE + off,
        len,
        remote_stag: remote.0,
        remote_to: BASE + off,
        fence: false,
    }
}

/// A Send of `data`.
pub(crate) fn send(wr_id: u64, data: &[u8]) -> WorkRequest {
    WorkRequest::Send {
        wr_id,
        payload: Payload::Bytes(Bytes::copy_from_slice(data)),
        solicited: false,
        invalidate: None,
        fence: false,
    }
}
