//! A well-behaved initiator on the project's verbs API.

use rddp::{
    Access, CompletionQueue, Device, ProtectionDomain, QueuePair, QueuePairBuilder, Quota,
    RemoteBuf, SendFlags, WcOpcode, WcStatus, WorkCompletion,
};
use rddp_mpa::MpaOptions;
use std::net::SocketAddr;
use std::time::Duration;

/// A verbs-API initiator with eight 4 KiB receives posted before connecting.
pub(crate) struct Client {
    pub qp: QueuePair,
    cq: CompletionQueue,
    pd: ProtectionDomain,
    _dev: Device,
}

impl Client {
    pub(crate) fn connect(addr: SocketAddr, opts: MpaOptions) -> Self {
        let dev = Device::new();
        let pd = dev
            .consumer("client", Quota::default())
            .unwrap()
            .alloc_pd()
            .unwrap();
        let cq = CompletionQueue::new(64);
        let mut p = QueuePairBuilder::new(&pd, &cq, &cq).build().unwrap();
        for i in 0..8 {
            p.post_recv(i, 4096).unwrap();
        }
        let qp = p.connect_mpa(addr, opts).unwrap();
        Self {
            qp,
            cq,
            pd,
            _dev: dev,
        }
    }

    /// The next completion of `op` (others are checked for success and skipped).
    pub(crate) fn next(&self, op: WcOpcode) -> WorkCompletion {
        loop {
            let wc = self.cq.wait(1, Duration::from_secs(10));
            let wc = wc.into_iter().next().expect("no completion within 10 s");
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            if wc.opcode == op {
                return wc;
            }
        }
    }

    /// The next message received: (MSN, payload); the buffer is reposted.
    pub(crate) fn recv(&self) -> (u32, Vec<u8>) {
        let wc = self.next(WcOpcode::Recv);
        let (q, msn) = wc.qn_msn.unwrap();
        assert_eq!(q, 0);
        let data = wc.buffer.as_ref().unwrap()[..wc.byte_len as usize].to_vec();
        self.qp.post_recv(wc.wr_id, 4096).unwrap();
        (msn, data)
    }

    pub(crate) fn advert(&self) -> RemoteBuf {
        let (msn, data) = self.recv();
        assert_eq!((msn, data.len()), (1, 16), "the advertisement is MSN 1");
        RemoteBuf::from_bytes(&data).unwrap()
    }

    pub(crate) fn send(&self, data: &[u8]) {
        self.qp
            .post_send_inline(0, data, SendFlags::default())
            .unwrap();
    }

    /// Write `data` at `off` of `remote`, read it back, compare.
    pub(crate) fn write_read(&self, remote: RemoteBuf, off: u64, data: &[u8]) {
        let n = data.len() as u64;
        let src = self.pd.register(data.to_vec(), Access::NONE).unwrap();
        let sink = self
            .pd
            .register(vec![0; data.len()], Access::REMOTE_WRITE)
            .unwrap();
        self.qp.post_write(1, &src, 0, n, remote, off).unwrap();
        self.next(WcOpcode::RdmaWrite);
        self.qp
            .post_read(2, &sink, 0, n as u32, remote, off)
            .unwrap();
        self.next(WcOpcode::RdmaRead);
        assert!(sink.read(0, n).unwrap() == data, "read back differs");
    }
}

pub(crate) fn opts(rev: u8, crc: bool, markers: bool) -> MpaOptions {
    MpaOptions {
        rev,
        crc,
        markers,
        ..MpaOptions::default()
    }
}

pub(crate) fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}
