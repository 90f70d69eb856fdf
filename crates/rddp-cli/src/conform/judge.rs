//! What a case's observations mean, without I/O: a Terminate's code and
//! layout against what the RFCs ask, a close, octets read back.

use super::peer::Seen;
use rddp_wire::{DdpHeader, Opcode, RdmapControl, TerminateCode, TerminateLayout, UntaggedHeader};

/// A case's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The peer did what the RFC asks (a note on how, possibly empty).
    Pass(String),
    /// It did not: what was expected, what came.
    Fail { expected: String, got: String },
    /// The case does not apply to this peer, and why.
    NotApplicable(String),
}

impl Verdict {
    pub(super) fn fail(expected: impl Into<String>, got: impl Into<String>) -> Self {
        Self::Fail {
            expected: expected.into(),
            got: got.into(),
        }
    }

    pub(super) fn pass(note: impl Into<String>) -> Self {
        Self::Pass(note.into())
    }

    pub(super) fn na(why: impl Into<String>) -> Self {
        Self::NotApplicable(why.into())
    }

    pub(super) fn is_fail(&self) -> bool {
        matches!(self, Self::Fail { .. })
    }
}

/// "1/1/0x03 (DDP TO wrap)".
pub(super) fn code_name(c: TerminateCode) -> String {
    format!("{}/{}/{:#04x} ({})", c.layer, c.etype, c.code, c.describe())
}

fn codes_name(want: &[TerminateCode]) -> String {
    let names: Vec<String> = want.iter().map(|c| code_name(*c)).collect();
    format!("Terminate {}", names.join(" or "))
}

/// Whether `got` is one of `want`; at Layer 2 (the LLP) any EType will do, as
/// implementations disagree on it (EType 0 or 3).
fn code_matches(got: TerminateCode, want: &[TerminateCode]) -> bool {
    want.iter().any(|w| {
        w.layer == got.layer && w.code == got.code && (w.etype == got.etype || w.layer == 2)
    })
}

/// Codes sent bare (M=D=R=0, RFC 5040 §4.8 and §7): LLP errors, local
/// catastrophic errors, version and opcode errors (the header cannot be trusted).
fn sent_bare(c: TerminateCode) -> bool {
    matches!(
        (c.layer, c.etype, c.code),
        (2, _, _) | (0 | 1, 0, _) | (0, 2, 0x05 | 0x06) | (1, 1, 0x04) | (1, 2, 0x06)
    )
}

/// The Terminate's format (RFC 5040 §4.8): control word in the RFC's layout, its
/// own DDP header QN 2 / MSN 1 / MO 0 / L=1 / opcode 7, M and D for the codes
/// that carry the offending header, and that header copied as we sent it.
pub(super) fn terminate_format(
    h: &UntaggedHeader,
    t: &rddp_wire::ReceivedTerminate,
    offending: Option<&[u8]>,
) -> Result<(), String> {
    if t.layout != TerminateLayout::Rfc5040 {
        return Err(format!(
            "a Terminate not in the RFC 5040 §4.8 layout: {}",
            t.summary()
        ));
    }
    let op = RdmapControl(h.rsvd_ulp[0]).opcode();
    if h.msn != 1 || h.mo != 0 || !h.ctrl.last() || op != Opcode::TERMINATE {
        return Err(format!(
            "a Terminate whose DDP header is not QN 2, MSN 1, MO 0, L=1, opcode 7 \
             (MSN {}, MO {}, L={}, opcode {:#x})",
            h.msn,
            h.mo,
            u8::from(h.ctrl.last()),
            op.0
        ));
    }
    let Some(term) = &t.terminate else {
        return Err("an undecodable Terminate".into());
    };
    if sent_bare(term.code) || matches!((term.code.layer, term.code.etype), (0, 2)) {
        return Ok(());
    }
    if !(term.m && term.d()) {
        return Err(format!(
            "Terminate {} without the offending DDP header (M={}, D={}; RFC 5040 §4.8 \
             asks for it with a DDP or RDMAP protection error)",
            code_name(term.code),
            u8::from(term.m),
            u8::from(term.d())
        ));
    }
    if let (Some(seg), Some(copied)) = (offending, &term.ddp_hdr)
        && let Ok(sent) = DdpHeader::parse(seg)
        && sent != *copied
    {
        return Err(format!(
            "Terminate {} carrying a DDP header that is not the offending one \
             (sent {sent:?}, copied {copied:?})",
            code_name(term.code)
        ));
    }
    Ok(())
}

