//! `rddp conform` validated against `rddp target`: every case passes
//! (or does not apply, saying why) against the real target, and each planted
//! deviation (`rddp target --deviate NAME`, a relay that breaks the RFCs on the
//! wire in front of the unchanged engine) is reported as the failure of the
//! case that looks for it, while a control case still passes.

use crate::common;

use common::Target;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Run `rddp conform ADDR ARGS`: (exit code, stdout, stderr). Every case is
/// bounded; 120 s is the test's own bound on the whole run.
fn conform(addr: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let all: Vec<&str> = ["conform", addr, "--setup-wait", "5"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    common::run_within(&all, Duration::from_secs(120))
}

/// The target as the tests run it: one buffer for all connections (so refused
/// Writes can be read back), a short setup timeout (mpa.no-request).
fn target(extra: &[&str]) -> Target {
    let mut args = vec!["--shared-buffer", "--setup-timeout", "1"];
    args.extend_from_slice(extra);
    Target::start(&args)
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("--json is not JSON ({e}): {stdout}"))
}

fn case<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no case {id} in {v}"))
}

/// The ids of the whole catalogue, from `--list`.
fn catalogue() -> Vec<String> {
    let (code, out, err) = conform("127.0.0.1:1", &["--list"]);
    assert_eq!(code, Some(0), "{err}");
    out.lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn every_case_passes_against_rddp_target() {
    let t = target(&[]);
    let ids = catalogue();
    assert!(ids.len() >= 25, "{ids:?}");
    // The RFC 5043 session cases do not apply over MPA/TCP.
    let sctp_only = ids.iter().filter(|i| i.starts_with("sctp.")).count();
    assert!(sctp_only >= 8, "{ids:?}");
    let t0 = Instant::now();
    let (code, out, err) = conform(&t.addr.to_string(), &[]);
    eprintln!("{err}{out}rddp conform took {:?}", t0.elapsed());
    assert!(
        err.contains("WARNING"),
        "no warning before the cases: {err}"
    );
    assert_eq!(code, Some(0), "{out}");
    // One row per case, each a pass.
    for id in &ids {
        let row = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no row for {id}: {out}"));
        let want = if id.starts_with("sctp.") {
            " n/a "
        } else {
            " pass "
        };
        assert!(row.contains(want), "{row}");
    }
    assert!(
        out.contains(&format!(
            "{} passed, 0 failed, {sctp_only} not applicable",
            ids.len() - sctp_only
        )),
        "{out}"
    );
}

#[test]
fn json_report_parses_and_agrees() {
    let t = target(&[]);
    let (code, out, err) = conform(
        &t.addr.to_string(),
        &["--json", "--only", "mpa.,ddp.", "--skip", "mpa.no-request"],
    );
    assert_eq!(code, Some(0), "{err}{out}");
    let v = json(&out);
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() >= 15, "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    assert_eq!(v["transport"], "mpa");
    assert_eq!(v["role"], "initiator");
    for c in cases {
        let id = c["id"].as_str().unwrap();
        assert!(id.starts_with("mpa.") || id.starts_with("ddp."), "{c}");
        assert_ne!(id, "mpa.no-request", "--skip did not leave it out");
        assert!(c["rfc"].as_str().unwrap().starts_with("RFC "), "{c}");
        assert!(!c["expect"].as_str().unwrap().is_empty(), "{c}");
        match c["result"].as_str().unwrap() {
            "pass" => {}
            "n/a" => assert!(!c["reason"].as_str().unwrap().is_empty(), "{c}"),
            r => panic!("{id}: {r}: {c}"),
        }
    }
    // The refused Write placed nothing, read back on a fresh connection.
    let bb = case(&v, "ddp.base-bounds");
    assert!(
        bb["note"]
            .as_str()
            .unwrap()
            .contains("nothing placed (read back)"),
        "{bb}"
    );
}

/// Each deviation: (name, the case that must fail, what its `got` says, a case
/// that must still pass).
const DEVIATIONS: [(&str, &str, &str, &str); 5] = [
    (
        "no-to-wrap-check",
        "ddp.to-wrap",
        "1/1/0x01",
        "ddp.base-bounds",
    ),
    (
        "wrong-terminate-code",
        "ddp.base-bounds",
        "1/1/0x00",
        "ddp.to-wrap",
    ),
    (
        "siw-terminate-layout",
        "rdmap.terminate-format",
        "not in the RFC 5040 §4.8 layout",
        "mpa.rev1",
    ),
    (
        "no-terminate",
        "ddp.invalid-stag",
        "a close without a Terminate",
        "fpdu.bad-crc",
    ),
    (
        "place-before-validate",
        "ddp.base-bounds",
        "octets placed although the segment was refused",
        "ddp.to-wrap",
    ),
];

#[test]
fn planted_deviations_are_reported_as_their_failures() {
    for (name, failing, says, control) in DEVIATIONS {
        let t = target(&["--deviate", name]);
        let only = format!("{failing},{control}");
        let (code, out, err) = conform(&t.addr.to_string(), &["--json", "--only", &only]);
        assert_eq!(code, Some(1), "{name}: exit {code:?}: {err}{out}");
        let v = json(&out);
        assert_eq!(v["failed"], 1, "{name}: {v}");
        let f = case(&v, failing);
        assert_eq!(f["result"], "fail", "{name}: {f}");
        assert!(f["got"].as_str().unwrap().contains(says), "{name}: {f}");
        assert_eq!(case(&v, control)["result"], "pass", "{name}: {v}");
    }
}

#[test]
fn a_failure_shows_in_the_table_and_the_exit_code() {
    let t = target(&["--deviate", "no-to-wrap-check"]);
    let (code, out, _) = conform(&t.addr.to_string(), &["--only", "ddp.to-wrap"]);
    assert_eq!(code, Some(1), "{out}");
    let row = out.lines().find(|l| l.starts_with("ddp.to-wrap")).unwrap();
    assert!(row.contains("FAIL") && row.contains("RFC 5041"), "{row}");
    assert!(row.contains("expected Terminate 1/1/0x03"), "{row}");
    assert!(out.contains("0 passed, 1 failed"), "{out}");
}

/// `--role responder`: the peer under test is `rddp rping -c`, an MPA
/// initiator started again for each case until conform is done.
#[test]
fn as_responder_every_case_passes_against_rddp_rping_client() {
    use std::io::{BufRead, BufReader};
    let mut c = Command::new(env!("CARGO_BIN_EXE_rddp"))
        .args(["conform", "127.0.0.1:0", "--role", "responder", "--json"])
        .args(["--setup-wait", "5", "--accept-wait", "20"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = BufReader::new(c.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in err.lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let port = loop {
        let l = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("no listening line");
        if let Some(at) = l.split("listening on 127.0.0.1:").nth(1) {
            break at.split(':').next().unwrap().to_string();
        }
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut clients = 0;
    while c.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "rddp conform did not finish");
        clients += 1;
        // One connection each; --timeout bounds its wait for the MPA Reply.
        let out = Command::new(env!("CARGO_BIN_EXE_rddp"))
            .args(["rping", "-c", "-a", "127.0.0.1", "-p", &port, "-C", "1"])
            .args(["--mpa-rev", "2", "--p2p", "both", "--timeout", "2"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let _ = out;
    }
    let out = c.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let v = json(&stdout);
    assert_eq!(v["role"], "responder", "{v}");
    let cases = v["cases"].as_array().unwrap();
    // The RFC 5043 cases (the peer as the active side over SCTP) do not apply.
    let (mpa, sctp): (Vec<_>, Vec<_>) = cases
        .iter()
        .partition(|c| c["id"].as_str().unwrap().starts_with("initiator."));
    assert!(mpa.len() >= 7, "{v}");
    assert!(clients >= mpa.len(), "{clients} clients for {v}");
    for c in mpa {
        assert_eq!(c["result"], "pass", "{c}");
    }
    for c in sctp {
        assert_eq!(c["result"], "n/a", "{c}");
    }
    let nr = case(&v, "initiator.no-reply");
    assert!(nr["ms"].as_u64().unwrap() < 5000, "{nr}");
    let rtr = case(&v, "initiator.rtr-not-offered");
    assert!(rtr["note"].as_str().unwrap().contains("2/0/0x07"), "{rtr}");
}

#[test]
fn unknown_cases_say_so() {
    for opt in ["--only", "--skip"] {
        let (code, _, err) = conform("127.0.0.1:1", &[opt, "nosuch"]);
        assert_eq!(code, Some(1));
        assert!(err.contains("no case"), "{err}");
    }
}

/// The SCTP tests need libusrsctp: without it they say so and pass, unless CI
/// is set (as the other SCTP tests of rddp-cli).
fn usrsctp_missing() -> bool {
    !rddp_testkit::usrsctp_present("the SCTP conform tests", usrsctp_ffi::available())
}

/// `--transport sctp`: every case that applies over SCTP passes against
/// `rddp target --transport sctp`, the refused segments read back as not
/// placed; the MPA cases say they do not apply.
#[test]
fn over_sctp_every_case_passes_against_rddp_target() {
    if usrsctp_missing() {
        return;
    }
    let t = target(&["--transport", "sctp"]);
    let t0 = Instant::now();
    let (code, out, err) = conform(&t.addr.to_string(), &["--transport", "sctp", "--json"]);
    eprintln!("{err}rddp conform over SCTP took {:?}", t0.elapsed());
    assert_eq!(code, Some(0), "{err}{out}");
    let v = json(&out);
    assert_eq!(v["transport"], "sctp", "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    let cases = v["cases"].as_array().unwrap();
    let sctp = cases
        .iter()
        .filter(|c| c["id"].as_str().unwrap().starts_with("sctp."))
        .count();
    assert!(sctp >= 10, "{v}");
    for c in cases {
        let id = c["id"].as_str().unwrap();
        let mpa_only =
            id.starts_with("mpa.") || id.starts_with("fpdu.") || id == "rdmap.read-beyond-ird";
        if mpa_only {
            assert_eq!(c["result"], "n/a", "{c}");
            assert!(
                c["reason"].as_str().unwrap().contains("MPA/TCP only"),
                "{c}"
            );
        } else {
            assert_eq!(c["result"], "pass", "{c}");
        }
    }
    for id in [
        "ddp.base-bounds",
        "sctp.stray-segment",
        "sctp.after-terminate",
        "sctp.over-max-segment",
    ] {
        let c = case(&v, id);
        assert!(
            c["note"]
                .as_str()
                .unwrap()
                .contains("nothing placed (read back)"),
            "{c}"
        );
    }
}

/// The deviations a relay can plant under SCTP (rewriting chunks in place),
/// as [`DEVIATIONS`]: one of them, `reject-not-terminate`, breaks a session
/// rule of RFC 5043 itself.
const SCTP_DEVIATIONS: [(&str, &str, &str, &str); 4] = [
    (
        "no-to-wrap-check",
        "ddp.to-wrap",
        "1/1/0x01",
        "ddp.base-bounds",
    ),
    (
        "wrong-terminate-code",
        "ddp.base-bounds",
        "1/1/0x00",
        "sctp.accept",
    ),
    (
        "siw-terminate-layout",
        "rdmap.terminate-format",
        "not in the RFC 5040 §4.8 layout",
        "sctp.accept",
    ),
    (
        "reject-not-terminate",
        "sctp.pd-513",
        "Session Reject",
        "sctp.accept",
    ),
];

#[test]
fn over_sctp_planted_deviations_are_reported_as_their_failures() {
    if usrsctp_missing() {
        return;
    }
    for (name, failing, says, control) in SCTP_DEVIATIONS {
        let t = target(&["--transport", "sctp", "--deviate", name]);
        let only = format!("{failing},{control}");
        let (code, out, err) = conform(
            &t.addr.to_string(),
            &["--transport", "sctp", "--json", "--only", &only],
        );
        assert_eq!(code, Some(1), "{name}: exit {code:?}: {err}{out}");
        let v = json(&out);
        assert_eq!(v["failed"], 1, "{name}: {v}");
        let f = case(&v, failing);
        assert_eq!(f["result"], "fail", "{name}: {f}");
        assert!(f["got"].as_str().unwrap().contains(says), "{name}: {f}");
        assert_eq!(case(&v, control)["result"], "pass", "{name}: {v}");
    }
}

/// `rddp conform --transport sctp --role responder ARGS` (its own process:
/// one usrsctp stack a process) with `rddp perf client --transport sctp` as
/// the active side under test, started again for each case until conform is
/// done; with `deviate`, through `rddp target --deviate NAME --deviate-to`,
/// which breaks the initiator's rules on the wire. (exit code, JSON report,
/// clients started).
fn sctp_responder(args: &[&str], deviate: Option<&str>) -> (Option<i32>, Value, usize) {
    use std::io::{BufRead, BufReader};
    let mut c = Command::new(env!("CARGO_BIN_EXE_rddp"))
        .args(["conform", "127.0.0.1:0", "--role", "responder"])
        .args(["--transport", "sctp", "--json"])
        .args(["--case-timeout", "3", "--accept-wait", "20"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = BufReader::new(c.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in err.lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let listening = loop {
        let l = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("no listening line");
        if let Some(at) = l.split("listening on ").nth(1) {
            break at.split(": ").next().unwrap().to_string();
        }
    };
    let relay = deviate.map(|name| {
        Target::start(&[
            "--transport",
            "sctp",
            "--deviate",
            name,
            "--deviate-to",
            &listening,
        ])
    });
    let addr = relay.as_ref().map_or(listening, |t| t.addr.to_string());
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut clients = 0;
    while c.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "rddp conform did not finish");
        clients += 1;
        // One association and session each; a short stall bound, since no
        // case serves the perf protocol.
        let _ = Command::new(env!("CARGO_BIN_EXE_rddp"))
            .args(["perf", "client", "--connect", &addr, "--transport", "sctp"])
            .args(["--size", "64", "--iters", "1", "--stall-secs", "1"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
    }
    let out = c.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    (out.status.code(), json(&stdout), clients)
}

/// `--role responder --transport sctp` against `rddp perf client`: every
/// RFC 5043 case passes; the MPA ones do not apply.
#[test]
fn over_sctp_as_responder_every_case_passes_against_rddp_perf_client() {
    if usrsctp_missing() {
        return;
    }
    let (code, v, clients) = sctp_responder(&[], None);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["role"], "responder", "{v}");
    assert_eq!(v["transport"], "sctp", "{v}");
    let cases = v["cases"].as_array().unwrap();
    let (sctp, mpa): (Vec<_>, Vec<_>) = cases
        .iter()
        .partition(|c| c["id"].as_str().unwrap().starts_with("sctp."));
    assert!(sctp.len() >= 9, "{v}");
    assert!(clients >= sctp.len(), "{clients} clients for {v}");
    for c in sctp {
        assert_eq!(c["result"], "pass", "{c}");
        assert!(c["rfc"].as_str().unwrap().starts_with("RFC 5043"), "{c}");
    }
    for c in mpa {
        assert_eq!(c["result"], "n/a", "{c}");
    }
    let st = case(&v, "sctp.stray-segment");
    assert!(
        st["note"].as_str().unwrap().contains("carries a Read"),
        "{st}"
    );
}

/// Deviations of the initiator under test, planted by a relay in front of
/// the responding conform, as [`DEVIATIONS`].
const SCTP_INITIATOR_DEVIATIONS: [(&str, &str, &str, &str); 2] = [
    ("ssn-gap", "sctp.initiate", "DDP-SSNs [2", "sctp.reject"),
    (
        "wrong-adaptation",
        "sctp.init-adaptation",
        "indication 0x00000002",
        "sctp.initiate",
    ),
];

#[test]
fn over_sctp_as_responder_planted_deviations_are_reported_as_their_failures() {
    if usrsctp_missing() {
        return;
    }
    for (name, failing, says, control) in SCTP_INITIATOR_DEVIATIONS {
        let only = format!("{failing},{control}");
        let (code, v, _) = sctp_responder(&["--only", &only], Some(name));
        assert_eq!(code, Some(1), "{name}: {v}");
        assert_eq!(v["failed"], 1, "{name}: {v}");
        let f = case(&v, failing);
        assert_eq!(f["result"], "fail", "{name}: {f}");
        assert!(f["got"].as_str().unwrap().contains(says), "{name}: {f}");
        assert_eq!(case(&v, control)["result"], "pass", "{name}: {v}");
    }
}
