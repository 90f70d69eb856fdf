//! The initiator (active opener) side of MPA setup (RFC 5044 §7.1.2; RFC 6581).
//!
//! Sends the Request at once, then nothing until the Reply arrives or the
//! deadline passes. A Reply with a wrong key, unknown Rev or PD_Length > 512 ends
//! the connection (close, RFC 5044 §8); R=1 is a refusal; an RTR type we did not
//! offer (or peer-to-peer mode when we offered none) or an IRD we cannot live with
//! gets a Terminate (2/0/0x07, 2/0/0x06) as the only FPDU, then close.

use super::negotiate::{crc_in_use, initiator_ird_ord, reply_rtr};
use super::reader::{FrameReader, Problem};
use super::{Negotiated, Role, SetupStatus};
use crate::error::MpaError;
use crate::fpdu::terminate_fpdu;
use crate::options::MpaOptions;
use rddp_wire::mpa::MPA_MAX_PD;
use rddp_wire::mpa::frame::ENHANCED_LEN;
use rddp_wire::{
    EnhancedBlock, FpduEncoder, FrameKind, MpaFlags, MpaFrame, Terminate, TerminateCode,
};
use std::time::Instant;

/// The active side of MPA setup, sans-IO: sends the Request and reads the
/// Reply (RFC 5044, RFC 6581).
#[derive(Debug)]
pub struct Initiator {
    crc: bool,
    markers: bool,
    /// Our Request's enhanced block (Rev 2): the RTR types and IRD/ORD offered.
    offered: Option<EnhancedBlock>,
    strict_ird: bool,
    deadline: Instant,
    reader: FrameReader,
    tx: Option<Vec<u8>>,
    status: SetupStatus,
    result: Option<Result<Negotiated, MpaError>>,
}

/// Check the ULP's options against what a Request or Reply can carry: Rev 1 or
/// 2, private data within its revision's limit (RFC 5044 §7.1.1), IRD and ORD within
/// their 14-bit fields (RFC 6581), so that what we announce is what
/// we use.
pub(crate) fn check_options(opts: &MpaOptions) -> Result<(), MpaError> {
    if !(1..=2).contains(&opts.rev) {
        return Err(MpaError::UnsupportedRev(opts.rev));
    }
    check_ird_ord(opts)?;
    let limit = MPA_MAX_PD - if opts.rev == 2 { ENHANCED_LEN } else { 0 };
    if opts.private_data.len() > limit {
        return Err(MpaError::PrivateDataTooLong(opts.private_data.len()));
    }
    Ok(())
}

/// IRD and ORD within their 14-bit fields (RFC 6581).
pub(crate) fn check_ird_ord(opts: &MpaOptions) -> Result<(), MpaError> {
    let max = EnhancedBlock::IRD_ORD_MAX;
    for (name, v) in [("IRD", opts.ird), ("ORD", opts.ord)] {
        if v > max {
            return Err(MpaError::Options(format!(
                "{name} {v} does not fit the 14-bit MPA field (at most {max})"
            )));
        }
    }
    Ok(())
}

impl Initiator {
    /// Build the Request; it is ready in [`Self::poll_transmit`]. Fails on a local
    /// mistake (Rev not 1 or 2, too much private data, IRD/ORD above 14 bits,
    /// peer-to-peer mode with no RTR type we can send).
    pub fn new(opts: &MpaOptions, now: Instant) -> Result<Self, MpaError> {
        check_options(opts)?;
        // The Read RTR takes one of our ORD slots (RFC 6581): with ORD 0
        // we could never send it, so we do not offer it.
        let rtr_write = opts.p2p && opts.rtr.write;
        let rtr_read = opts.p2p && opts.rtr.read && opts.ord >= 1;
        if opts.rev == 2 && opts.p2p && !rtr_write && !rtr_read {
            return Err(MpaError::Options(format!(
                "peer-to-peer mode needs an RTR type we can send: the Write RTR, or the \
                 Read RTR with ORD >= 1 (asked: {:?}, ORD {})",
                opts.rtr, opts.ord
            )));
        }
        let offered = (opts.rev == 2).then_some(EnhancedBlock {
            p2p: opts.p2p,
            rtr_send: false,
            ird: opts.ird,
            rtr_write,
            rtr_read,
            ord: opts.ord,
        });
        let flags = MpaFlags::new(opts.markers, opts.crc, false, offered.is_some());
        let req = MpaFrame::new(
            FrameKind::Request,
            flags,
            opts.rev,
            offered,
            opts.private_data.clone(),
        );
        let bytes = req
            .to_vec()
            .map_err(|e| MpaError::InvalidFrame(e.to_string()))?;
        Ok(Self {
            crc: opts.crc,
            markers: opts.markers,
            offered,
            strict_ird: opts.strict_ird,
            deadline: now + opts.reply_timeout,
            reader: FrameReader::new(FrameKind::Reply),
            tx: Some(bytes),
            status: SetupStatus::Pending,
            result: None,
        })
    }

