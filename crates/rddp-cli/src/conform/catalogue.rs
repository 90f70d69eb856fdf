//! The cases: each names its RFC section, says what the peer must do, sends
//! what it must send (within the case's bounds) and judges what came back.

use super::ConformTransport;
use super::judge::{self, Verdict};
use super::peer::{self, Buffer, Seen};
use super::run::Ctx;
use super::sessions;
use rddp_wire::rdmap::qn;
use rddp_wire::{MpaFrame, Opcode, TerminateCode as T, crc32c};
use std::time::{Duration, Instant};

type Script = fn(&Ctx) -> Result<Verdict, String>;

/// The transports a case applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Over {
    /// MPA/TCP only: its framing, its setup (RFC 5044, RFC 6581).
    Mpa,
    /// DDP over SCTP only: the adaptation's session rules (RFC 5043).
    Sctp,
    /// Either: DDP and RDMAP rules, which do not depend on the LLP.
    Both,
}

/// One case of the catalogue.
pub(super) struct Case {
    pub id: &'static str,
    pub rfc: &'static str,
    /// What the peer must do.
    pub expect: &'static str,
    pub run: Script,
    pub over: Over,
}

impl Case {
    /// `Err` with why, when the case does not apply to `t`.
    pub(super) fn applies(&self, t: ConformTransport) -> Result<(), &'static str> {
        match (self.over, t) {
            (Over::Both, _)
            | (Over::Mpa, ConformTransport::Mpa)
            | (Over::Sctp, ConformTransport::Sctp) => Ok(()),
            (Over::Mpa, ConformTransport::Sctp) => {
                Err("MPA/TCP only: DDP over SCTP has no MPA (RFC 5043)")
            }
            (Over::Sctp, ConformTransport::Mpa) => Err("DDP over SCTP only (RFC 5043)"),
        }
    }
}

