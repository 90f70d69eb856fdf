//! `rddp exec -- CMD`: the command runs with rddp's libibverbs.so.1 first on
//! the library path.

use std::process::Command;

const RDDP: &str = env!("CARGO_BIN_EXE_rddp");

/// Whether rddp-verbs-abi's cdylib is in the build tree of the rddp binary
/// (next to it or in deps/). Cargo builds it with that crate (`cargo test
/// --workspace`, `cargo build -p rddp-verbs-abi`), never as a dependency of
/// this one; without it the test skips loudly, or fails when CI is set.
fn have_cdylib() -> bool {
    let so = std::path::Path::new(RDDP).with_file_name("librddp_verbs_abi.so");
    let in_deps = std::path::Path::new(RDDP)
        .with_file_name("deps")
        .join("librddp_verbs_abi.so");
    if so.exists() || in_deps.exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} missing and CI set: build rddp-verbs-abi first",
        so.display()
    );
    eprintln!(
        "SKIPPED: {} missing; cargo build -p rddp-verbs-abi",
        so.display()
    );
    false
}

fn rddp_exec(args: &[&str]) -> std::process::Output {
    Command::new(RDDP)
        .arg("exec")
        .args(args)
        .output()
        .expect("run rddp exec")
}

#[test]
fn library_dir_goes_first_on_the_path() {
    if !have_cdylib() {
        return;
    }
    let out = Command::new(RDDP)
        .args(["exec", "--", "sh", "-c", "echo \"$LD_LIBRARY_PATH\""])
        .env("LD_LIBRARY_PATH", "/elsewhere")
        .output()
        .expect("run rddp exec");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rddp exec failed: {stderr}");
    let path = String::from_utf8(out.stdout).unwrap();
    let (first, rest) = path.trim().split_once(':').expect("two entries");
    assert_eq!(rest, "/elsewhere");
    // The cdylib under its four names: libibverbs and librdmacm, and the
    // stand-ins for the provider libraries perftest links.
    for name in [
        "libibverbs.so.1",
        "librdmacm.so.1",
        "libmlx5.so.1",
        "libefa.so.1",
    ] {
        let lib = std::path::Path::new(first).join(name);
        assert!(lib.exists(), "{} missing", lib.display());
    }
    assert!(first.ends_with("/rddp-verbs"), "{first}");
}

/// An installed layout as scripts/install.sh makes it (`PREFIX/bin/rddp`,
/// `PREFIX/lib/rddp-verbs/` with the four names of the library), with no
/// build tree beside the binary: `rddp exec` finds the library there.
#[test]
fn an_installed_layout_finds_its_library() {
    if !have_cdylib() {
        return;
    }
    let prefix = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("exec-installed");
    let _ = std::fs::remove_dir_all(&prefix);
    let (bin, lib) = (prefix.join("bin"), prefix.join("lib/rddp-verbs"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(RDDP, bin.join("rddp")).unwrap();
    let built = std::path::Path::new(RDDP).with_file_name("librddp_verbs_abi.so");
    let built = if built.exists() {
        built
    } else {
        built.with_file_name("deps").join("librddp_verbs_abi.so")
    };
    std::fs::copy(&built, lib.join("librddp_verbs_abi.so")).unwrap();
    for name in [
        "libibverbs.so.1",
        "librdmacm.so.1",
        "libmlx5.so.1",
        "libefa.so.1",
    ] {
        std::os::unix::fs::symlink("librddp_verbs_abi.so", lib.join(name)).unwrap();
    }
    let out = Command::new(bin.join("rddp"))
        .args(["exec", "--", "sh", "-c", "echo \"$LD_LIBRARY_PATH\""])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run the installed rddp exec");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rddp exec failed: {stderr}");
    let first = String::from_utf8(out.stdout).unwrap();
    let first = std::path::Path::new(first.trim());
    assert_eq!(
        first.canonicalize().unwrap(),
        lib.canonicalize().unwrap(),
        "{}",
        first.display()
    );
    assert!(
        !bin.join("rddp-verbs").exists(),
        "made a build-tree directory"
    );
    std::fs::remove_dir_all(&prefix).unwrap();
}

#[test]
fn a_directory_without_the_library_is_refused() {
    let empty = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("exec-empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = rddp_exec(&["--lib-dir", empty.to_str().unwrap(), "--", "true"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("holds no libibverbs.so.1"), "{stderr}");
}

#[test]
fn ibv_devinfo_over_rddp() {
    const DEVINFO: &str = "/usr/bin/ibv_devinfo";
    if !have_cdylib() {
        return;
    }
    if !std::path::Path::new(DEVINFO).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{DEVINFO} missing and CI set"
        );
        eprintln!("SKIPPED: {DEVINFO} missing; apt-get install ibverbs-utils");
        return;
    }
    let out = rddp_exec(&["--", DEVINFO, "-l"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "rddp exec -- ibv_devinfo -l failed: {stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1 HCA found:\n\trddp0\n\n"
    );
}
