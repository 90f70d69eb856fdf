//! Runs the real `rddp perf` as a process over the in-memory LLP (both ends in
//! one process) and checks what it prints.

use serde_json::Value;
use std::process::{Command, Output};

fn rddp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rddp"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Run a mem client with `args` and --json; every stdout line is one object.
fn perf_json(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["perf", "client", "--transport", "mem", "--json"];
    all.extend_from_slice(args);
    let out = rddp(&all);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{all:?}\nstdout:\n{stdout}\nstderr:\n{}",
        text(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

fn num(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("no number {k} in {v}"))
}

/// The fields every object has, and that they agree with each other.
fn check_consistent(v: &Value, op: &str, size: u64, iters: u64) {
    assert_eq!(v["op"], op, "{v}");
    assert_eq!(v["size"].as_u64(), Some(size), "{v}");
    assert_eq!(v["iterations"].as_u64(), Some(iters), "{v}");
    assert_eq!(v["bytes"].as_u64(), Some(size * iters), "{v}");
    let (bytes, secs) = (num(v, "bytes"), num(v, "seconds"));
    assert!(secs > 0.0, "{v}");
    let gbit = num(v, "gbit_per_s");
    assert!(
        (gbit - bytes * 8.0 / secs / 1e9).abs() <= 1e-9 * gbit.max(1.0),
        "{v}"
    );
    let mps = num(v, "msgs_per_s");
    assert!(
        (mps - iters as f64 / secs).abs() <= 1e-6 * mps.max(1.0),
        "{v}"
    );
}

#[test]
fn write_read_send_bandwidth_verified() {
    for op in ["write", "read", "send"] {
        let lines = perf_json(&["--op", op, "--size", "4096", "--iters", "300", "--verify"]);
        assert_eq!(lines.len(), 1, "{op}: {lines:?}");
        let v = &lines[0];
        check_consistent(v, op, 4096, 300);
        assert_eq!(v["corrupt_bytes"].as_u64(), Some(0), "{v}");
        assert!(v.get("p50_us").is_none(), "bandwidth has no latency: {v}");
    }
}

#[test]
fn pingpong_latency_for_write_and_send() {
    for op in ["write", "send"] {
        let lines = perf_json(&[
            "--op",
            op,
            "--size",
            "256",
            "--iters",
            "200",
            "--pingpong",
            "--verify",
        ]);
        let v = &lines[0];
        check_consistent(v, op, 256, 200);
        assert_eq!(v["pingpong"], true);
        assert_eq!(v["corrupt_bytes"].as_u64(), Some(0), "{v}");
        let (p50, p99, max) = (num(v, "p50_us"), num(v, "p99_us"), num(v, "max_us"));
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{v}");
    }
}

#[test]
fn several_sizes_queue_pairs_and_a_duration() {
    // Sizes that grow: the server's receive buffers must follow (send).
    let lines = perf_json(&[
        "--op", "send", "--sweep", "--iters", "8", "--qps", "2", "--verify",
    ]);
    let sizes: Vec<u64> = lines.iter().map(|v| v["size"].as_u64().unwrap()).collect();
    let want: Vec<u64> = (6..=22).map(|p| 1u64 << p).collect();
    assert_eq!(sizes, want);
    for v in &lines {
        check_consistent(v, "send", v["size"].as_u64().unwrap(), 16);
        assert_eq!(v["qps"].as_u64(), Some(2));
        assert_eq!(v["corrupt_bytes"].as_u64(), Some(0), "{v}");
    }
    // The most queue pairs the flag allows (128 consumers of one device here).
    let lines = perf_json(&[
        "--op", "read", "--size", "1K", "--iters", "20", "--qps", "64",
    ]);
    check_consistent(&lines[0], "read", 1024, 20 * 64);
    let lines = perf_json(&["--op", "write", "--size", "1K", "--duration", "0.2"]);
    let v = &lines[0];
    assert!(num(v, "seconds") >= 0.2, "{v}");
    assert!(v["iterations"].as_u64().unwrap() > 0);
}

/// The figures of several queue pairs time their data phases running at the
/// same time: from the first queue pair's first data work request to the last
/// one's end of data, with no queue pair's Begin or Ack (setup of the size)
/// inside; a Write's or Send's end is its server's Result, after its End. Told
/// by the client's own count of control messages in the timed interval, not by
/// timing.
#[test]
fn the_aggregate_times_the_data_phases_not_the_setup() {
    let qps = 64u64;
    for op in ["write", "send", "read"] {
        let lines = perf_json(&["--op", op, "--size", "4K", "--iters", "8", "--qps", "64"]);
        let v = &lines[0];
        check_consistent(v, op, 4096, 8 * qps);
        let timed = v["control_messages_timed"]
            .as_u64()
            .unwrap_or_else(|| panic!("no control_messages_timed in {v}"));
        if op == "read" {
            // A Read's data phase ends with its last Read: only the End and
            // Result of queue pairs done before the last one may be inside.
            assert!(timed < 2 * qps, "{op}: {v}");
        } else {
            assert_eq!(
                timed,
                2 * qps,
                "{op}: each queue pair's End and Result only: {v}"
            );
        }
        // The span holds every queue pair's own data phase.
        let longest = num(v, "qp_seconds_max");
        assert!(longest > 0.0 && longest <= num(v, "seconds"), "{op}: {v}");
    }
    // One queue pair: its own data phase, End and Result.
    let v = &perf_json(&["--op", "write", "--size", "4K", "--iters", "8"])[0];
    assert_eq!(v["control_messages_timed"].as_u64(), Some(2), "{v}");
    assert_eq!(num(v, "qp_seconds_max"), num(v, "seconds"), "{v}");
}

#[test]
fn writes_and_reads_may_run_longer_than_the_stall_limit() {
    // The server sees nothing of Writes and Reads until End; a size that runs
    // longer than the stall limit (1 s here, 10 s by default) must not look like
    // a dead client to it.
    for op in ["write", "read"] {
        let lines = perf_json(&[
            "--op",
            op,
            "--size",
            "4K",
            "--duration",
            "2.5",
            "--stall-secs",
            "1",
        ]);
        assert!(num(&lines[0], "seconds") >= 2.5, "{op}: {}", lines[0]);
    }
}

#[test]
fn few_receive_buffers_slow_a_fast_client_down_but_never_overrun() {
    // 2 receives asked for (16 kept at least), a client that could post 512.
    let lines = perf_json(&[
        "--op",
        "send",
        "--size",
        "64",
        "--iters",
        "3000",
        "--rx-depth",
        "2",
        "--tx-depth",
        "512",
        "--verify",
    ]);
    check_consistent(&lines[0], "send", 64, 3000);
    assert_eq!(lines[0]["corrupt_bytes"].as_u64(), Some(0));
    // Latency with two queue pairs and a duration.
    let lines = perf_json(&[
        "--op",
        "send",
        "--pingpong",
        "--qps",
        "2",
        "--size",
        "100",
        "--duration",
        "0.2",
    ]);
    assert_eq!(lines[0]["qps"].as_u64(), Some(2));
    assert!(num(&lines[0], "p99_us") > 0.0);
}

#[test]
fn sends_posted_as_lists_all_arrive_verified() {
    // Lists of up to 16, cut by the credits of few receives and by the depth;
    // an iteration count that no list size divides. The server checks every
    // Send and the client that it received all of them.
    for (rx, tx) in [("2", "128"), ("512", "20")] {
        let lines = perf_json(&[
            "--op",
            "send",
            "--size",
            "100",
            "--iters",
            "3001",
            "--post-list",
            "16",
            "--rx-depth",
            rx,
            "--tx-depth",
            tx,
            "--verify",
        ]);
        check_consistent(&lines[0], "send", 100, 3001);
        assert_eq!(lines[0]["corrupt_bytes"].as_u64(), Some(0), "{}", lines[0]);
    }
}

#[test]
fn plot_writes_an_svg_chart() {
    let path = std::env::temp_dir().join(format!("rddp-perf-{}.svg", std::process::id()));
    let p = path.to_str().unwrap();
    let lines = perf_json(&["--op", "write", "--sweep", "--iters", "4", "--plot", p]);
    assert_eq!(lines.len(), 17);
    let svg = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{}",
        &svg[..80]
    );
    assert!(
        svg.contains("<path") || svg.contains("<polyline"),
        "no line drawn"
    );
    assert!(
        svg.contains("4 MiB") && svg.contains("Gbit/s"),
        "axis labels missing"
    );
    assert!(svg.trim_end().ends_with("</svg>"));
}