pub(super) static CASES: &[Case] = &[
    Case {
        id: "mpa.rev1",
        rfc: "RFC 5044 §7.1.1",
        expect: "a Rev 1 Request is accepted with a Rev 1 Reply; FPDU mode works",
        run: rev1,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.rev2",
        rfc: "RFC 6581 §4",
        expect: "a Rev 2 Request (E=1, no peer-to-peer) is answered with Rev 2, E=1, A=0 \
                 and no RTR type (or Rev 1: N/A)",
        run: rev2,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.crc-off",
        rfc: "RFC 5044 §7.1.1",
        expect: "with C=0 asked, the Reply's C bit decides CRC for both directions",
        run: crc_off,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.markers",
        rfc: "RFC 5044 §7.1.1, §4.3",
        expect: "M=1 asked: the peer's FPDUs carry Markers (or it refuses with R=1: N/A)",
        run: markers,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.rtr-write",
        rfc: "RFC 6581 §4, §5",
        expect: "only the Write RTR offered: the Reply picks it (A=1, C) or declines \
                 peer-to-peer (A=0); the zero-length Write RTR is absorbed",
        run: rtr_write,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.rtr-read",
        rfc: "RFC 6581 §4, §5",
        expect: "only the Read RTR offered: the Reply picks it (A=1, D, IRD >= 1) or \
                 declines; the zero-length Read is answered",
        run: rtr_read,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.rtr-send-only",
        rfc: "RFC 6581 §4, §5",
        expect: "only the Send RTR offered: the Reply never picks a type not offered \
                 (it picks B, declines, or refuses)",
        run: rtr_send_only,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.ird-ord",
        rfc: "RFC 6581 §4",
        expect: "IRD 2 / ORD 4 offered: the Reply's ORD is at most our IRD (2)",
        run: ird_ord,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.pd-512",
        rfc: "RFC 5044 §7.1.1",
        expect: "512 octets of private data (the most allowed): a well-formed Reply \
                 (accepting or R=1)",
        run: pd_512,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.pd-513",
        rfc: "RFC 5044 §7.1.1",
        expect: "PD_Length 513: not accepted; the peer closes (a Reply with R=1 first \
                 is allowed)",
        run: pd_513,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.bad-key",
        rfc: "RFC 5044 §7.1.1",
        expect: "a Request with a wrong key: not accepted; the peer closes",
        run: bad_key,
        over: Over::Mpa,
    },
    Case {
        id: "mpa.no-request",
        rfc: "RFC 5044 §7.1.2",
        expect: "an initiator that never sends its Request is closed in bounded time \
                 (--setup-wait)",
        run: no_request,
        over: Over::Mpa,
    },
    Case {
        id: "fpdu.bad-crc",
        rfc: "RFC 5044 §4.4, §8",
        expect: "an FPDU with a bad CRC: Terminate 2/*/0x02 if any, close (octets placed \
                 before the check are reported)",
        run: bad_crc,
        over: Over::Mpa,
    },
    Case {
        id: "fpdu.bad-ulpdu-length",
        rfc: "RFC 5044 §4.1, §8",
        expect: "ULPDU_Length 6 (shorter than any DDP header): a close, a Layer 2 \
                 Terminate if any",
        run: bad_ulpdu_length,
        over: Over::Mpa,
    },
    Case {
        id: "ddp.invalid-stag",
        rfc: "RFC 5041 §7.1, §7.2",
        expect: "a Write to an STag that names nothing: Terminate 1/1/0x00, close",
        run: invalid_stag,
        over: Over::Both,
    },
    Case {
        id: "ddp.base-bounds",
        rfc: "RFC 5041 §7.1, §7.2",
        expect: "a Write across the end of the buffer: Terminate 1/1/0x01 with the \
                 offending header, nothing placed, close",
        run: base_bounds,
        over: Over::Both,
    },
    Case {
        id: "ddp.to-wrap",
        rfc: "RFC 5041 §7.1, §7.2",
        expect: "a Write whose TO + length wraps 2^64: Terminate 1/1/0x03, close",
        run: to_wrap,
        over: Over::Both,
    },
    Case {
        id: "ddp.bad-qn",
        rfc: "RFC 5041 §7.1, §7.2",
        expect: "an untagged segment on QN 5: Terminate 1/2/0x01, close",
        run: bad_qn,
        over: Over::Both,
    },
    Case {
        id: "ddp.bad-msn",
        rfc: "RFC 5041 §5.3, §7.2",
        expect: "a Send with MSN 2^31 + 1: Terminate 1/2/0x03 (or 0x02), close",
        run: bad_msn,
        over: Over::Both,
    },
    Case {
        id: "ddp.too-long",
        rfc: "RFC 5041 §7.2",
        expect: "a 64 KiB Send into smaller receive buffers: Terminate 1/2/0x05, close \
                 (N/A if the buffers hold it)",
        run: too_long,
        over: Over::Both,
    },
    Case {
        id: "ddp.zero-length",
        rfc: "RFC 5041 §5.3, RFC 5040 §5.1",
        expect: "a zero-length Send and a zero-length Write (to an STag never checked) \
                 are accepted",
        run: zero_length,
        over: Over::Both,
    },
    Case {
        id: "rdmap.bad-opcode",
        rfc: "RFC 5040 §4.2, §7",
        expect: "an untagged message with reserved opcode 0x8: Terminate 0/2/0x06, close",
        run: bad_opcode,
        over: Over::Both,
    },
    Case {
        id: "rdmap.terminate-format",
        rfc: "RFC 5040 §4.8",
        expect: "the Terminate for a refused Write: RFC layout, QN 2 / MSN 1 / MO 0, \
                 M=D=1, the Write's header copied, its segment length",
        run: terminate_format,
        over: Over::Both,
    },
    Case {
        id: "rdmap.read-bounds",
        rfc: "RFC 5040 §5.2, §4.8",
        expect: "a Read Request beyond the buffer: Terminate 0/1/0x01 with the DDP and \
                 Read Request headers, close",
        run: read_bounds,
        over: Over::Both,
    },
    Case {
        id: "rdmap.read-beyond-ird",
        rfc: "RFC 5040 §5.2, RFC 6581 §4",
        expect: "8 large Reads at once past IRD 1: a Terminate (0/2/0x07), close (N/A if \
                 the peer never had more than IRD outstanding)",
        run: read_beyond_ird,
        over: Over::Mpa,
    },
    Case {
        id: "rdmap.send-invalidate",
        rfc: "RFC 5040 §5.3, §7",
        expect: "Send with Invalidate of the peer's buffer: refused (0/1/0x09 or 0/2/0x09) \
                 or the STag is invalid afterwards",
        run: send_invalidate,
        over: Over::Both,
    },
    Case {
        id: "rdmap.send-invalidate-unknown",
        rfc: "RFC 5040 §5.3, §7",
        expect: "Send with Invalidate of an STag that names nothing: Terminate 0/1/0x09 \
                 or 0/2/0x09, close",
        run: send_invalidate_unknown,
        over: Over::Both,
    },
    Case {
        id: "sctp.adaptation",
        rfc: "RFC 5043 §5.1",
        expect: "the peer's INIT-ACK carries the Adaptation Layer Indication 0x00000001 \
                 (DDP); the association has as many inbound as outbound streams",
        run: sessions::adaptation,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.accept",
        rfc: "RFC 5043 (Session Control)",
        expect: "an Initiate is answered with Accept, DDP-SSN 0, every chunk unordered \
                 and the DDP-SSNs without gaps; the session then carries a zero-length Read",
        run: sessions::accept,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.pd-512",
        rfc: "RFC 5043 (Session Control)",
        expect: "an Initiate with 512 octets of private data (the most allowed): Accept or \
                 Reject",
        run: sessions::pd_512,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.pd-513",
        rfc: "RFC 5043 (Session Control)",
        expect: "an Initiate with 513 octets of private data: Session Terminate (not \
                 Accept, not Reject); the association carries on",
        run: sessions::pd_513,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.stray-segment",
        rfc: "RFC 5043 (Session Control)",
        expect: "a Write on a stream without a session: one Session Terminate there, \
                 nothing placed, the other session carries on",
        run: sessions::stray_segment,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.before-accept",
        rfc: "RFC 5043 (Session Control)",
        expect: "a Write right behind our Initiate, before the Accept: the session \
                 terminated and nothing placed (or, Accept sent first, the Write placed)",
        run: sessions::before_accept,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.after-terminate",
        rfc: "RFC 5043 (Session Control)",
        expect: "a Write after our Session Terminate: nothing placed, no DDP Segment in \
                 answer",
        run: sessions::after_terminate,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.second-initiate",
        rfc: "RFC 5043 (Session Control)",
        expect: "a second Initiate in an accepted session: Session Terminate",
        run: sessions::second_initiate,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.bad-function",
        rfc: "RFC 5043 (Session Control)",
        expect: "a Session Control with an unassigned function code (0xFFF0): Session \
                 Terminate",
        run: sessions::bad_function,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.terminate-reuse",
        rfc: "RFC 5043 (Session Control)",
        expect: "our Session Terminate ends the session (no DDP Segment after it); once \
                 nothing is outstanding the stream takes a new Initiate",
        run: sessions::terminate_reuse,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.max-segment",
        rfc: "RFC 5043 (Segment Chunk)",
        expect: "a Write that fills one unfragmented chunk is placed whole",
        run: sessions::max_segment,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.over-max-segment",
        rfc: "RFC 5043 (Segment Chunk)",
        expect: "a Write one octet above it (SCTP fragments the chunk): its session \
                 terminated and nothing placed, or (a larger maximum) placed whole",
        run: sessions::over_max_segment,
        over: Over::Sctp,
    },
];

