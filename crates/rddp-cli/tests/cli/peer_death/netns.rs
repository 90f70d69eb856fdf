//! Two network namespaces of this run joined by a veth pair (10.99.0.1 in A,
//! 10.99.0.2 in B), removed by name on drop with anything still running in them.
#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) const IP_A: &str = "10.99.0.1";
pub(crate) const IP_B: &str = "10.99.0.2";

static NEXT: AtomicU32 = AtomicU32::new(0);

pub(crate) struct NetnsPair {
    pub a: String,
    pub b: String,
    /// B's end of the veth pair (set down to cut the link).
    pub dev_b: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl NetnsPair {
    /// Namespaces named after this process and a counter, so parallel runs and
    /// other tests never share one.
    pub(crate) fn create() -> Result<Self, String> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{:x}x{n}", std::process::id());
        let p = Self {
            a: format!("rddp-pd-{tag}-a"),
            b: format!("rddp-pd-{tag}-b"),
            dev_b: format!("pd{tag}b"),
        };
        let dev_a = format!("pd{tag}a");
        // From here on, drop removes whatever was made.
        ip(&["netns", "add", &p.a])?;
        ip(&["netns", "add", &p.b])?;
        ip(&[
            "link", "add", &dev_a, "netns", &p.a, "type", "veth", "peer", "name", &p.dev_b,
            "netns", &p.b,
        ])?;
        for (ns, dev, addr) in [(&p.a, &dev_a, IP_A), (&p.b, &p.dev_b, IP_B)] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(p)
    }

    /// `ip netns exec NS` as a command prefix.
    pub(crate) fn exec(ns: &str) -> [&str; 4] {
        ["ip", "netns", "exec", ns]
    }

    /// Cut the link: B's end down (A keeps its address and route; its packets
    /// are dropped, as past a pulled cable).
    pub(crate) fn cut(a_ns_b: &str, dev_b: &str) {
        ip(&["-n", a_ns_b, "link", "set", dev_b, "down"]).expect("link down");
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            // Only processes inside our own namespaces: ours.
            if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            }
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// Namespaces for a test, or `None` (with the reason printed) where this machine
/// cannot make them; under CI=true that is a failure.
pub(crate) fn require() -> Option<NetnsPair> {
    match NetnsPair::create() {
        Ok(p) => Some(p),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but network namespaces cannot be made (run as root with iproute2): {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: network namespaces cannot be made here ({e}); run as root");
            None
        }
    }
}
