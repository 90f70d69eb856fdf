//! `--role responder`: the peer under test connects to us (it is the MPA
//! initiator; over SCTP, the active side of a DDP session: `sctp_responder`),
//! once per case, and each case answers its Request as it must
//! (or must not) be answered: a Reply that never comes, a refusal, a broken
//! Reply, an RTR type it did not offer.

use super::catalogue::{Case, Over};
use super::judge::{self, Verdict};
use super::peer::{self, Peer, SetupReply};
use super::run::Ctx;
use super::sctp_responder;
use rddp_wire::rdmap::qn;
use rddp_wire::{
    DdpHeader, EnhancedBlock, FpduDecoder, FrameKind, MpaFlags, MpaFrame, Opcode, RdmapControl,
    ReadRequestHeader, ReceivedTerminate, TerminateCode as T,
};
use std::io::Write;
use std::net::TcpStream;
use std::time::Instant;

pub(super) static CASES: &[Case] = &[
    Case {
        id: "initiator.setup",
        rfc: "RFC 5044 §7.1.1, §7.1.2",
        expect: "a valid Request; after our accepting Reply, the first FPDU comes from the \
                 initiator (the RTR we chose, if any)",
        run: setup,
        over: Over::Mpa,
    },
    Case {
        id: "initiator.no-reply",
        rfc: "RFC 5044 §7.1.2",
        expect: "no Reply ever: the initiator sends nothing more and closes in bounded \
                 time (--setup-wait)",
        run: no_reply,
        over: Over::Mpa,
    },
    Case {
        id: "initiator.reject",
        rfc: "RFC 5044 §7.1.1",
        expect: "a Reply with R=1: the initiator closes without sending an FPDU",
        run: reject,
        over: Over::Mpa,
    },
    Case {
        id: "initiator.bad-key",
        rfc: "RFC 5044 §7.1.1, §8",
        expect: "a Reply with the Request's key: a close (a Layer 2 Terminate first is \
                 allowed)",
        run: bad_key,
        over: Over::Mpa,
    },
    Case {
        id: "initiator.higher-rev",
        rfc: "RFC 5044 §7.1.1",
        expect: "a Reply whose Rev is above the Request's: a close (a Layer 2 Terminate \
                 first is allowed)",
        run: higher_rev,
        over: Over::Mpa,
    },
    Case {
        id: "initiator.pd-513",
        rfc: "RFC 5044 §7.1.1",
        expect: "a Reply with PD_Length 513: a close (a Layer 2 Terminate first is allowed)",
        run: pd_513,
        over: Over::Mpa,
    },
    Case {
        id: "initiator.rtr-not-offered",
        rfc: "RFC 6581 §4, §5",
        expect: "a Reply picking an RTR type the Request did not offer: Terminate \
                 2/*/0x07, close (N/A without peer-to-peer mode)",
        run: rtr_not_offered,
        over: Over::Mpa,
    },
    Case {
        id: "sctp.init-adaptation",
        rfc: "RFC 5043 §5.1",
        expect: "the peer's INIT carries the Adaptation Layer Indication 0x00000001 (DDP); \
                 the association has as many inbound as outbound streams",
        run: sctp_responder::adaptation,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.initiate",
        rfc: "RFC 5043 (Session Control)",
        expect: "its first chunk a Session Initiate, DDP-SSN 0, at most 512 octets of \
                 private data; after our Accept, DDP Segments with DDP-SSNs 1, 2, ... \
                 without gaps, every chunk unordered; the session carries a zero-length Read",
        run: sctp_responder::initiate,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.no-answer",
        rfc: "RFC 5043 (Session Control)",
        expect: "its Initiate never answered: no DDP Segment on the stream (the active side \
                 waits for the Accept) for the case's time",
        run: sctp_responder::no_answer,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.reject",
        rfc: "RFC 5043 (Session Control)",
        expect: "its Initiate answered with Session Reject: no DDP Segment on the stream",
        run: sctp_responder::reject,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.terminate-initiate",
        rfc: "RFC 5043 (Session Control)",
        expect: "its Initiate answered with Session Terminate: no DDP Segment on the stream",
        run: sctp_responder::terminate_initiate,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.accept-pd-513",
        rfc: "RFC 5043 (Session Control)",
        expect: "an Accept with 513 octets of private data: Session Terminate, no DDP \
                 Segment",
        run: sctp_responder::accept_pd_513,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.our-terminate",
        rfc: "RFC 5043 (Session Control)",
        expect: "our Session Terminate in its accepted session: no DDP Segment after it (a \
                 zero-length Read sent once SCTP acknowledged it goes unanswered)",
        run: sctp_responder::our_terminate,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.stray-segment",
        rfc: "RFC 5043 (Session Control)",
        expect: "a Write on a stream without a session: one Session Terminate there, its \
                 accepted session carrying on (a zero-length Read answered)",
        run: sctp_responder::stray_segment,
        over: Over::Sctp,
    },
    Case {
        id: "sctp.bad-function",
        rfc: "RFC 5043 (Session Control)",
        expect: "a Session Control with an unassigned function code (0xFFF0) in its \
                 accepted session: Session Terminate",
        run: sctp_responder::bad_function,
        over: Over::Sctp,
    },
];