/// An STag that names no buffer of the peer (not the advertised one).
fn bogus_stag(buf: Option<Buffer>) -> u32 {
    match buf {
        Some(b) if b.stag == 0xFFFF_FF00 => 0xFFFF_FE00,
        _ => 0xFFFF_FF00,
    }
}

fn need_buffer(buf: Option<Buffer>, min: u32) -> Result<Buffer, Verdict> {
    match buf {
        Some(b) if b.len >= min => Ok(b),
        Some(b) => Err(Verdict::na(format!(
            "the peer's buffer has {} octets; the case needs {min}",
            b.len
        ))),
        None => Err(Verdict::na(
            "the peer advertised no buffer (give --buffer STAG:TO:LEN)",
        )),
    }
}

macro_rules! buffer_or_na {
    ($b:expr, $min:expr) => {
        match need_buffer($b, $min) {
            Ok(b) => b,
            Err(v) => return Ok(v),
        }
    };
}

/// Send `req`; the accepted connection, or the verdict that ends the case.
fn setup(
    ctx: &Ctx,
    req: &MpaFrame,
    deadline: Instant,
) -> Result<Result<peer::Peer, Verdict>, String> {
    let bytes = req.to_vec().map_err(|e| e.to_string())?;
    let (sock, reply) = ctx.open(&bytes, deadline)?;
    Ok(ctx
        .accepted(sock, req, reply, deadline)
        .map_err(|got| Verdict::fail("an accepting Reply", got)))
}

/// First FPDU, then the zero-length Read probe: the connection works.
fn works(
    mut p: peer::Peer,
    deadline: Instant,
    what: &str,
    note: String,
) -> Result<Verdict, String> {
    p.start()?;
    let ok = p.probe(deadline)?;
    let v = match judge::alive(&p.seen, ok, what) {
        Verdict::Pass(_) => Verdict::pass(note),
        v => v,
    };
    p.close();
    Ok(v)
}

fn rev1(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let req = peer::request(1, false, true, None, Vec::new());
    let p = match setup(ctx, &req, d)? {
        Ok(p) => p,
        Err(v) => return Ok(v),
    };
    if p.reply.rev != 1 || p.reply.enhanced.is_some() {
        return Ok(Verdict::fail(
            "a Rev 1 Reply without the enhanced block",
            format!(
                "Rev {}, E={}",
                p.reply.rev,
                u8::from(p.reply.flags.enhanced())
            ),
        ));
    }
    works(p, d, "a Rev 1 connection", String::new())
}

