//! The DDP Stream Session cases of DDP over SCTP (RFC 5043): the Adaptation
//! Layer Indication, Initiate / Accept / Reject / Terminate, stray segments
//! before a session and after its end, private data above 512 octets, the
//! maximum segment. Legal sequences of one session, in DDP-SSN order: Initiate,
//! Accept, segments, at least one Terminate; Initiate, Reject; Initiate,
//! Terminate. Any other chunk terminates the session (RFC 5043).

use super::judge::{self, Verdict};
use super::peer::{self, Buffer, Peer};
use super::run::{Ctx, SCTP_SID};
use super::sctp::{Assoc, Chunk};
use rddp_wire::Opcode;
use rddp_wire::sctp::SessionFunction::{self, Accept, Initiate, Reject, Terminate};
use rddp_wire::sctp::{ADAPTATION_DDP, MAX_SESSION_PD, PPID_DDP_SEGMENT, PPID_SESSION_CONTROL};
use std::time::{Duration, Instant};

/// How long a case listens for chunks that must not come.
pub(super) const QUIET: Duration = Duration::from_millis(300);

/// How long the peer's answer to our Session Terminate is waited for.
pub(super) const ANSWER: Duration = Duration::from_secs(2);

/// A stream with no session of ours, for stray segments and refused Initiates.
pub(super) const OTHER_SID: u16 = 5;

pub(super) fn what(c: &Chunk) -> String {
    match (c.ppid, c.control()) {
        (_, Some(f)) => format!("Session {f:?} (DDP-SSN {})", c.ssn),
        (PPID_DDP_SEGMENT, _) => format!("a DDP Segment (DDP-SSN {})", c.ssn),
        (PPID_SESSION_CONTROL, None) => match c.body.get(..2) {
            Some(f) => format!(
                "a malformed Session Control (function code {:#06x}, {} octets)",
                u16::from_be_bytes([f[0], f[1]]),
                c.body.len()
            ),
            None => "a Session Control without a function code".into(),
        },
        (p, None) => format!("a chunk with PPID {p}"),
    }
}

pub(super) fn whats(cs: &[Chunk]) -> String {
    if cs.is_empty() {
        return "nothing".into();
    }
    cs.iter().map(what).collect::<Vec<_>>().join(", ")
}

/// The functions of the Session Control chunks among `cs`.
pub(super) fn functions(cs: &[Chunk]) -> Vec<Option<SessionFunction>> {
    cs.iter().map(Chunk::control).collect()
}

/// A chunk that came ordered or fragmented is a failure of its own (RFC 5043:
/// every DDP chunk is one unordered message).
pub(super) fn regular(a: &Assoc, v: Verdict) -> Verdict {
    match (&a.irregular, v) {
        (Some(i), Verdict::Pass(_)) => Verdict::fail(
            "every chunk sent unordered, as one whole message (RFC 5043)",
            i.clone(),
        ),
        (_, v) => v,
    }
}

/// A session on `sid` still opens on `a` (the association carries on after
/// another session's end): Initiate answered with Accept.
fn opens(ctx: &Ctx, a: Assoc, sid: u16, d: Instant) -> Result<Peer, String> {
    ctx.initiate(a, sid, &[], d)
}

/// `n` octets at `off` in `buf`, read through the session `p` (an RDMA Read).
fn read_via(p: &mut Peer, buf: Buffer, off: u64, n: u32, d: Instant) -> Result<Vec<u8>, String> {
    let before = p.seen.segments.len();
    p.read_request(buf.stag, buf.to + off, n, 0)?;
    p.read_until(d, |s| {
        s.terminate.is_some() || peer::read_data(&s.segments[before..], n as usize).is_some()
    })?;
    peer::read_data(&p.seen.segments[before..], n as usize)
        .ok_or_else(|| "the read-back got no Read Response in time".into())
}

pub(super) fn adaptation(ctx: &Ctx) -> Result<Verdict, String> {
    let a = ctx.associate(ctx.deadline())?;
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
            "no Adaptation Layer Indication in the peer's INIT-ACK",
        ),
    };
    a.close();
    Ok(v)
}

