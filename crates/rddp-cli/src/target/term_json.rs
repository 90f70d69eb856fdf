//! The `terminate` event's fields for a Terminate the peer sent: what it meant,
//! how it was laid out, and its raw control word, so that no field is ever null
//! (docs/interop.md: siw's bitfield layout, undecodable Terminates).

use rddp_wire::{ReceivedTerminate, TerminateLayout};
use serde_json::{Map, Value, json};

/// `layer`, `etype`, `code` (the meant code; for an undecodable body, the values at
/// the RFC 5040 positions of the raw word; absent if not even a word came),
/// `description`, `layout`, `control_word`, `raw` (hex, at most the first 64 octets),
/// and `note` when the body was not a plain RFC Terminate.
pub(super) fn received(conn: u64, r: &ReceivedTerminate) -> Value {
    let mut m = Map::new();
    m.insert("conn".into(), json!(conn));
    m.insert("direction".into(), json!("received"));
    if let Some(c) = r.code().or_else(|| r.rfc_fields()) {
        m.insert("layer".into(), json!(c.layer));
        m.insert("etype".into(), json!(c.etype));
        m.insert("code".into(), json!(c.code));
        if r.layout != TerminateLayout::Undecodable {
            m.insert("description".into(), json!(c.describe()));
        }
    }
    m.insert("layout".into(), json!(r.layout.name()));
    if let Some(w) = r.control_word {
        m.insert("control_word".into(), json!(format!("{w:#010x}")));
    }
    let hex: String = r.raw.iter().map(|b| format!("{b:02x}")).collect();
    m.insert("raw".into(), json!(hex));
    if let Some(n) = r.note() {
        m.insert("note".into(), json!(n));
    }
    Value::Object(m)
}
