//! Debian 12's unmodified ibverbs-utils and rdmacm-utils binaries over this
//! crate's libibverbs.so.1 and librdmacm.so.1 (one file), and its symbol
//! versions against what they import.

use crate::common;
use rddp_testkit::tcp_listening_by;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const DEVINFO: &str = "/usr/bin/ibv_devinfo";
const DEVICES: &str = "/usr/bin/ibv_devices";
const RPING: &str = "/usr/bin/rping";
const DEBIAN_LIB: &str = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
const DEBIAN_CM_LIB: &str = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";
/// rdmacm-utils' binaries whose librdmacm imports must all be exported.
const CM_TOOLS: [&str; 4] = [
    "/usr/bin/rping",
    "/usr/bin/ucmatose",
    "/usr/bin/rdma_server",
    "/usr/bin/rdma_client",
];
/// ibverbs-utils' examples that need a memory region: loaded, they must refuse.
const PINGPONGS: [&str; 5] = [
    "/usr/bin/ibv_rc_pingpong",
    "/usr/bin/ibv_srq_pingpong",
    "/usr/bin/ibv_uc_pingpong",
    "/usr/bin/ibv_ud_pingpong",
    "/usr/bin/ibv_xsrq_pingpong",
];

fn run(bin: &str, args: &[&str], dir: &str) -> String {
    let lib = common::lib_dir(dir);
    common::output(
        Command::new(bin)
            .args(args)
            // The directory replaces Debian's libibverbs for this process.
            .env("LD_LIBRARY_PATH", &lib)
            .env_remove("LD_PRELOAD"),
    )
}

#[test]
fn ibv_devinfo_lists_rddp0_as_iwarp() {
    if !common::have(DEVINFO, "ibverbs-utils") {
        return;
    }
    let out = run(DEVINFO, &[], "lib-devinfo");
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    for want in [
        "hca_id:\trddp0",
        "transport:\t\t\tiWARP (1)",
        "node_guid:\t\t\t0272:6464:7000:0001",
        "vendor_id:\t\t\t0x726464",
        "phys_port_cnt:\t\t\t1",
        "port:\t1",
        "state:\t\t\tPORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
    ] {
        assert!(
            lines.contains(&want),
            "{want:?} missing from ibv_devinfo:\n{out}"
        );
    }

    let list = run(DEVINFO, &["-l"], "lib-devinfo");
    assert_eq!(list, "1 HCA found:\n\trddp0\n\n");

    let verbose = run(DEVINFO, &["-v", "-d", "rddp0"], "lib-devinfo");
    for want in [
        "max_qp_rd_atom:\t\t\t128",
        "gid_tbl_len:\t\t1",
        "num_comp_vectors:\t\t1",
    ] {
        assert!(
            verbose.contains(want),
            "{want:?} missing from ibv_devinfo -v:\n{verbose}"
        );
    }
    assert!(
        verbose.contains("GID[  0]:\t\tfe80:0000:0000:0000:0272:6464:7000:0001"),
        "GID 0 missing from ibv_devinfo -v:\n{verbose}"
    );
}

#[test]
fn ibv_devices_lists_rddp0() {
    if !common::have(DEVICES, "ibverbs-utils") {
        return;
    }
    let out = run(DEVICES, &[], "lib-devices");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows.contains(&vec!["rddp0", "0272646470000001"]),
        "ibv_devices:\n{out}"
    );
}

/// `(name, version)` pairs from `nm -D --with-symbol-versions`, for the
/// lines that `keep` accepts.
fn nm(path: &str, defined: bool) -> BTreeSet<(String, String)> {
    let mut cmd = Command::new("nm");
    cmd.args(["-D", "--with-symbol-versions"]);
    if defined {
        cmd.arg("--defined-only");
    }
    let out = common::output(cmd.arg(path));
    out.lines()
        .filter_map(|l| {
            let sym = l.split_whitespace().last()?;
            let (name, ver) = sym.split_once('@')?;
            Some((name.to_string(), ver.trim_start_matches('@').to_string()))
        })
        .collect()
}

fn ours() -> BTreeSet<(String, String)> {
    nm(common::cdylib().to_str().unwrap(), true)
}

#[test]
fn exports_cover_what_ibverbs_utils_import() {
    if !common::have(DEVINFO, "ibverbs-utils") {
        return;
    }
    let ours = ours();
    // Every binary of ibverbs-utils, and rping's libibverbs half.
    let mut bins = vec![DEVINFO, DEVICES, "/usr/bin/ibv_asyncwatch"];
    bins.extend(PINGPONGS);
    if std::path::Path::new(RPING).exists() {
        bins.push(RPING);
    } else {
        eprintln!("note: {RPING} not installed (rdmacm-utils); its imports are not checked");
    }
    for bin in bins {
        let imports: BTreeSet<_> = nm(bin, false)
            .into_iter()
            .filter(|(_, v)| v.starts_with("IBVERBS_"))
            .collect();
        assert!(
            !imports.is_empty(),
            "{bin} imports nothing from libibverbs?"
        );
        let missing: Vec<_> = imports.difference(&ours).collect();
        assert!(
            missing.is_empty(),
            "{bin} imports {missing:?}, not exported"
        );
    }
}

#[test]
fn exports_are_versioned_as_debians_libibverbs() {
    if !common::have(DEBIAN_LIB, "libibverbs1") {
        return;
    }
    let all = ours();
    // Nothing leaks unversioned or under another node (e.g. a dependency's
    // C API): every export is libibverbs', librdmacm's or a stand-in's for
    // libmlx5 and libefa (the same file).
    let other = |v: &str| {
        ["RDMACM_", "MLX5_", "EFA_"]
            .iter()
            .any(|p| v.starts_with(p))
    };
    for (name, ver) in &all {
        assert!(
            ver.starts_with("IBVERBS_") || other(ver),
            "{name}@{ver} exported"
        );
    }
    let ours: BTreeSet<_> = all.into_iter().filter(|(_, v)| !other(v)).collect();
    // Each export has the default version rdma-core 44 gives it.
    let debian = nm(DEBIAN_LIB, true);
    let extra: Vec<_> = ours.difference(&debian).collect();
    assert!(
        extra.is_empty(),
        "not in Debian's libibverbs.so.1 at this version: {extra:?}"
    );
    // The same version nodes, in the same order.
    let nodes = |path: &str| -> Vec<String> {
        let out = common::output(Command::new("readelf").args(["-V", path]));
        out.lines()
            .skip_while(|l| !l.starts_with("Version definition"))
            .take_while(|l| !l.starts_with("Version needs"))
            .filter_map(|l| l.split("Name: ").nth(1))
            .map(str::to_string)
            .collect()
    };
    let ours_nodes: Vec<String> = nodes(common::cdylib().to_str().unwrap())
        .into_iter()
        .filter(|n| !other(n))
        .collect();
    assert_eq!(ours_nodes, nodes(DEBIAN_LIB));
}