pub(super) fn accept(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let mut a = ctx.associate(d)?;
    a.control(SCTP_SID, Initiate.code(), &[0x49; 16])?;
    let want = "Session Accept, DDP-SSN 0 (its first chunk on the stream)";
    let Some(c) = a.next_on(SCTP_SID, d) else {
        a.close();
        return Ok(Verdict::fail(want, "nothing in time"));
    };
    if c.control() != Some(Accept) || c.ssn != 0 {
        a.close();
        return Ok(Verdict::fail(want, what(&c)));
    }
    let pd = c.session_control().map_or(0, |s| s.private_data.len());
    let mut p = Peer::sctp(a, SCTP_SID, d);
    let ok = p.probe(d)?;
    let v = match judge::alive(&p.seen, ok, "the accepted session") {
        Verdict::Pass(_) => Verdict::pass(format!(
            "Accept with {pd} octets of private data; the session carries a Read"
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
            "DDP-SSNs from 0, one per chunk, without gaps (RFC 5043)",
            format!("{e} (after {n})"),
        ),
        (v, _) => v,
    };
    p.close();
    Ok(v)
}

/// The DDP-SSNs of a session's chunks after its Accept (DDP-SSN 0): 1, 2, ...
/// in some order (RFC 5043: the SSNs an ordered stream would have had; the
/// chunks themselves are unordered).
pub(super) fn gapless(ssns: &[u16]) -> Result<(), String> {
    let mut s = ssns.to_vec();
    s.sort_unstable();
    for (i, &x) in s.iter().enumerate() {
        if usize::from(x) != i + 1 {
            return Err(format!("DDP-SSNs {ssns:?} after the first chunk's 0"));
        }
    }
    Ok(())
}

/// An Initiate with `pd`: what came back on its stream first.
fn answer(ctx: &Ctx, pd: &[u8]) -> Result<(Assoc, Option<Chunk>, Instant), String> {
    let d = ctx.deadline();
    let mut a = ctx.associate(d)?;
    a.control(OTHER_SID, Initiate.code(), pd)?;
    let c = a.next_on(OTHER_SID, d);
    Ok((a, c, d))
}

pub(super) fn pd_512(ctx: &Ctx) -> Result<Verdict, String> {
    let (mut a, c, _) = answer(ctx, &[0x50; MAX_SESSION_PD])?;
    let want = "Session Accept or Reject";
    let v = match c.as_ref().and_then(Chunk::control) {
        Some(Accept) => {
            let _ = a.control(OTHER_SID, Terminate.code(), &[]);
            Verdict::pass("accepted")
        }
        Some(Reject) => Verdict::pass("rejected (by the ULP)"),
        _ => Verdict::fail(want, c.as_ref().map_or("nothing in time".into(), what)),
    };
    a.close();
    Ok(v)
}

pub(super) fn pd_513(ctx: &Ctx) -> Result<Verdict, String> {
    let (a, c, d) = answer(ctx, &[0x50; MAX_SESSION_PD + 1])?;
    let want = "Session Terminate (neither Accept nor Reject: the Initiate never \
                reaches the ULP), the association carrying on";
    match c.as_ref().and_then(Chunk::control) {
        Some(Terminate) => {}
        _ => {
            a.close();
            return Ok(Verdict::fail(
                want,
                c.as_ref().map_or("nothing in time".into(), what),
            ));
        }
    }
    Ok(match opens(ctx, a, SCTP_SID, d) {
        Ok(p) => {
            p.close();
            Verdict::pass("Session Terminate; another session then opened")
        }
        Err(e) => Verdict::fail(
            want,
            format!("Session Terminate, then {e} on another stream"),
        ),
    })
}

/// What [`filled`] writes at the start of the peer's buffer before a case
/// that must place nothing there.
const FILL: [u8; 16] = [0x5A; 16];

/// A session on [`SCTP_SID`] with [`FILL`] at the start of the peer's buffer;
/// `Err` (the verdict) without a buffer.
fn filled(ctx: &Ctx, d: Instant) -> Result<Result<(Peer, Buffer), Verdict>, String> {
    let mut c = ctx.connect(d)?;
    let Some(b) = c.buf.filter(|b| b.len as usize >= FILL.len()) else {
        c.peer.close();
        return Ok(Err(Verdict::na(
            "the peer advertised no buffer large enough (give --buffer STAG:TO:LEN)",
        )));
    };
    c.peer.write(b.stag, b.to, &FILL)?;
    Ok(Ok((c.peer, b)))
}

/// The verdict on the buffer's first octets read back after a case that must
/// place nothing: still [`FILL`] passes with `note`, anything else fails.
fn unplaced(want: &str, note: &str, after: &[u8]) -> Verdict {
    match judge::unchanged(&FILL, after) {
        Ok(()) => Verdict::pass(format!("{note}; nothing placed (read back)")),
        Err(e) => Verdict::fail(want, e),
    }
}

pub(super) fn stray_segment(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let (mut p, b) = match filled(ctx, d)? {
        Ok(x) => x,
        Err(v) => return Ok(v),
    };
    let Some((a, _)) = p.sctp_link() else {
        return Err("not an SCTP session".into());
    };
    let seg = peer::tagged(Opcode::RDMA_WRITE, b.stag, b.to, true, &[0xEE; 16]);
    a.segment(OTHER_SID, &seg)?;
    // The Terminate, then a short while for anything after it.
    let mut back: Vec<Chunk> = a.next_on(OTHER_SID, d).into_iter().collect();
    back.extend(a.collect_on(OTHER_SID, (Instant::now() + QUIET).min(d)));
    let want = "one Session Terminate on that stream, nothing placed, the other session \
                carrying on";
    if functions(&back) != [Some(Terminate)] {
        p.close();
        return Ok(Verdict::fail(want, whats(&back)));
    }
    let v = match read_via(&mut p, b, 0, FILL.len() as u32, d) {
        Ok(after) => unplaced(want, "Session Terminate", &after),
        Err(e) => Verdict::fail(want, format!("Session Terminate, then {e}")),
    };
    p.close();
    Ok(v)
}

pub(super) fn before_accept(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let (mut p, b) = match filled(ctx, d)? {
        Ok(x) => x,
        Err(v) => return Ok(v),
    };
    let Some((a, _)) = p.sctp_link() else {
        return Err("not an SCTP session".into());
    };
    // The Write right behind the Initiate, not waiting for the Accept.
    a.control(OTHER_SID, Initiate.code(), &[])?;
    let seg = peer::tagged(Opcode::RDMA_WRITE, b.stag, b.to, true, &[0xEE; 16]);
    a.segment(OTHER_SID, &seg)?;
    let first = a.next_on(OTHER_SID, d);
    let want = "the session terminated and nothing placed, or (its Accept sent before \
                the Write arrived) the Write placed";
    let answer = first.as_ref().and_then(Chunk::control);
    let accepted = match answer {
        Some(Accept) => true,
        Some(Terminate | Reject) => false,
        _ => {
            p.close();
            return Ok(Verdict::fail(
                want,
                first.as_ref().map_or("nothing in time".into(), what),
            ));
        }
    };
    // What the peer does with the Write comes before our read-back's answer
    // only on its own stream; a moment for it, then the octets.
    let later = a.collect_on(OTHER_SID, (Instant::now() + QUIET).min(d));
    let answered = what(first.as_ref().unwrap_or(&Chunk {
        sid: OTHER_SID,
        ppid: 0,
        ssn: 0,
        body: Vec::new(),
    }));
    let terminated_later = later.iter().any(|c| c.control() == Some(Terminate));
    let v = match read_via(&mut p, b, 0, FILL.len() as u32, d) {
        Ok(after) if after != FILL && accepted => {
            Verdict::pass("accepted; the Write placed (read back)")
        }
        Ok(after) if after != FILL => Verdict::fail(
            want,
            format!(
                "{answered}, but {}",
                judge::unchanged(&FILL, &after).err().unwrap_or_default()
            ),
        ),
        Ok(_) if !accepted => Verdict::pass(format!("{answered}; nothing placed (read back)")),
        Ok(_) if terminated_later => Verdict::pass(format!(
            "accepted, then {}; nothing placed (read back)",
            whats(&later)
        )),
        Ok(_) => Verdict::fail(
            want,
            "accepted, but the Write neither placed nor refused with a Session Terminate",
        ),
        Err(e) => Verdict::fail(want, format!("{answered}, then {e}")),
    };
    p.close();
    Ok(v)
}

pub(super) fn after_terminate(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let (mut p, b) = match filled(ctx, d)? {
        Ok(x) => x,
        Err(v) => return Ok(v),
    };
    let Some((a, sid)) = p.sctp_link() else {
        return Err("not an SCTP session".into());
    };
    let mut back = terminate_ours(a, sid, d)?;
    let seg = peer::tagged(Opcode::RDMA_WRITE, b.stag, b.to, true, &[0xEE; 16]);
    a.segment(sid, &seg)?;
    back.extend(a.collect_on(sid, (Instant::now() + QUIET).min(d)));
    let lost = a.lost;
    let want = "nothing placed by a segment after the session's Terminate, no DDP \
                Segment in answer (Session Terminate allowed)";
    if back.iter().any(|c| c.ppid == PPID_DDP_SEGMENT) {
        p.close();
        return Ok(Verdict::fail(want, whats(&back)));
    }
    p.close();
    let note = if lost {
        "the association ended".to_string()
    } else {
        format!("answered with {}", whats(&back))
    };
    Ok(match ctx.read_back(b, 0, FILL.len() as u32)? {
        Ok(after) => unplaced(want, &note, &after),
        Err(why) => Verdict::pass(format!("{note}; {why}")),
    })
}

/// Our Session Terminate on `sid`, then what the peer sends back: its own
/// Terminate if it sends one (the session needs only ours), waited for up to
/// [`ANSWER`]. Returns once our chunks are all acknowledged, so that what we
/// send next on `sid` cannot overtake the Terminate (RFC 5043: no Session
/// Control may arrive before an earlier one; a stream is reused only when
/// nothing of its old session is outstanding).
pub(super) fn terminate_ours(a: &mut Assoc, sid: u16, d: Instant) -> Result<Vec<Chunk>, String> {
    a.control(sid, Terminate.code(), &[])?;
    let mut back: Vec<Chunk> = a
        .next_on(sid, (Instant::now() + ANSWER).min(d))
        .into_iter()
        .collect();
    if !a.wait_dry(d) {
        return Err("our chunks were never all acknowledged (SCTP sender-dry)".into());
    }
    back.extend(a.collect_on(sid, Instant::now()));
    Ok(back)
}

/// In an accepted session, `f` (a raw function code) with `pd`: the peer must
/// terminate the session.
fn violation(ctx: &Ctx, code: u16, pd: &[u8], want: &str) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let mut c = ctx.connect(d)?;
    let Some((a, sid)) = c.peer.sctp_link() else {
        return Err("not an SCTP session".into());
    };
    a.control(sid, code, pd)?;
    c.peer.read_to_end()?;
    let seen = &c.peer.seen;
    let v = if seen.closed && seen.terminate.is_none() && seen.broken.is_none() {
        Verdict::pass("Session Terminate")
    } else if let Some(b) = &seen.broken {
        Verdict::fail(want, b.clone())
    } else if let Some((_, t)) = &seen.terminate {
        if seen.closed {
            Verdict::pass(format!("Terminate {}, then Session Terminate", t.summary()))
        } else {
            Verdict::fail(
                want,
                format!("Terminate {}, but no Session Terminate", t.summary()),
            )
        }
    } else {
        Verdict::fail(want, "no Session Terminate in time")
    };
    c.peer.close();
    Ok(v)
}

