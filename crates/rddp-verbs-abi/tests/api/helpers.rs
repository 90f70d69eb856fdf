//! The pure helpers (rate conversions, `ibv_*_str`) against Debian's
//! libibverbs: one C program (tests/c/helpers.c), linked once, run over
//! Debian's library and over this crate's, must print the same.

use crate::common;
use std::process::Command;

#[test]
fn helpers_match_debians() {
    if !common::have("/usr/include/infiniband/verbs.h", "libibverbs-dev") {
        return;
    }
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/helpers.c");
    let exe = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("verbs_helpers");
    // Linked with Debian's libibverbs.so (libibverbs-dev).
    common::output(
        Command::new("cc")
            .args(["-std=gnu11", "-o"])
            .arg(&exe)
            .arg(src)
            .arg("-libverbs"),
    );
    let debian = common::output(Command::new(&exe).env_remove("LD_LIBRARY_PATH"));
    let lib = common::lib_dir("lib-helpers");
    let ours = common::output(Command::new(&exe).env("LD_LIBRARY_PATH", &lib));
    assert!(debian.lines().count() > 100, "{debian}");
    for (d, o) in debian.lines().zip(ours.lines()) {
        assert_eq!(o, d, "rddp's (left) and Debian's (right) libibverbs differ");
    }
    assert_eq!(ours.lines().count(), debian.lines().count());
}
