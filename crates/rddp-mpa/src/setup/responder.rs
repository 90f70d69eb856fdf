//! The responder (passive opener) side of MPA setup (RFC 5044 §7.1.1, §7.1.2; RFC 6581).
//!
//! Refusals (RFC 5044 §7.1.1, §8): a wrong key is not an MPA peer, so we only close;
//! Rev 0 (pre-standard) is closed too (siw answers only Rev >= 1). Rev above 2 is
//! answered with a Reply R=1 carrying our Rev 2, so the initiator can retry lower;
//! PD_Length > 512 from a valid MPA peer is answered with R=1 (Rev echoed). The ULP
//! may also reject a valid Request. Octets from the initiator after its Request and
//! before our Reply break RFC 5044 §7.1.2 and close the connection.

use super::initiator::check_options;
use super::negotiate::{choose_rtr, crc_in_use, responder_ird_ord};
use super::reader::{FrameReader, Problem};
use super::{Negotiated, Role, SetupStatus};
use crate::error::MpaError;
use crate::options::MpaOptions;
use rddp_wire::mpa::frame::MAX_REV;
use rddp_wire::{EnhancedBlock, FrameKind, MpaFlags, MpaFrame};
use std::time::Instant;

/// What the initiator asked for, shown to the ULP before it accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRequest {
    /// The Request's revision.
    pub rev: u8,
    /// Its flags: Markers, CRC.
    pub flags: MpaFlags,
    /// Its RFC 6581 block (Rev 2): IRD, ORD and the RTR types offered.
    pub enhanced: Option<EnhancedBlock>,
    /// The initiator ULP's private data (enhanced block removed).
    pub private_data: Vec<u8>,
}

/// How the ULP accepts a Request: the Reply's private data and, if it has
/// its own, the IRD and ORD to answer with instead of the options' (as
/// `rdma_accept`'s conn_param gives them; RFC 6581 section 5.1: each side
/// offers its own limits, the Reply's still lowered to what the Request
/// allows).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accept {
    /// The Reply's private data.
    pub private_data: Vec<u8>,
    /// `(IRD, ORD)` to offer; `None`: the options'.
    pub ird_ord: Option<(u16, u16)>,
}

impl From<Vec<u8>> for Accept {
    fn from(private_data: Vec<u8>) -> Self {
        Self {
            private_data,
            ird_ord: None,
        }
    }
}

/// The passive side of MPA setup, sans-IO: reads the Request, lets the ULP
/// accept or refuse it, sends the Reply (RFC 5044, RFC 6581).
#[derive(Debug)]
pub struct Responder {
    opts: MpaOptions,
    deadline: Instant,
    reader: FrameReader,
    request: Option<PeerRequest>,
    tx: Option<Vec<u8>>,
    status: SetupStatus,
    result: Option<Result<Negotiated, MpaError>>,
}

impl Responder {
    /// Wait for a Request until `now + opts.request_timeout`.
    pub fn new(opts: &MpaOptions, now: Instant) -> Self {
        Self {
            opts: opts.clone(),
            deadline: now + opts.request_timeout,
            reader: FrameReader::new(FrameKind::Request),
            request: None,
            tx: None,
            status: SetupStatus::Pending,
            result: None,
        }
    }

    /// Answer with `opts` instead of the options the Request was read with (a
    /// listener reads every Request with its own; each accept may bring its own,
    /// e.g. a queue pair's IRD/ORD, RFC 6581). The deadline stays.
    pub fn set_options(&mut self, opts: &MpaOptions) {
        self.opts = opts.clone();
    }

    /// Where setup stands.
    pub fn status(&self) -> SetupStatus {
        self.status
    }

    /// The Request, once `status` is `Requested`.
    pub fn request(&self) -> Option<&PeerRequest> {
        self.request.as_ref()
    }