pub(super) fn second_initiate(ctx: &Ctx) -> Result<Verdict, String> {
    violation(
        ctx,
        Initiate.code(),
        &[],
        "Session Terminate of the accepted session",
    )
}

/// A function code no RFC assigns (RFC 5043 assigns 1 to 4).
pub(super) const UNASSIGNED_FUNCTION: u16 = 0xFFF0;

pub(super) fn bad_function(ctx: &Ctx) -> Result<Verdict, String> {
    violation(
        ctx,
        UNASSIGNED_FUNCTION,
        &[],
        "Session Terminate of the session (an unassigned function code)",
    )
}

pub(super) fn terminate_reuse(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let mut c = ctx.connect(d)?;
    let Some((a, sid)) = c.peer.sctp_link() else {
        return Err("not an SCTP session".into());
    };
    let back = terminate_ours(a, sid, d)?;
    let want = "after our Session Terminate no DDP Segment on the stream; once nothing \
                is outstanding, the stream takes a new Initiate";
    if back.iter().any(|c| c.ppid == PPID_DDP_SEGMENT)
        || back
            .iter()
            .any(|c| c.control().is_some_and(|f| f != SessionFunction::Terminate))
    {
        c.peer.close();
        return Ok(Verdict::fail(want, whats(&back)));
    }
    a.control(sid, Initiate.code(), &[])?;
    let next = a.next_on(sid, d);
    let v = match next.as_ref().and_then(Chunk::control) {
        Some(Accept) => Verdict::pass(format!("answered with {}; the stream reused", whats(&back))),
        _ => Verdict::fail(want, next.as_ref().map_or("nothing in time".into(), what)),
    };
    c.peer.close();
    Ok(v)
}

