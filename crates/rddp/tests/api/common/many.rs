//! Helpers of the many-queue-pair tests (`many_qps.rs`).
#![allow(dead_code)]

use rddp::Quota;

/// A field of /proc/self/status (kB for the memory ones).
pub(crate) fn status(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/self/status"))
}

/// A consumer quota for `n` queue pairs with one receive buffer each.
pub(crate) fn quota(n: usize) -> Quota {
    Quota {
        queue_pairs: n as u64,
        receive_buffers: n as u64,
        ..Quota::default()
    }
}