    /// Octets to send: the Reply (accepting or refusing).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.tx.take()
    }

    /// The deadline for the Request (the driver also applies it to the first FPDU).
    pub fn deadline(&self) -> Option<Instant> {
        matches!(self.status, SetupStatus::Pending | SetupStatus::Requested)
            .then_some(self.deadline)
    }

    /// Fail with [`MpaError::Timeout`] if the deadline has passed at `now`.
    pub fn on_timeout(&mut self, now: Instant) {
        if self.deadline().is_some() && now >= self.deadline {
            self.fail(MpaError::Timeout);
        }
    }

    /// What setup ended with, once: what was agreed, or why it failed.
    pub fn take_result(&mut self) -> Option<Result<Negotiated, MpaError>> {
        self.result.take()
    }

    fn fail(&mut self, e: MpaError) {
        self.status = SetupStatus::Failed;
        self.result = Some(Err(e));
    }

    /// Octets from the initiator; returns how many were consumed. Nothing is
    /// consumed once the Reply has been produced: those octets are FPDUs.
    pub fn on_bytes(&mut self, input: &[u8]) -> usize {
        match self.status {
            SetupStatus::Pending => {}
            SetupStatus::Requested => {
                if !input.is_empty() {
                    self.fail(MpaError::InvalidFrame(
                        "initiator sent octets before our Reply".into(),
                    ));
                }
                return input.len();
            }
            SetupStatus::Established | SetupStatus::Failed => return 0,
        }
        match self.reader.push(input) {
            Ok((n, None)) => n,
            Ok((n, Some(f))) => {
                self.request = Some(PeerRequest {
                    rev: f.rev,
                    flags: f.flags,
                    enhanced: f.enhanced,
                    private_data: f.private_data,
                });
                self.status = SetupStatus::Requested;
                // Anything after the Request came before our Reply: a violation.
                self.on_bytes(&input[n..]);
                input.len()
            }
            Err(p) => {
                let flags = self.reader.flags_rev();
                let e = match p {
                    Problem::BadKey => MpaError::BadKey,
                    Problem::BadRev(r) => {
                        if r > MAX_REV {
                            self.reply_reject(MAX_REV, flags.map(|f| f.0), Vec::new());
                        }
                        MpaError::UnsupportedRev(r)
                    }
                    Problem::PdTooLong(l) => {
                        let rev = flags.map_or(1, |f| f.1);
                        self.reply_reject(rev, flags.map(|f| f.0), Vec::new());
                        MpaError::PrivateDataTooLong(l)
                    }
                    Problem::Invalid(s) => MpaError::InvalidFrame(s),
                };
                self.fail(MpaError::Refused(Box::new(e)));
                input.len()
            }
        }
    }

    /// A Reply with R=1, Rev `rev`, C as we would use it, no enhanced block.
    fn reply_reject(&mut self, rev: u8, peer_flags: Option<MpaFlags>, pd: Vec<u8>) {
        let crc = crc_in_use(self.opts.crc, peer_flags.is_some_and(|f| f.crc()));
        let flags = MpaFlags::new(false, crc, true, false);
        let reply = MpaFrame::new(FrameKind::Reply, flags, rev, None, pd);
        self.tx = reply.to_vec().ok();
    }

    /// The ULP refuses the Request: Reply with R=1 and its private data, then close.
    pub fn reject(&mut self, private_data: Vec<u8>) -> Result<(), MpaError> {
        let Some(req) = self
            .request
            .take()
            .filter(|_| self.status == SetupStatus::Requested)
        else {
            return Err(MpaError::InvalidFrame("no Request to reject".into()));
        };
        let mut pd = private_data;
        pd.truncate(rddp_wire::mpa::MPA_MAX_PD);
        self.reply_reject(req.rev, Some(req.flags), pd);
        self.fail(MpaError::Refused(Box::new(MpaError::InvalidFrame(
            "rejected by the local ULP".into(),
        ))));
        Ok(())
    }

    /// The ULP accepts with `opts.private_data`: Reply with the negotiated settings
    /// (RFC 5044 §7.1.1: C ORed, our M; RFC 6581: RTR chosen, IRD/ORD). Returns the settings
    /// for FPDU mode; the responder must still wait for the first FPDU before
    /// sending any (RFC 5044 §7.1.2; the verbs queue pair's gate enforces it).
    pub fn accept(&mut self) -> Result<(), MpaError> {
        let pd = self.opts.private_data.clone();
        self.accept_with(pd)
    }

    /// As [`Self::accept`], with the ULP's Reply private data chosen now (e.g.
    /// after looking at [`Self::request`]).
    pub fn accept_with(&mut self, private_data: Vec<u8>) -> Result<(), MpaError> {
        self.opts.private_data = private_data;
        if self.status != SetupStatus::Requested {
            return Err(MpaError::InvalidFrame("no Request to accept".into()));
        }
        let Some(req) = self.request.clone() else {
            return Err(MpaError::InvalidFrame("no Request to accept".into()));
        };
        let rev = req.rev.min(self.opts.rev);
        let mut o = self.opts.clone();
        o.rev = rev;
        check_options(&o)?;
        let crc = crc_in_use(self.opts.crc, req.flags.crc());
        let their = if rev == 2 { req.enhanced } else { None };
        let rtr = their.and_then(|b| {
            if self.opts.p2p {
                choose_rtr(&b, self.opts.rtr)
            } else {
                None
            }
        });
        let ours = their.map(|b| {
            let (ird, ord) = responder_ird_ord(&b, &self.opts, rtr);
            EnhancedBlock {
                p2p: rtr.is_some(),
                rtr_send: false,
                ird,
                rtr_write: rtr == Some(super::Rtr::Write),
                rtr_read: rtr == Some(super::Rtr::Read),
                ord,
            }
        });
        let flags = MpaFlags::new(self.opts.markers, crc, false, ours.is_some());
        let reply = MpaFrame::new(
            FrameKind::Reply,
            flags,
            rev,
            ours,
            self.opts.private_data.clone(),
        );
        self.tx = Some(
            reply
                .to_vec()
                .map_err(|e| MpaError::InvalidFrame(e.to_string()))?,
        );
        self.status = SetupStatus::Established;
        self.result = Some(Ok(Negotiated {
            role: Role::Responder,
            rev,
            crc,
            markers_tx: req.flags.markers(),
            markers_rx: self.opts.markers,
            rtr,
            ird_ord: ours.map(|b| (b.ird, b.ord)),
            peer_ird_ord: their.map(|b| (b.ird, b.ord)),
            peer_private_data: req.private_data,
        }));
        Ok(())
    }
}
