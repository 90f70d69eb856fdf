//! `rddp exec -- CMD ARGS`: runs an unmodified rdma-core application over
//! rddp, with rddp-verbs-abi's libibverbs.so.1 first on the library path
//! (docs/verbs-abi.md). The directory replaces Debian's library for that
//! process; nothing is preloaded.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The cdylib cargo builds for rddp-verbs-abi, next to the `rddp` binary.
const CDYLIB: &str = "librddp_verbs_abi.so";
/// The directory, next to the binary, that holds `libibverbs.so.1` -> [`CDYLIB`].
const LIB_SUBDIR: &str = "rddp-verbs";

#[derive(clap::Args, Clone)]
pub struct ExecArgs {
    /// Directory holding rddp's libibverbs.so.1 (default: rddp-verbs/ next to
    /// the rddp binary, made from librddp_verbs_abi.so there if missing).
    #[arg(long)]
    lib_dir: Option<PathBuf>,
    /// The command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    cmd: Vec<OsString>,
}

/// Replaces this process with the command; returns only on failure.
pub fn run(a: &ExecArgs) -> Result<std::convert::Infallible, String> {
    let dir = match &a.lib_dir {
        Some(d) => d.clone(),
        None => default_dir()?,
    };
    if !dir.join("libibverbs.so.1").exists() {
        return Err(format!("{} holds no libibverbs.so.1", dir.display()));
    }
    let mut path = OsString::from(dir.as_os_str());
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let (prog, args) = a.cmd.split_first().ok_or("no command given")?;
    let err = Command::new(prog)
        .args(args)
        .env("LD_LIBRARY_PATH", path)
        .exec();
    Err(format!("{}: {err}", prog.to_string_lossy()))
}

/// rddp-verbs/ next to the running binary, with `libibverbs.so.1` linked to
/// the cdylib beside it when the link is not there yet.
fn default_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("where is rddp? {e}"))?;
    let bin_dir = exe.parent().unwrap_or(Path::new("."));
    let dir = bin_dir.join(LIB_SUBDIR);
    let link = dir.join("libibverbs.so.1");
    if link.exists() {
        return Ok(dir);
    }
    if !bin_dir.join(CDYLIB).exists() {
        return Err(format!(
            "no {CDYLIB} next to {}: build it (cargo build -p rddp-verbs-abi) or pass --lib-dir",
            exe.display()
        ));
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // A dangling link left behind (exists() follows it) is replaced.
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(Path::new("..").join(CDYLIB), &link)
        .map_err(|e| format!("{}: {e}", link.display()))?;
    Ok(dir)
}
