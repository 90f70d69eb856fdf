//! SCTP notifications (received with MSG_NOTIFICATION), decoded from the bytes of
//! `union sctp_notification` without unsafe: fields at the offsets asserted in sys.rs.

use crate::sys::*;

/// The notifications the adaptation layer acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notification {
    /// `SCTP_ASSOC_CHANGE` (`struct sctp_assoc_change`, RFC 6458 §6.1.1):
    /// the association came up, went down or restarted.
    AssocChange {
        /// `sac_state`: [`SCTP_COMM_UP`], [`SCTP_COMM_LOST`], [`SCTP_RESTART`],
        /// [`SCTP_SHUTDOWN_COMP`] or [`SCTP_CANT_STR_ASSOC`].
        state: u16,
        /// `sac_error`: the error cause code of an ABORT or an operation
        /// error that ended the association (RFC 4960 §3.3.10), else 0.
        error: u16,
        /// Streams this end may send on.
        outbound_streams: u16,
        /// Streams the peer may send on.
        inbound_streams: u16,
    },
    /// `SCTP_ADAPTATION_INDICATION` (RFC 6458 §6.1.6): the peer's
    /// Adaptation Layer Indication parameter (RFC 5061 §4.2.6), sent in its
    /// INIT or INIT ACK.
    Adaptation {
        /// The indication's value in host order (DDP over SCTP sends one, RFC 5043).
        indication: u32,
    },
    /// `SCTP_SHUTDOWN_EVENT` (RFC 6458 §6.1.5): the peer sent SHUTDOWN, no
    /// more data comes from it.
    Shutdown,
    /// `SCTP_SENDER_DRY_EVENT`: everything sent has been acknowledged.
    SenderDry,
    /// `SCTP_SEND_FAILED_EVENT` (RFC 6458 §6.1.11): a message could not be
    /// delivered (the association ended with it unsent or unacknowledged).
    SendFailed,
    /// Any other notification, by its `sn_type`.
    Other {
        /// `sn_type` of `struct sctp_tlv`.
        kind: u16,
    },
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

impl Notification {
    /// Decode the bytes of one notification (`union sctp_notification`, host
    /// byte order); `None` if shorter than its type requires.
    #[must_use]
    pub fn parse(b: &[u8]) -> Option<Self> {
        Some(match u16_at(b, 0)? {
            SCTP_ASSOC_CHANGE => Self::AssocChange {
                state: u16_at(b, 8)?,
                error: u16_at(b, 10)?,
                outbound_streams: u16_at(b, 12)?,
                inbound_streams: u16_at(b, 14)?,
            },
            SCTP_ADAPTATION_INDICATION => Self::Adaptation {
                indication: u32_at(b, 8)?,
            },
            SCTP_SHUTDOWN_EVENT => Self::Shutdown,
            SCTP_SENDER_DRY_EVENT => Self::SenderDry,
            SCTP_SEND_FAILED_EVENT => Self::SendFailed,
            kind => Self::Other { kind },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_notifications() {
        let mut b = [0u8; 20];
        b[0..2].copy_from_slice(&SCTP_ADAPTATION_INDICATION.to_ne_bytes());
        b[8..12].copy_from_slice(&1u32.to_ne_bytes());
        assert_eq!(
            Notification::parse(&b),
            Some(Notification::Adaptation { indication: 1 })
        );
        assert_eq!(Notification::parse(&b[..10]), None);
        b[0..2].copy_from_slice(&SCTP_ASSOC_CHANGE.to_ne_bytes());
        b[8..10].copy_from_slice(&SCTP_COMM_UP.to_ne_bytes());
        assert!(matches!(
            Notification::parse(&b),
            Some(Notification::AssocChange {
                state: SCTP_COMM_UP,
                ..
            })
        ));
    }
}
