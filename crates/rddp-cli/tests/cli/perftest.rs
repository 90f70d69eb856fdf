//! `rddp perf --perftest` against itself over loopback: perftest's -R exchange
//! from both ends (tests/cli/interop_siw.rs runs each end against stock perftest on
//! siw), and what it refuses.

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

/// The report line (" 65536      200   ...") of a perftest-style output.
fn report(out: &str, size: u32, iters: u32) -> String {
    out.lines()
        .find(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() == 5 && w[0] == size.to_string() && w[1] == iters.to_string()
        })
        .unwrap_or_else(|| panic!("no report line in\n{out}"))
        .trim()
        .to_string()
}

fn pair(op: &str, size: u32, iters: u32) -> (String, String) {
    let (s, n) = (size.to_string(), iters.to_string());
    let mut server = Command::new(env!("CARGO_BIN_EXE_rddp"))
        .args(["perf", "server", "--listen", "127.0.0.1:0", "--perftest"])
        .args(["--op", op, "--size", &s, "--iters", &n])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(server.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let addr = first
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
    let (code, out, cerr) = common::run(&[
        "perf",
        "client",
        "--connect",
        &addr,
        "--perftest",
        "--op",
        op,
        "--size",
        &s,
        "--iters",
        &n,
    ]);
    assert_eq!(code, Some(0), "{op}: {out}\n{cerr}");
    let status = server.wait().unwrap();
    let mut sout = String::new();
    server
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut sout)
        .unwrap();
    let mut serr = String::new();
    err.read_to_string(&mut serr).unwrap();
    assert!(status.success(), "{op}: {sout}\n{serr}");
    (out, sout)
}

#[test]
fn write_and_read_reports_reach_the_server() {
    for op in ["write", "read"] {
        let (client, server) = pair(op, 65536, 200);
        assert!(client.contains(if op == "write" {
            "RDMA_Write BW Test"
        } else {
            "RDMA_Read BW Test"
        }));
        // The server prints the client's report as it came (step 11).
        assert_eq!(
            report(&client, 65536, 200),
            report(&server, 65536, 200),
            "{op}"
        );
    }
}

#[test]
fn send_is_paced_by_credits_and_measured_by_the_server() {
    // More messages than the server's receive depth: the client must wait for
    // the server's credit writes.
    let (client, server) = pair("send", 4096, 2000);
    let c = report(&client, 4096, 2000);
    let s = report(&server, 4096, 2000);
    let avg = |l: &str| l.split_whitespace().nth(3).unwrap().parse::<f64>().unwrap();
    assert!(avg(&c) > 0.0 && avg(&s) > 0.0, "{c}\n{s}");
}

#[test]
fn perftest_mode_refuses_what_perftest_cannot_do() {
    for extra in [
        &["--sweep"][..],
        &["--pingpong"],
        &["--qps", "2"],
        &["--duration", "1"],
    ] {
        let mut args = vec!["perf", "client", "--connect", "127.0.0.1:9", "--perftest"];
        args.extend_from_slice(extra);
        let (code, _, err) = common::run(&args);
        assert_eq!(code, Some(1), "{extra:?}: {err}");
        assert!(err.contains("--perftest runs one size"), "{extra:?}: {err}");
    }
    let (code, _, err) =
        common::run(&["perf", "server", "--listen", "127.0.0.1:0", "--op", "send"]);
    assert_eq!(code, Some(2), "{err}");
}