/// The peer must answer with one of `want` and close (RFC 5040 §5.4: the
/// Terminate is the last message, then the stream is torn down). With
/// `required` false a close without a Terminate passes too (LLP errors, where
/// the Terminate is optional: RFC 5044 §8). `offending` is the segment that
/// must be copied into the Terminate.
pub(super) fn terminate(
    seen: &Seen,
    want: &[TerminateCode],
    required: bool,
    offending: Option<&[u8]>,
) -> Verdict {
    let expected = if required {
        format!("{}, then a close", codes_name(want))
    } else {
        format!("a close, after {} if any", codes_name(want))
    };
    if let Some(b) = &seen.broken {
        return Verdict::fail(expected, b.clone());
    }
    match &seen.terminate {
        Some((h, t)) => {
            let Some(code) = t.code().or_else(|| t.rfc_fields()) else {
                return Verdict::fail(expected, "an empty Terminate");
            };
            if !code_matches(code, want) {
                return Verdict::fail(expected, format!("Terminate {}", code_name(code)));
            }
            if let Err(e) = terminate_format(h, t, offending) {
                return Verdict::fail(expected, e);
            }
            if !seen.closed {
                return Verdict::fail(
                    expected,
                    format!(
                        "Terminate {}, but the connection stayed open",
                        code_name(code)
                    ),
                );
            }
            Verdict::pass(format!("Terminate {}", code_name(code)))
        }
        None if seen.closed && !required => Verdict::pass("closed without a Terminate"),
        None if seen.closed => Verdict::fail(expected, "a close without a Terminate"),
        None => Verdict::fail(expected, "neither a Terminate nor a close in time"),
    }
}

/// A connection that must have stayed up: no Terminate, no close, and the
/// probe (a zero-length Read) answered.
pub(super) fn alive(seen: &Seen, probed: bool, what: &str) -> Verdict {
    let expected = format!("{what} accepted: no Terminate, the connection carries on");
    if let Some(b) = &seen.broken {
        return Verdict::fail(expected, b.clone());
    }
    if let Some((_, t)) = &seen.terminate {
        return Verdict::fail(expected, format!("Terminate {}", t.summary()));
    }
    if seen.closed {
        return Verdict::fail(expected, "the peer closed");
    }
    if !probed {
        return Verdict::fail(
            expected,
            "no answer to a zero-length Read afterwards (in time)",
        );
    }
    Verdict::pass("")
}