/// The payload that makes a tagged segment (14 octets of header) after the
/// DDP-SSN exactly fill the fragmentation point, plus `extra`.
fn max_payload(a: &Assoc, extra: usize) -> usize {
    (a.fragmentation_point.max(2 + 14 + 1) - 2 - 14) + extra
}

pub(super) fn max_segment(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let mut c = ctx.connect(d)?;
    let Some((a, _)) = c.peer.sctp_link() else {
        return Err("not an SCTP session".into());
    };
    let n = max_payload(a, 0);
    let Some(b) = c.buf.filter(|b| b.len as usize >= n) else {
        c.peer.close();
        return Ok(Verdict::na(format!(
            "the peer advertised no buffer of {n} octets (give --buffer STAG:TO:LEN)"
        )));
    };
    let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    c.peer.write(b.stag, b.to, &data)?;
    let want = "a segment that fills one unfragmented chunk placed whole";
    let v = match read_via(&mut c.peer, b, 0, n as u32, d) {
        Ok(after) if after == data => {
            Verdict::pass(format!("{n} octets of payload placed (read back)"))
        }
        Ok(_) => Verdict::fail(want, "other octets read back"),
        Err(e) => {
            let t = c.peer.seen.terminate.as_ref().map(|(_, t)| t.summary());
            Verdict::fail(want, t.map_or(e, |t| format!("Terminate {t}")))
        }
    };
    c.peer.close();
    Ok(v)
}

