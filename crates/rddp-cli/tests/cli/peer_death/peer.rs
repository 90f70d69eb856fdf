//! The peer that dies: a real `rddp target` process, started directly or inside
//! a network namespace, killed with SIGKILL.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// A running `rddp target --events json`; killed (SIGKILL) and reaped on drop.
pub(crate) struct Peer {
    child: Option<Child>,
    pub addr: SocketAddr,
}

impl Peer {
    /// `rddp target --listen LISTEN --events json EXTRA`, run through `prefix`
    /// (e.g. `ip netns exec NS`, which execs, so the child is the target itself).
    pub(crate) fn start(prefix: &[&str], listen: &str, extra: &[&str]) -> Self {
        let rddp = env!("CARGO_BIN_EXE_rddp");
        let mut cmd = match prefix.split_first() {
            None => Command::new(rddp),
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(rddp);
                c
            }
        };
        let mut child = cmd
            .args(["target", "--listen", listen, "--events", "json"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start rddp target");
        // The first line says where it listens. The pipe is closed after it: the
        // target ignores a closed stdout.
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        BufReader::new(out).read_line(&mut line).unwrap_or(0);
        let addr = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .filter(|v| v["event"] == "listening")
            .and_then(|v| v["addr"].as_str().and_then(|a| a.parse().ok()));
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rddp target did not say where it listens: {line:?}");
        };
        Self {
            child: Some(child),
            addr,
        }
    }

    /// SIGKILL now; returns when it was sent. The process is reaped before this
    /// returns (its sockets are closed by the kernel as it exits).
    pub(crate) fn kill(&mut self) -> Instant {
        let at = Instant::now();
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        at
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill();
    }
}
