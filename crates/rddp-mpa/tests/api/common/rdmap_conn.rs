//! [`RdmapConn`]: a test driver of one MPA connection in FPDU mode, sans-IO,
//! over the product's engine: the verbs queue pair's [`RdmapStream`] through
//! [`RdmapPlacer`] and [`FpduReceiver`] (CRC, Markers, the RFC 6581 RTR check)
//! on receive, [`build_fpdu`] on transmit. RTRs and Terminates are the
//! engine's; the driver only holds the responder's first FPDU back (RFC 5044
//! §7.1.2) and turns the engine's events into an [`MpaError`].

use rddp_mpa::fpdu::{
    FpduReceiver, OutFpdu, Progress, RdmapPlacer, RxConfig, build_fpdu, write_rtr_fpdu,
};
use rddp_mpa::{MpaError, Negotiated, Role, Rtr};
use rddp_proto::ddp::DdpConfig;
use rddp_proto::mem::{MemoryTable, PdId, StreamId};
use rddp_proto::rdmap::{AsyncEvent, RdmapConfig, RdmapStream};
use rddp_wire::ddp::UNTAGGED_HDR_LEN;
use rddp_wire::{FpduEncoder, Terminate, TerminateCode, mulpdu};
use std::io::{self, Read};

/// An MPA connection in FPDU mode over any byte stream, sans-IO. The
/// stream is [`RdmapConn::rdmap`]: post work requests and poll completions
/// there; the tests' tables register their regions in PD 1.
#[derive(Debug)]
pub(crate) struct RdmapConn {
    pub rdmap: RdmapStream,
    rx: FpduReceiver,
    enc: FpduEncoder,
    neg: Negotiated,
    emss: usize,
    /// The initiator's Write RTR, sent first.
    rtr: Option<OutFpdu>,
    /// The responder sends nothing before the initiator's first FPDU (RFC 5044 §7.1.2).
    gate_open: bool,
    error: Option<MpaError>,
}

impl RdmapConn {
    /// FPDU mode as `neg` agreed, `emss` TCP's effective MSS, `leftover` the
    /// octets setup read past its frame. The initiator queues its RTR.
    pub(crate) fn new(neg: Negotiated, emss: usize, leftover: Vec<u8>) -> Result<Self, MpaError> {
        let (ird, ord) = neg.ird_ord.map_or((16, 16), |(i, o)| (i.into(), o.into()));
        let ddp = DdpConfig {
            mulpdu: mulpdu(emss, neg.markers_tx),
            ..DdpConfig::default()
        };
        let cfg = RdmapConfig { ddp, ird, ord };
        let mut rdmap =
            RdmapStream::new(StreamId(1), PdId(1), cfg).map_err(|e| MpaError::Stream(e.into()))?;
        let mut enc = FpduEncoder::new(neg.crc, neg.markers_tx);
        let initiator = neg.role == Role::Initiator;
        let mut rtr = None;
        match (initiator, neg.rtr) {
            (true, Some(Rtr::Write)) => rtr = Some(write_rtr_fpdu(&mut enc)),
            (true, Some(Rtr::Read)) => rdmap
                .post_read_rtr()
                .map_err(|e| MpaError::Options(e.to_string()))?,
            _ => {}
        }
        let cfg = RxConfig {
            crc: neg.crc,
            markers: neg.markers_rx,
            max_ulpdu: mulpdu(emss, neg.markers_rx),
            expect_rtr: if initiator { None } else { neg.rtr },
        };
        Ok(Self {
            rdmap,
            rx: FpduReceiver::new(cfg, leftover),
            enc,
            neg,
            emss,
            rtr,
            gate_open: initiator,
            error: None,
        })
    }

    pub(crate) fn negotiated(&self) -> &Negotiated {
        &self.neg
    }

    /// Whether FPDUs may leave: the responder saw the initiator's first FPDU
    /// (its RTR in peer-to-peer mode), or is sending its Terminate.
    pub(crate) fn gate_open(&self) -> bool {
        self.gate_open
    }

