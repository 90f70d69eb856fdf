//! Test helpers for `rddp target`: the child process (killed on drop), its event
//! lines, and a hostile MPA peer on a raw TCP socket.
#![allow(dead_code)]

pub(crate) mod client;
pub(crate) mod pcap;
pub(crate) mod raw_peer;
pub(crate) mod raw_sctp;
pub(crate) mod root_script;

use raw_peer::RawPeer;
use rddp_wire::TerminateCode;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// The number in field `key` of /proc/PID/status (Linux), e.g. "Threads",
/// "VmRSS" (KiB); `None` once the process is gone.
pub(crate) fn proc_status(pid: u32, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Raise this process's soft RLIMIT_NOFILE to its hard limit; it must allow
/// `need` descriptors (the tests that hold thousands of sockets).
pub(crate) fn raise_nofile(need: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    l.current = l.maximum;
    setrlimit(Resource::Nofile, l).expect("raise RLIMIT_NOFILE to the hard limit");
    let have = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    assert!(
        have >= need,
        "this test holds {need} descriptors; the hard RLIMIT_NOFILE is {have} (raise it, e.g. ulimit -Hn)"
    );
}

/// One turn at the whole machine: the tests that load it (a QEMU guest, a
/// soak, thousands of connections, namespaces with impaired links) hold this
/// while they run, so no two of them share the two cores' time and miss a
/// deadline for it. A test that failed while holding it does not poison it.
pub(crate) fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    MACHINE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running `rddp target --listen 127.0.0.1:0 --events json ARGS`; killed on drop.
pub(crate) struct Target {
    child: Child,
    lines: Receiver<String>,
    /// Every event read so far, in order.
    pub seen: Vec<Value>,
    pub addr: SocketAddr,
}

impl Target {
    pub(crate) fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rddp"))
            .args(["target", "--listen", "127.0.0.1:0", "--events", "json"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { return };
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        let mut t = Self {
            child,
            lines,
            seen: Vec::new(),
            addr: "0.0.0.0:0".parse().unwrap(),
        };
        // The very first line says where it listens.
        let first = t
            .next_line(Duration::from_secs(10))
            .expect("no listening line");
        assert_eq!(first["event"], "listening", "first line: {first}");
        t.addr = first["addr"].as_str().unwrap().parse().unwrap();
        assert_eq!(t.addr.ip().to_string(), "127.0.0.1");
        assert_ne!(t.addr.port(), 0);
        t
    }

    /// The target's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn next_line(&mut self, timeout: Duration) -> Option<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(l) => {
                assert!(l.starts_with("{\"event\":\""), "event name not first: {l}");
                let v: Value =
                    serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"));
                assert!(v["event"].is_string(), "no event name: {l}");
                self.seen.push(v.clone());
                Some(v)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => panic!("target exited; saw {:?}", self.seen),
        }
    }

    /// The first event (already seen or still to come) named `name` whose fields
    /// include all of `fields`.
    pub(crate) fn expect(&mut self, name: &str, fields: Value) -> Value {
        let matches = |v: &Value| {
            v["event"] == name
                && fields
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, want)| &v[k] == want)
        };
        if let Some(v) = self.seen.iter().find(|v| matches(v)) {
            return v.clone();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_line(left) {
                Some(v) if matches(&v) => return v,
                Some(_) => {}
                None => panic!("no {name} event with {fields}; saw {:#?}", self.seen),
            }
        }
    }

    /// Read events for `d` (to check that something did not happen).
    pub(crate) fn drain_for(&mut self, d: Duration) {
        let deadline = Instant::now() + d;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            if self.next_line(left).is_none() {
                return;
            }
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `rddp ARGS` to completion: (exit code, stdout, stderr).
pub(crate) fn run(args: &[&str]) -> (Option<i32>, String, String) {
    run_within(args, Duration::from_secs(10))
}

/// Run `rddp ARGS` to completion, killed (and the test failed) if it
/// outlives `bound`: (exit code, stdout, stderr).
pub(crate) fn run_within(args: &[&str], bound: Duration) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rddp"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + bound;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rddp {args:?} did not exit within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), s(&out.stdout), s(&out.stderr))
}

pub(crate) fn int(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} is not a JSON integer in {v}"))
}

/// The connected event of `conn`, with every field of the contract and its type.
pub(crate) fn connected(t: &mut Target, conn: u64) -> Value {
    let v = t.expect("connected", json!({ "conn": conn }));
    let peer: SocketAddr = v["peer"].as_str().unwrap().parse().unwrap();
    assert_eq!(peer.ip().to_string(), "127.0.0.1");
    assert_eq!(v["transport"], "mpa");
    for k in ["crc", "markers_rx", "markers_tx"] {
        assert!(v[k].is_boolean(), "{k} not boolean: {v}");
    }
    for k in ["mpa_rev", "ird", "ord"] {
        int(&v, k);
    }
    v
}

pub(crate) fn check_terminate(t: &mut Target, conn: u64, dir: &str, code: TerminateCode) {
    let (l, e, c) = (code.layer, code.etype, code.code);
    let want = json!({ "conn": conn, "direction": dir, "layer": l, "etype": e, "code": c });
    t.expect("terminate", want);
    t.expect("closed", json!({ "conn": conn }));
}

/// A raw connection that has spoken first and read its advertisement.
pub(crate) fn raw(t: &Target) -> (RawPeer, (u32, u64, u32)) {
    let mut p = RawPeer::connect(t.addr, true);
    p.send(1, b"hi", true);
    let ad = p.advert();
    assert_eq!(p.next_untagged(), (0, 2, b"hi".to_vec()));
    (p, ad)
}