/// Every `RDMACM_*` symbol that rdmacm-utils' binaries import is exported
/// at its version (they are linked with BIND_NOW: a missing one stops them
/// loading), and each export is one Debian's librdmacm.so.1 defines at
/// that version.
#[test]
fn exports_cover_what_rdmacm_utils_import() {
    if !common::have(RPING, "rdmacm-utils") || !common::have(DEBIAN_CM_LIB, "librdmacm1") {
        return;
    }
    let ours: BTreeSet<_> = ours()
        .into_iter()
        .filter(|(_, v)| v.starts_with("RDMACM_"))
        .collect();
    for bin in CM_TOOLS {
        let imports: BTreeSet<_> = nm(bin, false)
            .into_iter()
            .filter(|(_, v)| v.starts_with("RDMACM_"))
            .collect();
        assert!(!imports.is_empty(), "{bin} imports nothing from librdmacm?");
        let missing: Vec<_> = imports.difference(&ours).collect();
        assert!(
            missing.is_empty(),
            "{bin} imports {missing:?}, not exported"
        );
    }
    let debian = nm(DEBIAN_CM_LIB, true);
    let extra: Vec<_> = ours.difference(&debian).collect();
    assert!(
        extra.is_empty(),
        "not in Debian's librdmacm.so.1 at this version: {extra:?}"
    );
}

/// No root: when the suite runs as root, `ibv_devinfo` runs again as
/// nobody (uid 65534, no capabilities, no new privileges) through
/// util-linux's setpriv. Nothing opens /dev/infiniband or needs a module.
#[test]
fn ibv_devinfo_runs_unprivileged() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if !common::have(DEVINFO, "ibverbs-utils") {
        return;
    }
    let euid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0);
    if euid != 0 {
        // Already unprivileged: ibv_devinfo_lists_rddp0_as_iwarp covers it.
        return;
    }
    if !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!("SKIPPED: no /usr/bin/setpriv (util-linux) to drop root");
        return;
    }
    let lib = common::lib_dir("lib-nobody");
    let so = common::cdylib();
    // nobody must reach the library: every directory searchable and the file
    // readable by others.
    let reachable = so
        .ancestors()
        .skip(1)
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
        && std::fs::metadata(&so).is_ok_and(|m| m.permissions().mode() & 0o004 != 0)
        && std::fs::metadata(&lib).is_ok_and(|m| m.permissions().mode() & 0o005 == 0o005);
    if !reachable {
        eprintln!("SKIPPED: {} is not readable by other users", so.display());
        return;
    }
    let out = common::output(
        Command::new("/usr/bin/setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--no-new-privs",
            ])
            .args(["--inh-caps=-all", "--bounding-set=-all", DEVINFO])
            .env("LD_LIBRARY_PATH", &lib),
    );
    assert!(out.contains("hca_id:\trddp0"), "{out}");
    assert!(out.contains("transport:\t\t\tiWARP (1)"), "{out}");
}

