//! `--role responder --transport sctp`: the peer under test is the active
//! side of DDP over SCTP (RFC 5043). It opens an association to us and a
//! session on it, once per case; each case answers the peer's Initiate as it
//! must (or must not) be answered: an Accept, a Reject, a Session Terminate,
//! no answer, a malformed Accept; or, in an accepted session, our Session
//! Terminate, a stray segment, an unassigned function code.

use super::judge::{self, Verdict};
use super::peer::{self, Peer};
use super::run::Ctx;
use super::sctp::{Assoc, Chunk};
use super::sessions::{
    ANSWER, OTHER_SID, QUIET, UNASSIGNED_FUNCTION, gapless, regular, terminate_ours, what, whats,
};
use rddp_wire::Opcode;
use rddp_wire::sctp::SessionFunction::{Accept, Initiate, Reject, Terminate};
use rddp_wire::sctp::{ADAPTATION_DDP, MAX_SESSION_PD, PPID_DDP_SEGMENT};
use std::time::{Duration, Instant};

/// The peer's Initiate: its stream and private data.
struct Initiated {
    assoc: Assoc,
    deadline: Instant,
    sid: u16,
    pd: usize,
}

/// The peer's next association and its first chunk, which must be a
/// well-formed Session Initiate (DDP-SSN 0, at most 512 octets of private
/// data); `Err` with the verdict (the association closed) otherwise.
fn initiated(ctx: &Ctx) -> Result<Result<Initiated, Verdict>, String> {
    let (mut a, d) = ctx.accept_sctp()?;
    let want = format!(
        "a Session Initiate (DDP-SSN 0, at most {MAX_SESSION_PD} octets of private data) \
         as its first chunk"
    );
    let Some(c) = a.next_any(d) else {
        let got = if a.lost {
            "the association ended"
        } else {
            "nothing in time"
        };
        a.close();
        return Ok(Err(Verdict::fail(want, got)));
    };
    let v = match c.session_control() {
        Some(s) if s.function == Initiate && c.ssn == 0 => {
            return Ok(Ok(Initiated {
                assoc: a,
                deadline: d,
                sid: c.sid,
                pd: s.private_data.len(),
            }));
        }
        _ => Verdict::fail(want, what(&c)),
    };
    // Whatever session it claims ends with our Terminate (RFC 5043), unless
    // it was a Terminate (never answered with one).
    if c.control() != Some(Terminate) {
        let _ = a.control(c.sid, Terminate.code(), &[]);
    }
    a.close();
    Ok(Err(v))
}

macro_rules! initiated_or_verdict {
    ($ctx:expr) => {
        match initiated($ctx)? {
            Ok(i) => i,
            Err(v) => return Ok(v),
        }
    };
}

/// An accepted session: the peer's Initiate answered with our Accept
/// (DDP-SSN 0 of our side of the stream), then its first DDP Segment waited
/// for (an active side that has something to send sends it now).
fn accepted(ctx: &Ctx) -> Result<Result<(Peer, usize), Verdict>, String> {
    let Initiated {
        mut assoc,
        deadline,
        sid,
        pd,
    } = match initiated(ctx)? {
        Ok(i) => i,
        Err(v) => return Ok(Err(v)),
    };
    assoc.control(sid, Accept.code(), &[])?;
    let mut p = Peer::sctp(assoc, sid, deadline);
    p.read_until(deadline, |s| {
        !s.segments.is_empty() || s.terminate.is_some()
    })?;
    let want = "after our Accept, DDP Segments (the peer's first one waited for)";
    let v = if let Some(b) = &p.seen.broken {
        Verdict::fail(want, b.clone())
    } else if let Some((_, t)) = &p.seen.terminate {
        Verdict::fail(want, format!("Terminate {}", t.summary()))
    } else if p.seen.closed {
        Verdict::fail(want, "a Session Terminate (or the association's end)")
    } else if p.seen.segments.is_empty() {
        Verdict::fail(want, "no DDP Segment in time")
    } else {
        p.seen.timed_out = false;
        return Ok(Ok((p, pd)));
    };
    p.close();
    Ok(Err(v))
}

macro_rules! accepted_or_verdict {
    ($ctx:expr) => {
        match accepted($ctx)? {
            Ok(x) => x,
            Err(v) => return Ok(v),
        }
    };
}

/// Chunks on `sid` until `until`, the peer's end of the session (its Session
/// Terminate) or of the association, whichever comes first.
fn watch(a: &mut Assoc, sid: u16, until: Instant) -> Vec<Chunk> {
    let mut got = Vec::new();
    while let Some(c) = a.next_on(sid, until) {
        let end = c.control() == Some(Terminate);
        got.push(c);
        if end {
            break;
        }
    }
    got
}

