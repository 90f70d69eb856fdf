//! The short soak of CI (docs/reliability.md): `scripts/soak.sh 60` with this
//! build's `rddp`: 100 queue pairs of mixed Writes, Reads and Sends of random
//! sizes with --verify, each reconnecting every 10 s. Passes with no failed
//! connection, no wrong octet, and flat memory (the script's rule). Where it
//! cannot run (no bash or no /proc) it is skipped, except under CI=true.

use std::path::Path;
use std::process::Command;

#[test]
fn soak_60_seconds_has_no_error_and_flat_memory() {
    let _machine = crate::common::heavy();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("scripts/soak.sh");
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let missing = [
        (!Path::new("/proc/self/status").exists()).then_some("/proc"),
        Command::new("bash")
            .arg("--version")
            .output()
            .is_err()
            .then_some("bash"),
    ];
    if let Some(what) = missing.into_iter().flatten().next() {
        assert!(!ci, "CI=true but the soak cannot run here: no {what}");
        eprintln!("SKIPPED: the soak needs {what}");
        return;
    }
    let logs = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("soak-{}", std::process::id()));
    let out = Command::new("bash")
        .arg(&script)
        .arg("60")
        .env("RDDP", env!("CARGO_BIN_EXE_rddp"))
        .env("OUT", &logs)
        .output()
        .expect("run scripts/soak.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    let result = stdout
        .lines()
        .find_map(|l| l.strip_prefix("soak-result "))
        .unwrap_or_else(|| panic!("scripts/soak.sh gave no result line ({})", out.status));
    let v: serde_json::Value = serde_json::from_str(result).expect("result JSON");
    assert_eq!(v["errors"], 0, "errors in the soak: {v}");
    assert!(
        v["verified_bytes"].as_u64().is_some_and(|b| b > 0),
        "no octet verified: {v}"
    );
    assert_eq!(
        v["late"], 0,
        "octets landed in a Read sink after its completion: {v}"
    );
    assert_eq!(v["flat_memory"], true, "memory not flat: {v}");
    assert!(
        out.status.success(),
        "scripts/soak.sh failed: {}",
        out.status
    );
    // Kept when the soak failed, for a look at the logs.
    let _ = std::fs::remove_dir_all(&logs);
}