/// The examples that go on to create resources load (BIND_NOW: every import
/// resolves), get their PD (and with `-e` their completion channel), register
/// their buffer, and stop at the first refusal, with their own message and
/// exit status 1, not a crash: the UC and UD queue pair, the XRC domain.
/// ibv_rc_pingpong gets its RC queue pair into INIT, exchanges its address
/// with its peer over TCP, moves to RTR (which means nothing more than INIT
/// over iWARP) and stops at the move to RTS: over iWARP a queue pair is
/// connected by the CM, which the example does not use. ibv_srq_pingpong
/// gets as far with its SRQ and the 16 queue pairs on it.
#[test]
fn pingpongs_load_and_refuse_cleanly() {
    if !common::have(DEVINFO, "ibverbs-utils") {
        return;
    }
    let lib = common::lib_dir("lib-pingpong");
    for bin in &PINGPONGS[2..] {
        for args in [&[][..], &["-e"]] {
            let out = Command::new(bin)
                .args(args)
                .env("LD_LIBRARY_PATH", &lib)
                .output()
                .unwrap_or_else(|e| panic!("{bin}: {e}"));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{bin} {args:?}: {stderr}");
            assert!(
                ["Couldn't create QP", "Couldn't create SRQ", "XRC Domain"]
                    .iter()
                    .any(|m| stderr.contains(m)),
                "{bin} {args:?}: {stderr}"
            );
        }
    }
    let rc = PINGPONGS[0];
    for ev in [&[][..], &["-e"]] {
        let port = released_port().to_string();
        let server = Command::new(rc)
            .args(ev)
            .args(["-p", &port])
            .env("LD_LIBRARY_PATH", &lib)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The client retries until the server listens.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let client = loop {
            let out = Command::new(rc)
                .args(ev)
                .args(["-p", &port, "127.0.0.1"])
                .env("LD_LIBRARY_PATH", &lib)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            if !stderr.contains("Couldn't connect to 127.0.0.1")
                || std::time::Instant::now() > deadline
            {
                break (out.status.code(), stderr);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let server = server.wait_with_output().unwrap();
        let s_err = String::from_utf8_lossy(&server.stderr);
        let s_out = String::from_utf8_lossy(&server.stdout);
        assert_eq!(client.0, Some(1), "client: {}", client.1);
        assert_eq!(server.status.code(), Some(1), "server: {s_err}");
        assert!(
            s_err.contains("Failed to modify QP to RTS"),
            "server: {s_err}"
        );
        assert!(
            s_out.contains("local address:  LID 0x0000, QPN"),
            "server: {s_out}"
        );
    }
    // ibv_srq_pingpong makes its SRQ, 16 QPs on it and posts its receives
    // there, then stops as ibv_rc_pingpong does. (Its client then reads the
    // closed socket for ever, a fault of the example's: it is killed.)
    let srq = PINGPONGS[1];
    let port = released_port().to_string();
    let pingpong = |args: &[&str]| {
        let mut c = Command::new("timeout");
        c.args(["30", srq, "-p", &port])
            .args(args)
            .env("LD_LIBRARY_PATH", &lib)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    };
    let server = serve(pingpong(&[]), port.parse().unwrap(), "ibv_srq_pingpong");
    let client = Killed(Some(pingpong(&["127.0.0.1"]).spawn().unwrap()));
    let out = server.output();
    drop(client);
    let (s_err, s_out) = (
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout),
    );
    assert_eq!(out.status.code(), Some(1), "server: {s_err}");
    assert!(
        s_err.contains("Failed to modify QP[0] to RTS"),
        "server: {s_err}"
    );
    // Its SRQ, QPs and receives were made and posted.
    assert!(
        !s_err.contains("Couldn't create") && !s_err.contains("Couldn't post"),
        "server: {s_err}"
    );
    let qps = s_out.matches("local address:  LID 0x0000, QPN").count();
    assert_eq!(qps, 16, "server: {s_out}");
}

/// The last 2000 characters of `s` (rping -v prints each ping whole).
fn tail(s: &str) -> &str {
    let mut i = s.len().saturating_sub(2000);
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

/// A child process killed (and reaped) when dropped, so a failing test
/// leaves none behind.
struct Killed(Option<std::process::Child>);

impl Killed {
    /// Waits for the process to end on its own and returns its output
    /// (for output small enough to stay in its pipes meanwhile).
    fn output(mut self) -> std::process::Output {
        let child = self.0.take().expect("a process");
        child.wait_with_output().expect("wait")
    }

    /// Ends the process as `Drop` does (SIGTERM) and returns what it printed:
    /// a server's side of a failed client run.
    fn stop(mut self) -> std::process::Output {
        let child = self.0.take().expect("a process");
        terminate(&child);
        child.wait_with_output().expect("wait")
    }

    /// Waits for the process to end on its own.
    fn wait(mut self) -> std::process::ExitStatus {
        let mut child = self.0.take().expect("a process");
        child.wait().expect("wait")
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            terminate(c);
            let _ = c.wait();
        }
    }
}

/// SIGTERM to `child`, not SIGKILL: a `timeout` wrapper passes it on to its
/// command, which SIGKILL would leave running (a perftest server left
/// waiting spins on a CPU).
fn terminate(child: &std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: a signal to this test's own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
}

/// Debian's unmodified rping, server and client, both over this library
/// (libibverbs.so.1 and librdmacm.so.1 from one directory): ten pings of
/// `-S` octets each, validated by the client (`-V`), both ending with
/// status 0 after the client's disconnect; then once more with `-q`, each
/// side creating its QP itself (`ibv_create_qp`, moved with
/// `rdma_init_qp_attr`, named to the CM by `conn_param.qp_num`, and
/// `rdma_establish`). `timeout` bounds each run.
#[test]
fn rping_runs_over_rddp() {
    if !common::have(RPING, "rdmacm-utils") {
        return;
    }
    let lib = common::lib_dir("lib-rping");
    for (size, q) in [("4096", ""), ("23", ""), ("65535", ""), ("4096", "-q")] {
        let port = released_port().to_string();
        let rping = |args: &[&str]| {
            let mut c = Command::new("timeout");
            c.args(["60", RPING])
                .args(args)
                .args(["-a", "127.0.0.1", "-p", &port, "-S", size, "-v"])
                .args((!q.is_empty()).then_some(q))
                .env("LD_LIBRARY_PATH", &lib)
                .env_remove("LD_PRELOAD")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c
        };
        // The server's output goes to files: with -v it prints every ping
        // (640 KiB at -S 65535), more than a pipe holds while nobody reads it.
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let (out_path, err_path) = (tmp.join("rping-s.out"), tmp.join("rping-s.err"));
        let server = Killed(Some(
            rping(&["-s"])
                .stdout(std::fs::File::create(&out_path).unwrap())
                .stderr(std::fs::File::create(&err_path).unwrap())
                .spawn()
                .unwrap(),
        ));
        // The client retries, while it is refused, until the server listens.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let client = loop {
            let out = rping(&["-c", "-C", "10", "-V"]).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            if stderr.contains("RDMA_CM_EVENT_REJECTED") && std::time::Instant::now() < deadline {
                continue;
            }
            break out;
        };
        let stdout = String::from_utf8_lossy(&client.stdout);
        let stderr = String::from_utf8_lossy(&client.stderr);
        assert!(
            client.status.success(),
            "rping -c -S {size} {q}: {}\n{}\n{stderr}",
            client.status,
            tail(&stdout)
        );
        let pings: Vec<_> = stdout
            .lines()
            .filter(|l| l.starts_with("ping data: rdma-ping-"))
            .collect();
        assert_eq!(
            pings.len(),
            10,
            "rping -c -S {size}:\n{}\n{stderr}",
            tail(&stdout)
        );
        assert!(
            pings[9].starts_with("ping data: rdma-ping-9: "),
            "{}",
            tail(&stdout)
        );
        assert_eq!(
            pings[9].len(),
            "ping data: ".len() + size.parse::<usize>().unwrap() - 1
        );
        let server = server.wait();
        let stdout = std::fs::read_to_string(&out_path).unwrap();
        let stderr = std::fs::read_to_string(&err_path).unwrap();
        assert!(
            server.success(),
            "rping -s -S {size} {q}: {server}\n{}\n{stderr}",
            tail(&stdout)
        );
        assert!(
            stdout.contains("server ping data: rdma-ping-9: "),
            "{}",
            tail(&stdout)
        );
        assert!(stderr.contains("server DISCONNECT EVENT"), "{stderr}");
    }
}