fn rev2(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let req = peer::request(
        2,
        false,
        true,
        Some(peer::block(16, 16, false, false, false)),
        vec![],
    );
    let p = match setup(ctx, &req, d)? {
        Ok(p) => p,
        Err(v) => return Ok(v),
    };
    if p.reply.rev == 1 {
        p.close();
        return Ok(Verdict::na(
            "the peer answers Rev 2 with Rev 1 (an RFC 5044 peer)",
        ));
    }
    let want = "Rev 2, E=1, A=0, no RTR type, ORD <= 16";
    let Some(b) = p.reply.enhanced else {
        return Ok(Verdict::fail(
            want,
            format!("Rev {} without the enhanced block", p.reply.rev),
        ));
    };
    if b.p2p || b.rtr_send || b.rtr_write || b.rtr_read || (b.ord > 16 && b.ord != 0x3FFF) {
        return Ok(Verdict::fail(want, format!("{b:?}")));
    }
    works(
        p,
        d,
        "a Rev 2 connection",
        format!("IRD {}, ORD {}", b.ird, b.ord),
    )
}

fn crc_off(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let req = peer::request(1, false, false, None, Vec::new());
    let p = match setup(ctx, &req, d)? {
        Ok(p) => p,
        Err(v) => return Ok(v),
    };
    let note = if p.crc() {
        "the peer asked for CRC"
    } else {
        "no CRC"
    };
    works(
        p,
        d,
        "a connection with CRC as the Reply decided",
        note.into(),
    )
}

fn markers(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let req = peer::request(1, true, true, None, Vec::new());
    let bytes = req.to_vec().map_err(|e| e.to_string())?;
    let (sock, reply) = ctx.open(&bytes, d)?;
    if let peer::SetupReply::Reply(r) = &reply
        && r.flags.reject()
    {
        return Ok(Verdict::na("the peer refuses Markers (Reply R=1)"));
    }
    let p = match ctx.accepted(sock, &req, reply, d) {
        Ok(p) => p,
        Err(got) => return Ok(Verdict::fail("an accepting Reply or R=1", got)),
    };
    works(p, d, "FPDUs with Markers towards us", String::new())
}

/// The RTR cases: `offer` (send, write, read); `ok` says whether the Reply's
/// choice is allowed.
fn rtr(ctx: &Ctx, offer: (bool, bool, bool)) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let (s, w, r) = offer;
    let req = peer::request(2, false, true, Some(peer::block(16, 16, s, w, r)), vec![]);
    let bytes = req.to_vec().map_err(|e| e.to_string())?;
    let (sock, reply) = ctx.open(&bytes, d)?;
    match &reply {
        peer::SetupReply::Reply(x) if x.flags.reject() => {
            return Ok(Verdict::pass("refused with R=1"));
        }
        peer::SetupReply::Closed if s && !w && !r => {
            return Ok(Verdict::pass("refused (closed)"));
        }
        _ => {}
    }
    let p = match ctx.accepted(sock, &req, reply, d) {
        Ok(p) => p,
        Err(got) => return Ok(Verdict::fail("an accepting Reply", got)),
    };
    let Some(b) = p.reply.enhanced else {
        return Ok(Verdict::na(format!(
            "Rev {} Reply: no RFC 6581 negotiation",
            p.reply.rev
        )));
    };
    let types = (b.rtr_send, b.rtr_write, b.rtr_read);
    let chosen = u8::from(b.rtr_send) + u8::from(b.rtr_write) + u8::from(b.rtr_read);
    let want = "A=0 and no RTR type, or A=1 and exactly one RTR type that was offered";
    if !b.p2p {
        if chosen > 0 {
            return Ok(Verdict::fail(want, format!("A=0 with RTR types {types:?}")));
        }
        return works(p, d, "the connection", "peer-to-peer declined".into());
    }
    let offered_ok = (!b.rtr_send || s) && (!b.rtr_write || w) && (!b.rtr_read || r);
    if chosen != 1 || !offered_ok {
        return Ok(Verdict::fail(
            want,
            format!("A=1 with (B, C, D) = {types:?}, offered {offer:?}"),
        ));
    }
    if b.rtr_read && b.ird == 0 {
        return Ok(Verdict::fail("IRD >= 1 with the Read RTR", "IRD 0"));
    }
    let name = if b.rtr_write {
        "Write"
    } else if b.rtr_read {
        "Read"
    } else {
        "Send"
    };
    works(p, d, "the RTR", format!("the {name} RTR chosen"))
}

