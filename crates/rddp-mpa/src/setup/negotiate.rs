//! Negotiation rules as pure functions (RFC 5044 §7.1.1; RFC 6581), unit-tested as truth
//! tables.

use super::Rtr;
use crate::options::{MpaOptions, RtrTypes};
use rddp_wire::EnhancedBlock;

/// CRC is used in both directions when either side set C (RFC 5044 §7.1.1).
pub fn crc_in_use(req_c: bool, rep_c: bool) -> bool {
    req_c || rep_c
}

/// Responder's RTR choice from the initiator's offer (RFC 6581): Write if
/// offered and accepted, else Read; never the zero-length Send (B).
pub fn choose_rtr(offer: &EnhancedBlock, accept: RtrTypes) -> Option<Rtr> {
    if !offer.p2p {
        return None;
    }
    if offer.rtr_write && accept.write {
        Some(Rtr::Write)
    } else if offer.rtr_read && accept.read {
        Some(Rtr::Read)
    } else {
        None
    }
}

/// The RTR a Reply selected, checked against the initiator's own Request block
/// `offered` (RFC 6581). `Err` means "no matching RTR option" (RFC 6581:
/// Terminate 2/0/0x07): a type we did not offer or not exactly one type with A=1,
/// and, when we offered no peer-to-peer mode at all, any A=1 or RTR type in the
/// Reply (we would otherwise send an RTR the responder cannot expect from us).
pub(crate) fn reply_rtr(offered: &EnhancedBlock, reply: &EnhancedBlock) -> Result<Option<Rtr>, ()> {
    let any_type = reply.rtr_send || reply.rtr_write || reply.rtr_read;
    if !offered.p2p {
        return if reply.p2p || any_type {
            Err(())
        } else {
            Ok(None)
        };
    }
    if !reply.p2p {
        return Ok(None);
    }
    match (reply.rtr_send, reply.rtr_write, reply.rtr_read) {
        (false, true, false) if offered.rtr_write => Ok(Some(Rtr::Write)),
        (false, false, true) if offered.rtr_read => Ok(Some(Rtr::Read)),
        _ => Err(()),
    }
}

/// Responder's (IRD, ORD) for its Reply (RFC 6581, siw's relaxed rule): ORD
/// lowered to the initiator's IRD; IRD raised to the initiator's ORD up to our own
/// limit (`opts.ird`); at least 1 when the Read RTR will use a slot.
pub(crate) fn responder_ird_ord(
    req: &EnhancedBlock,
    opts: &MpaOptions,
    rtr: Option<Rtr>,
) -> (u16, u16) {
    let cap = opts.ird.min(EnhancedBlock::IRD_ORD_MAX);
    let want = if req.ord == EnhancedBlock::IRD_ORD_MAX {
        cap
    } else {
        req.ord
    };
    let mut ird = want.min(cap);
    if rtr == Some(Rtr::Read) {
        ird = ird.max(1);
    }
    let ord = if req.ird == EnhancedBlock::IRD_ORD_MAX {
        opts.ord
    } else {
        opts.ord.min(req.ird)
    };
    (ird, ord)
}

