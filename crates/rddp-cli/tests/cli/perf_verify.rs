//! `rddp perf --op mixed --verify` checks every octet (docs/perf.md): a
//! short run between two processes over MPA verifies octets of Reads, Writes
//! (read back) and Sends and finds none wrong; one wrong octet planted in a
//! Write's or a Send's source, in a Read's sink before its check or after it
//! (a late octet) is found and fails the run. Write bandwidth (`--op write
//! --verify`) checks every Write at the server too: one wrong octet in a Write
//! in the middle of a run, overwritten in place by none, is found.

use serde_json::Value;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};

struct Server(Child, String);

impl Server {
    fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rddp"))
            .args(["perf", "server", "--listen", "127.0.0.1:0", "--forever"])
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let addr = first
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_string();
        // Keep reading its stderr, so the server never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        Self(child, addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A mixed run of `secs` against `addr`: success, its final JSON line, stderr.
fn mixed(addr: &str, secs: &str, extra: &[&str]) -> (bool, Value, String) {
    let mut args = vec![
        "perf",
        "client",
        "--connect",
        addr,
        "--op",
        "mixed",
        "--qps",
        "2",
        "--duration",
        secs,
        "--size",
        "16K",
        "--verify",
    ];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_rddp"))
        .args(&args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let last = stdout
        .lines()
        .rfind(|l| l.contains("\"done\":true"))
        .unwrap_or_else(|| panic!("no final line: {stdout}{stderr}"));
    let v = serde_json::from_str(last).unwrap();
    (out.status.success(), v, stderr)
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

#[test]
fn a_mixed_run_verifies_every_kind_of_octet_and_finds_none_wrong() {
    let s = Server::start();
    let (ok, v, err) = mixed(&s.1, "3", &["--reconnect", "1"]);
    assert!(ok, "{v}\n{err}");
    assert_eq!(n(&v, "corrupt"), 0, "{v}");
    assert_eq!(n(&v, "errors"), 0, "{v}");
    for k in [
        "writes",
        "reads",
        "sends",
        "verified_bytes",
        "write_verified_bytes",
    ] {
        assert!(n(&v, k) > 0, "{k}: {v}");
    }
    assert!(n(&v, "rechecked_bytes") > 0, "{v}");
    assert!(n(&v, "connections") >= 4, "{v}");
}

#[test]
fn a_planted_wrong_octet_is_found_wherever_it_is() {
    let s = Server::start();
    for (plant, counter) in [
        ("write", "wrong_reads"),
        ("send", "wrong_sends"),
        ("read", "wrong_reads"),
        ("late", "late"),
    ] {
        let (ok, v, err) = mixed(&s.1, "1", &["--plant-wrong", plant]);
        assert!(!ok, "{plant}: the run passed: {v}");
        assert!(n(&v, counter) >= 1, "{plant}: {v}\n{err}");
        assert!(n(&v, "corrupt") >= n(&v, counter), "{plant}: {v}");
        assert_eq!(n(&v, "errors"), 0, "{plant}: {v}\n{err}");
        assert!(err.contains("octet(s) wrong"), "{plant}: {err}");
    }
}

/// A run with almost no time (`--duration 0.001`) still makes a connection on
/// each queue pair and plants its octet, and finds it: the run is as a
/// connection set up after a short run's end on a loaded machine. (Before:
/// no connection, or one that sent nothing, and the run passed; seen in the
/// test above, 1 s runs, with the machine loaded.)
#[test]
fn a_planted_wrong_octet_is_found_in_a_run_with_almost_no_time() {
    let s = Server::start();
    for (plant, counter) in [("send", "wrong_sends"), ("write", "wrong_reads")] {
        let (ok, v, err) = mixed(&s.1, "0.001", &["--plant-wrong", plant]);
        assert!(!ok, "{plant}: the run passed: {v}");
        assert!(n(&v, counter) >= 1, "{plant}: {v}\n{err}");
        assert!(n(&v, "connections") >= 2, "{plant}: {v}");
    }
}

/// A Write bandwidth run of `iters` Writes of 4 KiB against `addr`, `--json`:
/// its one line (a measurement, or the failure).
fn write_bw(addr: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "perf",
        "client",
        "--connect",
        addr,
        "--op",
        "write",
        "--size",
        "4K",
        "--iters",
        "200",
        "--verify",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_rddp"))
        .args(&args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line: {stdout}{stderr}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn write_bandwidth_checks_every_write_not_only_the_last() {
    let s = Server::start();
    let v = write_bw(&s.1, &[]);
    assert_eq!(n(&v, "iterations"), 200, "{v}");
    assert_eq!(n(&v, "corrupt_bytes"), 0, "{v}");
    // The 100th of 200 Writes has a wrong octet; 100 more Writes follow it.
    let v = write_bw(&s.1, &["--plant-wrong", "write"]);
    assert_eq!(n(&v, "iterations"), 200, "{v}");
    assert_eq!(n(&v, "corrupt_bytes"), 1, "{v}");
}
