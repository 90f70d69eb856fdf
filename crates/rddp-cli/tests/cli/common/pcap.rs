//! tshark checks of `--pcap` files (observe.rs, rping.rs).

use std::path::Path;
use std::process::Command;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(crate) fn tshark_present() -> bool {
    let ok = Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set and tshark is missing"
        );
        eprintln!("\n*** SKIPPED: the --pcap check needs tshark (CI unset)\n");
    }
    ok
}

/// Keep heuristic dissectors that also claim iWARP payloads out of the way.
pub(crate) const NO_HEURISTICS: &[&str] = &[
    "--disable-heuristic",
    "rpcrdma_iwarp",
    "--disable-heuristic",
    "smb_direct_iwarp",
];

pub(crate) fn tshark(file: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "tshark: {}", text(&out.stderr));
    text(&out.stdout)
}

/// Every FPDU of the MPA capture `file` decodes with a good CRC, the TCP stream
/// has no gap, and the RDMAP opcodes seen are returned, by direction
/// (source port, opcode).
pub(crate) fn check_mpa_capture(file: &Path) -> Vec<(String, String)> {
    let mut a = NO_HEURISTICS.to_vec();
    a.extend(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|"]);
    a.extend([
        "-e",
        "tcp.srcport",
        "-e",
        "iwarp_mpa.rev",
        "-e",
        "iwarp_rdma.opcode",
    ]);
    let rows = tshark(file, &a);
    let mut frames = 0;
    let mut ops = Vec::new();
    for r in rows.lines() {
        let f: Vec<&str> = r.split('\t').collect();
        if !f[1].is_empty() {
            frames += 1;
        }
        for op in f[2].split('|').filter(|s| !s.is_empty()) {
            ops.push((f[0].to_string(), op.to_lowercase()));
        }
    }
    assert_eq!(frames, 2, "one Request and one Reply:\n{rows}");
    let mut v = NO_HEURISTICS.to_vec();
    v.extend(["-V", "-O", "iwarp_mpa"]);
    let verbose = tshark(file, &v);
    assert_eq!(verbose.matches("Bad CRC32").count(), 0, "bad CRC");
    assert_eq!(
        verbose.matches("Good CRC32").count(),
        ops.len(),
        "a CRC not checked"
    );
    let mut e = NO_HEURISTICS.to_vec();
    e.extend(["-q", "-z", "expert,note"]);
    let expert = tshark(file, &e);
    for bad in [
        "not captured",
        "Malformed",
        "ACKed segment that wasn't",
        "Retransmission",
    ] {
        assert!(!expert.contains(bad), "{bad}:\n{expert}");
    }
    ops
}
