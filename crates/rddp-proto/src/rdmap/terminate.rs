//! Terminate (RFC 5040 §4.8, §6): built for every error with the right
//! Layer/EType/Code and M/D/R headers, sent as the last message; a received one is
//! reported and never answered.

use super::{AsyncEvent, RdmapStream, TxTrack, WcStatus};
use crate::ddp::DdpError;
use bytes::Bytes;
use rddp_wire::rdmap::qn;
use rddp_wire::read_request::ReadRequestHeader;
use rddp_wire::{DdpHeader, Opcode, ReceivedTerminate, Terminate, TerminateCode};

/// The Terminate describing a DDP validation failure: M=D=1 with the offending
/// header and segment length when the header can be trusted, else the code alone.
pub(super) fn from_ddp_error(e: &DdpError) -> Terminate {
    match e.header {
        Some(h) => Terminate::with_headers(e.code, seg_len(e.segment_len), h, None),
        None => Terminate::bare(e.code),
    }
}

/// M=D=1 (and R=1 with a Read Request header) for an error RDMAP found.
pub(super) fn with_header(
    code: TerminateCode,
    hdr: DdpHeader,
    segment_len: usize,
    rr: Option<ReadRequestHeader>,
) -> Terminate {
    Terminate::with_headers(code, seg_len(segment_len), hdr, rr)
}

fn seg_len(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

impl RdmapStream {
    /// A fatal error on this stream: queue the Terminate as the last message (the
    /// stream turns erroneous), flush pending work, tell the ULP. Once only.
    pub(super) fn fatal(&mut self, term: Terminate, detail: String) {
        if self.terminated {
            return;
        }
        self.terminated = true;
        let code = term.code;
        self.counters.terminates_sent.count(Some(code));
        // Every field of a Terminate we build is in range, so encoding succeeds;
        // if it did not, the code alone still goes out.
        let body = term
            .to_vec()
            .or_else(|_| Terminate::bare(code).to_vec())
            .unwrap_or_default();
        self.flush_in_flight();
        self.flush_sq();
        let rsvd = super::tx::rsvd(Opcode::TERMINATE, 0);
        if self
            .ddp
            .send_last(code, qn::TERMINATE, rsvd, Bytes::from(body))
            .is_ok()
        {
            self.tx.push_back(TxTrack::Terminate);
        }
        if code == TerminateCode::DDP_MSG_TOO_LONG {
            self.first_recv_status = Some(WcStatus::LocalLength);
        }
        self.events
            .push_back(AsyncEvent::TerminateSent { code, detail });
    }

    /// A fatal error found below DDP by the LLP (e.g. an MPA CRC error, RFC 5044 §4.4):
    /// a Terminate with the code alone goes out as the last message, then the LLP
    /// closes.
    pub fn llp_error(&mut self, code: TerminateCode, detail: String) {
        if code == TerminateCode::MPA_CRC_ERROR {
            self.counters.crc_errors += 1;
        }
        self.ddp.fail(code);
        self.fatal(Terminate::bare(code), detail);
    }

    /// The peer's Terminate arrived (QN 2): stop, report, never answer (RFC 5040 §4.8).
    /// Read as the peer meant it, siw's bitfield layout included (see
    /// [`ReceivedTerminate`]).
    pub(super) fn on_terminate_received(&mut self, body: &[u8]) {
        let received = ReceivedTerminate::decode(body);
        let terminate = received.terminate.clone();
        let code = received.code();
        let already = self.terminated;
        self.terminated = true;
        self.ddp
            .fail(code.unwrap_or(TerminateCode::RDMAP_OP_UNSPECIFIED));
        // The oldest outstanding Read is the likeliest victim: it gets the remote
        // status; everything else pending is flushed.
        if let Some(r) = self.orq.pop_front() {
            let status = match code {
                Some(c) if c.etype == 1 && c.layer <= 1 => WcStatus::RemoteAccess,
                _ => WcStatus::RemoteOperation,
            };
            self.read_done(r, status);
        }
        self.flush_all();
        if !already {
            self.counters.terminates_received.count(code);
            self.events.push_back(AsyncEvent::TerminateReceived {
                code,
                terminate,
                received: Box::new(received),
            });
        }
    }
}