    pub(crate) fn emss(&self) -> usize {
        self.emss
    }

    /// TCP's effective MSS changed: MULPDU follows it for sends at once; the
    /// receive limit only grows, FPDUs built for a larger EMSS stay legal
    /// (RFC 5044 §4).
    pub(crate) fn set_emss(&mut self, emss: usize) -> Result<(), MpaError> {
        let tx = mulpdu(emss, self.neg.markers_tx);
        self.rdmap
            .ddp_mut()
            .set_mulpdu(tx)
            .map_err(|e| MpaError::Stream(e.into()))?;
        let rx = mulpdu(emss, self.neg.markers_rx).max(self.rx.max_ulpdu());
        self.rx.set_max_ulpdu(rx);
        self.emss = emss;
        Ok(())
    }

    /// Payload octets read from the source straight into their place.
    pub(crate) fn direct_bytes(&self) -> u64 {
        self.rx.placed_octets()
    }

    /// The stream died (a Terminate) or its LLP ended.
    pub(crate) fn is_dead(&self) -> bool {
        self.rdmap.flushes_new_work()
    }

    /// Why the connection died, from the engine's events (taken once).
    pub(crate) fn take_error(&mut self) -> Option<MpaError> {
        while let Some(ev) = self.rdmap.poll_event() {
            let e = match ev {
                AsyncEvent::TerminateSent { code, detail } => MpaError::LocalTerminate {
                    terminate: Terminate::bare(code),
                    detail,
                },
                AsyncEvent::TerminateReceived {
                    code, terminate, ..
                } => {
                    let code = code.unwrap_or(TerminateCode::MPA_LOCAL_CATASTROPHIC);
                    MpaError::RemoteTerminate(terminate.unwrap_or_else(|| Terminate::bare(code)))
                }
                AsyncEvent::Closed { .. } => MpaError::ConnectionLost,
            };
            self.error.get_or_insert(e);
        }
        self.error.take()
    }

    /// The next FPDU to write whole, or `None`.
    pub(crate) fn poll_transmit(&mut self) -> Option<OutFpdu> {
        if let Some(f) = self.rtr.take() {
            return Some(f);
        }
        if !self.gate_open {
            return None;
        }
        let seg = self.rdmap.poll_segment()?;
        let mut hdr = [0u8; UNTAGGED_HDR_LEN];
        let n = seg.header.emit(&mut hdr).ok()?;
        // Each FPDU is built whole: a region's lease is copied.
        self.rdmap.count_copied(0, seg.payload.leased_len());
        Some(build_fpdu(&mut self.enc, &hdr[..n], seg.payload.to_bytes()))
    }

    /// Read FPDUs from `src` until it would block, ends or the stream dies;
    /// payloads straight into their place. At its end or an I/O error the LLP
    /// is closed.
    pub(crate) fn drive(&mut self, mem: &MemoryTable, src: &mut impl Read) -> io::Result<Progress> {
        let mut p = RdmapPlacer::new(&mut self.rdmap, mem);
        let got = self.rx.drive(src, &mut p);
        // As the queue pair: the gate opens also for a Terminate.
        self.gate_open |= p.first_fpdu_seen || self.rdmap.is_terminated();
        match &got {
            Ok(Progress::Eof { .. }) => self.rdmap.on_llp_closed(true),
            Err(_) => self.rdmap.on_llp_closed(false),
            Ok(_) => {}
        }
        got
    }

    /// Every octet of `input`, as a source that then would block.
    pub(crate) fn on_bytes(&mut self, mem: &MemoryTable, input: &[u8]) {
        let _ = self.drive(mem, &mut Feed(input));
    }
}

/// A byte slice as a source that would block at its end.
pub(crate) struct Feed<'a>(pub &'a [u8]);

impl Read for Feed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.0.read(buf)
    }
}