#[test]
fn table_has_perftests_columns() {
    let out = rddp(&[
        "perf",
        "client",
        "--transport",
        "mem",
        "--size",
        "64K",
        "--iters",
        "50",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("#bytes     #iterations    BW peak[Gb/sec]"),
        "{stdout}"
    );
    let row = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("65536"))
        .unwrap_or_else(|| panic!("no row:\n{stdout}"));
    assert_eq!(row.split_whitespace().count(), 5, "{row}");
}

/// A wrong command line: one line on stderr, non-zero exit, no panic.
fn refused(args: &[&str], says: &str) {
    let out = rddp(args);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}:\n{stderr}");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
}

#[test]
fn bad_arguments_are_one_clear_line() {
    let mem = ["perf", "client", "--transport", "mem"];
    fn with<'a>(mem: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [mem, extra].concat()
    }
    let with = |extra: &[&'static str]| with(&mem, extra);
    refused(&with(&["--op", "fetch"]), "invalid value 'fetch'");
    refused(&with(&["--size", "0"]), "out of range");
    refused(&with(&["--size", "12Q"]), "unknown unit");
    refused(&with(&["--size", "-5"]), "--size");
    refused(&with(&["--size", "64", "--sweep"]), "cannot be used with");
    refused(&with(&["--iters", "0"]), "--iters");
    refused(&with(&["--duration", "-1"]), "--duration");
    refused(
        &with(&["--iters", "5", "--duration", "1"]),
        "cannot be used with",
    );
    refused(&with(&["--plot", "x.svg"]), "--sweep");
    refused(&with(&["--qps", "0"]), "--qps");
    refused(&with(&["--op", "read", "--pingpong"]), "--pingpong");
    refused(&["perf", "client"], "--connect");
    refused(&["perf", "server"], "--listen");
    refused(&["perf", "server", "--transport", "mem"], "perf client");
}

