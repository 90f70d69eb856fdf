//! Errors the ULP sees from MPA setup and FPDU mode (RFC 5044 §8).

use rddp_proto::ddp::StreamError;
use rddp_wire::{Terminate, TerminateCode};

/// Why an MPA connection failed or ended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MpaError {
    /// The responder answered with R=1 (RFC 5044 §7.1.1); its private data is the reason.
    #[error("connection refused by the peer (MPA Reply with R=1)")]
    Rejected {
        /// The peer ULP's private data: its reason, if it gave one.
        private_data: Vec<u8>,
    },
    /// The first 16 octets were not the expected key: not an MPA peer (RFC 5044 §7.1.1).
    #[error("not an MPA peer: wrong Request/Reply key")]
    BadKey,
    /// A Rev this implementation does not speak (we speak 1 and 2).
    #[error("unsupported MPA revision {0}")]
    UnsupportedRev(u8),
    /// PD_Length above 512 (RFC 5044 §7.1.1), received or asked for locally.
    #[error("private data of {0} octets exceeds the MPA limit")]
    PrivateDataTooLong(usize),
    /// Options that no Request or Reply can carry (an IRD/ORD above the 14-bit
    /// field, peer-to-peer mode with no RTR type we could send; RFC 6581).
    #[error("invalid MPA options: {0}")]
    Options(String),
    /// A Request/Reply that breaks another rule (RFC 5044 §7.1.1, §7.1.2; RFC 6581).
    #[error("invalid MPA Request/Reply: {0}")]
    InvalidFrame(String),
    /// We refused the peer's Request (Reply with R=1 sent, or closed).
    #[error("refused the peer's MPA Request: {0}")]
    Refused(Box<MpaError>),
    /// A setup deadline passed (RFC 5044 §7.1.2).
    #[error("MPA setup timed out")]
    Timeout,
    /// We sent this Terminate (the last FPDU) and closed.
    #[error("sent Terminate {}: {detail}", .terminate.code)]
    LocalTerminate {
        /// The Terminate sent.
        terminate: Terminate,
        /// What was wrong with the peer's octets, in words.
        detail: String,
    },
    /// The peer sent a Terminate (RFC 5040 §4.8): we stop and close, sending nothing.
    #[error("peer sent Terminate {}", .0.code)]
    RemoteTerminate(Terminate),
    /// The TCP connection ended (RFC 5044 §8: local 2/0/0x01).
    #[error("TCP connection closed ({})", TerminateCode::MPA_CONNECTION_LOST)]
    ConnectionLost,
    /// A local request the DDP stream refused.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// A socket call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl MpaError {
    /// The Terminate code behind this error, if one was sent or received.
    pub fn terminate_code(&self) -> Option<TerminateCode> {
        match self {
            Self::LocalTerminate { terminate, .. } | Self::RemoteTerminate(terminate) => {
                Some(terminate.code)
            }
            _ => None,
        }
    }
}