/// The next connection (waited for apart from the case's bound) and its
/// Request; the case's deadline runs from the connection, `bound` from then.
fn request(
    ctx: &Ctx,
    bound: std::time::Duration,
) -> Result<(TcpStream, Instant, Result<MpaFrame, Verdict>), String> {
    let mut sock = ctx.accept()?;
    let deadline = Instant::now() + bound;
    let r = match peer::read_request(&mut sock, deadline) {
        SetupReply::Reply(f) if !f.flags.reject() => Ok(f),
        SetupReply::Reply(_) => Err(Verdict::fail("a Request", "a Request with R=1")),
        SetupReply::Closed => Err(Verdict::fail("a Request", "a close")),
        SetupReply::Silent => Err(Verdict::fail("a Request", "nothing in time")),
        SetupReply::Bad(e) => Err(Verdict::fail("a Request", e)),
    };
    Ok((sock, deadline, r))
}

macro_rules! request_or_verdict {
    ($ctx:expr, $bound:expr) => {
        match request($ctx, $bound)? {
            (s, d, Ok(f)) => (s, d, f),
            (_, _, Err(v)) => return Ok(v),
        }
    };
}

/// Our accepting Reply: Rev as asked (at most 2), C echoed, no Markers; with
/// the enhanced block, IRD and ORD met and `rtr` chosen.
fn reply_to(req: &MpaFrame, rtr: Option<(bool, bool, bool)>) -> MpaFrame {
    let enhanced = req.enhanced.map(|b| EnhancedBlock {
        p2p: rtr.is_some(),
        rtr_send: rtr.is_some_and(|r| r.0),
        ird: b.ord,
        rtr_write: rtr.is_some_and(|r| r.1),
        rtr_read: rtr.is_some_and(|r| r.2),
        ord: b.ird,
    });
    MpaFrame::new(
        FrameKind::Reply,
        MpaFlags::new(false, req.flags.crc(), false, enhanced.is_some()),
        req.rev.min(2),
        enhanced,
        Vec::new(),
    )
}

fn send(sock: &mut TcpStream, b: &[u8]) -> Result<(), String> {
    sock.write_all(b).map_err(|e| format!("write: {e}"))
}

fn setup(ctx: &Ctx) -> Result<Verdict, String> {
    let (mut sock, d, req) = request_or_verdict!(ctx, ctx.bound);
    // The RTR: Write if offered, else Read (as siw's responder chooses).
    let rtr = req.enhanced.filter(|b| b.p2p).and_then(|b| {
        if b.rtr_write {
            Some((false, true, false))
        } else if b.rtr_read {
            Some((false, false, true))
        } else {
            None
        }
    });
    let reply = reply_to(&req, rtr);
    send(&mut sock, &reply.to_vec().map_err(|e| e.to_string())?)?;
    let mut p = Peer::responder(sock, &req, reply, d, ctx.budget);
    p.read_until(d, |s| !s.segments.is_empty() || s.terminate.is_some())?;
    let want = match rtr {
        Some((_, true, _)) => "a zero-length RDMA Write (the Write RTR) first",
        Some(_) => "a zero-length Read Request (the Read RTR) first",
        None => "an FPDU first",
    };
    let v = if let Some(b) = &p.seen.broken {
        Verdict::fail(want, b.clone())
    } else if let Some((_, t)) = &p.seen.terminate {
        Verdict::fail(want, format!("Terminate {}", t.summary()))
    } else if let Some(first) = p.seen.segments.first() {
        match (rtr, DdpHeader::parse(first)) {
            (Some((_, true, _)), Ok(DdpHeader::Tagged(h)))
                if RdmapControl(h.rsvd_ulp).opcode() == Opcode::RDMA_WRITE
                    && first.len() == 14
                    && h.ctrl.last() =>
            {
                Verdict::pass("the Write RTR")
            }
            (Some((_, _, true)), Ok(DdpHeader::Untagged(h)))
                if h.qn == qn::READ_REQUEST
                    && ReadRequestHeader::parse(&first[18..]).is_ok_and(|r| r.size == 0) =>
            {
                Verdict::pass("the Read RTR")
            }
            (None, Ok(h)) => Verdict::pass(format!(
                "first FPDU: opcode {:#x}",
                RdmapControl(h.rdmap_octet()).opcode().0
            )),
            (_, h) => Verdict::fail(want, format!("{h:?}")),
        }
    } else if p.seen.closed {
        Verdict::fail(want, "a close")
    } else {
        Verdict::fail(want, "no FPDU in time")
    };
    p.close();
    Ok(match v {
        Verdict::Pass(n) => Verdict::pass(format!(
            "Rev {}, CRC {}, {n}",
            req.rev,
            if req.flags.crc() { "on" } else { "off" }
        )),
        v => v,
    })
}

