//! Real network faults between two network namespaces (docs/faults.md): runs
//! `scripts/faults.sh --short` with this build's `rddp` and checks its results
//! here, from the numbers each run reported (the client's and server's JSON, the
//! impairing bridge's counters), not from the script's own verdict alone.
//!
//! Needs root (network namespaces). Without root it is skipped with a message,
//! except under CI=true, where it fails: CI runs as root and must run it.

use crate::common;

use common::root_script;

use serde_json::Value;

const MIB16: u64 = 16 << 20;

fn n(row: &Value, k: &str) -> u64 {
    row[k]
        .as_u64()
        .unwrap_or_else(|| panic!("no count {k} in {row}"))
}

/// The one row of `rows` with this case, kind, transport and operation.
fn row<'a>(rows: &'a [Value], case: &str, kind: &str, transport: &str, op: &str) -> &'a Value {
    let found: Vec<&Value> = rows
        .iter()
        .filter(|r| {
            r["case"] == case && r["kind"] == kind && r["transport"] == transport && r["op"] == op
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "row {case} {kind} {transport} {op} in {rows:#?}"
    );
    found[0]
}

#[test]
fn short_fault_run_through_loss_duplication_reordering_and_corruption() {
    let _machine = crate::common::heavy();
    let Some((summary, stdout)) = root_script::run("faults.sh", &["--short"], "network namespaces")
    else {
        return;
    };
    let rows = summary["rows"].as_array().expect("rows").as_slice();

    for op in ["write", "read", "send"] {
        // Loss, duplication and reordering over MPA: byte-exact, and the bridge
        // did impair the run.
        let r = row(rows, "loss+dup+reorder", "clean", "mpa", op);
        assert_eq!(n(r, "completed"), n(r, "runs"), "{r}");
        assert_eq!(n(r, "octets_verified"), n(r, "runs") * MIB16, "{r}");
        assert_eq!(n(r, "corrupt_delivered"), 0, "{r}");
        for k in ["lost", "dup", "reordered"] {
            assert!(n(r, k) > 0, "the bridge {k} nothing: {r}");
        }

        // Corruption past the TCP checksum, CRC on: each run's corrupted FPDU
        // reached MPA and was refused, the refused one is the one the bridge
        // hit, Terminate 2/0/0x02 was on the wire, nothing corrupt delivered.
        let r = row(rows, "corrupt 0.1%", "crc-on", "mpa", op);
        let runs = n(r, "runs");
        assert!(runs >= 1, "{r}");
        assert_eq!(n(r, "reached"), runs, "{r}");
        assert_eq!(n(r, "refused"), n(r, "reached"), "{r}");
        assert_eq!(n(r, "index_match"), runs, "{r}");
        assert_eq!(r["wire_terminates"]["2/0/0x02"].as_u64(), Some(runs), "{r}");
        assert_eq!(n(r, "corrupt_delivered"), 0, "{r}");

        // DDP over SCTP through all of it, corruption included: byte-exact.
        let r = row(rows, "loss+dup+reorder+corrupt", "clean", "sctp", op);
        assert_eq!(n(r, "completed"), n(r, "runs"), "{r}");
        assert_eq!(n(r, "octets_verified"), n(r, "runs") * MIB16, "{r}");
        assert_eq!(n(r, "corrupt_delivered"), 0, "{r}");
        for k in ["lost", "dup", "reordered", "corrupted"] {
            assert!(n(r, k) > 0, "the bridge {k} nothing: {r}");
        }
    }
    // CRC off: the damage gets through, octet for octet what the bridge flipped
    // in payloads (verify counts one octet per flipped bit).
    let r = row(rows, "corrupt 0.1%", "crc-off", "mpa", "send");
    assert!(n(r, "payload_hits") > 0, "{r}");
    if n(r, "completed") == n(r, "runs") {
        assert_eq!(n(r, "corrupt_delivered"), n(r, "payload_hits"), "{r}");
    } else {
        // A flip in a header (nothing checks a CRC) ended the run: the
        // receiver refused that segment with a Terminate, and payloads behind
        // it were never delivered to be counted (1 run in about 10).
        let endings = r["endings"].as_object().expect("endings");
        assert!(
            endings.keys().all(|k| k.starts_with("sent ")),
            "a run that did not complete ended otherwise than by the receiver's Terminate: {r}"
        );
        assert!(!r["wire_terminates"].as_object().unwrap().is_empty(), "{r}");
    }
    assert_eq!(summary["all_pass"], true, "{stdout}");
}
