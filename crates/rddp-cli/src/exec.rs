//! `rddp exec -- CMD ARGS`: runs an unmodified rdma-core application over
//! rddp, with rddp-verbs-abi's libibverbs.so.1 and librdmacm.so.1 (two
//! names of one file, which also stands in for libmlx5.so.1 and
//! libefa.so.1) first on the library path (docs/verbs-abi.md). The
//! directory replaces Debian's libraries for that process; nothing is
//! preloaded.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The cdylib cargo builds for rddp-verbs-abi, next to the `rddp` binary.
const CDYLIB: &str = "librddp_verbs_abi.so";
/// The directory, next to the binary, that holds [`SONAMES`] -> [`CDYLIB`].
const LIB_SUBDIR: &str = "rddp-verbs";
/// The names the cdylib is found under: it is both libraries (one object,
/// so that the CM and the verbs share their objects; docs/verbs-abi.md),
/// and it stands in for the provider libraries perftest links (libmlx5,
/// libefa: their symbols refuse; rddp0 is neither device).
const SONAMES: [&str; 4] = [
    "libibverbs.so.1",
    "librdmacm.so.1",
    "libmlx5.so.1",
    "libefa.so.1",
];

#[derive(clap::Args, Clone)]
pub(crate) struct ExecArgs {
    /// Directory holding rddp's libibverbs.so.1 (default: rddp-verbs/ next to
    /// the rddp binary, made from librddp_verbs_abi.so there if missing; in
    /// an installed layout, ../lib/rddp-verbs/ from the binary, as
    /// scripts/install.sh lays it out).
    #[arg(long)]
    lib_dir: Option<PathBuf>,
    /// The command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    cmd: Vec<OsString>,
}

/// Replaces this process with the command; returns only on failure.
pub(crate) fn run(a: &ExecArgs) -> Result<std::convert::Infallible, String> {
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

/// rddp-verbs/ next to the running binary, its [`SONAMES`] linked to
/// the newest cdylib of the build tree: next to the binary (where `cargo
/// build -p rddp-verbs-abi` copies it) or in deps/ (where `cargo test`
/// leaves it). Without either, an existing link is used as it is, and
/// then an installed layout's `../lib/rddp-verbs/` (`PREFIX/bin/rddp`,
/// `PREFIX/lib/rddp-verbs/`: scripts/install.sh).
fn default_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("where is rddp? {e}"))?;
    let bin_dir = exe.parent().unwrap_or(Path::new("."));
    let dir = bin_dir.join(LIB_SUBDIR);
    let installed = bin_dir.join("..").join("lib").join(LIB_SUBDIR);
    let newest = [PathBuf::from(CDYLIB), Path::new("deps").join(CDYLIB)]
        .into_iter()
        .filter_map(|rel| {
            let modified = std::fs::metadata(bin_dir.join(&rel)).and_then(|m| m.modified());
            modified.ok().map(|t| (t, rel))
        })
        .max();
    let Some((_, rel)) = newest else {
        if let Some(d) = [dir, installed]
            .into_iter()
            .find(|d| SONAMES.iter().all(|n| d.join(n).exists()))
        {
            return Ok(d);
        }
        return Err(format!(
            "no {CDYLIB} next to {} nor an installed ../lib/{LIB_SUBDIR}/: build it \
             (cargo build -p rddp-verbs-abi), install with scripts/install.sh, or pass --lib-dir",
            exe.display()
        ));
    };
    let target = Path::new("..").join(rel);
    for name in SONAMES {
        let link = dir.join(name);
        if std::fs::read_link(&link).ok().as_deref() == Some(target.as_path()) {
            continue;
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // A link to an older or missing build is replaced, atomically: a
        // new link under a name of this process's, renamed over the old one
        // (two `rddp exec` may start at once).
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&target, &tmp)
            .and_then(|()| std::fs::rename(&tmp, &link))
            .map_err(|e| format!("{}: {e}", link.display()))?;
    }
    Ok(dir)
}