    /// Where setup stands.
    pub fn status(&self) -> SetupStatus {
        self.status
    }

    /// Octets to send: the Request, or a Terminate after a bad Reply.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.tx.take()
    }

    /// When the Reply wait ends, while pending.
    pub fn deadline(&self) -> Option<Instant> {
        (self.status == SetupStatus::Pending).then_some(self.deadline)
    }

    /// Fail with [`MpaError::Timeout`] if `now` is past the deadline.
    pub fn on_timeout(&mut self, now: Instant) {
        if self.status == SetupStatus::Pending && now >= self.deadline {
            self.fail(MpaError::Timeout);
        }
    }

    /// The outcome, once `status` is `Established` or `Failed` (taken once).
    pub fn take_result(&mut self) -> Option<Result<Negotiated, MpaError>> {
        self.result.take()
    }

    fn fail(&mut self, e: MpaError) {
        self.status = SetupStatus::Failed;
        self.result = Some(Err(e));
    }

    /// Octets from the responder. Returns how many were consumed: octets after the
    /// Reply are FPDUs and are left to the caller.
    pub fn on_bytes(&mut self, input: &[u8]) -> usize {
        if self.status != SetupStatus::Pending {
            return 0;
        }
        match self.reader.push(input) {
            Ok((n, None)) => n,
            Ok((n, Some(reply))) => {
                self.on_reply(reply);
                n
            }
            Err(p) => {
                self.fail(match p {
                    Problem::BadKey => MpaError::BadKey,
                    Problem::BadRev(r) => MpaError::UnsupportedRev(r),
                    Problem::PdTooLong(l) => MpaError::PrivateDataTooLong(l),
                    Problem::Invalid(s) => MpaError::InvalidFrame(s),
                });
                input.len()
            }
        }
    }

    fn on_reply(&mut self, reply: MpaFrame) {
        if reply.flags.reject() {
            return self.fail(MpaError::Rejected {
                private_data: reply.private_data,
            });
        }
        let sent_rev = if self.offered.is_some() { 2 } else { 1 };
        if reply.rev > sent_rev {
            return self.fail(MpaError::InvalidFrame(format!(
                "Reply Rev {} is above the Request's Rev {sent_rev}",
                reply.rev
            )));
        }
        let crc = crc_in_use(self.crc, reply.flags.crc());
        let mut neg = Negotiated {
            role: Role::Initiator,
            rev: reply.rev,
            crc,
            markers_tx: reply.flags.markers(),
            markers_rx: self.markers,
            rtr: None,
            ird_ord: None,
            peer_ird_ord: None,
            peer_private_data: reply.private_data,
        };
        // A Rev 1 Reply (or Rev 2 without E) downgrades: no IRD/ORD, no RTR.
        if let (Some(ours), Some(theirs)) = (self.offered, reply.enhanced) {
            neg.peer_ird_ord = Some((theirs.ird, theirs.ord));
            let Ok(rtr) = reply_rtr(&ours, &theirs) else {
                let why = if ours.p2p {
                    "the Reply chose an RTR type we did not offer"
                } else {
                    "the Reply chose peer-to-peer mode or an RTR type, and we offered neither"
                };
                return self.terminate(&neg, TerminateCode::MPA_NO_MATCHING_RTR, why);
            };
            neg.rtr = rtr;
            match initiator_ird_ord((ours.ird, ours.ord), &theirs, rtr, self.strict_ird) {
                Ok(v) => neg.ird_ord = Some(v),
                Err(()) => {
                    return self.terminate(
                        &neg,
                        TerminateCode::MPA_INSUFFICIENT_IRD,
                        "the responder's IRD/ORD do not fit ours (or it chose the Read \
                         RTR with IRD 0)",
                    );
                }
            }
        }
        self.status = SetupStatus::Established;
        self.result = Some(Ok(neg));
    }

    /// In FPDU mode already (the Reply was valid MPA): send a Terminate as the
    /// first and last FPDU, then fail (RFC 6581; RFC 5044 §8).
    fn terminate(&mut self, neg: &Negotiated, code: TerminateCode, why: &str) {
        let term = Terminate::bare(code);
        let mut enc = FpduEncoder::new(neg.crc, neg.markers_tx);
        self.tx = Some(terminate_fpdu(&term, &mut enc));
        self.fail(MpaError::LocalTerminate {
            terminate: term,
            detail: why.into(),
        });
    }
}
