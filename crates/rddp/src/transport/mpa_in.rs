//! The receive half of an MPA queue pair on the event loop: octets from the
//! socket cut into CRC-checked ULPDUs (rddp-mpa's `Receiver`), the RTR and
//! gate rules of spec §4.9 / RFC 6581, each DDP segment handed to the engine.
//!
//! Memory: the loop thread's read buffer is shared by every connection on that
//! thread (the caller's); a `Receiver` buffers only an FPDU split across reads
//! (at most one ULPDU, freed once handed up), so an idle connection holds no
//! buffer at all.

use rddp_mpa::Rtr;
use rddp_mpa::fpdu::{Receiver, terminate_for_wire};
use rddp_mpa::pcap::TcpEndpoint;
use rddp_wire::ddp::{TAGGED_HDR_LEN, UNTAGGED_HDR_LEN};
use rddp_wire::{Opcode, RdmapControl, TerminateCode};
use std::ops::ControlFlow;

/// What the engine hears from [`MpaIn::feed`].
pub(crate) trait Upcalls {
    /// One DDP segment (`seq`: its place, counted from 0 after setup).
    fn segment(&mut self, seq: u64, ulpdu: &[u8]);
    /// A fatal error in the peer's octets: a Terminate with `code` goes out.
    fn error(&mut self, code: TerminateCode, detail: String);
    /// The responder may transmit now (spec §4.9).
    fn open_gate(&mut self);
}

pub(crate) struct MpaIn {
    rx: Receiver,
    /// Octets read during setup after the Reply, fed first.
    pub pending: Vec<u8>,
    seq: u64,
    /// Responder in peer-to-peer mode: the RTR the first FPDU must be.
    expect_rtr: Option<Rtr>,
    /// The gate is still closed (a responder before the initiator's first FPDU).
    gate_closed: bool,
    /// A framing error was found: nothing after it is trusted.
    pub failed: bool,
    /// This connection in the process's capture (`--pcap`).
    pub wire: Option<TcpEndpoint>,
}

impl MpaIn {
    pub fn new(
        rx: Receiver,
        pending: Vec<u8>,
        expect_rtr: Option<Rtr>,
        gate_closed: bool,
        wire: Option<TcpEndpoint>,
    ) -> Self {
        Self {
            rx,
            pending,
            seq: 0,
            expect_rtr,
            gate_closed,
            failed: false,
            wire,
        }
    }

    /// Feed octets read from the socket.
    pub fn feed(&mut self, input: &[u8], up: &mut impl Upcalls) {
        if self.failed {
            return;
        }
        let Self {
            rx,
            seq,
            expect_rtr,
            gate_closed,
            ..
        } = self;
        let mut error = None;
        let res = rx.feed(input, |ulpdu| {
            if *seq == 0 {
                if let Some(want) = expect_rtr.take()
                    && !is_rtr(want, ulpdu)
                {
                    error = Some((
                        TerminateCode::MPA_NO_MATCHING_RTR,
                        format!("the initiator's first FPDU is not the agreed {want:?} RTR"),
                    ));
                    return ControlFlow::Break(());
                }
                if std::mem::take(gate_closed) {
                    up.open_gate();
                }
            }
            up.segment(*seq, ulpdu);
            *seq += 1;
            ControlFlow::Continue(())
        });
        if let Err(e) = res {
            // Which FPDU (counted from 0 after setup) failed, so a capture or an
            // impairing bridge can tell which one was refused.
            error = Some((
                terminate_for_wire(&e).code,
                format!("MPA framing: {e} (FPDU {seq} after setup)"),
            ));
        }
        if let Some((code, detail)) = error {
            self.failed = true;
            // The initiator is sending FPDUs, so it is in FPDU mode: the Terminate
            // for its bad first FPDU (wrong RTR, bad CRC) may go out (spec §4.9).
            if std::mem::take(&mut self.gate_closed) {
                up.open_gate();
            }
            up.error(code, detail);
        }
    }
}

/// Whether a ULPDU is the RFC 6581 RTR of kind `want`.
fn is_rtr(want: Rtr, u: &[u8]) -> bool {
    let op = u.get(1).map(|c| RdmapControl(*c).opcode());
    match want {
        Rtr::Write => {
            u.len() == TAGGED_HDR_LEN && u[0] & 0x80 != 0 && op == Some(Opcode::RDMA_WRITE)
        }
        Rtr::Read => {
            u.len() == UNTAGGED_HDR_LEN + rddp_wire::READ_REQ_HDR_LEN
                && u[0] & 0x80 == 0
                && op == Some(Opcode::READ_REQUEST)
                && u[UNTAGGED_HDR_LEN + 12..UNTAGGED_HDR_LEN + 16] == [0; 4]
        }
    }
}
