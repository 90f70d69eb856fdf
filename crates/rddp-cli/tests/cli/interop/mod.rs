//! Driving the siw interop guest (scripts/interop/) from tests: one boot runs a
//! plan of steps, each a guest command (rping, perftest against siw) paired with a
//! host command (the `rddp` tool), and returns every step's output.
//!
//! A step's host side is either started before the boot and reached by the guest
//! at 10.0.2.2:PORT (QEMU's user network maps it to the host's 127.0.0.1), or
//! started once the guest server listens, reaching it through a forwarded
//! 127.0.0.1 port. Several checks share one boot: TCG boots take seconds each.
//! [`run_routed`] boots on a routed network instead (a tap device in a network
//! namespace of its own, scripts/interop/netns.sh), for tools that tell each
//! other ephemeral ports, which no forward can know: there the host side runs
//! in the namespace as 10.0.2.2 and reaches the guest at 10.0.2.15.
//!
//! Availability: the harness builds (or finds cached) the guest with
//! scripts/interop/build-guest.sh, which installs QEMU and friends when run as
//! root. If it cannot, the tests fail under CI=true and say why; elsewhere they
//! print why and pass without checking (RDDP_INTEROP=0 asks for that too).
#![allow(dead_code)]

pub(crate) mod patient;
pub(crate) mod proxy;

use rddp_testkit::{tcp_listening, tcp_listening_in};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Repository root (this file is crates/rddp-cli/tests/cli/interop/mod.rs).
pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn rddp() -> String {
    env!("CARGO_BIN_EXE_rddp").to_string()
}

/// `n` distinct free ports on 127.0.0.1 (bound to port 0 all at once, then
/// released for the children and QEMU's forwards).
pub(crate) fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// Whether the harness can run here; `Err` says why not. Under CI=true a harness
/// that cannot run is a failure, not a skip.
pub(crate) fn available() -> Result<(), String> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let why = match std::env::var("RDDP_INTEROP").as_deref() {
        Ok("0" | "off") if !ci => Some("RDDP_INTEROP=0".to_string()),
        _ => build_guest().err(),
    };
    match why {
        None => Ok(()),
        Some(w) if ci => panic!("the siw interop harness cannot run under CI: {w}"),
        Some(w) => Err(w),
    }
}