fn rtr_write(ctx: &Ctx) -> Result<Verdict, String> {
    rtr(ctx, (false, true, false))
}

fn rtr_read(ctx: &Ctx) -> Result<Verdict, String> {
    rtr(ctx, (false, false, true))
}

fn rtr_send_only(ctx: &Ctx) -> Result<Verdict, String> {
    rtr(ctx, (true, false, false))
}

fn ird_ord(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let req = peer::request(
        2,
        false,
        true,
        Some(peer::block(2, 4, false, false, false)),
        vec![],
    );
    let p = match setup(ctx, &req, d)? {
        Ok(p) => p,
        Err(v) => return Ok(v),
    };
    let Some(b) = p.reply.enhanced else {
        p.close();
        return Ok(Verdict::na("no enhanced block in the Reply (Rev 1 peer)"));
    };
    if b.ord > 2 && b.ord != 0x3FFF {
        return Ok(Verdict::fail(
            "ORD <= 2 (our IRD)",
            format!("ORD {}", b.ord),
        ));
    }
    works(
        p,
        d,
        "the connection",
        format!("IRD {}, ORD {}", b.ird, b.ord),
    )
}

fn pd_512(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let req = peer::request(1, false, true, None, vec![0x50; 512]);
    let bytes = req.to_vec().map_err(|e| e.to_string())?;
    let (sock, reply) = ctx.open(&bytes, d)?;
    Ok(match reply {
        peer::SetupReply::Reply(r) if r.flags.reject() => Verdict::pass("refused with R=1"),
        r @ peer::SetupReply::Reply(_) => {
            // Accepted: leave as a well-behaved initiator would.
            if let Ok(p) = ctx.accepted(sock, &req, r, d) {
                p.close();
            }
            Verdict::pass("accepted")
        }
        peer::SetupReply::Closed => Verdict::fail("a Reply", "a close"),
        peer::SetupReply::Silent => Verdict::fail("a Reply", "nothing in time"),
        peer::SetupReply::Bad(e) => Verdict::fail("a Reply", e),
    })
}

/// A Request the peer must refuse: a close (after R=1, if it replies at all).
fn refused(ctx: &Ctx, bytes: &[u8]) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let (mut sock, reply) = ctx.open(bytes, d)?;
    let want = "no accepting Reply, then a close";
    Ok(match reply {
        peer::SetupReply::Reply(r) if !r.flags.reject() => {
            Verdict::fail(want, format!("an accepting Reply (Rev {})", r.rev))
        }
        peer::SetupReply::Reply(_) if peer::wait_close(&mut sock, d) => {
            Verdict::pass("R=1, then a close")
        }
        peer::SetupReply::Reply(_) => Verdict::fail(want, "R=1, but the connection stayed open"),
        peer::SetupReply::Closed => Verdict::pass("closed"),
        peer::SetupReply::Silent => Verdict::fail(want, "the connection stayed open, silent"),
        peer::SetupReply::Bad(e) => Verdict::fail(want, format!("a bad Reply: {e}")),
    })
}

fn pd_513(ctx: &Ctx) -> Result<Verdict, String> {
    // Built by hand: rddp-wire refuses to emit it.
    let mut b = rddp_wire::mpa::frame::KEY_REQ.to_vec();
    b.extend_from_slice(&[0x40, 1, 0x02, 0x01]);
    b.resize(20 + 513, 0x50);
    refused(ctx, &b)
}

fn bad_key(ctx: &Ctx) -> Result<Verdict, String> {
    let mut b = peer::request(1, false, true, None, Vec::new())
        .to_vec()
        .map_err(|e| e.to_string())?;
    b[9] = b'x';
    refused(ctx, &b)
}

fn no_request(ctx: &Ctx) -> Result<Verdict, String> {
    let d = Instant::now() + ctx.setup_wait;
    let mut sock = peer::dial(ctx.addr, d)?;
    Ok(if peer::wait_close(&mut sock, d) {
        Verdict::pass("closed")
    } else {
        Verdict::fail(
            format!("a close within {:?}", ctx.setup_wait),
            "the connection stayed open",
        )
    })
}

/// A Terminate case: `seg` goes out (as one FPDU, or `raw` as built), then
/// the peer must answer with one of `want` and close.
fn terminated(
    mut c: super::run::Conn,
    seg: &[u8],
    want: &[T],
    offending: bool,
) -> Result<(Verdict, Seen), String> {
    c.peer.send_segment(seg)?;
    c.peer.read_to_end()?;
    let v = judge::terminate(&c.peer.seen, want, true, offending.then_some(seg));
    let seen = std::mem::take(&mut c.peer.seen);
    c.peer.close();
    Ok((v, seen))
}