#[test]
fn unreachable_peers_and_missing_transports_are_one_clear_line() {
    // A port nobody listens on (bound, then freed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    refused(
        &["perf", "client", "--transport", "mpa", "--connect", &addr],
        "nothing listens there",
    );
    refused(
        &["perf", "client", "--transport", "sctp", "--connect", &addr],
        "cannot connect to",
    );
    refused(
        &[
            "perf",
            "server",
            "--transport",
            "sctp",
            "--listen",
            "[::1]:0",
        ],
        "needs an IPv4 address",
    );
}

#[test]
fn write_send_read_between_two_processes() {
    use std::io::BufRead;
    let sctp = std::env::var_os("CI").is_some()
        || std::path::Path::new("/usr/lib/x86_64-linux-gnu/libusrsctp.so.2").exists();
    let transports: &[&str] = if sctp { &["mpa", "sctp"] } else { &["mpa"] };
    for t in transports {
        for op in ["write", "send", "read"] {
            let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_rddp"))
                .args([
                    "perf",
                    "server",
                    "--transport",
                    t,
                    "--listen",
                    "127.0.0.1:0",
                ])
                .stderr(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let mut lines = std::io::BufReader::new(server.stderr.take().unwrap()).lines();
            let first = lines.next().unwrap().unwrap();
            let addr = first.rsplit(' ').next().unwrap().to_string();
            let out = rddp(&[
                "perf",
                "client",
                "--transport",
                t,
                "--connect",
                &addr,
                "--op",
                op,
                "--size",
                "65536",
                "--iters",
                "300",
                "--verify",
                "--json",
            ]);
            let stdout = text(&out.stdout);
            let _ = server.kill();
            let _ = server.wait();
            assert!(
                out.status.success(),
                "{t} {op}: {stdout}{}",
                text(&out.stderr)
            );
            let v: serde_json::Value =
                serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
            assert_eq!(v["op"], op);
            assert_eq!(v["size"], 65536);
            assert_eq!(v["bytes"], 65536 * 300);
            assert_eq!(v["corrupt_bytes"], 0, "{v}");
            assert!(v["gbit_per_s"].as_f64().unwrap() > 0.0);
            // Both ends' user-space copies of payload over the size (issue
            // 11 point 8), the server's from its Result: none, but for the
            // one counted exception. Before a size of Sends the client uses
            // up the server's too-short buffers with 1-octet Pads; where a
            // few arrived alone in a row (a loaded machine), the server reads
            // the next Send in one read into the buffer of a 1-octet Send.
            // That longer Send was a miss whose read octets were copied (seen
            // once: 24 octets); it is taken in place since (fpdu/rx_direct/lone.rs,
            // `longer_lone_sends_are_taken_in_place`). A Send the loopback
            // cut into pieces is still a miss there: the bound stays (at most
            // 12 misses a connection, each under 1,100 octets).
            let most = if op == "send" && *t == "mpa" {
                12 * 1100
            } else {
                0
            };
            let copied = v["payload_copied_octets"].as_u64().unwrap();
            assert!(copied <= most, "{t} {op}: {copied} octets copied: {v}");
            let ends: u64 = ["client_rx", "client_tx", "server_rx", "server_tx"]
                .iter()
                .map(|k| v["payload_copies"][k].as_u64().unwrap())
                .sum();
            assert_eq!(ends, copied, "{t} {op}: {v}");
            for k in ["client_tx", "server_tx"] {
                assert_eq!(v["payload_copies"][k], 0, "{t} {op} {k}: {v}");
            }
        }
    }
}
