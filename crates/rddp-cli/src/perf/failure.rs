//! What a failed connection reports with `--json`: why it ended (the Terminate
//! sent or received, or the close) and how many FPDUs the MPA CRC refused, so a
//! fault test (scripts/faults.sh) can count refusals without parsing messages.

use rddp::{AsyncEvent, TerminateCode};
use serde_json::{Value, json};

/// `layer/etype/0xcode`, as the RFCs and the README write a Terminate code.
pub(crate) fn code_str(c: &TerminateCode) -> String {
    format!("{}/{}/{:#04x}", c.layer, c.etype, c.code)
}

/// FPDUs this side refused for their CRC: 2/0/0x02 sent. RFC 5044 §7 ends the
/// connection at the first, so this is 0 or 1 per connection. (An impossible
/// ULPDU_Length, whose CRC cannot even be found, is refused with the same code.)
pub(crate) fn crc_refused(ev: Option<&AsyncEvent>) -> u64 {
    u64::from(matches!(
        ev,
        Some(AsyncEvent::TerminateSent { code, .. }) if *code == TerminateCode::MPA_CRC_ERROR
    ))
}

/// The JSON object of one failed connection: `error`, `crc_refused`, and
/// `terminate_sent` + `terminate_detail`, `terminate_received`, or `closed`.
pub(crate) fn json(error: &str, ev: Option<&AsyncEvent>) -> Value {
    let mut o = json!({ "error": error, "crc_refused": crc_refused(ev) });
    match ev {
        Some(AsyncEvent::TerminateSent { code, detail }) => {
            o["terminate_sent"] = code_str(code).into();
            o["terminate_detail"] = detail.as_str().into();
        }
        Some(AsyncEvent::TerminateReceived { code, .. }) => {
            o["terminate_received"] = code.as_ref().map_or("malformed".into(), code_str).into();
        }
        Some(AsyncEvent::Closed { graceful }) => {
            o["closed"] = if *graceful { "graceful" } else { "lost" }.into();
        }
        None => {}
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crc_refusal_is_counted_and_named() {
        let ev = AsyncEvent::TerminateSent {
            code: TerminateCode::MPA_CRC_ERROR,
            detail: "MPA framing: MPA CRC mismatch (FPDU 7 after setup)".into(),
        };
        let v = json("boom", Some(&ev));
        assert_eq!(v["crc_refused"], 1);
        assert_eq!(v["terminate_sent"], "2/0/0x02");
        assert!(v["terminate_detail"].as_str().unwrap().contains("FPDU 7"));
        assert_eq!(v["error"], "boom");
    }

    #[test]
    fn other_endings_refuse_nothing() {
        let body = [0x20, 0x02, 0, 0];
        let got = AsyncEvent::TerminateReceived {
            code: Some(TerminateCode::MPA_CRC_ERROR),
            terminate: None,
            received: Box::new(rddp_wire::ReceivedTerminate::decode(&body)),
        };
        let v = json("x", Some(&got));
        assert_eq!(
            (v["crc_refused"].as_u64(), v["terminate_received"].as_str()),
            (Some(0), Some("2/0/0x02"))
        );
        let other = AsyncEvent::TerminateSent {
            code: TerminateCode::DDP_BASE_BOUNDS,
            detail: String::new(),
        };
        assert_eq!(crc_refused(Some(&other)), 0);
        assert_eq!(
            json("x", Some(&AsyncEvent::Closed { graceful: false }))["closed"],
            "lost"
        );
        assert_eq!(json("x", None)["crc_refused"], 0);
    }
}
