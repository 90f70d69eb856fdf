//! Wire check of real UDP encapsulation (RFC 5043): tshark
//! captures the process's UDP encapsulation port on lo while two endpoints of this
//! process run a scripted session (listener at 127.0.0.1:P, SCTP port = UDP port =
//! P; the client joins the stack and sets the remote encapsulation port to P).

use crate::common::wire::{check_capture, session, tshark_present};
use crate::common::*;
use rddp_proto::mem::MemoryTable;
use rddp_sctp::driver::{Listener, Options, connect};
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

/// The capture process; stopped (SIGINT, so it writes its file out) and reaped
/// once, at the latest on drop.
struct Capture {
    child: Child,
    stopped: bool,
    /// The capture file.
    file: String,
    /// A port captured besides the session's, for probes.
    probe_port: u16,
    /// Probes sent so far (each carries its own number).
    probes: u32,
}

impl Capture {
    /// Send probes (UDP, not decoded as SCTP) until one is in the capture
    /// file: every packet that crossed lo before it is in there too (the
    /// capture writes packets in the order it saw them). False if none shows
    /// within 20 s.
    fn probe(&mut self) -> bool {
        let Ok(sock) = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)) else {
            return false;
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            self.probes += 1;
            let marker = format!("rddp-probe-{}-{}", std::process::id(), self.probes);
            let _ = sock.send_to(marker.as_bytes(), (Ipv4Addr::LOCALHOST, self.probe_port));
            let next = Instant::now() + Duration::from_millis(200);
            while Instant::now() < next {
                let seen = std::fs::read(&self.file)
                    .is_ok_and(|b| b.windows(marker.len()).any(|w| w == marker.as_bytes()));
                if seen {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        false
    }

    fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Start tshark on lo for `port`; None (loud skip, or failure under CI) if it
/// cannot capture here. tshark says "Capturing on" before packets are really
/// seen, so probes (UDP to another free port, not decoded as SCTP) are sent until
/// one is in the file.
fn capture(port: u16, file: &str) -> Option<Capture> {
    let probe_port = free_port();
    let mut child = Command::new("tshark")
        .args([
            "-i",
            "lo",
            "-f",
            &format!("udp port {port} or udp port {probe_port}"),
            "-w",
            file,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let err = child.stderr.take()?;
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if l.contains("Capturing on") {
                let _ = tx.send(true);
            }
        }
    });
    let mut c = Capture {
        child,
        stopped: false,
        file: file.to_string(),
        probe_port,
        probes: 0,
    };
    if rx.recv_timeout(Duration::from_secs(20)).is_ok() && c.probe() {
        return Some(c);
    }
    c.stop();
    assert!(
        std::env::var_os("CI").is_none(),
        "CI: tshark cannot capture on lo"
    );
    eprintln!("\n*** SKIPPED: tshark cannot capture on lo here (CI unset)\n");
    None
}

#[test]
fn tshark_sees_rfc5043_on_the_udp_encapsulation_port() {
    if !own_process(
        module_path!(),
        "tshark_sees_rfc5043_on_the_udp_encapsulation_port",
    ) || !tshark_present()
    {
        return;
    }
    let port = free_port();
    let file = std::env::temp_dir().join(format!("rddp-sctp-udp-{}.pcap", std::process::id()));
    let file_s = file.to_str().unwrap().to_string();
    let Some(mut cap) = capture(port, &file_s) else {
        return;
    };
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let l = Listener::bind(addr, Options::default()).unwrap();
    let mut a = connect(addr, Options::default()).unwrap();
    let mut b = l.accept(Duration::from_secs(5)).unwrap();
    let (ma, mb) = (MemoryTable::with_seed(5), MemoryTable::with_seed(6));
    let sent = session(&mut a, &ma, &mut b, &mb);
    // Every packet of the session is in the file before the capture stops.
    assert!(cap.probe(), "the capture stopped writing packets");
    cap.stop();
    drop((a, b, l));
    check_capture(
        &file_s,
        &["-d".into(), format!("udp.port=={port},sctp")],
        &sent,
    );
    let _ = std::fs::remove_file(&file);
}
