//! What the integration tests of rddp's crates share (a dev-dependency only).
//!
//! Each crate's tests are one binary whose tests share a process. Some cannot:
//! usrsctp runs one stack per process on one UDP port, which is also the SCTP
//! port of the process's one listener, and a test that counts what its whole
//! process allocates or holds sees the others. [`own_process`] runs such a
//! test alone in a child process of the test binary. (rusty-fork does the same
//! behind a macro around the test, which keeps rustfmt out of the test's body;
//! this is the one function those tests call first.)
#![warn(missing_docs)]

use std::process::Command;

/// Environment variable naming the one test a child process runs.
const OWN_PROCESS_ENV: &str = "RDDP_TEST_OWN_PROCESS";

/// Whether to run the test `test` of module `module` (`module_path!()`) here.
/// In the test binary's own process this runs the binary again for that one
/// test (when `runnable()` says it can run at all, else it is skipped),
/// checks that it ran and passed, and returns `false`; in that child process
/// it returns `true`:
///
/// ```ignore
/// #[test]
/// fn counts_every_allocation() {
///     if !rddp_testkit::own_process(module_path!(), "counts_every_allocation", || true) {
///         return;
///     }
///     // ... the test, alone in its process
/// }
/// ```
pub fn own_process(module: &str, test: &str, runnable: impl FnOnce() -> bool) -> bool {
    // The harness names a test by its path below the crate root.
    let path = match module.split_once("::") {
        Some((_, m)) => format!("{m}::{test}"),
        None => test.to_string(),
    };
    if std::env::var(OWN_PROCESS_ENV).is_ok_and(|v| v == path) {
        return true;
    }
    if !runnable() {
        return false;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args(["--exact", &path, "--nocapture", "--test-threads", "1"])
        .env(OWN_PROCESS_ENV, &path)
        .output()
        .expect("the test binary runs again");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // The status names a signal (a crash in a library shows only as that).
    assert!(
        out.status.success(),
        "{path} in its own process ({}):\n{text}",
        out.status
    );
    assert!(
        text.contains("1 passed"),
        "{path} did not run in its own process:\n{text}"
    );
    eprint!("{text}");
    false
}

/// Whether libusrsctp could be loaded (`available`: what
/// `usrsctp_ffi::available()` said). Missing: a loud skip (`false`), unless
/// the environment variable CI is set: then the test fails, so that CI never
/// passes by skipping. `what` names the tests in the message.
pub fn usrsctp_present(what: &str, available: Result<(), impl std::fmt::Display>) -> bool {
    match available {
        Ok(()) => true,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("\n*** SKIPPED: {what} need libusrsctp (CI unset): {e}\n");
            false
        }
        Err(e) => panic!("CI is set and libusrsctp is missing: {e}"),
    }
}

/// Whether a TCP socket listens on `port` (any address, IPv4 or IPv6) in this
/// network namespace, from /proc/net/tcp and /proc/net/tcp6 (state 0A is
/// LISTEN): what a test waits for before it starts a client of a server it
/// started, so that the client is not refused.
pub fn tcp_listening(port: u16) -> bool {
    listening_in("/proc/net", port)
}

/// [`tcp_listening`] in the network namespace of process `pid` (its
/// /proc/PID/net), for a server started in another namespace.
pub fn tcp_listening_in(pid: u32, port: u16) -> bool {
    listening_in(&format!("/proc/{pid}/net"), port)
}

fn listening_in(net: &str, port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["tcp", "tcp6"].iter().any(|f| {
        std::fs::read_to_string(format!("{net}/{f}")).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&want) && cols[3] == "0A"
            })
        })
    })
}

/// The sizes fi_pingpong (libfabric's) runs by default, 64 octets to 1 MiB,
/// as its report names them.
const FI_PINGPONG_SIZES: [&str; 6] = ["64", "256", "1k", "4k", "64k", "1m"];

/// Whether fi_pingpong's report (`out`, its standard output) has every
/// default size with all `iters` messages acknowledged (`#ack` `=iters`).
pub fn fi_pingpong_reported_all(out: &str, iters: u32) -> bool {
    let acked = format!("={iters}");
    FI_PINGPONG_SIZES.iter().all(|size| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(*size))
            .is_some_and(|l| l.split_whitespace().nth(2) == Some(acked.as_str()))
    })
}