/// After a refused Write at `off`: were the `before` octets left alone?
fn nothing_placed(
    ctx: &Ctx,
    v: Verdict,
    buf: Buffer,
    off: u64,
    before: &[u8],
) -> Result<Verdict, String> {
    let Verdict::Pass(note) = v else {
        return Ok(v);
    };
    match ctx.read_back(buf, off, before.len() as u32)? {
        Ok(after) => Ok(match judge::unchanged(before, &after) {
            Ok(()) => Verdict::pass(format!("{note}; nothing placed (read back)")),
            Err(e) => Verdict::fail("nothing placed", e),
        }),
        Err(why) => Ok(Verdict::pass(format!("{note}; {why}"))),
    }
}

fn bad_crc(ctx: &Ctx) -> Result<Verdict, String> {
    let mut c = ctx.connect(ctx.deadline())?;
    let fill = [0x5A; 8];
    let buf = c.buf;
    let seg = match buf {
        Some(b) if b.len >= 8 => {
            c.peer.write(b.stag, b.to, &fill)?;
            peer::tagged(Opcode::RDMA_WRITE, b.stag, b.to, true, &[0xEE; 8])
        }
        _ => {
            let msn = c.peer.send_msn;
            peer::untagged(Opcode::SEND, qn::SEND, msn, 0, true, b"bad crc!")
        }
    };
    if !c.peer.crc() {
        c.peer.close();
        return Ok(Verdict::na("CRC is not in use"));
    }
    let mut fpdu = c.peer.encode(&seg)?;
    let n = fpdu.len();
    fpdu[n - 1] ^= 0xFF;
    c.peer.send_raw(&fpdu)?;
    c.peer.read_to_end()?;
    let v = judge::terminate(&c.peer.seen, &[T::MPA_CRC_ERROR], false, None);
    c.peer.close();
    let (Some(b), Verdict::Pass(note)) = (buf.filter(|b| b.len >= 8), &v) else {
        return Ok(v);
    };
    // The FPDU's DDP header was valid: octets placed before the CRC was checked
    // are allowed (the buffer of a failed stream is undefined); said, not failed.
    Ok(match ctx.read_back(b, 0, 8)? {
        Ok(after) if after == fill => Verdict::pass(format!("{note}; nothing placed (read back)")),
        Ok(_) => Verdict::pass(format!(
            "{note}; its payload was placed before the CRC was checked (allowed: \
             the buffer of a failed stream is undefined)"
        )),
        Err(why) => Verdict::pass(format!("{note}; {why}")),
    })
}

fn bad_ulpdu_length(ctx: &Ctx) -> Result<Verdict, String> {
    let mut c = ctx.connect(ctx.deadline())?;
    // ULPDU_Length 6, six octets, no pad ((2 + 6) % 4 == 0), then the CRC.
    let mut f = vec![0x00, 0x06, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41];
    let crc = if c.peer.crc() { crc32c(&f) } else { 0 };
    f.extend_from_slice(&crc.to_le_bytes());
    c.peer.send_raw(&f)?;
    c.peer.read_to_end()?;
    let llp = [
        T::MPA_CRC_ERROR,
        T::MPA_MARKER_MISMATCH,
        T::MPA_INVALID_REQ_REP,
        T::MPA_LOCAL_CATASTROPHIC,
    ];
    let v = judge::terminate(&c.peer.seen, &llp, false, None);
    c.peer.close();
    Ok(v)
}

fn invalid_stag(ctx: &Ctx) -> Result<Verdict, String> {
    let c = ctx.connect(ctx.deadline())?;
    let seg = peer::tagged(Opcode::RDMA_WRITE, bogus_stag(c.buf), 0, true, &[0xEE; 16]);
    let want = [T::DDP_INVALID_STAG, T::RDMAP_INVALID_STAG];
    Ok(terminated(c, &seg, &want, true)?.0)
}

fn base_bounds(ctx: &Ctx) -> Result<Verdict, String> {
    let mut c = ctx.connect(ctx.deadline())?;
    let b = buffer_or_na!(c.buf, 16);
    let off = u64::from(b.len) - 8;
    let fill = [0x5A; 8];
    c.peer.write(b.stag, b.to + off, &fill)?;
    let seg = peer::tagged(Opcode::RDMA_WRITE, b.stag, b.to + off, true, &[0xEE; 16]);
    let want = [T::DDP_BASE_BOUNDS, T::RDMAP_BASE_BOUNDS];
    let (v, _) = terminated(c, &seg, &want, true)?;
    nothing_placed(ctx, v, b, off, &fill)
}

