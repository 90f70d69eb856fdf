//! Runs one of the root-only scripts (scripts/faults.sh, scripts/ipsec.sh) with
//! this build's `rddp` and hands back the summary it wrote, for the test to
//! check the numbers itself. Without root the test is skipped with a message,
//! except under CI=true, where it fails: CI runs as root and must run it.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// `bash scripts/<script> <args> --out DIR` with `RDDP` set to this build's
/// binary; `needs` says what root is for. Returns the run's `summary.json` and
/// its stdout, or `None` when skipped (not root, not CI). Panics when the script
/// fails or writes no summary. DIR is removed afterwards.
pub(crate) fn run(script: &str, args: &[&str], needs: &str) -> Option<(Value, String)> {
    if !is_root() {
        assert!(
            !in_ci(),
            "CI=true but not root: scripts/{script} needs root ({needs}), and CI must run it"
        );
        eprintln!("skipped: scripts/{script} needs root ({needs})");
        return None;
    }
    let stem = script.trim_end_matches(".sh");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("rddp-{stem}-test-{}", std::process::id()));
    let run = Command::new("bash")
        .arg(root.join("scripts").join(script))
        .args(args)
        .arg("--out")
        .arg(&out)
        .env("RDDP", env!("CARGO_BIN_EXE_rddp"))
        .output()
        .unwrap_or_else(|e| panic!("running scripts/{script}: {e}"));
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr);
    let summary = std::fs::read_to_string(out.join("summary.json"));
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        run.status.success(),
        "scripts/{script} {} failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        run.status
    );
    println!("{stdout}");
    let summary = serde_json::from_str(&summary.expect("no summary.json")).unwrap();
    Some((summary, stdout))
}
