//! What this process holds, from /proc/self: threads, file descriptors, resident
//! memory.
#![allow(dead_code)]

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub threads: u64,
    pub fds: u64,
    pub rss_kib: u64,
}

impl fmt::Display for ProcStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} threads, {} fds, VmRSS {} KiB",
            self.threads, self.fds, self.rss_kib
        )
    }
}

fn status_field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /proc/self/status"))
}

/// Read /proc/self/status (Threads, VmRSS) and count /proc/self/fd.
pub(crate) fn now() -> ProcStat {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    // read_dir holds one descriptor of its own while it lists.
    let fds = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count() as u64
        - 1;
    ProcStat {
        threads: status_field(&status, "Threads:"),
        fds,
        rss_kib: status_field(&status, "VmRSS:"),
    }
}
