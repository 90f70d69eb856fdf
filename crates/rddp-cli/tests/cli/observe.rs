//! Seeing what happens (docs/features.md), with the real `rddp` binary: logs on stderr
//! that leave `--json` stdout clean, counters in perf's JSON and in target's
//! `closed` event, and `--pcap` files that tshark decodes with good CRCs.

use crate::common;

use common::client::{Client, opts};
use common::pcap::{check_mpa_capture, tshark, tshark_present};
use common::raw_peer::RawPeer;
use common::{Target, connected};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

fn rddp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rddp"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rddp-observe-{name}-{}.pcap", std::process::id()))
}

/// A `rddp perf server` child (killed on drop) and the address it listens on,
/// read from its stderr among the log lines; the rest of stderr is collected.
struct Server {
    child: Child,
    addr: String,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Server {
    fn start(args: &[&str]) -> Self {
        let mut child = rddp()
            .args(["perf", "server", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let addr = loop {
            let l = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the server did not say where it listens");
            if let Some(a) = l.strip_prefix("rddp perf server: listening on ") {
                break a.to_string();
            }
        };
        Self {
            child,
            addr,
            stderr: rx,
        }
    }

    /// Wait for the server to exit (it serves one connection); its stderr.
    fn finish(mut self) -> String {
        for _ in 0..500 {
            if self.child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::iter::from_fn(|| self.stderr.recv_timeout(Duration::from_secs(1)).ok())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn verbose_logs_go_to_stderr_and_json_stdout_stays_parseable() {
    let server = Server::start(&["-v"]);
    let out = rddp()
        .args(["perf", "client", "--connect", &server.addr])
        .args(["--size", "4K", "--iters", "200", "--json", "-vv"])
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout not JSON ({e}): {l:?}")))
        .collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let c = &lines[0]["counters"];
    // 200 Writes of 4096 octets, plus the run's control Sends.
    let sent = c["octets_sent"].as_u64().unwrap();
    assert!((200 * 4096..200 * 4096 + 4096).contains(&sent), "{c}");
    assert!(c["completions"]["success"].as_u64().unwrap() >= 200, "{c}");
    assert_eq!(c["segments_refused"], 0, "{c}");
    assert_eq!(c["terminates_sent"], json!({}), "{c}");
    // The client's logs: setup as initiator and the queue pair's state (info),
    // FPDU mode (debug with -vv).
    assert!(
        stderr.contains("INFO")
            && stderr.contains("MPA: connected with")
            && stderr.contains("as initiator"),
        "{stderr}"
    );
    assert!(stderr.contains("state RTS"), "{stderr}");
    assert!(
        stderr.contains("DEBUG") && stderr.contains("MULPDU"),
        "{stderr}"
    );
    let serr = server.finish();
    assert!(serr.contains("as responder"), "{serr}");
    assert!(!serr.contains("DEBUG"), "-v is info, not debug:\n{serr}");
}

#[test]
fn quiet_silences_warnings_and_rust_log_is_honoured() {
    // Step 6 of the demo provokes a Terminate: a warning at the default level.
    let demo = |args: &[&str], rust_log: Option<&str>| {
        let mut c = rddp();
        c.arg("demo").args(args);
        match rust_log {
            Some(v) => c.env("RUST_LOG", v),
            None => c.env_remove("RUST_LOG"),
        };
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        (text(&out.stdout), text(&out.stderr))
    };
    let (stdout, stderr) = demo(&[], None);
    assert!(stdout.contains("demo finished"));
    assert!(
        stderr.contains("WARN")
            && stderr.contains("Terminate sent: DDP base or bounds violation (1/1/0x01)"),
        "{stderr}"
    );
    assert!(stderr.contains("Terminate received"), "{stderr}");
    assert!(!stderr.contains("INFO"), "{stderr}");
    assert!(!stdout.contains("WARN"), "logs leaked to stdout:\n{stdout}");
    let (_, quiet) = demo(&["-q"], None);
    assert_eq!(quiet, "", "-q keeps errors only");
    let (_, env) = demo(&[], Some("rddp_mpa=debug"));
    assert!(env.contains("MPA: connected with"), "{env}");
    assert!(
        !env.contains("Terminate sent"),
        "only rddp_mpa asked for:\n{env}"
    );
    // Flags win over RUST_LOG.
    let (_, both) = demo(&["-qq"], Some("trace"));
    assert_eq!(both, "");
}

#[test]
fn target_reports_each_connections_counters_when_it_closes() {
    let mut t = Target::start(&["--buffer-size", "4096"]);
    let c = Client::connect(t.addr, opts(2, true, false));
    connected(&mut t, 1);
    let remote = c.advert();
    c.write_read(remote, 0, &[7; 1000]);
    c.send(b"hello");
    let _ = c.recv();
    drop(c);
    let closed = t.expect("closed", json!({ "conn": 1 }));
    let s = &closed["stats"];
    // The Write's 1000 octets, the Read Request's 28, the Send's 5 (and the RTR).
    assert_eq!(s["octets_placed"], 1000 + 28 + 5, "{closed}");
    // The advertisement (16), the echo (5), the Read Response (1000).
    assert_eq!(s["octets_sent"], 16 + 5 + 1000, "{closed}");
    assert_eq!(s["segments_refused"], 0, "{closed}");
    assert!(
        s["completions"]["success"].as_u64().unwrap() >= 3,
        "{closed}"
    );

    // A raw peer writes past the buffer: refused, Terminate 1/1/0x01 sent.
    let mut p = RawPeer::connect(t.addr, true);
    p.send(1, b"hi", true);
    let (stag, to, _) = p.advert();
    let mut seg = vec![0xC1, 0x40];
    seg.extend_from_slice(&stag.to_be_bytes());
    seg.extend_from_slice(&(to + 4090).to_be_bytes());
    seg.extend_from_slice(&[0xEE; 16]);
    p.send_segment(&seg);
    let closed = t.expect("closed", json!({ "conn": 2 }));
    let s = &closed["stats"];
    assert_eq!(s["segments_refused"], 1, "{closed}");
    assert_eq!(s["terminates_sent"], json!({ "ddp_tagged": 1 }), "{closed}");
    assert_eq!(s["terminates_received"], json!({}), "{closed}");
}

// ---- --pcap ----

#[test]
fn demo_pcap_decodes_in_tshark_with_good_crcs() {
    if !tshark_present() {
        return;
    }
    let file = tmp("demo-mpa");
    let out = rddp()
        .arg("demo")
        .arg("--pcap")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ops = check_mpa_capture(&file);
    let names: Vec<&str> = ops.iter().map(|(_, o)| o.as_str()).collect();
    // Write RTR + Writes, Read Request, Read Response, Sends, the Terminate.
    for want in ["0x00", "0x01", "0x02", "0x03", "0x07"] {
        assert!(names.contains(&want), "no opcode {want} in {names:?}");
    }
    // Both ends are in the process: each FPDU once (demo: 14 FPDUs).
    assert_eq!(ops.len(), 14, "{ops:?}");
    let _ = std::fs::remove_file(&file);
}

#[test]
fn perf_pcap_on_each_side_holds_both_directions_of_the_connection() {
    if !tshark_present() {
        return;
    }
    let (cf, sf) = (tmp("perf-client"), tmp("perf-server"));
    let sfs = sf.to_str().unwrap().to_string();
    let server = Server::start(&["--pcap", &sfs]);
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let out = rddp()
        .args(["perf", "client", "--connect", &server.addr, "--op", "read"])
        .args(["--size", "2000", "--iters", "20", "--json", "--pcap"])
        .arg(&cf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    server.finish();
    // Each process saw the same connection: its own FPDUs and the peer's, in
    // the same order in each direction (the two directions interleave as each
    // process saw them).
    let (c, s) = (check_mpa_capture(&cf), check_mpa_capture(&sf));
    let from = |v: &[(String, String)], server: bool| -> Vec<String> {
        v.iter()
            .filter(|(p, _)| (*p == port) == server)
            .map(|(_, o)| o.clone())
            .collect()
    };
    assert_eq!(from(&c, true), from(&s, true), "server's FPDUs differ");
    assert_eq!(from(&c, false), from(&s, false), "client's FPDUs differ");
    let from_server = c.iter().filter(|(p, _)| *p == port).count();
    // RDMAP opcodes: 0x1 Read Request (client), 0x2 Read Response (server).
    let requests = c.iter().filter(|(p, o)| *p != port && o == "0x01").count();
    let responses = c.iter().filter(|(p, o)| *p == port && o == "0x02").count();
    assert!(responses >= 20 && requests >= 20, "{c:?}");
    assert!(from_server > 0 && from_server < c.len());
    let _ = std::fs::remove_file(&cf);
    let _ = std::fs::remove_file(&sf);
}

#[test]
fn sctp_demo_pcap_decodes_with_good_checksums_and_the_lua_dissector() {
    if !tshark_present() {
        return;
    }
    let file = tmp("demo-sctp");
    let out = rddp()
        .args(["demo", "--transport", "sctp", "--pcap"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    if !out.status.success() && stderr.contains("libusrsctp") && std::env::var_os("CI").is_none() {
        eprintln!("\n*** SKIPPED: the SCTP demo needs libusrsctp (CI unset)\n");
        return;
    }
    assert!(out.status.success(), "{stderr}");
    let stdout = text(&out.stdout);
    let port = stdout
        .split("UDP encapsulation on ")
        .nth(1)
        .and_then(|s| s.lines().next())
        .and_then(|s| s.rsplit(':').next())
        .unwrap_or_else(|| panic!("no address in {stdout}"))
        .to_string();
    let lua = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../rddp-sctp/tests/wire/rddp_sctp.lua"
    );
    let rows = tshark(
        &file,
        &[
            "-d",
            &format!("udp.port=={port},sctp"),
            "-o",
            "sctp.checksum:CRC-32C",
            "-X",
            &format!("lua_script:{lua}"),
            "-T",
            "fields",
            "-e",
            "sctp.checksum.status",
            "-e",
            "sctp.data_payload_proto_id",
            "-e",
            "rddp_sctp.summary",
        ],
    );
    let rows: Vec<Vec<&str>> = rows.lines().map(|l| l.split('\t').collect()).collect();
    assert!(rows.len() > 20, "{rows:?}");
    for r in &rows {
        assert_eq!(r[0], "1", "checksum not good: {r:?}");
        assert!(r[1] == "16" || r[1] == "17", "PPID: {r:?}");
        assert!(!r[2].is_empty() && !r[2].contains("malformed"), "{r:?}");
    }
    let summary: Vec<&str> = rows.iter().map(|r| r[2]).collect();
    // Initiate, Accept, the advertisement Send, tagged Writes, a Terminate.
    assert!(summary[0].starts_with("ctl ssn=0 fc=1"), "{summary:?}");
    assert!(summary[1].starts_with("ctl ssn=0 fc=2"), "{summary:?}");
    assert!(summary.iter().any(|s| s.contains("T=1")), "{summary:?}");
    assert!(
        summary.iter().any(|s| s.contains("qn=2")),
        "no Terminate: {summary:?}"
    );
    let _ = std::fs::remove_file(&file);
}