pub(super) fn over_max_segment(ctx: &Ctx) -> Result<Verdict, String> {
    let d = ctx.deadline();
    let (mut p, b) = match filled(ctx, d)? {
        Ok(x) => x,
        Err(v) => return Ok(v),
    };
    let Some((a, _)) = p.sctp_link() else {
        return Err("not an SCTP session".into());
    };
    let n = max_payload(a, 1);
    if (b.len as usize) < n {
        p.close();
        return Ok(Verdict::na(format!(
            "the peer's buffer is below {n} octets: the segment would break its bounds too"
        )));
    }
    let data = vec![0xEE; n];
    p.write(b.stag, b.to, &data)?;
    // Terminated, or carrying on: the zero-length Read tells which.
    let alive = p.probe(d)?;
    let want = "its session terminated and nothing placed (or, by a peer whose maximum \
                segment is larger, placed whole): never placed in part";
    if let Some(br) = &p.seen.broken {
        let v = Verdict::fail(want, br.clone());
        p.close();
        return Ok(v);
    }
    if alive {
        // RFC 5043 forbids the sender to fragment; a receiver whose own
        // maximum holds the segment may take it, but then whole.
        let v = match read_via(&mut p, b, 0, n as u32, d) {
            Ok(after) if after == data => Verdict::pass(format!(
                "accepted: {n} octets placed whole (read back); the peer's maximum \
                 segment is larger than ours"
            )),
            Ok(after) => Verdict::fail(
                want,
                format!(
                    "the session carried on with {} of {n} octets placed",
                    after.iter().filter(|&&x| x == 0xEE).count()
                ),
            ),
            Err(e) => Verdict::fail(want, format!("the session carried on, then {e}")),
        };
        p.close();
        return Ok(v);
    }
    let note = match (&p.seen.terminate, p.seen.closed) {
        (Some((_, t)), true) => format!("Terminate {}, Session Terminate", t.summary()),
        (None, true) => "Session Terminate".into(),
        (Some((_, t)), false) => {
            let v = Verdict::fail(
                want,
                format!("Terminate {}, no Session Terminate", t.summary()),
            );
            p.close();
            return Ok(v);
        }
        (None, false) => {
            p.close();
            return Ok(Verdict::fail(want, "no answer in time"));
        }
    };
    p.close();
    Ok(match ctx.read_back(b, 0, FILL.len() as u32)? {
        Ok(after) => unplaced(want, &note, &after),
        Err(why) => Verdict::pass(format!("{note}; {why}")),
    })
}
