//! RFC 6581 ready-to-receive messages (RFC 6581). The RTR is an
//! ordinary RDMAP message that the MPA layer sends and absorbs itself.

use bytes::Bytes;
use rddp_proto::ddp::{DdpStream, Delivery, RecvBuffer, StreamError};
use rddp_wire::rdmap::qn;
use rddp_wire::read_request::READ_REQ_HDR_LEN;
use rddp_wire::{Opcode, RdmapControl, ReadRequestHeader};

/// Receive-buffer id of the buffer the responder posts on QN 1 for a Read RTR.
pub(super) const RTR_BUF_ID: u64 = u64::MAX;
/// STag siw uses in its zero-length Write RTR (never validated, RFC 6581).
const RTR_STAG: u32 = 1;

fn ctrl(op: Opcode) -> u8 {
    RdmapControl::new(op).0
}

/// Initiator: queue the zero-length RDMA Write RTR.
pub(super) fn send_write(s: &mut DdpStream) -> Result<(), StreamError> {
    s.send_tagged(ctrl(Opcode::RDMA_WRITE), RTR_STAG, 0, Bytes::new())
}

/// Initiator: queue the zero-length RDMA Read Request RTR (QN 1, size 0).
pub(super) fn send_read(s: &mut DdpStream) -> Result<(), StreamError> {
    let h = ReadRequestHeader {
        sink_stag: RTR_STAG,
        sink_to: 0,
        size: 0,
        src_stag: RTR_STAG,
        src_to: 0,
    };
    let mut rsvd = [0u8; 5];
    rsvd[0] = ctrl(Opcode::READ_REQUEST);
    s.send_untagged(
        qn::READ_REQUEST,
        rsvd,
        Bytes::copy_from_slice(&h.to_bytes()),
    )
    .map(|_| ())
}

/// Responder: the buffer that will take the Read RTR (MSN 1 on QN 1).
pub(super) fn post_read_buffer(s: &mut DdpStream) -> Result<(), StreamError> {
    s.post_recv(
        qn::READ_REQUEST,
        RecvBuffer {
            id: RTR_BUF_ID,
            data: vec![0; READ_REQ_HDR_LEN],
        },
    )
}

/// Responder: whether the first delivery is the Write RTR.
pub(super) fn is_write(d: &Delivery) -> bool {
    matches!(d, Delivery::Tagged { rsvd_ulp, len: 0, .. } if RdmapControl(*rsvd_ulp).opcode() == Opcode::RDMA_WRITE)
}

/// Responder: if the first delivery is the Read RTR, the zero-length Read Response
/// it needs: (STag, TO).
pub(super) fn read_request(d: &Delivery) -> Option<(u32, u64)> {
    let Delivery::Untagged {
        rsvd_ulp,
        qn: q,
        len,
        buffer,
        ..
    } = d
    else {
        return None;
    };
    if *q != qn::READ_REQUEST
        || buffer.id != RTR_BUF_ID
        || RdmapControl(rsvd_ulp[0]).opcode() != Opcode::READ_REQUEST
    {
        return None;
    }
    let h = ReadRequestHeader::parse(buffer.data.get(..*len as usize)?).ok()?;
    (h.size == 0).then_some((h.sink_stag, h.sink_to))
}

/// Responder: queue the zero-length Read Response answering the Read RTR.
pub(super) fn send_read_response(s: &mut DdpStream, stag: u32, to: u64) -> Result<(), StreamError> {
    s.send_tagged(ctrl(Opcode::READ_RESPONSE), stag, to, Bytes::new())
}

/// Initiator: whether a delivery is the zero-length Read Response to our Read RTR.
pub(super) fn is_read_response(d: &Delivery) -> bool {
    matches!(d, Delivery::Tagged { rsvd_ulp, len: 0, stag: RTR_STAG, .. } if RdmapControl(*rsvd_ulp).opcode() == Opcode::READ_RESPONSE)
}