fn to_wrap(ctx: &Ctx) -> Result<Verdict, String> {
    let c = ctx.connect(ctx.deadline())?;
    let b = buffer_or_na!(c.buf, 1);
    let seg = peer::tagged(Opcode::RDMA_WRITE, b.stag, u64::MAX - 7, true, &[0xEE; 16]);
    let want = [T::DDP_TO_WRAP, T::RDMAP_TO_WRAP];
    Ok(terminated(c, &seg, &want, true)?.0)
}

fn bad_qn(ctx: &Ctx) -> Result<Verdict, String> {
    let c = ctx.connect(ctx.deadline())?;
    let seg = peer::untagged(Opcode::SEND, 5, 1, 0, true, b"queue 5");
    Ok(terminated(c, &seg, &[T::DDP_INVALID_QN], true)?.0)
}

fn bad_msn(ctx: &Ctx) -> Result<Verdict, String> {
    let c = ctx.connect(ctx.deadline())?;
    let msn = c.peer.send_msn.wrapping_add(0x8000_0000);
    let seg = peer::untagged(Opcode::SEND, qn::SEND, msn, 0, true, b"far msn");
    let want = [T::DDP_INVALID_MSN_RANGE, T::DDP_INVALID_MSN_NO_BUFFER];
    Ok(terminated(c, &seg, &want, true)?.0)
}

fn too_long(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let mut c = ctx.connect(d)?;
    let msn = c.peer.send_msn;
    c.peer.send_msn += 1;
    const SEG: usize = 1024;
    const TOTAL: usize = 64 * 1024;
    let mut sent = 0;
    while sent < TOTAL && c.peer.seen.terminate.is_none() && !c.peer.seen.closed {
        let last = sent + SEG == TOTAL;
        let seg = peer::untagged(Opcode::SEND, qn::SEND, msn, sent as u32, last, &[0x33; SEG]);
        if c.peer.send_segment(&seg).is_err() {
            break;
        }
        sent += SEG;
    }
    if c.peer.seen.terminate.is_none() && !c.peer.seen.closed {
        let alive = c.peer.probe(d)?;
        if alive {
            c.peer.close();
            return Ok(Verdict::na("the peer's receive buffers hold 64 KiB"));
        }
    }
    c.peer.read_to_end()?;
    let v = judge::terminate(&c.peer.seen, &[T::DDP_MSG_TOO_LONG], true, None);
    c.peer.close();
    Ok(v)
}

fn zero_length(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let mut c = ctx.connect(d)?;
    c.peer.send(&[])?;
    c.peer.write(bogus_stag(c.buf), 0, &[])?;
    let ok = c.peer.probe(d)?;
    let v = judge::alive(&c.peer.seen, ok, "a zero-length Send and Write");
    c.peer.close();
    Ok(v)
}

fn bad_opcode(ctx: &Ctx) -> Result<Verdict, String> {
    let c = ctx.connect(ctx.deadline())?;
    let msn = c.peer.send_msn;
    let seg = peer::untagged(Opcode(0x8), qn::SEND, msn, 0, true, b"opcode 8");
    Ok(terminated(c, &seg, &[T::RDMAP_UNEXPECTED_OPCODE], false)?.0)
}

fn terminate_format(ctx: &Ctx) -> Result<Verdict, String> {
    let c = ctx.connect(ctx.deadline())?;
    let seg = peer::tagged(Opcode::RDMA_WRITE, bogus_stag(c.buf), 0, true, &[0xEE; 16]);
    let want = [T::DDP_INVALID_STAG, T::RDMAP_INVALID_STAG];
    let (v, seen) = terminated(c, &seg, &want, true)?;
    if !matches!(v, Verdict::Pass(_)) {
        return Ok(v);
    }
    let len = seen
        .terminate
        .as_ref()
        .and_then(|(_, t)| t.terminate.as_ref())
        .and_then(|t| t.seg_len);
    // The whole segment (its name), or its payload only (Linux siw).
    Ok(match len {
        Some(n) if usize::from(n) == seg.len() => Verdict::pass("the whole segment's length"),
        Some(16) => Verdict::pass("the payload's length (as siw counts it)"),
        n => Verdict::fail(
            format!("DDP Segment Length {} (or the payload's, 16)", seg.len()),
            format!("{n:?}"),
        ),
    })
}

