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

/// Whether process `pid`, or a process it started (at any depth: a tool
/// run under `timeout`), holds a TCP socket listening on `port` in this
/// network namespace. Unlike [`tcp_listening`], another process's listener
/// on the same port at another local address (a test beside this one that
/// listens on 192.0.2.2 while this one's tool will listen on 127.0.0.1)
/// does not count: its client would be refused.
pub fn tcp_listening_by(pid: u32, port: u16) -> bool {
    let inodes = listening_inodes("/proc/net", port);
    if inodes.is_empty() {
        return false;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    process_tree(pid).into_iter().any(|p| {
        std::fs::read_dir(format!("/proc/{p}/fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|l| wanted.iter().any(|w| l.as_os_str() == w.as_str()))
            })
        })
    })
}

fn listening_in(net: &str, port: u16) -> bool {
    !listening_inodes(net, port).is_empty()
}

/// The inodes of the TCP sockets (IPv4 and IPv6) in state LISTEN (0A) on
/// `port`, any local address, from `net`/tcp and `net`/tcp6.
fn listening_inodes(net: &str, port: u16) -> Vec<String> {
    let want = format!(":{port:04X}");
    let mut inodes = Vec::new();
    for f in ["tcp", "tcp6"] {
        let Ok(table) = std::fs::read_to_string(format!("{net}/{f}")) else {
            continue;
        };
        for line in table.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() > 9 && cols[1].ends_with(&want) && cols[3] == "0A" {
                inodes.push(cols[9].to_owned());
            }
        }
    }
    inodes
}

/// `pid` and every live process descended from it, from the parent field
/// of each /proc/PID/stat (the field after the command's closing `)`).
fn process_tree(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let p: u32 = e.file_name().to_str()?.parse().ok()?;
                    let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
                    let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
                    Some((p, ppid.parse().ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|&&(_, pp)| pp == parent)
                .map(|&(p, _)| p),
        );
        i += 1;
    }
    tree
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener this process holds is seen by the any-address check and
    /// by the owner check for this process, not by the owner check for
    /// another process: a tool told to listen on that port would not have.
    #[test]
    fn a_listener_counts_for_its_own_process_only() {
        let listener = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut other = Command::new("sleep").arg("30").spawn().unwrap();
        let seen_for_other = tcp_listening_by(other.id(), port);
        other.kill().unwrap();
        other.wait().unwrap();
        assert!(tcp_listening(port));
        assert!(tcp_listening_by(std::process::id(), port));
        assert!(!seen_for_other, "another process's listener counted");
        drop(listener);
        assert!(!tcp_listening_by(std::process::id(), port));
    }
}
