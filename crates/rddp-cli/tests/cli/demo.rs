//! Runs the real `rddp` binary as a process.

use std::process::Command;

#[test]
fn demo_runs_every_step_and_exits_zero() {
    let out = Command::new(env!("CARGO_BIN_EXE_rddp"))
        .arg("demo")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [
        "[1]",
        "[2]",
        "[3]",
        "[4]",
        "base or bounds violation (1/1/0x01)",
        "demo finished",
    ] {
        assert!(stdout.contains(step), "missing {step:?} in:\n{stdout}");
    }
}

#[test]
fn unknown_subcommand_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_rddp"))
        .arg("nonsense")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unrecognized subcommand"), "{stderr}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn demo_over_sctp() {
    let out = Command::new(env!("CARGO_BIN_EXE_rddp"))
        .args(["demo", "--transport", "sctp"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success()
        && std::env::var_os("CI").is_none()
        && stderr.contains("needs libusrsctp")
    {
        eprintln!("*** SKIPPED: the SCTP demo needs libusrsctp (CI unset): {stderr}");
        return;
    }
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for step in [
        "DDP over SCTP (RFC 5043)",
        "[4] the client RDMA-Reads it back",
        "(1/1/0x01)",
        "demo finished",
    ] {
        assert!(stdout.contains(step), "missing {step:?} in:\n{stdout}");
    }
}