/// The count: `rping -c -C 1000 -V` at `-S` 23, 4096 and 65535
/// through the library, every ping validated by the client (a mismatch
/// ends it with "data mismatch!" and a failure status); both sides exit 0.
/// No `-v`: a thousand 64 KiB pings printed would be 64 MiB of output.
#[test]
fn rping_thousand_validated_pings_over_rddp() {
    if !common::have(RPING, "rdmacm-utils") {
        return;
    }
    let lib = common::lib_dir("lib-rping-1000");
    for size in ["23", "4096", "65535"] {
        let port = released_port().to_string();
        let rping = |args: &[&str]| {
            let mut c = Command::new("timeout");
            c.args(["120", RPING])
                .args(args)
                .args(["-a", "127.0.0.1", "-p", &port, "-S", size])
                .env("LD_LIBRARY_PATH", &lib)
                .env_remove("LD_PRELOAD")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c
        };
        let server = Killed(Some(rping(&["-s"]).spawn().unwrap()));
        // The client retries, while it is refused, until the server listens.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let client = loop {
            let out = rping(&["-c", "-C", "1000", "-V"]).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            if stderr.contains("RDMA_CM_EVENT_REJECTED") && std::time::Instant::now() < deadline {
                continue;
            }
            break out;
        };
        let stderr = String::from_utf8_lossy(&client.stderr);
        assert!(
            client.status.success() && !stderr.contains("mismatch"),
            "rping -c -C 1000 -V -S {size}: {}\n{stderr}",
            client.status
        );
        let server = server.output();
        assert!(
            server.status.success(),
            "rping -s -S {size}: {}\n{}",
            server.status,
            String::from_utf8_lossy(&server.stderr)
        );
    }
}

/// Debian's ucmatose, server and client over the library: two connections
/// on one listener, four Sends each way on each, then the disconnects;
/// both exit 0. Then again with `-m`: both sides move their ids to a new
/// event channel (`rdma_migrate_id`) before disconnecting; and with `-t`
/// and `-a` (`rdma_set_option`: a type of service, an ACK timeout).
#[test]
fn ucmatose_runs_over_rddp() {
    if !common::have(UCMATOSE, "rdmacm-utils") {
        return;
    }
    let lib = common::lib_dir("lib-ucmatose");
    ucmatose(&lib, &[]);
    ucmatose(&lib, &["-m"]);
    // A type of service and an ACK timeout (rdma_set_option) on both sides.
    ucmatose(&lib, &["-t", "40", "-a", "14"]);
}

const UCMATOSE: &str = "/usr/bin/ucmatose";

fn ucmatose(lib: &Path, extra: &[&str]) {
    let port = released_port().to_string();
    let ucmatose = |args: &[&str]| {
        let mut c = Command::new("timeout");
        c.args(["60", UCMATOSE])
            .args(args)
            .args(["-p", &port, "-c", "2", "-C", "4"])
            .args(extra)
            .env("LD_LIBRARY_PATH", lib)
            .env_remove("LD_PRELOAD")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    };
    // The client starts once the server listens (a server that could not,
    // its port taken meanwhile, fails here with its output).
    let server = serve(
        ucmatose(&["-b", "127.0.0.1"]),
        port.parse().unwrap(),
        "ucmatose",
    );
    let client = ucmatose(&["-s", "127.0.0.1"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&client.stdout);
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert!(
        client.status.success(),
        "client: {}\n{stdout}\n{stderr}",
        client.status
    );
    assert!(stdout.contains("data transfers complete"), "{stdout}");
    // ucmatose goes on after a refused option, saying so.
    assert!(!stderr.contains("option failed"), "client: {stderr}");
    let out = server.output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "server: {}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("disconnected"), "{stdout}");
    assert!(!stderr.contains("option failed"), "server: {stderr}");
    if extra.contains(&"-m") {
        assert!(
            stdout.contains("migrating to new event channel"),
            "{stdout}"
        );
    }
}

/// ucmatose's server sends first (its four Sends on each connection, then
/// it waits for the client's), against an initiator that agreed no RTR, as
/// Linux siw's default build connects (RFC 6581 enhanced mode, IRD and ORD
/// 1, no peer-to-peer flag): the server's first FPDU still leaves, with no
/// FPDU from the initiator. (Before: the library's responder waited for the
/// initiator's first FPDU, RFC 5044 section 7.1.2, and siw's ucmatose
/// client waited for the server's Sends for ever.) The initiator here is a
/// plain TCP socket that speaks siw's MPA Request and reads.
#[test]
fn ucmatose_server_sends_first_to_an_initiator_without_rtr() {
    use std::io::{Read, Write};
    if !common::have(UCMATOSE, "rdmacm-utils") {
        return;
    }
    let lib = common::lib_dir("lib-ucmatose-first");
    let port = released_port();
    let mut cmd = Command::new("timeout");
    cmd.args(["60", UCMATOSE, "-b", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", "1", "-C", "4"])
        .env("LD_LIBRARY_PATH", &lib)
        .env_remove("LD_PRELOAD")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let _server = serve(cmd, port, "ucmatose");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    // A bound on each read, so that a server that never sends fails the
    // test instead of hanging it.
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    // RFC 5044 section 7.1.1's Request, Revision 2, no Markers, no CRC,
    // with RFC 6581's IRD/ORD private data (siw's enhanced flag, 0x10).
    let mut req = b"MPA ID Req Frame".to_vec();
    req.extend_from_slice(&[0x10, 2, 0, 4, 0, 1, 0, 1]);
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 24];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[..16], b"MPA ID Rep Frame", "{reply:02x?}");
    assert_eq!(reply[16] & 0x20, 0, "rejected: {reply:02x?}");
    // The first FPDU: ULPDU_Length, then DDP's untagged header with its
    // RDMAP control octet (RDMAP version 1, opcode Send, RFC 5040 section
    // 4.3): ucmatose's 100-octet message.
    let mut head = [0u8; 4];
    s.read_exact(&mut head)
        .expect("the server's first Send, before any FPDU from the initiator");
    let ulpdu = u16::from_be_bytes([head[0], head[1]]);
    assert_eq!(ulpdu, 18 + 100, "{head:02x?}");
    assert_eq!(head[3], 0x43, "RDMAP version 1, Send: {head:02x?}");
}

/// ucmatose's client holds its Write RTR (RFC 6581) about 100 ms after a
/// Reply that agreed one, as the responder of Linux siw's (6.1) answers:
/// siw's responder installs the socket callback that reads the RTR only
/// after it has sent the Reply, and an RTR that lands in between is never
/// read, so iw_cm never reports the connection established; ucmatose's
/// server, which sends first, then waits for ever, and the connection's
/// close stops siw's kernel at an iw_cm BUG (docs/interop.md, difference
/// 5). (Before: the RTR left within a millisecond of the Reply.) The
/// responder here is a plain TCP socket that speaks siw's Reply.
#[test]
fn ucmatose_client_holds_its_rtr_for_a_siw_responder() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    if !common::have(UCMATOSE, "rdmacm-utils") {
        return;
    }
    let lib = common::lib_dir("lib-ucmatose-rtr");
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let mut cmd = Command::new("timeout");
    cmd.args(["60", UCMATOSE, "-s", "127.0.0.1", "-p", &port])
        .args(["-c", "1", "-C", "1"])
        .env("LD_LIBRARY_PATH", &lib)
        .env_remove("LD_PRELOAD")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _client = Killed(Some(cmd.spawn().unwrap()));
    let (mut s, _) = l.accept().unwrap();
    // A bound on each read, so that a client that never sends fails the
    // test instead of hanging it.
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // RFC 5044 section 7.1.1's Request, then its private data: RFC 6581's
    // IRD and ORD, and the application's.
    let mut req = [0u8; 20];
    s.read_exact(&mut req).unwrap();
    assert_eq!(&req[..16], b"MPA ID Req Frame", "{req:02x?}");
    let mut pd = vec![0u8; usize::from(u16::from_be_bytes([req[18], req[19]]))];
    s.read_exact(&mut pd).unwrap();
    assert!(
        pd.len() >= 4 && pd[0] & 0x80 != 0,
        "peer-to-peer: {pd:02x?}"
    );
    assert!(pd[2] & 0x80 != 0, "the Write RTR offered: {pd:02x?}");
    // siw's Reply: Revision 2, enhanced, IRD and ORD 1, peer-to-peer, the
    // zero-length Write as RTR.
    let mut reply = b"MPA ID Rep Frame".to_vec();
    reply.extend_from_slice(&[0x10, 2, 0, 4, 0x80, 1, 0x80, 1]);
    let sent = Instant::now();
    s.write_all(&reply).unwrap();
    // The RTR: one tagged DDP segment, its last (T and L set, DDP version
    // 1), RDMAP version 1, RDMA Write, no payload: ULPDU_Length 14 (RFC 5041
    // section 4.2, RFC 5040 section 4.3).
    let mut rtr = [0u8; 4];
    s.read_exact(&mut rtr).expect("the RTR");
    let waited = sent.elapsed();
    assert_eq!(rtr, [0, 14, 0xc1, 0x40], "{rtr:02x?}");
    assert!(
        waited >= Duration::from_millis(100),
        "the RTR {waited:?} after the Reply"
    );
}