fn build_guest() -> Result<(), String> {
    let script = repo().join("scripts/interop/build-guest.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "scripts/interop/build-guest.sh failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Where a step's host side starts.
pub(crate) enum Host {
    /// Before the boot; the guest command finds it at 10.0.2.2:{port}.
    Before(Vec<String>),
    /// Once the guest server listens on its port (`{gport}`, chosen per step); the
    /// host command reaches it at 127.0.0.1:{port}, forwarded there (routed:
    /// at 10.0.2.15:{port}, the guest's own port).
    OnReady(Vec<String>),
    /// Nothing on the host.
    None,
}

/// One check: a guest command and its host side. In both commands `{port}` is
/// the host port of this step (the host server's, or the forwarded one) and
/// `{gport}` the guest server's port.
pub(crate) struct Step {
    pub name: String,
    pub siw: String,
    pub seconds: u32,
    pub guest: String,
    pub host: Host,
    /// A corrupting proxy in front of the host side's port (see [`proxy`]).
    pub proxy: Option<proxy::Corrupt>,
    /// The host client reaches the guest server through a forwarder that
    /// tries a refused connection again (see [`patient`]).
    pub patient: bool,
}

impl Step {
    pub(crate) fn new(name: &str, siw: &str, seconds: u32, guest: &str, host: Host) -> Self {
        Self {
            name: name.into(),
            siw: siw.into(),
            seconds,
            guest: guest.into(),
            host,
            proxy: None,
            patient: false,
        }
    }

    /// The guest command's time limit (it is killed then).
    pub(crate) fn secs(mut self, n: u32) -> Self {
        self.seconds = n;
        self
    }

    /// See [`Step::patient`] (the field).
    pub(crate) fn patient(mut self) -> Self {
        self.patient = true;
        self
    }

    pub(crate) fn via_proxy(mut self, c: proxy::Corrupt) -> Self {
        self.proxy = Some(c);
        self
    }
}

/// What one step produced.
#[derive(Debug, Default, Clone)]
pub(crate) struct Outcome {
    /// The guest command's exit status (137: killed at its time limit).
    pub guest_rc: Option<i32>,
    /// The guest command's output (stdout and stderr), without markers.
    pub guest: String,
    /// siw's kernel messages during the step ("[dmesg] ..." lines).
    pub dmesg: String,
    pub host_rc: Option<i32>,
    pub host_out: String,
    pub host_err: String,
    /// What the proxy did, if there was one.
    pub proxy: String,
    /// From the step's begin to its end as the host saw them: where the
    /// boot's time goes (the log lists every step's).
    pub seconds: f64,
}

impl Outcome {
    pub(crate) fn all(&self) -> String {
        format!(
            "--- guest (rc {:?}, {:.1} s)\n{}--- dmesg\n{}--- host (rc {:?})\n{}{}--- proxy\n{}",
            self.guest_rc,
            self.seconds,
            self.guest,
            self.dmesg,
            self.host_rc,
            self.host_out,
            self.host_err,
            self.proxy
        )
    }
}

/// The results of one boot, by step name.
pub(crate) struct Run {
    pub steps: HashMap<String, Outcome>,
    pub seconds: f64,
    /// run-guest.sh's stdout (the guest console from the boot on).
    pub console: String,
    /// run-guest.sh's own lines and QEMU's errors.
    pub stderr: String,
}

impl Run {
    pub(crate) fn get(&self, name: &str) -> &Outcome {
        self.steps.get(name).unwrap_or_else(|| {
            panic!(
                "step {name} did not run; console:\n{}\n{}",
                self.console, self.stderr
            )
        })
    }

    /// A step's outputs and the harness's own lines, for assertion messages.
    pub(crate) fn explain(&self, name: &str) -> String {
        format!(
            "step {name}\n{}--- run-guest\n{}",
            self.get(name).all(),
            self.stderr
        )
    }
}

struct Proc {
    child: Child,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
    /// The threads collecting stdout and stderr: they end at EOF, once the
    /// process (and anything it left holding its pipes) is gone.
    readers: Vec<std::thread::JoinHandle<()>>,
}

fn collect(r: impl Read + Send + 'static, into: Arc<Mutex<String>>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            let mut s = into.lock().unwrap();
            s.push_str(&l);
            s.push('\n');
        }
    })
}

fn spawn(cmd: &[String]) -> Proc {
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let (out, err) = (Arc::default(), Arc::default());
    let readers = vec![
        collect(child.stdout.take().unwrap(), Arc::clone(&out)),
        collect(child.stderr.take().unwrap(), Arc::clone(&err)),
    ];
    Proc {
        child,
        out,
        err,
        readers,
    }
}