/// Octets read back after a failed operation: `before` must still be there.
pub(super) fn unchanged(before: &[u8], after: &[u8]) -> Result<(), String> {
    if before == after {
        return Ok(());
    }
    let at = before
        .iter()
        .zip(after)
        .position(|(a, b)| a != b)
        .unwrap_or(0);
    Err(format!(
        "octets placed although the segment was refused (read back differs from \
         octet {at} on: {:02x?})",
        &after[at..after.len().min(at + 8)]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rddp_wire::rdmap::qn;
    use rddp_wire::{ReceivedTerminate, TaggedHeader, Terminate};

    fn term_header() -> UntaggedHeader {
        let rsvd = [RdmapControl::new(Opcode::TERMINATE).0, 0, 0, 0, 0];
        UntaggedHeader::new(true, rsvd, qn::TERMINATE, 1, 0)
    }

    fn seen_with(t: &Terminate, closed: bool) -> Seen {
        let body = t.to_vec().unwrap();
        Seen {
            terminate: Some((term_header(), ReceivedTerminate::decode(&body))),
            closed,
            ..Seen::default()
        }
    }

    fn write_seg() -> Vec<u8> {
        let mut s = TaggedHeader::new(true, 0, 0x100, u64::MAX - 3)
            .to_bytes()
            .to_vec();
        s.extend_from_slice(b"12345678");
        s
    }

    #[test]
    fn right_code_with_its_header_passes() {
        let seg = write_seg();
        let h = DdpHeader::parse(&seg).unwrap();
        let t = Terminate::with_headers(TerminateCode::DDP_TO_WRAP, 22, h, None);
        let v = terminate(
            &seen_with(&t, true),
            &[TerminateCode::DDP_TO_WRAP],
            true,
            Some(&seg),
        );
        assert!(matches!(v, Verdict::Pass(_)), "{v:?}");
    }

    #[test]
    fn wrong_code_fails_naming_both() {
        let seg = write_seg();
        let h = DdpHeader::parse(&seg).unwrap();
        let t = Terminate::with_headers(TerminateCode::DDP_BASE_BOUNDS, 22, h, None);
        let v = terminate(
            &seen_with(&t, true),
            &[TerminateCode::DDP_TO_WRAP],
            true,
            Some(&seg),
        );
        let Verdict::Fail { expected, got } = v else {
            panic!("{v:?}")
        };
        assert!(expected.contains("1/1/0x03"), "{expected}");
        assert!(got.contains("1/1/0x01"), "{got}");
    }

    #[test]
    fn missing_header_and_open_connection_fail() {
        let t = Terminate::bare(TerminateCode::DDP_TO_WRAP);
        let v = terminate(
            &seen_with(&t, true),
            &[TerminateCode::DDP_TO_WRAP],
            true,
            None,
        );
        assert!(v.is_fail(), "{v:?}");
        let seg = write_seg();
        let h = DdpHeader::parse(&seg).unwrap();
        let t = Terminate::with_headers(TerminateCode::DDP_TO_WRAP, 22, h, None);
        let v = terminate(
            &seen_with(&t, false),
            &[TerminateCode::DDP_TO_WRAP],
            true,
            None,
        );
        assert!(v.is_fail(), "{v:?}");
    }

    #[test]
    fn siw_layout_fails_the_format() {
        // siw's bitfields: MPA CRC error written 02 02 00 00.
        let s = Seen {
            terminate: Some((term_header(), ReceivedTerminate::decode(&[2, 2, 0, 0]))),
            closed: true,
            ..Seen::default()
        };
        let v = terminate(&s, &[TerminateCode::MPA_CRC_ERROR], false, None);
        let Verdict::Fail { got, .. } = v else {
            panic!("{v:?}")
        };
        assert!(got.contains("RFC 5040 §4.8 layout"), "{got}");
    }

    #[test]
    fn llp_layer_takes_any_etype_and_a_bare_close() {
        let t = Terminate::bare(TerminateCode {
            layer: 2,
            etype: 3,
            code: 2,
        });
        let v = terminate(
            &seen_with(&t, true),
            &[TerminateCode::MPA_CRC_ERROR],
            false,
            None,
        );
        assert!(matches!(v, Verdict::Pass(_)), "{v:?}");
        let closed = Seen {
            closed: true,
            ..Seen::default()
        };
        let v = terminate(&closed, &[TerminateCode::MPA_CRC_ERROR], false, None);
        assert!(matches!(v, Verdict::Pass(_)), "{v:?}");
        let v = terminate(&closed, &[TerminateCode::DDP_TO_WRAP], true, None);
        assert!(v.is_fail(), "{v:?}");
    }

    #[test]
    fn placed_octets_are_found() {
        assert!(unchanged(b"abcd", b"abcd").is_ok());
        let e = unchanged(b"abcd", b"abXX").unwrap_err();
        assert!(e.contains("octet 2"), "{e}");
    }
}