fn read_bounds(ctx: &Ctx) -> Result<Verdict, String> {
    let mut c = ctx.connect(ctx.deadline())?;
    let b = buffer_or_na!(c.buf, 16);
    let seg = c
        .peer
        .read_request_segment(b.stag, b.to + u64::from(b.len) - 8, 16, 0);
    let (v, seen) = terminated(c, &seg, &[T::RDMAP_BASE_BOUNDS], true)?;
    if !matches!(v, Verdict::Pass(_)) {
        return Ok(v);
    }
    let carried = seen
        .terminate
        .as_ref()
        .and_then(|(_, t)| t.terminate.as_ref())
        .is_some_and(|t| t.r && t.rdmap_hdr.is_some());
    Ok(if carried {
        v
    } else {
        Verdict::fail(
            "the Read Request header in the Terminate (R=1, RFC 5040 §4.8)",
            "R=0 or no RDMAP header",
        )
    })
}

fn read_beyond_ird(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    // IRD 16, ORD 1: the peer's IRD is what it says; we ask it to keep 1.
    let req = peer::request(
        2,
        false,
        true,
        Some(peer::block(16, 1, false, true, true)),
        vec![],
    );
    let mut p = match setup(ctx, &req, d)? {
        Ok(p) => p,
        Err(v) => return Ok(v),
    };
    let ird = p.reply.enhanced.map(|b| b.ird);
    p.start()?;
    let buf = match ctx.buffer {
        Some(b) => Some(b),
        None => p.advertisement((Instant::now() + Duration::from_secs(1)).min(d))?,
    };
    let b = buffer_or_na!(buf, 1);
    let Some(ird) = ird.filter(|&i| i != 0x3FFF && i < 8) else {
        p.close();
        return Ok(Verdict::na("the peer's IRD is not below 8 (or not given)"));
    };
    let size = b.len.min(1 << 20);
    let mut all = Vec::new();
    for _ in 0..8 {
        let seg = p.read_request_segment(b.stag, b.to, size, 0);
        all.extend(p.encode(&seg)?);
    }
    // One write: the Requests arrive together, the Responses cannot all be out.
    p.send_raw(&all)?;
    p.read_to_end()?;
    let responses = p.read_responses();
    let v = if p.seen.terminate.is_none() && responses >= 8 {
        Verdict::na(format!(
            "all 8 Reads answered (IRD {ird}): never more than IRD outstanding"
        ))
    } else {
        judge::terminate(
            &p.seen,
            &[
                T::RDMAP_CATASTROPHIC_STREAM,
                T::RDMAP_OP_UNSPECIFIED,
                T::RDMAP_CATASTROPHIC_GLOBAL,
            ],
            true,
            None,
        )
    };
    p.close();
    Ok(v)
}

/// A Send with Invalidate (opcode 4) of `stag`, whole, next MSN.
fn send_inv(p: &mut peer::Peer, stag: u32) -> Vec<u8> {
    let msn = p.send_msn;
    p.send_msn += 1;
    let mut seg = peer::untagged(
        Opcode::SEND_INVALIDATE,
        qn::SEND,
        msn,
        0,
        true,
        b"invalidate",
    );
    seg[2..6].copy_from_slice(&stag.to_be_bytes());
    seg
}

const CANNOT_INVALIDATE: [T; 2] = [
    T::RDMAP_PROT_CANNOT_INVALIDATE,
    T::RDMAP_OP_CANNOT_INVALIDATE,
];

fn send_invalidate(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let mut c = ctx.connect(d)?;
    let b = buffer_or_na!(c.buf, 8);
    let seg = send_inv(&mut c.peer, b.stag);
    c.peer.send_segment(&seg)?;
    c.peer.quiet_for(Duration::from_millis(300))?;
    if c.peer.seen.terminate.is_some() || c.peer.seen.closed {
        c.peer.read_to_end()?;
        let v = judge::terminate(&c.peer.seen, &CANNOT_INVALIDATE, true, Some(&seg));
        c.peer.close();
        return Ok(match v {
            Verdict::Pass(n) => Verdict::pass(format!("refused: {n}")),
            v => v,
        });
    }
    // Accepted: the STag must be invalid now (RFC 5040 §5.3).
    let w = peer::tagged(Opcode::RDMA_WRITE, b.stag, b.to, true, &[0xEE; 8]);
    let (v, _) = terminated(c, &w, &[T::DDP_INVALID_STAG, T::RDMAP_INVALID_STAG], true)?;
    Ok(match v {
        Verdict::Pass(n) => Verdict::pass(format!("invalidated: a later Write got {n}")),
        Verdict::Fail { got, .. } => Verdict::fail(
            "after an accepted invalidation, a Write to the STag refused as Invalid STag",
            got,
        ),
        v => v,
    })
}

fn send_invalidate_unknown(ctx: &Ctx) -> Result<Verdict, String> {
    let mut c = ctx.connect(ctx.deadline())?;
    let seg = send_inv(&mut c.peer, bogus_stag(c.buf));
    Ok(terminated(c, &seg, &CANNOT_INVALIDATE, true)?.0)
}
