//! rddp inside an IKEv2/ESP tunnel (docs/security.md; RFC 5041's IPsec profile
//! is the host's job): runs `scripts/ipsec.sh` with this build's `rddp` and
//! checks its results here: every `rddp perf --verify` run through the tunnel
//! byte-exact over MPA/TCP and SCTP, only ESP in UDP on the outer link, and the
//! control run without the tunnel seen in clear.
//!
//! Needs root (namespaces, strongSwan). Without root it is skipped with a
//! message, except under CI=true, where it fails.

use crate::common;

use common::root_script;

use serde_json::Value;

fn frames(cap: &Value, class: &str) -> u64 {
    cap["frames"][class].as_u64().unwrap_or(0)
}

#[test]
fn perf_through_an_esp_tunnel_and_only_esp_outside() {
    let _machine = crate::common::heavy();
    let Some((s, stdout)) = root_script::run(
        "ipsec.sh",
        &["--iters", "64"],
        "network namespaces, strongSwan",
    ) else {
        return;
    };
    assert!(
        s["esp_sa"]
            .as_str()
            .unwrap_or("")
            .contains("INSTALLED, TUNNEL"),
        "{s}"
    );
    let runs = s["runs"].as_array().unwrap();
    for t in ["mpa", "sctp"] {
        for op in ["write", "read", "send"] {
            let r = runs
                .iter()
                .find(|r| r["path"] == "tunnel" && r["transport"] == t && r["op"] == op)
                .unwrap_or_else(|| panic!("no tunnel run {t} {op}: {s}"));
            assert_eq!(r["ok"], true, "{r}");
            assert_eq!(r["bytes"].as_u64(), Some(64 * 65536), "{r}");
            assert_eq!(r["corrupt_bytes"].as_u64(), Some(0), "{r}");
        }
    }
    let tunnel = &s["captures"]["during the tunnel runs"];
    for clear in ["tcp", "sctp", "udp", "other"] {
        assert_eq!(frames(tunnel, clear), 0, "{clear} in clear: {tunnel}");
    }
    // Six runs of 4 MiB each went through: ESP carried at least that.
    assert!(
        tunnel["octets"]["esp"].as_u64().unwrap_or(0) >= 6 * 64 * 65536,
        "{tunnel}"
    );
    let control = &s["captures"]["during the control runs"];
    assert!(frames(control, "tcp") > 0, "control not seen: {control}");
    assert!(frames(control, "udp") > 0, "control not seen: {control}");
    assert_eq!(s["all_pass"], true, "{stdout}");
}
