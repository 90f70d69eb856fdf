//! Received Terminates as `rddp target` reports them: siw's bitfield layout read as
//! siw meant it, and an undecodable one with its raw control word, never as nulls
//! (docs/interop.md). The octets are the ones siw 6.1 sends (see
//! crates/rddp-wire/src/terminate_rx.rs); the siw interop test sees them from siw.

use crate::common;

use common::{Target, raw};
use rddp_wire::rdmap::qn;
use rddp_wire::{Opcode, UntaggedHeader};
use serde_json::{Value, json};

/// Send `body` as a Terminate and return the target's `terminate` event.
fn report(body: &[u8]) -> Value {
    let mut t = Target::start(&[]);
    let (mut p, _) = raw(&t);
    p.send_segment(&common::raw_peer::untagged(
        Opcode::TERMINATE,
        qn::TERMINATE,
        1,
        true,
        body,
    ));
    let v = t.expect("terminate", json!({ "conn": 1, "direction": "received" }));
    t.expect("closed", json!({ "conn": 1 }));
    let nulls: Vec<_> = v
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, x)| x.is_null())
        .collect();
    assert!(nulls.is_empty(), "null fields in {v}");
    v
}

#[test]
fn siw_bitfield_terminate_is_reported_as_siw_meant_it() {
    // siw 6.1, a Send with no receive posted: DDP / untagged / 0x02 "no buffer",
    // M=D=1, written 21 02 03 00, then siw's length and the offending header.
    let mut body = vec![0x21, 0x02, 0x03, 0x00, 0x00, 0x10];
    body.extend_from_slice(&UntaggedHeader::new(true, [0x43, 0, 0, 0, 0], 0, 2, 0).to_bytes());
    let v = report(&body);
    assert_eq!(
        (&v["layer"], &v["etype"], &v["code"]),
        (&json!(1), &json!(2), &json!(2)),
        "{v}"
    );
    assert_eq!(v["layout"], "siw-bitfields", "{v}");
    assert_eq!(v["control_word"], "0x21020300", "{v}");
    assert_eq!(
        v["description"], "DDP invalid MSN: no buffer available",
        "{v}"
    );
    assert!(v["note"].as_str().unwrap().contains("siw"), "{v}");
}

#[test]
fn undecodable_terminate_is_reported_with_its_raw_control_word() {
    // The same control word with 3 octets after it: valid in neither layout.
    let v = report(&[0x21, 0x02, 0x03, 0x00, 0xAA, 0xBB, 0xCC]);
    assert_eq!(v["layout"], "undecodable", "{v}");
    assert_eq!(v["control_word"], "0x21020300", "{v}");
    assert_eq!(v["raw"], "21020300aabbcc", "{v}");
    // Layer/EType/Code as they sit in the raw word at the RFC's positions.
    assert_eq!(
        (&v["layer"], &v["etype"], &v["code"]),
        (&json!(2), &json!(1), &json!(2)),
        "{v}"
    );
    assert!(v["note"].as_str().unwrap().contains("undecodable"), "{v}");
}

#[test]
fn siw_bare_llp_terminate() {
    // siw's MPA CRC error, Layer 2 / EType 0 / 0x02 written as 02 02 00 00 (the RFC
    // reading, 0/2/0x02, is no code at all).
    let v = report(&[0x02, 0x02, 0x00, 0x00]);
    assert_eq!(
        (&v["layer"], &v["etype"], &v["code"]),
        (&json!(2), &json!(0), &json!(2)),
        "{v}"
    );
    assert_eq!(v["layout"], "siw-bitfields", "{v}");
    assert_eq!(v["description"], "MPA CRC error", "{v}");
}

#[test]
fn ambiguous_terminate_is_read_as_the_rfc_and_says_so() {
    // 02 07 00 00: RFC 0/2/0x07 (catastrophic, stream) or siw's 2/0/0x07 (no
    // matching RTR); the RFC wins and the note names the other reading.
    let v = report(&[0x02, 0x07, 0x00, 0x00]);
    assert_eq!(
        (&v["layer"], &v["etype"], &v["code"]),
        (&json!(0), &json!(2), &json!(7)),
        "{v}"
    );
    assert_eq!(v["layout"], "rfc5040", "{v}");
    assert!(v["note"].as_str().unwrap().contains("2/0/0x07"), "{v}");
}

#[test]
fn rfc_terminate_is_reported_plainly() {
    let v = report(&[0x20, 0x02, 0x00, 0x00]);
    assert_eq!(
        (&v["layer"], &v["etype"], &v["code"]),
        (&json!(2), &json!(0), &json!(2)),
        "{v}"
    );
    assert_eq!(v["layout"], "rfc5040", "{v}");
    assert_eq!(v["description"], "MPA CRC error", "{v}");
    assert!(v.get("note").is_none(), "{v}");
}
