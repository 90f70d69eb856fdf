//! What the hostile peers say: an MPA Rev 1 Request (no CRC, no Markers), and
//! well-framed FPDUs the target must refuse; and how the target's FPDUs are read
//! back (a Terminate's code, or anything else).

use rddp_wire::rdmap::qn;
use rddp_wire::{
    DdpHeader, FpduDecoder, FpduEncoder, FrameKind, MpaFlags, MpaFrame, Opcode, RdmapControl,
    ReceivedTerminate, TaggedHeader, UntaggedHeader, frame_len,
};

/// An STag no region has: index 0xFFFFFF (the table hands out low indices
/// first), key 0. A Write to it is "Invalid STag", 1/1/0x00 (RFC 5041 §7.1).
pub(super) const INVALID_STAG: u32 = 0xFFFF_FF00;

/// Payload of each flooding Send: well below the target's receive buffers, so
/// the only thing wrong with a Send is that no buffer waits for its MSN.
pub(super) const FLOOD_PAYLOAD: usize = 64;

/// The Request: Rev 1 (RFC 5044), so no RTR is due and FPDU mode starts at once
/// after the Reply; C=0 and M=0 (the target's CRC policy decides the CRC).
pub(super) fn request() -> Vec<u8> {
    MpaFrame::new(
        FrameKind::Request,
        MpaFlags::new(false, false, false, false),
        1,
        None,
        Vec::new(),
    )
    .to_vec()
    .unwrap_or_default()
}

/// The Reply, once its octets are all in `buf`: Ok(Some(crc in use, octets
/// taken)), Ok(None) if more are needed, Err on a refusal or a bad frame.
pub(super) fn reply(buf: &[u8]) -> Result<Option<(bool, usize)>, String> {
    if buf.len() < 20 {
        return Ok(None);
    }
    let n = frame_len(buf).map_err(|e| format!("bad Reply: {e}"))?;
    if buf.len() < n {
        return Ok(None);
    }
    let f = MpaFrame::parse(&buf[..n]).map_err(|e| format!("bad Reply: {e}"))?;
    if f.kind != FrameKind::Reply {
        return Err("a Request came back".into());
    }
    if f.flags.reject() {
        return Err("Reply with R=1".into());
    }
    // CRC is in use if either side asked (RFC 5044 §7.1); we did not.
    Ok(Some((f.flags.crc(), n)))
}

/// The slow peer's one FPDU: an RDMA Write of 4 octets to [`INVALID_STAG`].
pub(super) fn bogus_write(crc: bool) -> Vec<u8> {
    let mut ulpdu = TaggedHeader::new(
        true,
        RdmapControl::new(Opcode::RDMA_WRITE).0,
        INVALID_STAG,
        0,
    )
    .to_bytes()
    .to_vec();
    ulpdu.extend_from_slice(b"slow");
    let mut out = Vec::new();
    let _ = FpduEncoder::new(crc, false).encode(&ulpdu, &mut out);
    out
}

/// One Send of the flood, MSN `msn`, appended to `out`.
pub(super) fn flood_send(enc: &mut FpduEncoder, msn: u32, out: &mut Vec<u8>) {
    let mut rsvd = [0u8; 5];
    rsvd[0] = RdmapControl::new(Opcode::SEND).0;
    let mut ulpdu = UntaggedHeader::new(true, rsvd, qn::SEND, msn, 0)
        .to_bytes()
        .to_vec();
    ulpdu.resize(ulpdu.len() + FLOOD_PAYLOAD, 0x5a);
    let _ = enc.encode(&ulpdu, out);
}

/// What the target sent, FPDU by FPDU.
pub(super) struct Incoming {
    dec: FpduDecoder,
    /// The first Terminate's code, "L/E/0xCC" (RFC 5040 §6 layout).
    pub terminate: Option<String>,
    /// FPDUs other than a Terminate (the advertisement, echoes).
    pub others: u64,
    /// The target's octets did not decode as FPDUs.
    pub broken: Option<String>,
}

impl Incoming {
    pub(super) fn new(crc: bool) -> Self {
        Self {
            dec: FpduDecoder::new(crc, false, 65535),
            terminate: None,
            others: 0,
            broken: None,
        }
    }

    pub(super) fn feed(&mut self, b: &[u8]) {
        if self.broken.is_some() {
            return;
        }
        let mut ulpdus = Vec::new();
        if let Err(e) = self.dec.feed(b, &mut ulpdus) {
            self.broken = Some(e.to_string());
        }
        for u in ulpdus {
            match DdpHeader::parse(&u) {
                Ok(DdpHeader::Untagged(h)) if h.qn == qn::TERMINATE => {
                    let t = ReceivedTerminate::decode(&u[h_len()..]);
                    let code = t.code().map_or_else(
                        || format!("undecodable {}", t.summary()),
                        |c| format!("{}/{}/{:#04x}", c.layer, c.etype, c.code),
                    );
                    self.terminate.get_or_insert(code);
                }
                Ok(_) => self.others += 1,
                Err(e) => {
                    self.broken.get_or_insert(e.to_string());
                }
            }
        }
    }
}

fn h_len() -> usize {
    rddp_wire::ddp::UNTAGGED_HDR_LEN
}

#[cfg(test)]
mod tests {
    use super::*;
    use rddp_wire::{Terminate, TerminateCode};

    #[test]
    fn the_bogus_write_is_one_well_framed_fpdu() {
        let w = bogus_write(false);
        let mut d = FpduDecoder::new(false, false, 65535);
        let mut out = Vec::new();
        d.feed(&w, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        match DdpHeader::parse(&out[0]).unwrap() {
            DdpHeader::Tagged(h) => assert_eq!(h.stag, INVALID_STAG),
            h => panic!("{h:?}"),
        }
    }

    #[test]
    fn a_terminate_is_read_back_with_its_code() {
        // As the target sends it: with the refused Send's length and header.
        let mut send = [0u8; 5];
        send[0] = RdmapControl::new(Opcode::SEND).0;
        let refused = UntaggedHeader::new(true, send, qn::SEND, 9, 0);
        let t = Terminate::with_headers(
            TerminateCode::DDP_INVALID_MSN_NO_BUFFER,
            (18 + FLOOD_PAYLOAD) as u16,
            DdpHeader::Untagged(refused),
            None,
        );
        let mut rsvd = [0u8; 5];
        rsvd[0] = RdmapControl::new(Opcode::TERMINATE).0;
        let mut u = UntaggedHeader::new(true, rsvd, qn::TERMINATE, 1, 0)
            .to_bytes()
            .to_vec();
        u.extend_from_slice(&t.to_vec().unwrap());
        let mut wire = Vec::new();
        let mut enc = FpduEncoder::new(true, false);
        flood_send(&mut enc, 1, &mut wire);
        enc.encode(&u, &mut wire).unwrap();
        let mut inc = Incoming::new(true);
        // One octet at a time: the decoder keeps its place.
        for b in &wire {
            inc.feed(std::slice::from_ref(b));
        }
        assert_eq!(inc.others, 1);
        assert_eq!(inc.terminate.as_deref(), Some("1/2/0x02"));
        assert_eq!(inc.broken, None);
    }
}
