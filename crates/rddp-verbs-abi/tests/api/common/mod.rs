//! Shared by the tests that need Debian's rdma-core files.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Skips (returns false) when `what` is missing and CI is unset; panics
/// when CI is set, where scripts/test.sh installs `pkg`.
pub(crate) fn have(path: &str, pkg: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{path} is missing and CI is set: install {pkg} (scripts/test.sh does)");
    }
    eprintln!("SKIPPED: {path} is missing; install {pkg} (apt-get install {pkg}) to run this test");
    false
}

/// The cdylib cargo built for this crate with these tests:
/// target/<profile>/deps/librddp_verbs_abi.so, next to this test binary.
/// (`cargo build` also copies it up to target/<profile>/; `cargo test` does
/// not, so that copy may be stale.)
pub(crate) fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let so = exe.with_file_name("librddp_verbs_abi.so");
    assert!(so.exists(), "{} not built", so.display());
    so
}

/// The names the cdylib is loaded under: it is libibverbs and librdmacm,
/// and stands in for the provider libraries perftest links
/// (src/standins.rs).
pub(crate) const SONAMES: [&str; 4] = [
    "libibverbs.so.1",
    "librdmacm.so.1",
    "libmlx5.so.1",
    "libefa.so.1",
];

/// A directory holding [`SONAMES`], each a link to the cdylib (one file
/// is all four libraries), to put first on LD_LIBRARY_PATH (the directory
/// replaces Debian's libraries; no LD_PRELOAD).
pub(crate) fn lib_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).expect("create lib dir");
    for soname in SONAMES {
        let link = dir.join(soname);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(cdylib(), &link).expect("symlink the cdylib");
    }
    dir
}

/// Runs `cmd` and returns its stdout, panicking with stderr on failure.
pub(crate) fn output(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}