/// Debian's unmodified rdma_server and rdma_client, the synchronous
/// endpoint API (`rdma_create_ep`, `rdma_get_request`, synchronous
/// `rdma_accept`/`rdma_connect`, and the CQs and completion channels the
/// library makes for their QPs, waited on by rdma_verbs.h's
/// `rdma_get_recv_comp`): one 16-octet Send each way, inline, both over
/// this library; both print "end 0" and exit 0.
#[test]
fn rdma_server_and_client_run_over_rddp() {
    if !common::have("/usr/bin/rdma_server", "rdmacm-utils") {
        return;
    }
    let lib = common::lib_dir("lib-rdma-ep");
    let port = released_port().to_string();
    let tool = |bin: &str, args: &[&str]| {
        let mut c = Command::new("timeout");
        c.args(["30", bin])
            .args(args)
            .args(["-p", &port])
            .env("LD_LIBRARY_PATH", &lib)
            .env_remove("LD_PRELOAD")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    };
    let server = Killed(Some(tool("/usr/bin/rdma_server", &[]).spawn().unwrap()));
    // The client retries, while it is refused, until the server listens.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let client = loop {
        let out = tool("/usr/bin/rdma_client", &["-s", "127.0.0.1"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("rdma_connect: Connection refused")
            && std::time::Instant::now() < deadline
        {
            continue;
        }
        break out;
    };
    let (stdout, stderr) = (
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&client.stderr),
    );
    assert!(
        client.status.success() && stdout.contains("rdma_client: end 0"),
        "client: {}\n{stdout}\n{stderr}",
        client.status
    );
    let server = server.output();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&server.stdout),
        String::from_utf8_lossy(&server.stderr),
    );
    assert!(
        server.status.success() && stdout.contains("rdma_server: end 0"),
        "server: {}\n{stdout}\n{stderr}",
        server.status
    );
}

/// perftest's binaries (Debian 12's perftest 4.5), over the library with
/// `-R` (rdma_cm for the connection and the data exchange).
const PERFTEST: [&str; 6] = [
    "/usr/bin/ib_write_bw",
    "/usr/bin/ib_read_bw",
    "/usr/bin/ib_send_bw",
    "/usr/bin/ib_write_lat",
    "/usr/bin/ib_read_lat",
    "/usr/bin/ib_send_lat",
];
const DEBIAN_MLX5: &str = "/usr/lib/x86_64-linux-gnu/libmlx5.so.1";
const DEBIAN_EFA: &str = "/usr/lib/x86_64-linux-gnu/libefa.so.1";

