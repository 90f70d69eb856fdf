//! Idle MPA connections for `scripts/bench-perf.sh`: open N connections to a
//! `rddp target` (MPA Request/Reply, then the Write RTR, as a queue pair's
//! initiator does), print `ready N`, and hold them without a queue pair (so this
//! process runs no thread per connection) until it is killed.
//!
//! Usage: idle_mpa ADDR [N=1000]

use rddp_mpa::{MpaOptions, RtrTypes};
use std::io::Write;

fn main() -> Result<(), String> {
    let addr = std::env::args().nth(1).ok_or("usage: idle_mpa ADDR [N]")?;
    let n: usize = std::env::args()
        .nth(2)
        .map_or(Ok(1000), |s| s.parse())
        .map_err(|e| format!("N: {e}"))?;
    let opts = MpaOptions {
        rtr: RtrTypes {
            write: true,
            read: false,
        },
        ..MpaOptions::default()
    };
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        let c = rddp::transport::mpa::connect(addr.as_str(), &opts)
            .map_err(|e| format!("connection {i}: {e}"))?;
        held.push(c);
    }
    println!("ready {}", held.len());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
