//! `rddp rping` against itself over loopback MPA/TCP: rping's protocol and
//! output, its size limits, and the faults used by the siw interop tests
//! (tests/cli/interop_siw.rs runs the same commands against rdma-core's rping on siw).

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// `rddp rping -s -a 127.0.0.1 -p 0 ARGS`, killed on drop; its port is read from
/// the "listening on" line.
struct Server {
    child: Child,
    port: u16,
    stderr: Receiver<String>,
}

impl Server {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rddp"))
            .args(["rping", "-s", "-a", "127.0.0.1", "-p", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, stderr) = channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let first = stderr.recv_timeout(Duration::from_secs(10)).unwrap();
        let port = first
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {first:?}"));
        Self {
            child,
            port,
            stderr,
        }
    }

    /// Wait for the exit: (code, stdout, stderr).
    fn finish(mut self) -> (Option<i32>, String, String) {
        let mut out = String::new();
        for _ in 0..500 {
            if self.child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let status = self.child.wait().unwrap();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let err: Vec<String> = self.stderr.try_iter().collect();
        (status.code(), out, err.join("\n"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(port: u16, args: &[&str]) -> (Option<i32>, String, String) {
    let p = port.to_string();
    let mut all = vec!["rping", "-c", "-a", "127.0.0.1", "-p", &p];
    all.extend_from_slice(args);
    common::run(&all)
}

#[test]
fn every_ping_is_read_written_back_and_validated() {
    let s = Server::start(&["-S", "1000", "-v"]);
    let (code, out, err) = client(s.port, &["-C", "20", "-S", "1000", "-V", "-v"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let pings: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("ping data: "))
        .collect();
    assert_eq!(pings.len(), 20, "{out}");
    assert!(
        pings[0].starts_with("ping data: rdma-ping-0: ABCDEFG"),
        "{}",
        pings[0]
    );
    assert!(
        pings[19].starts_with("ping data: rdma-ping-19: TUVW"),
        "{}",
        pings[19]
    );
    // 1000 octets with the NUL last: 999 characters printed.
    assert_eq!(pings[0].len(), "ping data: ".len() + 999);
    assert!(err.contains("MPA rev 2, CRC off"), "{err}");
    assert!(
        err.contains("20 pings of 1000 octets, each validated"),
        "{err}"
    );
    let (code, out, err) = s.finish();
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("server ping data: rdma-ping-"))
            .count(),
        20
    );
    assert!(err.contains("served 20 pings"), "{err}");
}

#[test]
fn sizes_are_rpings() {
    for bad in ["22", "65536"] {
        let (code, _, err) = common::run(&["rping", "-s", "-p", "0", "-S", bad]);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("valid range is 23 to 65535"), "{err}");
    }
    let s = Server::start(&["-S", "65535", "--crc"]);
    let (code, out, err) = client(s.port, &["-C", "3", "-S", "65535", "-V"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(err.contains("CRC on"), "{err}");
    // The client may not offer more than the server's -S.
    let s = Server::start(&["-S", "100"]);
    let (code, _, _) = client(s.port, &["-C", "1", "-S", "200"]);
    assert_eq!(code, Some(1));
    let (_, _, err) = s.finish();
    assert!(err.contains("size 200 is larger than ours (100"), "{err}");
}

#[test]
fn faults_draw_the_terminates_they_are_for() {
    // Each fault makes the client the side that finds the error: its receive is
    // missing, or the server's Read or Write names an STag it never registered.
    let cases = [
        ("no-recv", "DDP invalid MSN: no buffer available (1/2/0x02)"),
        ("read-stag", "RDMAP invalid STag (0/1/0x00)"),
        ("write-stag", "DDP invalid STag (1/1/0x00)"),
    ];
    for (fault, code) in cases {
        let s = Server::start(&[]);
        let (ccode, _, cerr) = client(s.port, &["-C", "3", "--fault", fault]);
        let (scode, _, serr) = s.finish();
        assert_eq!(
            (ccode, scode),
            (Some(1), Some(1)),
            "{fault}: {cerr}\n{serr}"
        );
        assert!(
            cerr.contains(&format!("sent Terminate {code}")),
            "{fault}: {cerr}"
        );
        assert!(
            serr.contains(&format!("the peer sent Terminate {code}")),
            "{fault}: {serr}"
        );
    }
    // As server, the wrong STag is the one it uses: the client finds the error.
    // (--fault extra-send races the peer's repost of its receive; siw loses that
    // race every time, an rddp peer not always: tests/cli/interop_siw.rs has it.)
    let server_cases = [
        ("read-stag", "RDMAP invalid STag (0/1/0x00)"),
        ("write-stag", "DDP invalid STag (1/1/0x00)"),
    ];
    for (fault, code) in &server_cases {
        let s = Server::start(&["--fault", fault]);
        let (ccode, _, cerr) = client(s.port, &["-C", "3"]);
        let (scode, _, serr) = s.finish();
        assert_eq!(
            (ccode, scode),
            (Some(1), Some(1)),
            "{fault}: {cerr}\n{serr}"
        );
        assert!(
            cerr.contains(&format!("sent Terminate {code}")),
            "{fault}: {cerr}"
        );
        assert!(
            serr.contains(&format!("the peer sent Terminate {code}")),
            "{fault}: {serr}"
        );
    }
}

#[test]
fn markers_work_between_rddp_ends() {
    let s = Server::start(&["--markers"]);
    let (code, out, err) = client(s.port, &["-C", "3", "-V", "--markers"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(err.contains("Markers rx on tx on"), "{err}");
}

#[test]
fn pcap_of_an_rping_client_decodes_in_tshark_with_good_crcs() {
    if !common::pcap::tshark_present() {
        return;
    }
    let file = std::env::temp_dir().join(format!("rddp-rping-{}.pcap", std::process::id()));
    let f = file.to_str().unwrap().to_string();
    let s = Server::start(&["-S", "100", "--crc"]);
    let (code, out, err) = client(
        s.port,
        &["-C", "3", "-S", "100", "-V", "--crc", "--pcap", &f],
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let _ = s.finish();
    let ops = common::pcap::check_mpa_capture(&file);
    let names: Vec<&str> = ops.iter().map(|(_, o)| o.as_str()).collect();
    // rping: advertisement Sends, the server's RDMA Read of the start buffer and
    // its RDMA Write into the sink.
    for want in ["0x00", "0x01", "0x02", "0x03"] {
        assert!(names.contains(&want), "no opcode {want} in {names:?}");
    }
    let _ = std::fs::remove_file(&file);
}