/// After a Reply the initiator must refuse: it closes, having sent nothing
/// but (at most) a Layer 2 Terminate, as an FPDU with or without CRC.
fn gives_up(sock: &mut TcpStream, deadline: Instant, terminate_ok: bool) -> Verdict {
    let want = if terminate_ok {
        "a close (a Layer 2 Terminate first allowed)"
    } else {
        "a close, nothing sent"
    };
    let (octets, closed) = peer::drain(sock, deadline);
    if !closed {
        return Verdict::fail(want, "the connection stayed open");
    }
    if octets.is_empty() {
        return Verdict::pass("closed");
    }
    let term = [true, false].into_iter().find_map(|crc| {
        let mut d = FpduDecoder::new(crc, false, 65535);
        let mut segs = Vec::new();
        d.feed(&octets, &mut segs).ok()?;
        let s = segs.first()?;
        match DdpHeader::parse(s).ok()? {
            DdpHeader::Untagged(h) if h.qn == qn::TERMINATE => {
                Some(ReceivedTerminate::decode(&s[18..]))
            }
            _ => None,
        }
    });
    match term.and_then(|t| t.code()) {
        Some(c) if terminate_ok && c.layer == 2 => {
            Verdict::pass(format!("Terminate {}, then a close", judge::code_name(c)))
        }
        Some(c) => Verdict::fail(want, format!("Terminate {}", judge::code_name(c))),
        None => Verdict::fail(
            want,
            format!("{} octets that are not a Terminate", octets.len()),
        ),
    }
}

fn no_reply(ctx: &Ctx) -> Result<Verdict, String> {
    let (mut sock, d, _) = request_or_verdict!(ctx, ctx.setup_wait);
    Ok(match gives_up(&mut sock, d, false) {
        Verdict::Fail { got, .. } => Verdict::fail(
            format!("nothing more, then a close within {:?}", ctx.setup_wait),
            got,
        ),
        v => v,
    })
}

fn reject(ctx: &Ctx) -> Result<Verdict, String> {
    let (mut sock, d, req) = request_or_verdict!(ctx, ctx.bound);
    let r = MpaFrame::new(
        FrameKind::Reply,
        MpaFlags::new(false, req.flags.crc(), true, false),
        req.rev.min(2),
        None,
        b"conform: rejected".to_vec(),
    );
    send(&mut sock, &r.to_vec().map_err(|e| e.to_string())?)?;
    Ok(gives_up(&mut sock, d, false))
}

/// Send `reply` (raw octets) to the next Request; the initiator must give up.
fn broken_reply(ctx: &Ctx, make: fn(&MpaFrame) -> Vec<u8>) -> Result<Verdict, String> {
    let (mut sock, d, req) = request_or_verdict!(ctx, ctx.bound);
    send(&mut sock, &make(&req))?;
    Ok(gives_up(&mut sock, d, true))
}

fn bad_key(ctx: &Ctx) -> Result<Verdict, String> {
    broken_reply(ctx, |req| {
        let mut b = reply_to(req, None).to_vec().unwrap_or_default();
        b[..16].copy_from_slice(&rddp_wire::mpa::frame::KEY_REQ);
        b
    })
}

fn higher_rev(ctx: &Ctx) -> Result<Verdict, String> {
    broken_reply(ctx, |req| {
        let mut b = reply_to(req, None).to_vec().unwrap_or_default();
        b[17] = req.rev + 1;
        b
    })
}

fn pd_513(ctx: &Ctx) -> Result<Verdict, String> {
    broken_reply(ctx, |req| {
        let mut b = rddp_wire::mpa::frame::KEY_REP.to_vec();
        b.extend_from_slice(&[if req.flags.crc() { 0x40 } else { 0 }, 1, 0x02, 0x01]);
        b.resize(20 + 513, 0x50);
        b
    })
}

fn rtr_not_offered(ctx: &Ctx) -> Result<Verdict, String> {
    let (mut sock, d, req) = request_or_verdict!(ctx, ctx.bound);
    let Some(b) = req.enhanced.filter(|b| b.p2p) else {
        drop(sock);
        return Ok(Verdict::na("the Request offers no peer-to-peer mode (A=0)"));
    };
    let pick = if !b.rtr_send {
        (true, false, false)
    } else if !b.rtr_write {
        (false, true, false)
    } else if !b.rtr_read {
        (false, false, true)
    } else {
        drop(sock);
        return Ok(Verdict::na("the Request offers every RTR type"));
    };
    let reply = reply_to(&req, Some(pick));
    send(&mut sock, &reply.to_vec().map_err(|e| e.to_string())?)?;
    let mut p = Peer::responder(sock, &req, reply, d, ctx.budget);
    p.read_to_end()?;
    let v = judge::terminate(&p.seen, &[T::MPA_NO_MATCHING_RTR], true, None);
    p.close();
    Ok(v)
}
