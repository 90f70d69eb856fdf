//! A C program compiled against Debian's verbs.h and linked with this
//! crate's libibverbs.so.1 (tests/c/abi_calls.c): the implemented verbs,
//! the refusals, the ops table as verbs.h's inline functions reach it, and
//! stale contexts refused.

use crate::common;
use std::process::Command;

#[test]
fn c_program_over_the_library() {
    if !common::have("/usr/include/infiniband/verbs.h", "libibverbs-dev") {
        return;
    }
    let lib = common::lib_dir("lib-capi");
    // The link-time name, so that `-libverbs` finds this library, not Debian's.
    let dev_link = lib.join("libibverbs.so");
    let _ = std::fs::remove_file(&dev_link);
    std::os::unix::fs::symlink("libibverbs.so.1", &dev_link).unwrap();

    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/abi_calls.c");
    let exe = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("abi_calls");
    common::output(
        Command::new("cc")
            .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
            .arg(&exe)
            .arg(src)
            .arg("-L")
            .arg(&lib)
            .arg("-libverbs"),
    );
    let out = common::output(Command::new(&exe).env("LD_LIBRARY_PATH", &lib));
    assert_eq!(out, "ok\n");
}