/// perftest links libmlx5.so.1 and libefa.so.1 (with BIND_NOW), which the
/// cdylib stands in for (src/standins.rs): every symbol any perftest binary
/// imports from libibverbs, librdmacm, libmlx5 or libefa is exported at its
/// version; the stand-ins are ones Debian's libmlx5/libefa define at that
/// version.
#[test]
fn exports_cover_what_perftest_imports() {
    if !common::have(PERFTEST[0], "perftest") {
        return;
    }
    let ours = ours();
    let ours_of = |prefix: &str| -> BTreeSet<(String, String)> {
        ours.iter()
            .filter(|(_, v)| v.starts_with(prefix))
            .cloned()
            .collect()
    };
    for bin in PERFTEST {
        let imports = nm(bin, false);
        for prefix in ["IBVERBS_", "RDMACM_", "MLX5_", "EFA_"] {
            let from: BTreeSet<_> = imports
                .iter()
                .filter(|(_, v)| v.starts_with(prefix))
                .cloned()
                .collect();
            assert!(!from.is_empty(), "{bin} imports nothing at {prefix}*?");
            let missing: Vec<_> = from.difference(&ours).collect();
            assert!(
                missing.is_empty(),
                "{bin} imports {missing:?}, not exported"
            );
        }
    }
    for (prefix, debian) in [("MLX5_", DEBIAN_MLX5), ("EFA_", DEBIAN_EFA)] {
        // perftest depends on ibverbs-providers, which ships both.
        if !common::have(debian, "ibverbs-providers") {
            continue;
        }
        let extra: Vec<_> = ours_of(prefix)
            .difference(&nm(debian, true))
            .cloned()
            .collect();
        assert!(
            extra.is_empty(),
            "not in {debian} at this version: {extra:?}"
        );
    }
}