pub(super) fn adaptation(ctx: &Ctx) -> Result<Verdict, String> {
    let (mut a, d) = ctx.accept_sctp()?;
    let (inbound, outbound) = a.streams;
    let v = match a.indication {
        Some(ADAPTATION_DDP) if inbound != outbound => Verdict::fail(
            "as many inbound as outbound streams (RFC 5043), we offered 16 each way",
            format!("{inbound} inbound, {outbound} outbound"),
        ),
        Some(ADAPTATION_DDP) => Verdict::pass(format!(
            "Adaptation Indication 0x00000001 (DDP); {inbound} streams each way"
        )),
        Some(i) => Verdict::fail(
            "the Adaptation Layer Indication 0x00000001 (DDP)",
            format!("indication {i:#010x}"),
        ),
        None => Verdict::fail(
            "the Adaptation Layer Indication 0x00000001 (DDP)",
            "no Adaptation Layer Indication in the peer's INIT",
        ),
    };
    // Its Initiate, if it came, ends with our Terminate (Initiate, Terminate).
    if let Some(c) = a.next_any((Instant::now() + QUIET).min(d))
        && c.control() == Some(Initiate)
    {
        let _ = a.control(c.sid, Terminate.code(), &[]);
    }
    a.close();
    Ok(v)
}

pub(super) fn initiate(ctx: &Ctx) -> Result<Verdict, String> {
    let (mut p, pd) = accepted_or_verdict!(ctx);
    let d = Instant::now() + ctx.bound;
    let ok = p.probe(d)?;
    let v = match judge::alive(&p.seen, ok, "the accepted session") {
        Verdict::Pass(_) => Verdict::pass(format!(
            "Initiate with {pd} octets of private data; after our Accept its DDP \
             Segments; the session carries a Read"
        )),
        v => v,
    };
    let v = match p.sctp_link() {
        Some((a, _)) => regular(a, v),
        None => v,
    };
    // Chunks are unordered: one with a lower DDP-SSN may still be on its way.
    if gapless(&p.ssns).is_err() {
        p.quiet_for(QUIET)?;
    }
    let v = match (v, gapless(&p.ssns)) {
        (Verdict::Pass(n), Err(e)) if !p.seen.closed => Verdict::fail(
            "DDP-SSNs from 1 after the Initiate's 0, one per chunk, without gaps (RFC 5043)",
            format!("{e} (after {n})"),
        ),
        (v, _) => v,
    };
    p.close();
    Ok(v)
}

/// Our answer `function` (Reject, Terminate) to the Initiate, or none: the
/// peer must send no DDP Segment on the stream. Watched until the peer ends
/// its side, or for `look` (bounded by the case's deadline).
fn refused(ctx: &Ctx, answer: Option<(u16, &[u8])>, look: Duration) -> Result<Verdict, String> {
    let Initiated {
        mut assoc,
        deadline,
        sid,
        ..
    } = initiated_or_verdict!(ctx);
    if let Some((f, pd)) = answer {
        assoc.control(sid, f, pd)?;
    }
    let back = watch(&mut assoc, sid, (Instant::now() + look).min(deadline));
    let want = "no DDP Segment on the stream";
    let v = if back.iter().any(|c| c.ppid == PPID_DDP_SEGMENT) {
        Verdict::fail(want, whats(&back))
    } else {
        let end = if assoc.lost {
            "the association ended".to_string()
        } else if back.is_empty() {
            format!("nothing in {:?}", look.min(ctx.bound))
        } else {
            whats(&back)
        };
        regular(&assoc, Verdict::pass(format!("no DDP Segment; {end}")))
    };
    if answer.is_none() {
        // Initiate, Terminate: the session ends as the RFC lets it.
        let _ = assoc.control(sid, Terminate.code(), &[]);
    }
    assoc.close();
    Ok(v)
}

pub(super) fn no_answer(ctx: &Ctx) -> Result<Verdict, String> {
    refused(ctx, None, ctx.bound)
}

pub(super) fn reject(ctx: &Ctx) -> Result<Verdict, String> {
    refused(
        ctx,
        Some((Reject.code(), b"conform: rejected")),
        Duration::from_secs(1),
    )
}

pub(super) fn terminate_initiate(ctx: &Ctx) -> Result<Verdict, String> {
    refused(ctx, Some((Terminate.code(), &[])), Duration::from_secs(1))
}

