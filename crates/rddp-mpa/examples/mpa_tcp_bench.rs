//! Loopback MPA throughput: one connection, the initiator RDMA-Writes `SIZE`-octet
//! messages into a registered region of the responder until `TOTAL` octets have
//! gone, then a Send; the clock stops when the responder's answering Send arrives.
//! Prints one line: `mpa <size> <Gbit/s>`. Used by scripts/bench-mpa-tcp.sh.
//!
//! Usage: mpa_tcp_bench SIZE TOTAL [crc=1] [markers=0] [direct=1]

use bytes::Bytes;
use rddp_mpa::{MpaOptions, connect, listen};
use rddp_proto::ddp::{Delivery, RecvBuffer};
use rddp_proto::mem::{Access, MemoryTable, PdId, StagScope};
use std::thread;
use std::time::Instant;

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let size = arg(1, 128 * 1024);
    let total = arg(2, 1 << 30);
    let opts = MpaOptions {
        crc: arg(3, 1) != 0,
        markers: arg(4, 0) != 0,
        direct_placement: arg(5, 1) != 0,
        ..MpaOptions::rev1()
    };
    let mem_r = MemoryTable::new();
    let stag = mem_r
        .register(
            PdId(1),
            StagScope::Pd,
            Access::REMOTE_WRITE,
            0,
            vec![0; size],
        )
        .expect("register");
    let l = listen("127.0.0.1:0", opts.clone()).expect("listen");
    let addr = l.local_addr().expect("addr");
    let resp = thread::spawn(move || {
        let mut c = l.accept().expect("accept");
        c.post_recv(
            0,
            RecvBuffer {
                id: 1,
                data: vec![0; 64],
            },
        )
        .expect("post");
        // Writes complete as tagged deliveries; the closing Send ends the loop.
        while let Delivery::Tagged { .. } = c.recv(&mem_r).expect("recv") {}
        c.send_untagged(0, [0x43, 0, 0, 0, 0], Bytes::from_static(b"done"))
            .expect("ack");
        let _ = c.recv(&mem_r);
    });
    let mut c = connect(addr, opts).expect("connect");
    c.post_recv(
        0,
        RecvBuffer {
            id: 2,
            data: vec![0; 64],
        },
    )
    .expect("post");
    let msg = Bytes::from(vec![0x5Au8; size]);
    let mem_i = MemoryTable::new();
    let t = Instant::now();
    let mut sent = 0;
    while sent < total {
        c.send_tagged(0x40, stag.0, 0, msg.clone()).expect("write");
        sent += size;
    }
    c.send_untagged(0, [0x43, 0, 0, 0, 0], Bytes::from_static(b"end"))
        .expect("send");
    c.recv(&mem_i).expect("ack");
    let secs = t.elapsed().as_secs_f64();
    c.close().expect("close");
    resp.join().expect("responder");
    println!("mpa {size} {:.2}", sent as f64 * 8.0 / secs / 1e9);
}