/// Initiator's final (IRD, ORD) after the Reply (RFC 6581). `Err` means
/// insufficient IRD (Terminate 2/0/0x06): always when the responder's ORD exceeds
/// our IRD or when it picked the Read RTR with IRD 0 (the RTR takes one of its IRD
/// slots, RFC 6581), and in strict mode also when our ORD
/// exceeds its IRD. 0x3FFF means "not given" (Intel practice) and never fails.
pub(crate) fn initiator_ird_ord(
    ours: (u16, u16),
    reply: &EnhancedBlock,
    rtr: Option<Rtr>,
    strict: bool,
) -> Result<(u16, u16), ()> {
    let (ird, ord) = ours;
    let given = |v: u16| v != EnhancedBlock::IRD_ORD_MAX;
    if given(reply.ord) && reply.ord > ird {
        return Err(());
    }
    if rtr == Some(Rtr::Read) && reply.ird == 0 {
        return Err(());
    }
    if given(reply.ird) && ord > reply.ird {
        if strict {
            return Err(());
        }
        return Ok((ird, reply.ird));
    }
    Ok((ird, ord))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(p2p: bool, b: bool, c: bool, d: bool, ird: u16, ord: u16) -> EnhancedBlock {
        EnhancedBlock {
            p2p,
            rtr_send: b,
            ird,
            rtr_write: c,
            rtr_read: d,
            ord,
        }
    }
    const BOTH: RtrTypes = RtrTypes {
        write: true,
        read: true,
    };
    const READ: RtrTypes = RtrTypes {
        write: false,
        read: true,
    };

    #[test]
    fn crc_is_ored() {
        let t = [
            (false, false, false),
            (true, false, true),
            (false, true, true),
            (true, true, true),
        ];
        for (a, b, r) in t {
            assert_eq!(crc_in_use(a, b), r);
        }
    }

    #[test]
    fn rtr_choice() {
        assert_eq!(
            choose_rtr(&blk(true, false, true, true, 1, 1), BOTH),
            Some(Rtr::Write)
        );
        assert_eq!(
            choose_rtr(&blk(true, false, true, true, 1, 1), READ),
            Some(Rtr::Read)
        );
        assert_eq!(
            choose_rtr(&blk(true, false, false, true, 1, 1), BOTH),
            Some(Rtr::Read)
        );
        // Only the zero-length Send offered: we never use it.
        assert_eq!(choose_rtr(&blk(true, true, false, false, 1, 1), BOTH), None);
        assert_eq!(choose_rtr(&blk(false, false, true, true, 1, 1), BOTH), None);
    }

    #[test]
    fn reply_rtr_checks() {
        let offer = blk(true, false, true, true, 1, 1);
        let offer_read = blk(true, false, false, true, 1, 1);
        let no_p2p = blk(false, false, false, false, 1, 1);
        assert_eq!(
            reply_rtr(&offer, &blk(true, false, true, false, 1, 1)),
            Ok(Some(Rtr::Write))
        );
        assert_eq!(
            reply_rtr(&offer_read, &blk(true, false, true, false, 1, 1)),
            Err(())
        );
        assert_eq!(
            reply_rtr(&offer, &blk(true, false, true, true, 1, 1)),
            Err(())
        );
        assert_eq!(
            reply_rtr(&offer, &blk(true, true, false, false, 1, 1)),
            Err(())
        );
        assert_eq!(
            reply_rtr(&offer, &blk(true, false, false, false, 1, 1)),
            Err(())
        );
        assert_eq!(
            reply_rtr(&offer, &blk(false, false, false, false, 1, 1)),
            Ok(None)
        );
        // No peer-to-peer offered: A=1 or any RTR type is no match.
        assert_eq!(
            reply_rtr(&no_p2p, &blk(false, false, false, false, 1, 1)),
            Ok(None)
        );
        for r in [
            blk(true, false, true, false, 1, 1),
            blk(true, false, false, true, 1, 1),
            blk(true, false, false, false, 1, 1),
            blk(false, false, true, false, 1, 1),
            blk(false, true, false, false, 1, 1),
        ] {
            assert_eq!(reply_rtr(&no_p2p, &r), Err(()), "{r:?}");
        }
    }

    #[test]
    fn ird_ord() {
        let opts = MpaOptions {
            ird: 8,
            ord: 8,
            ..MpaOptions::default()
        };
        // Initiator IRD 4, ORD 16: we lower our ORD to 4 and raise IRD only to our cap.
        assert_eq!(
            responder_ird_ord(&blk(true, false, true, true, 4, 16), &opts, None),
            (8, 4)
        );
        assert_eq!(
            responder_ird_ord(&blk(true, false, true, true, 4, 2), &opts, None),
            (2, 4)
        );
        assert_eq!(
            responder_ird_ord(&blk(true, false, true, true, 4, 0), &opts, Some(Rtr::Read)),
            (1, 4)
        );
        assert_eq!(
            initiator_ird_ord((4, 16), &blk(true, false, true, false, 8, 4), None, false),
            Ok((4, 8))
        );
        assert_eq!(
            initiator_ird_ord((4, 16), &blk(true, false, true, false, 8, 4), None, true),
            Err(())
        );
        assert_eq!(
            initiator_ird_ord((4, 4), &blk(true, false, true, false, 8, 5), None, false),
            Err(())
        );
        assert_eq!(
            initiator_ird_ord(
                (4, 4),
                &blk(true, false, true, false, 0x3FFF, 0x3FFF),
                None,
                true
            ),
            Ok((4, 4))
        );
        // The Read RTR needs one IRD slot at the responder; the Write RTR none.
        let ird0 = blk(true, false, false, true, 0, 1);
        assert_eq!(
            initiator_ird_ord((4, 4), &ird0, Some(Rtr::Read), false),
            Err(())
        );
        assert_eq!(
            initiator_ird_ord((4, 4), &ird0, Some(Rtr::Write), false),
            Ok((4, 0))
        );
        assert_eq!(
            initiator_ird_ord(
                (4, 4),
                &blk(true, false, false, true, 1, 1),
                Some(Rtr::Read),
                false
            ),
            Ok((4, 1))
        );
    }
}