pub(super) fn accept_pd_513(ctx: &Ctx) -> Result<Verdict, String> {
    let Initiated {
        mut assoc,
        deadline,
        sid,
        ..
    } = initiated_or_verdict!(ctx);
    assoc.control(sid, Accept.code(), &[0x50; MAX_SESSION_PD + 1])?;
    let back = watch(&mut assoc, sid, deadline);
    let want = "Session Terminate (the Accept is malformed), no DDP Segment";
    let v = if back.iter().any(|c| c.ppid == PPID_DDP_SEGMENT) {
        Verdict::fail(want, whats(&back))
    } else if back.iter().any(|c| c.control() == Some(Terminate)) {
        Verdict::pass("Session Terminate")
    } else if assoc.lost {
        Verdict::fail(want, "the association ended without a Session Terminate")
    } else {
        Verdict::fail(want, format!("{} in time", whats(&back)))
    };
    let _ = assoc.control(sid, Terminate.code(), &[]);
    assoc.close();
    Ok(v)
}

pub(super) fn our_terminate(ctx: &Ctx) -> Result<Verdict, String> {
    let (mut p, _) = accepted_or_verdict!(ctx);
    let d = Instant::now() + ctx.bound;
    // A zero-length Read, sent after our Terminate (acknowledged by then): it
    // must go unanswered.
    let seg = p.read_request_segment(0, 0, 0, 0);
    let Some((a, sid)) = p.sctp_link() else {
        return Err("not an SCTP session".into());
    };
    let mut back = terminate_ours(a, sid, d)?;
    // A peer that ends the association on our Terminate takes no Read.
    let sent = !a.lost && a.segment(sid, &seg).is_ok();
    back.extend(a.collect_on(sid, (Instant::now() + ANSWER.min(QUIET * 3)).min(d)));
    let want = "after our Session Terminate no DDP Segment on the stream (a Read sent \
                after it unanswered); its own Session Terminate allowed";
    let v = if back.iter().any(|c| c.ppid == PPID_DDP_SEGMENT)
        || back
            .iter()
            .any(|c| c.control().is_some_and(|f| f != Terminate))
    {
        Verdict::fail(want, whats(&back))
    } else if a.lost {
        Verdict::pass(format!(
            "answered with {}; the association ended",
            whats(&back)
        ))
    } else if sent {
        Verdict::pass(format!(
            "answered with {}; the Read unanswered",
            whats(&back)
        ))
    } else {
        Verdict::pass(format!("answered with {}; the Read not sent", whats(&back)))
    };
    p.close();
    Ok(v)
}

pub(super) fn stray_segment(ctx: &Ctx) -> Result<Verdict, String> {
    let (mut p, _) = accepted_or_verdict!(ctx);
    let d = Instant::now() + ctx.bound;
    let Some((a, sid)) = p.sctp_link() else {
        return Err("not an SCTP session".into());
    };
    let other = if sid == OTHER_SID {
        OTHER_SID + 1
    } else {
        OTHER_SID
    };
    let seg = peer::tagged(Opcode::RDMA_WRITE, 0xFFFF_FF00, 0, true, &[0xEE; 16]);
    a.segment(other, &seg)?;
    let mut back: Vec<_> = a.next_on(other, d).into_iter().collect();
    back.extend(a.collect_on(other, (Instant::now() + QUIET).min(d)));
    let want = "one Session Terminate on that stream, its own session carrying on";
    if back.iter().map(Chunk::control).collect::<Vec<_>>() != [Some(Terminate)] {
        p.close();
        return Ok(Verdict::fail(want, whats(&back)));
    }
    let ok = p.probe(d)?;
    let v = match judge::alive(&p.seen, ok, "its own session") {
        Verdict::Pass(_) => Verdict::pass("Session Terminate; its session then carries a Read"),
        Verdict::Fail { got, .. } => Verdict::fail(want, format!("Session Terminate, then {got}")),
        v => v,
    };
    p.close();
    Ok(v)
}

pub(super) fn bad_function(ctx: &Ctx) -> Result<Verdict, String> {
    let (mut p, _) = accepted_or_verdict!(ctx);
    let Some((a, sid)) = p.sctp_link() else {
        return Err("not an SCTP session".into());
    };
    a.control(sid, UNASSIGNED_FUNCTION, &[])?;
    let d = Instant::now() + ctx.bound;
    p.read_until(d, |_| false)?;
    let want = "Session Terminate of the session (an unassigned function code)";
    let seen = &p.seen;
    let v = if let Some(b) = &seen.broken {
        Verdict::fail(want, b.clone())
    } else if seen.closed {
        match &seen.terminate {
            Some((_, t)) => {
                Verdict::pass(format!("Terminate {}, then Session Terminate", t.summary()))
            }
            None => Verdict::pass("Session Terminate"),
        }
    } else if let Some((_, t)) = &seen.terminate {
        Verdict::fail(
            want,
            format!("Terminate {}, but no Session Terminate", t.summary()),
        )
    } else {
        Verdict::fail(want, "no Session Terminate in time")
    };
    p.close();
    Ok(v)
}