/// Starts the server `cmd` (its output piped) and returns once it (or the
/// tool it runs, under `timeout`) holds a socket listening on `port`, the
/// port it was told to listen on (`tool` names it in failures): a client
/// started then is not refused. Another test's listener on that port at
/// another address (ofi_rxm's, on rddp0's, takes ports of the same range)
/// does not count.
fn serve(mut cmd: Command, port: u16, tool: &str) -> Killed {
    let mut server = Killed(Some(cmd.spawn().unwrap()));
    let pid = server.0.as_ref().unwrap().id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !tcp_listening_by(pid, port) {
        let exited = server.0.as_mut().unwrap().try_wait().unwrap();
        if let Some(status) = exited {
            let out = server.output();
            panic!(
                "{tool} server exited ({status}) before listening:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{tool} server not listening on {port} after 20 s"
        );
        // Polls the server's state, 5 ms apart: no delay is assumed.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    server
}

/// The client's stderr when it lost perftest's own race on its second
/// connection (the test QP's): after the handshake that precedes it, the
/// server replies and only then opens its new listener on the same port
/// (perftest_communication.c, `create_rdma_cm_connection`), while the
/// client connects as soon as it has the reply. Refused (REJECTED,
/// ECONNREFUSED, as the kernel's iw_cm reports it over siw), the client's
/// retry loop (`rdma_cm_client_connection`) reuses the ids and the channel
/// it has just destroyed, so it cannot recover, and the server waits for
/// ever. (Seen in about one run in seven on loopback.)
fn lost_perftest_race(stderr: &str) -> bool {
    stderr.contains("Event: RDMA_CM_EVENT_REJECTED; error: -111")
        && stderr.contains("Failed to create RDMA CM connection")
}

/// A TCP port free now: bound to port 0 by this test, then released, for
/// the tools that cannot listen on port 0 and report the port they got.
fn released_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// Runs perftest's `tool` with `args` (and `-R`), server and client, both
/// over the library on loopback; returns both outputs (stdout) once both
/// ended with status 0, each bounded by `secs` seconds. The client starts
/// only once the server listens (its first connection, the control one, is
/// not retried). A run lost to
/// perftest's race on its second connection ([`lost_perftest_race`]) is
/// run again, up to five times in all.
fn perftest(lib: &Path, tool: &str, args: &[&str], secs: &str) -> (String, String) {
    for attempt in 1..=5 {
        // perftest cannot listen on port 0 and report the port: a port
        // free now (bound to 0 by this test, then released) is passed to
        // both sides.
        let port = released_port();
        let port_arg = port.to_string();
        let cmd = |extra: &[&str]| {
            let mut c = Command::new("timeout");
            c.args([secs, tool, "-R", "-p", &port_arg])
                .args(args)
                .args(extra)
                .env("LD_LIBRARY_PATH", lib)
                .env_remove("LD_PRELOAD")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c
        };
        let server = serve(cmd(&[]), port, tool);
        let client = cmd(&["127.0.0.1"]).output().unwrap();
        let c_out = String::from_utf8_lossy(&client.stdout).into_owned();
        let c_err = String::from_utf8_lossy(&client.stderr).into_owned();
        if !client.status.success() && lost_perftest_race(&c_err) && attempt < 5 {
            eprintln!("note: {tool} {args:?} lost perftest's second-connect race; again");
            continue; // `server` is killed as it drops.
        }
        if !client.status.success() {
            // The server's side too: which end gave up, and why.
            let s = server.stop();
            panic!(
                "{tool} {args:?} client: {}\n{c_out}\n{c_err}\nserver on port {port}: {}\n{}\n{}",
                client.status,
                s.status,
                String::from_utf8_lossy(&s.stdout),
                String::from_utf8_lossy(&s.stderr)
            );
        }
        let server = server.output();
        let s_out = String::from_utf8_lossy(&server.stdout).into_owned();
        assert!(
            server.status.success(),
            "{tool} {args:?} server: {}\n{s_out}\n{}",
            server.status,
            String::from_utf8_lossy(&server.stderr)
        );
        return (c_out, s_out);
    }
    unreachable!("the fifth attempt returns or panics")
}

/// The fields of the result lines under perftest's `#bytes` header, one
/// line per size reported, each with at least four (size, iterations and
/// two figures).
fn report(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"))
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .take_while(|f| f.first().is_some_and(|b| b.parse::<u64>().is_ok()))
        .inspect(|f| assert!(f.len() >= 4, "{f:?}"))
        .collect()
}

/// Runs perftest's `tool` with `-R`, 100 iterations of `size` octets,
/// over the library on both ends, and checks the result line of the
/// client and, when `server_reports`, of the server: that size, that many
/// iterations, and a figure above 0 (the average bandwidth or `t_min`).
fn perftest_runs(tool: &str, size: &str, server_reports: bool) {
    perftest_runs_n(tool, size, "100", server_reports);
}

/// [`perftest_runs`] with `iters` iterations.
fn perftest_runs_n(tool: &str, size: &str, iters: &str, server_reports: bool) {
    if !common::have(tool, "perftest") {
        return;
    }
    let name = tool.rsplit('/').next().unwrap();
    let lib = common::lib_dir(&format!("lib-{name}"));
    let (client, server) = perftest(&lib, tool, &["-n", iters, "-s", size], "60");
    let outs: &[&String] = if server_reports {
        &[&client, &server]
    } else {
        &[&client]
    };
    for out in outs {
        let rows = report(out);
        assert_eq!(rows.len(), 1, "{name}:\n{out}");
        assert_eq!(rows[0][..2], [size, iters], "{name}:\n{out}");
        // The average bandwidth (the server of ib_send_bw has no peak),
        // or t_min.
        let figure = if name.ends_with("_bw") { 3 } else { 2 };
        assert!(
            rows[0][figure].parse::<f64>().is_ok_and(|v| v > 0.0),
            "{name}:\n{out}"
        );
    }
}

/// `ib_write_bw -R`: 1000 RDMA Writes of 4 KiB, client to server; both
/// print the client's figures. With 1000 the send queue is perftest's
/// default 128 deep, on a CQ of 128 that also takes the QP's receive: the
/// overcommit rddp refused at connect before its CQs had room for it.
#[test]
fn ib_write_bw_runs_over_rddp() {
    perftest_runs_n(PERFTEST[0], "4096", "1000", true);
}

/// `ib_read_bw -R`: 100 RDMA Reads of 4 KiB.
#[test]
fn ib_read_bw_runs_over_rddp() {
    perftest_runs(PERFTEST[1], "4096", true);
}

/// `ib_send_bw -R`: 100 Sends of 4 KiB, the server's credits going back
/// by RDMA Write.
#[test]
fn ib_send_bw_runs_over_rddp() {
    perftest_runs(PERFTEST[2], "4096", true);
}

/// `ib_write_lat -R`: 100 RDMA Write ping-pongs of 64 octets, each side
/// polling its buffer for the peer's Write.
#[test]
fn ib_write_lat_runs_over_rddp() {
    perftest_runs(PERFTEST[3], "64", true);
}

/// `ib_read_lat -R`: 100 RDMA Reads of 64 octets (only the client reports).
#[test]
fn ib_read_lat_runs_over_rddp() {
    perftest_runs(PERFTEST[4], "64", false);
}

/// `ib_send_lat -R`: 100 Send ping-pongs of 64 octets.
#[test]
fn ib_send_lat_runs_over_rddp() {
    perftest_runs(PERFTEST[5], "64", true);
}

/// `-a`: every size from 2 octets to 8 MiB (23 report lines) for the
/// three bandwidth tools, 5 iterations each (perftest's least): the whole
/// sweep of sizes in a debug build in the time a tool's 100 iterations
/// would take at 8 MiB alone.
#[test]
fn perftest_all_sizes_over_rddp() {
    for tool in &PERFTEST[..3] {
        if !common::have(tool, "perftest") {
            return;
        }
        let name = tool.rsplit('/').next().unwrap();
        let lib = common::lib_dir(&format!("lib-{name}-a"));
        let (client, _) = perftest(&lib, tool, &["-a", "-n", "5"], "600");
        let rows = report(&client);
        let sizes: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
        let want: Vec<String> = (1..=23).map(|k| (1u64 << k).to_string()).collect();
        assert_eq!(sizes, want, "{name}:\n{client}");
        for r in &rows {
            assert_eq!(r[1], "5", "{name}:\n{client}");
            // The message rate: five 2-octet messages average 0.00 MB/s.
            assert!(
                r.get(4)
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| v > 0.0),
                "{name}:\n{client}"
            );
        }
    }
}

const FI_INFO: &str = "/usr/bin/fi_info";
const LIBFABRIC: &str = "/usr/lib/x86_64-linux-gnu/libfabric.so.1";

/// Debian's libfabric1 loads over the library (every verbs, rdmacm and EFA
/// symbol it imports exported at its version), and `fi_info -p verbs` finds
/// rddp0 as an iWARP domain for its verbs provider (MSG endpoints) and for
/// ofi_rxm over it (RDM): the provider's device scan, `rdma_getaddrinfo`
/// with addresses in its hints and `rdma_create_ep` included.
#[test]
fn fi_info_lists_rddp0_for_libfabrics_verbs_provider() {
    if !common::have(FI_INFO, "libfabric-bin") {
        return;
    }
    let ours = ours();
    let imports = nm(LIBFABRIC, false);
    for prefix in ["IBVERBS_", "RDMACM_", "EFA_"] {
        let missing: Vec<_> = imports
            .iter()
            .filter(|(_, v)| v.starts_with(prefix))
            .filter(|s| !ours.contains(*s))
            .collect();
        assert!(
            missing.is_empty(),
            "libfabric imports {missing:?}, not exported"
        );
    }
    let out = run(FI_INFO, &["-p", "verbs"], "lib-fi-info");
    assert!(out.contains("domain: rddp0"), "{out}");
    assert!(out.contains("protocol: FI_PROTO_IWARP"), "{out}");
    assert!(out.contains("provider: verbs;ofi_rxm"), "{out}");
}

const FI_PINGPONG: &str = "/usr/bin/fi_pingpong";

/// `fi_pingpong -p verbs -e msg` (libfabric's verbs provider, MSG
/// endpoints) runs over the library on loopback, both ends, data checked
/// (`-c`), every size. The provider makes its ids with `rdma_create_ep`
/// (synchronous) and moves them to its event queue's channel
/// (`rdma_migrate_id`), then waits there for ROUTE_RESOLVED before it
/// connects: with the id still synchronous, `rdma_resolve_route` took that
/// event itself and the client waited for ever.
#[test]
fn fi_pingpong_msg_runs_over_rddp() {
    fi_pingpong_runs("msg");
}

/// `fi_pingpong -p verbs -e rdm` (libfabric's ofi_rxm over the verbs
/// provider: each end listens on a passive endpoint and sends its name to
/// the other, which inserts it in its address vector and connects to it on
/// first send) runs over the library on loopback, both ends, data checked,
/// every size (eager, segmented and rendezvous transfers). Three things of
/// the CM's it needs, each once missing: the client's name comes from
/// `rdma_resolve_addr` toward the server's (a wildcard source made it
/// 0.0.0.0, which the server's `fi_av_insert` refused); a CONNECT_REQUEST's
/// id carries the initiator's address (ofi_rxm finds its peer by it); the
/// initiator's ESTABLISHED carries the Reply's private data (the peer's
/// connection index, without which the server crashed on the first
/// message).
#[test]
fn fi_pingpong_rdm_runs_over_rddp() {
    fi_pingpong_runs("rdm");
}

/// A fi_pingpong MSG server over the library names its passive endpoint to
/// its client (over fi_pingpong's control connection) by an interface's
/// address, which a client on another host can reach, not 127.0.0.1. The
/// verbs provider binds "localhost" to find the endpoint's source; an id
/// bound to a loopback address names no device, as with the kernel's
/// rdma_cm, so the provider takes the device's interface address. (Before:
/// the bind named rddp0 and the endpoint was 127.0.0.1, which siw's client
/// in the interop guest could not reach.) Needs an interface other than lo,
/// as the verbs provider offers MSG endpoints only then.
#[test]
fn fi_pingpong_server_names_an_interface_address() {
    use std::io::Read;
    if !common::have(FI_PINGPONG, "libfabric-bin") {
        return;
    }
    let lib = common::lib_dir("lib-fi-pingpong-name");
    let port = released_port();
    let mut cmd = Command::new("timeout");
    cmd.args(["30", FI_PINGPONG, "-p", "verbs", "-e", "msg"])
        .args(["-B", &port.to_string()])
        .env("LD_LIBRARY_PATH", &lib)
        .env_remove("LD_PRELOAD")
        .current_dir(&lib)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let _server = serve(cmd, port, "fi_pingpong");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    // fi_pingpong's control messages: the name's length (4 octets, network
    // order), its address format (4), then the name, here a sockaddr_in.
    let mut head = [0u8; 8];
    s.read_exact(&mut head).expect("the server's name");
    assert_eq!(u32::from_be_bytes([head[0], head[1], head[2], head[3]]), 16);
    let mut name = [0u8; 16];
    s.read_exact(&mut name).unwrap();
    assert_eq!(
        i32::from(u16::from_ne_bytes([name[0], name[1]])),
        libc::AF_INET
    );
    let ip = std::net::Ipv4Addr::new(name[4], name[5], name[6], name[7]);
    assert!(
        !ip.is_loopback() && !ip.is_unspecified(),
        "the passive endpoint is {ip}"
    );
}

/// Whether a fi_pingpong run over ofi_rxm was lost to libfabric 1.17's own
/// teardown bug, not to the transfers: every size went through and was
/// checked (`reported_all`), then one side died of SIGSEGV (libfabric's
/// handler prints "terminated with signal 11"). When the peer's endpoint
/// closes, ofi_rxm 1.17 (`rxm_close_conn`) closes the verbs endpoint first
/// and only then drains the MSG CQ, with the connection still naming the
/// closed endpoint, so a receive that had completed before the close (the
/// peer's final message) is handled and its buffer re-posted to the freed
/// endpoint (`rxm_free_rx_buf`). Completions stay in their CQ when a QP
/// is destroyed, as with siw, so this happens whenever the disconnect is
/// processed before that completion; later libfabric drains first. Its
/// data path reads the CM's events only after finding the CQ empty, at
/// most once per `FI_OFI_RXM_CM_PROGRESS_INTERVAL` (10 ms by default): a
/// thread preempted between the two (the CPU being shared) finds the
/// disconnect first. The test sets that interval to a second, which makes
/// the window rare; what is left of it is run again.
fn lost_rxm_teardown_race(reported_all: bool, server_err: &str, client_err: &str) -> bool {
    let segv = "terminated with signal 11";
    reported_all && (server_err.contains(segv) || client_err.contains(segv))
}

/// Runs `fi_pingpong -p verbs -e <endpoint>` over the library, server and
/// client on loopback, 20 messages of each size with data checked (`-c`),
/// and checks that the client reported every size, 64 octets to 1 MiB. A
/// run lost to [`lost_rxm_teardown_race`] is run again, up to five times
/// in all.
fn fi_pingpong_runs(endpoint: &str) {
    if !common::have(FI_PINGPONG, "libfabric-bin") {
        return;
    }
    let lib = common::lib_dir(&format!("lib-fi-pingpong-{endpoint}"));
    for attempt in 1..=5 {
        // The control connection's port (fi_pingpong cannot take port 0
        // and report it): free now, bound to 0 by this test and released.
        let port = released_port();
        let port_arg = port.to_string();
        let cmd = |side: &[&str]| {
            let mut c = Command::new("timeout");
            c.args([
                "60",
                FI_PINGPONG,
                "-p",
                "verbs",
                "-e",
                endpoint,
                "-I",
                "20",
                "-c",
            ])
            .args(side)
            .env("LD_LIBRARY_PATH", &lib)
            .env_remove("LD_PRELOAD")
            // See `lost_rxm_teardown_race` (MSG endpoints ignore it).
            .env("FI_OFI_RXM_CM_PROGRESS_INTERVAL", "1000000")
            // libfabric's crash handler writes its report (a `.btr` file)
            // into the working directory: the test's own, not the crate.
            .current_dir(&lib)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
            c
        };
        let server = serve(cmd(&["-B", &port_arg]), port, "fi_pingpong");
        let client = cmd(&["-P", &port_arg, "127.0.0.1"]).output().unwrap();
        let server = server.output();
        let c_out = String::from_utf8_lossy(&client.stdout);
        let c_err = String::from_utf8_lossy(&client.stderr);
        let s_err = String::from_utf8_lossy(&server.stderr);
        let all = rddp_testkit::fi_pingpong_reported_all(&c_out, 20);
        let ok = client.status.success() && server.status.success();
        if !ok && endpoint == "rdm" && lost_rxm_teardown_race(all, &s_err, &c_err) && attempt < 5 {
            eprintln!("note: fi_pingpong rdm lost libfabric 1.17's rxm teardown race; again");
            continue;
        }
        assert!(
            client.status.success(),
            "{endpoint} client: {}\n{c_out}\n{c_err}",
            client.status,
        );
        assert!(
            server.status.success(),
            "{endpoint} server: {}\n{}\n{s_err}",
            server.status,
            String::from_utf8_lossy(&server.stdout),
        );
        assert!(
            all,
            "{endpoint}: a size missing or not all acknowledged:\n{c_out}"
        );
        return;
    }
    unreachable!("the fifth attempt returns or panics")
}
