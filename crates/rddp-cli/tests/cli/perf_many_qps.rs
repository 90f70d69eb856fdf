//! `rddp perf` with thousands of queue pairs (docs/perf.md): server and
//! client as two processes over MPA, each driving every queue pair from a small
//! fixed number of threads, not one thread per connection; and with one queue
//! pair, one worker thread at each end (more only hand its task around).

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const QPS: u64 = 2000;

/// Kills the child when the test ends, passed or not.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The tokio workers of `pid` (threads named perf-worker).
fn workers_of(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "perf-worker")
        .count()
}

/// A perf server for `qps` queue pairs over MPA on a free port: the process,
/// its address and its stdout.
fn server(qps: &str) -> (Reap, String, std::process::ChildStdout) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_rddp"))
        .args([
            "perf",
            "server",
            "--transport",
            "mpa",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--qps", qps, "--json"])
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = server.stderr.take().unwrap();
    let stdout = server.stdout.take().unwrap();
    let server = Reap(server);
    let first = std::io::BufReader::new(stderr)
        .lines()
        .next()
        .unwrap()
        .unwrap();
    let addr = first.rsplit(' ').next().unwrap().to_string();
    (server, addr, stdout)
}

/// A perf client of `args` against `addr` (JSON out, both streams piped).
fn client(addr: &str, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_rddp"))
        .args(["perf", "client", "--transport", "mpa", "--connect", addr])
        .args(args)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn one_queue_pair_runs_on_one_worker_at_each_end() {
    let (server, addr, _out) = server("1");
    let mut c = Reap(client(
        &addr,
        &["--op", "read", "--size", "64K", "--iters", "5000"],
    ));
    let (mut most_server, mut most_client) = (0, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = c.0.try_wait().unwrap() {
            break s;
        }
        most_server = most_server.max(workers_of(server.0.id()));
        most_client = most_client.max(workers_of(c.0.id()));
        assert!(start.elapsed() < Duration::from_secs(60), "no end");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(status.success());
    // Two cores or more used to give two workers at each end.
    assert_eq!(
        (most_server, most_client),
        (1, 1),
        "perf-worker threads (server, client)"
    );
}

#[test]
fn two_thousand_queue_pairs_on_a_few_threads() {
    let _machine = crate::common::heavy();
    let qps = QPS.to_string();
    let (server, addr, stdout) = server(&qps);
    let mut client = client(
        &addr,
        &[
            "--qps", &qps, "--op", "write", "--size", "4K", "--iters", "2", "--verify",
        ],
    );
    let client_stdout = client.stdout.take().unwrap();
    let lines = std::thread::spawn(move || {
        std::io::BufReader::new(client_stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let client_pid = client.id();
    let mut client = Reap(client);
    // Watch both processes' thread counts until the client ends.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let limit = cores + 8;
    let start = Instant::now();
    let (mut most_server, mut most_client) = (0, 0);
    let status = loop {
        if let Some(s) = client.0.try_wait().unwrap() {
            break s;
        }
        most_server =
            most_server.max(crate::common::proc_status(server.0.id(), "Threads").unwrap_or(0));
        most_client =
            most_client.max(crate::common::proc_status(client_pid, "Threads").unwrap_or(0));
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{QPS} queue pairs did not finish in 120 s (server threads up to {most_server}, client {most_client})"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(client.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    let lines = lines.join().unwrap();
    assert!(status.success(), "client: {lines:?}\n{err}");
    assert!(
        most_server <= limit && most_client <= limit,
        "threads: server up to {most_server}, client up to {most_client}; at most {limit} ({cores} cores + 8)"
    );
    assert_eq!(lines.len(), 1, "{lines:?}");
    let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(v["op"], "write", "{v}");
    assert_eq!(v["qps"].as_u64(), Some(QPS), "{v}");
    assert_eq!(v["iterations"].as_u64(), Some(2 * QPS), "{v}");
    assert_eq!(v["bytes"].as_u64(), Some(4096 * 2 * QPS), "{v}");
    assert_eq!(v["corrupt_bytes"].as_u64(), Some(0), "{v}");
    // Timed: the data phases only (every queue pair's End and Result, and
    // the Written after each of its two verified Writes; no Begin or Ack),
    // from the first queue pair's start to the last one's end.
    assert_eq!(v["control_messages_timed"].as_u64(), Some(4 * QPS), "{v}");
    let (longest, span) = (v["qp_seconds_max"].as_f64(), v["seconds"].as_f64());
    assert!(
        longest.zip(span).is_some_and(|(l, s)| 0.0 < l && l <= s),
        "{v}"
    );
    // The server prints one line per connection once all have ended.
    let mut server = server;
    let out: Vec<String> = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .collect();
    let _ = server.0.wait();
    assert_eq!(out.len() as u64, QPS, "server lines");
    let verified: u64 = out
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["ok"], true, "{v}");
            assert_eq!(v["corrupt_bytes"].as_u64(), Some(0), "{v}");
            v["messages"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(verified, 2 * QPS, "Writes the server counted");
}