impl Proc {
    /// Wait up to `d` for the exit, then kill: (rc, stdout, stderr).
    fn finish(mut self, d: Duration) -> (Option<i32>, String, String) {
        let deadline = Instant::now() + d;
        let mut rc = None;
        while Instant::now() < deadline {
            if let Some(s) = self.child.try_wait().unwrap() {
                rc = s.code();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if rc.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // Every line the process wrote, its last included: the readers end
        // at EOF (a fixed pause here once lost a loaded run's last line).
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let out = self.out.lock().unwrap().clone();
        let err = self.err.lock().unwrap().clone();
        (rc, out, err)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn subst(s: &str, port: u16, gport: u16) -> String {
    s.replace("{port}", &port.to_string())
        .replace("{gport}", &gport.to_string())
        .replace("{rddp}", &rddp())
}

/// Single quotes for the guest's sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A network namespace with the routed network's tap device
/// (scripts/interop/netns.sh), deleted when dropped.
struct Netns(String);

impl Netns {
    fn up() -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("rddp-interop-{}-{n}", std::process::id());
        let out = Command::new("bash")
            .arg(repo().join("scripts/interop/netns.sh"))
            .args(["up", &name])
            .output()
            .expect("cannot run scripts/interop/netns.sh");
        assert!(
            out.status.success(),
            "scripts/interop/netns.sh up {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("scripts/interop/netns.sh"))
            .args(["down", &self.0])
            .output();
    }
}

/// Boot once and run `steps` in order; every step's output, by name.
pub(crate) fn run(steps: Vec<Step>) -> Run {
    run_in(steps, None)
}

/// [`run`] on a routed network (a tap device in a network namespace made for
/// this boot): every host command runs in the namespace, as 10.0.2.2, and a
/// host client reaches its guest server at 10.0.2.15:{port}, with no QEMU
/// forward between them, so [`Step::patient`] changes nothing. No proxies.
pub(crate) fn run_routed(steps: Vec<Step>) -> Run {
    assert!(
        steps.iter().all(|s| s.proxy.is_none()),
        "a routed run has no proxies"
    );
    let ns = Netns::up();
    run_in(steps, Some(&ns.0))
}

fn run_in(mut steps: Vec<Step>, netns: Option<&str>) -> Run {
    let t0 = Instant::now();
    // A host command, run in the routed network's namespace if there is one.
    let host_cmd = |cmd: Vec<String>| -> Vec<String> {
        match netns {
            Some(ns) => ["ip", "netns", "exec", ns]
                .into_iter()
                .map(String::from)
                .chain(cmd)
                .collect(),
            None => cmd,
        }
    };
    // RDDP_INTEROP_ONLY=NAME,NAME runs only the steps whose names start so
    // (to rerun a few by hand; the tests for the others then fail).
    if let Ok(only) = std::env::var("RDDP_INTEROP_ONLY") {
        let only: Vec<&str> = only.split(',').collect();
        steps.retain(|s| only.iter().any(|o| s.name.starts_with(o)));
    }
    let mut script = String::new();
    let mut fwds = Vec::new();
    let mut before: HashMap<String, (Proc, Option<proxy::Proxy>)> = HashMap::new();
    // The port each host server started before the boot listens on.
    let mut listens: Vec<(String, u16)> = Vec::new();
    // Host clients to start on READY: (command template, forwarded port, guest port, proxy).
    type Ready = (Vec<String>, u16, u16, Option<proxy::Corrupt>, bool);
    let mut on_ready: HashMap<String, Ready> = HashMap::new();
    let mut guest_limit = 30;
    let mut siw = "default".to_string();
    let ports = free_ports(steps.len());
    for (i, s) in steps.iter().enumerate() {
        let gport = 7200 + i as u16;
        let port = ports[i];
        // With a proxy the guest (or the host client) talks to the proxy's port.
        let mut visible = port;
        match &s.host {
            Host::Before(cmd) => {
                let cmd = host_cmd(cmd.iter().map(|a| subst(a, port, gport)).collect());
                let p = s.proxy.map(|c| proxy::Proxy::start(port, c));
                if let Some(p) = &p {
                    visible = p.port;
                }
                before.insert(s.name.clone(), (spawn(&cmd), p));
                listens.push((s.name.clone(), port));
            }
            Host::OnReady(cmd) => {
                if netns.is_none() {
                    fwds.push(format!("-f{port}:{gport}"));
                }
                on_ready.insert(
                    s.name.clone(),
                    (cmd.clone(), port, gport, s.proxy, s.patient),
                );
            }
            Host::None => {}
        }
        if s.siw != siw {
            script.push_str(&format!("siw {}\n", s.siw));
            siw = s.siw.clone();
        }
        let guest = subst(&s.guest, visible, gport);
        match &s.host {
            Host::OnReady(_) => script.push_str(&format!(
                "serve {} {} {} {}\n",
                s.name,
                gport,
                s.seconds,
                quote(&guest)
            )),
            _ => script.push_str(&format!(
                "step {} {} {}\n",
                s.name,
                s.seconds,
                quote(&guest)
            )),
        }
        guest_limit += s.seconds + 5;
    }
    // Host servers listen before the guest can reach them (one that exits
    // first fails its step with its own output).
    let deadline = Instant::now() + Duration::from_secs(30);
    for (name, port) in &listens {
        let (p, _) = before.get_mut(name).unwrap();
        let pid = p.child.id();
        let listening = |port| match netns {
            Some(_) => tcp_listening_in(pid, port),
            None => tcp_listening(port),
        };
        while !listening(*port) && p.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "the host server of {name} not listening on {port} after 30 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let mut qemu = Command::new("bash")
        .arg(repo().join("scripts/interop/run-guest.sh"))
        .arg("-q")
        .arg("-t")
        .arg(guest_limit.to_string())
        .args(&fwds)
        .args(netns.map(|ns| format!("-n{ns}")))
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start scripts/interop/run-guest.sh");
    let err = Arc::new(Mutex::new(String::new()));
    let err_reader = collect(qemu.stderr.take().unwrap(), Arc::clone(&err));
    let mut results: HashMap<String, Outcome> = HashMap::new();
    let mut running: Option<(String, Option<Proc>, Option<proxy::Proxy>)> = None;
    // The forwarders of `patient` steps, until the run ends.
    let mut patients = Vec::new();
    let mut current: Option<String> = None;
    let mut began = Instant::now();
    let mut console = String::new();
    for line in BufReader::new(qemu.stdout.take().unwrap()).lines() {
        let Ok(line) = line else { break };
        console.push_str(&line);
        console.push('\n');
        let Some(at) = line.find("### RDDP-") else {
            if let Some(name) = &current {
                let o = results.entry(name.clone()).or_default();
                if let Some(k) = line.strip_prefix("[dmesg] ") {
                    o.dmesg.push_str(k);
                    o.dmesg.push('\n');
                } else {
                    o.guest.push_str(&line);
                    o.guest.push('\n');
                }
            }
            continue;
        };
        let mark = &line[at + "### RDDP-".len()..];
        let mut w = mark.split_whitespace();
        match (w.next(), w.next()) {
            (Some("STEP-BEGIN"), Some(name)) => {
                current = Some(name.to_string());
                results.entry(name.to_string()).or_default();
                began = Instant::now();
            }
            (Some("READY"), Some(name)) => {
                if let Some((cmd, fwd, gport, corrupt, patient)) = on_ready.remove(name) {
                    // The host client connects to the forwarded 127.0.0.1 port, or
                    // to a proxy or a patient forwarder in front of it.
                    let p = corrupt.map(|c| proxy::Proxy::start(fwd, c));
                    let mut port = p.as_ref().map_or(fwd, |p| p.port);
                    if netns.is_some() {
                        port = gport;
                    } else if patient {
                        let f = patient::Patient::start(fwd);
                        port = f.port;
                        patients.push(f);
                    }
                    let cmd = host_cmd(cmd.iter().map(|a| subst(a, port, gport)).collect());
                    running = Some((name.to_string(), Some(spawn(&cmd)), p));
                }
            }
            (Some("STEP-END"), Some(name)) => {
                let rc = w
                    .next()
                    .and_then(|r| r.strip_prefix("rc="))
                    .and_then(|r| r.parse().ok());
                let o = results.entry(name.to_string()).or_default();
                o.guest_rc = rc;
                o.seconds = began.elapsed().as_secs_f64();
                let host = match running.take() {
                    Some((n, p, px)) if n == name => Some((p, px)),
                    other => {
                        running = other;
                        before.remove(name).map(|(p, px)| (Some(p), px))
                    }
                };
                if let Some((p, px)) = host {
                    if let Some(p) = p {
                        let (rc, out, err) = p.finish(Duration::from_secs(5));
                        (o.host_rc, o.host_out, o.host_err) = (rc, out, err);
                    }
                    if let Some(px) = px {
                        o.proxy = px.report();
                    }
                }
                current = None;
            }
            _ => {}
        }
    }
    let _ = qemu.wait();
    // Steps the guest never ended (it crashed or hung): their host processes'
    // output is what tells why.
    let unended = running
        .take()
        .into_iter()
        .chain(before.drain().map(|(n, (p, px))| (n, Some(p), px)));
    for (name, p, px) in unended {
        if !results.contains_key(&name) {
            continue;
        }
        let o = results.entry(name).or_default();
        if let Some(p) = p {
            (o.host_rc, o.host_out, o.host_err) = p.finish(Duration::from_secs(5));
        }
        if let Some(px) = px {
            o.proxy = px.report();
        }
    }
    let _ = err_reader.join();
    let stderr = err.lock().unwrap().clone();
    // RDDP_INTEROP_LOG=FILE keeps the guest script, its forwards, the console
    // and each step's outputs and time, a boot after another (appended).
    if let Ok(f) = std::env::var("RDDP_INTEROP_LOG") {
        let mut log = format!("{fwds:?}\n{script}\n{console}\n{stderr}\n");
        for s in &steps {
            if let Some(o) = results.get(&s.name) {
                log.push_str(&format!("=== {}\n{}", s.name, o.all()));
            }
        }
        use std::io::Write;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(f);
        let _ = file.and_then(|mut file| file.write_all(log.as_bytes()));
    }
    Run {
        steps: results,
        seconds: t0.elapsed().as_secs_f64(),
        console,
        stderr,
    }
}
