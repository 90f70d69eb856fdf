//! DDP over SCTP (RFC 5043): chunk payloads and the Adaptation Layer
//! Indication parameter. There is no MPA here: SCTP keeps message boundaries and
//! carries its own CRC32c.

use crate::ddp::TAGGED_HDR_LEN;
use crate::error::{WireError, be16, be32, need};

/// PPID of a DDP Segment chunk (RFC 5043).
pub const PPID_DDP_SEGMENT: u32 = 16;
/// PPID of a DDP Stream Session Control chunk (RFC 5043).
pub const PPID_SESSION_CONTROL: u32 = 17;
/// Parameter type of the Adaptation Layer Indication (RFC 5043).
pub const ADAPTATION_IND_PARAM: u16 = 0xC006;
/// Adaptation Indication value for DDP (RFC 5043).
pub const ADAPTATION_DDP: u32 = 1;
/// Length field of the Adaptation Layer Indication parameter.
pub const ADAPTATION_IND_LEN: usize = 8;
/// The largest DDP segment the adaptation layer offers is at least this (RFC 5043).
pub const MIN_MAX_SEGMENT: usize = 516;
/// Octets of DDP-SSN in front of every chunk payload.
pub const SSN_LEN: usize = 2;
/// Largest Session Control private data (RFC 5043).
pub const MAX_SESSION_PD: usize = 512;

/// A PPID 16 payload: DDP-SSN, then one DDP segment (borrowed, not copied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DdpSegmentChunk<'a> {
    /// DDP-SSN: the SCTP SSN the chunk would have had if sent ordered on its stream,
    /// numbering every chunk of the stream in submission order, modulo 2^16 (RFC 5043).
    pub ssn: u16,
    /// The DDP segment: header (RFC 5041 §4.2, §4.3) and payload.
    pub segment: &'a [u8],
}

impl<'a> DdpSegmentChunk<'a> {
    /// Split a chunk payload. The segment must hold at least a tagged DDP header
    /// (14 octets); DDP validates the header itself. Never panics.
    pub fn parse(b: &'a [u8]) -> Result<Self, WireError> {
        need(b, SSN_LEN + TAGGED_HDR_LEN, "DDP Segment chunk")?;
        Ok(Self {
            ssn: be16(b, 0),
            segment: &b[SSN_LEN..],
        })
    }

    /// Octets [`DdpSegmentChunk::emit`] writes: 2 + the segment.
    pub fn buffer_len(&self) -> usize {
        SSN_LEN + self.segment.len()
    }

    /// Append the DDP-SSN and the segment to `out`; returns the octets appended.
    pub fn emit(&self, out: &mut Vec<u8>) -> usize {
        out.extend_from_slice(&self.ssn.to_be_bytes());
        out.extend_from_slice(self.segment);
        self.buffer_len()
    }
}

/// Function Code of a Session Control message (RFC 5043).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionFunction {
    /// 0x0001: opens a session; private data 0 to 512 octets.
    Initiate = 1,
    /// 0x0002: accepts an Initiate; private data 0 to 512 octets.
    Accept = 2,
    /// 0x0003: the ULP refuses an Initiate; private data 0 to 512 octets.
    Reject = 3,
    /// 0x0004: ends the session; no private data.
    Terminate = 4,
}

impl SessionFunction {
    /// The function for a wire code; `InvalidField` for any code but 1 to 4.
    pub fn from_code(code: u16) -> Result<Self, WireError> {
        Ok(match code {
            1 => Self::Initiate,
            2 => Self::Accept,
            3 => Self::Reject,
            4 => Self::Terminate,
            _ => {
                return Err(WireError::InvalidField {
                    field: "DDP session control function code",
                    value: u64::from(code),
                });
            }
        })
    }

    /// The wire code.
    pub fn code(self) -> u16 {
        self as u16
    }
}

/// A PPID 17 payload: DDP-SSN, Function Code, private data (0..=512 octets on
/// Initiate/Accept/Reject, none on Terminate). Its length is the chunk length - 4.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionControl {
    /// DDP-SSN: the SCTP SSN the chunk would have had if sent ordered on its stream,
    /// numbering every chunk of the stream in submission order, modulo 2^16 (RFC 5043).
    pub ssn: u16,
    /// What the message does.
    pub function: SessionFunction,
    /// The ULP's private data: at most 512 octets, none on Terminate.
    pub private_data: Vec<u8>,
}

impl SessionControl {
    /// Parse a whole chunk payload: the private data is everything after the first
    /// 4 octets. Fails on fewer than 4 octets, an unknown function code, private
    /// data on a Terminate, or more than 512 octets of it. Never panics.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        need(b, 4, "DDP session control")?;
        let s = Self {
            ssn: be16(b, 0),
            function: SessionFunction::from_code(be16(b, 2))?,
            private_data: b[4..].to_vec(),
        };
        s.check()?;
        Ok(s)
    }

    fn check(&self) -> Result<(), WireError> {
        let len = self.private_data.len();
        if self.function == SessionFunction::Terminate && len > 0 {
            return Err(WireError::Trailing {
                what: "DDP Stream Session Terminate",
                extra: len,
            });
        }
        if len > MAX_SESSION_PD {
            return Err(WireError::PrivateDataTooLong {
                len,
                max: MAX_SESSION_PD,
            });
        }
        Ok(())
    }

    /// Octets [`SessionControl::emit`] writes: 4 + the private data.
    pub fn buffer_len(&self) -> usize {
        4 + self.private_data.len()
    }

    /// Append to `out`. Fails on private data the parser would refuse.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<usize, WireError> {
        self.check()?;
        out.extend_from_slice(&self.ssn.to_be_bytes());
        out.extend_from_slice(&self.function.code().to_be_bytes());
        out.extend_from_slice(&self.private_data);
        Ok(self.buffer_len())
    }

    /// The message's octets, as [`SessionControl::emit`] would append them.
    pub fn to_vec(&self) -> Result<Vec<u8>, WireError> {
        let mut v = Vec::with_capacity(self.buffer_len());
        self.emit(&mut v)?;
        Ok(v)
    }
}

/// A DDP/SCTP chunk payload of either PPID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SctpPayload<'a> {
    /// PPID 16: a DDP segment.
    Segment(DdpSegmentChunk<'a>),
    /// PPID 17: a DDP Stream Session Control message.
    Control(SessionControl),
}

impl<'a> SctpPayload<'a> {
    /// Parse by PPID; any PPID other than 16 and 17 is an error (RFC 5043: a DDP
    /// association carries nothing else).
    pub fn parse(ppid: u32, b: &'a [u8]) -> Result<Self, WireError> {
        match ppid {
            PPID_DDP_SEGMENT => DdpSegmentChunk::parse(b).map(Self::Segment),
            PPID_SESSION_CONTROL => SessionControl::parse(b).map(Self::Control),
            _ => Err(WireError::InvalidField {
                field: "SCTP PPID",
                value: u64::from(ppid),
            }),
        }
    }

    /// The PPID the chunk is sent with.
    pub fn ppid(&self) -> u32 {
        match self {
            Self::Segment(_) => PPID_DDP_SEGMENT,
            Self::Control(_) => PPID_SESSION_CONTROL,
        }
    }

    /// The chunk's DDP-SSN.
    pub fn ssn(&self) -> u16 {
        match self {
            Self::Segment(s) => s.ssn,
            Self::Control(c) => c.ssn,
        }
    }
}

/// The Adaptation Layer Indication parameter of INIT and INIT-ACK (RFC 5061): type
/// 0xC006, length 8, value (RFC 5043).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AdaptationIndication {
    /// The Adaptation Indication value; [`ADAPTATION_DDP`] (1) for DDP.
    pub indication: u32,
}

impl AdaptationIndication {
    /// The indication a DDP endpoint sends in its INIT or INIT-ACK (RFC 5043).
    pub const DDP: Self = Self {
        indication: ADAPTATION_DDP,
    };

    /// Parse exactly one 8-octet parameter.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        need(b, ADAPTATION_IND_LEN, "Adaptation Layer Indication")?;
        let ty = be16(b, 0);
        if ty != ADAPTATION_IND_PARAM {
            return Err(WireError::InvalidField {
                field: "SCTP parameter type",
                value: u64::from(ty),
            });
        }
        let len = be16(b, 2);
        if usize::from(len) != ADAPTATION_IND_LEN {
            return Err(WireError::InvalidField {
                field: "Adaptation Layer Indication length",
                value: u64::from(len),
            });
        }
        if b.len() > ADAPTATION_IND_LEN {
            return Err(WireError::Trailing {
                what: "Adaptation Layer Indication",
                extra: b.len() - ADAPTATION_IND_LEN,
            });
        }
        Ok(Self {
            indication: be32(b, 4),
        })
    }

    /// Whether the peer announced DDP (RFC 5043: anything else forbids DDP).
    pub fn is_ddp(&self) -> bool {
        self.indication == ADAPTATION_DDP
    }

    /// Always [`ADAPTATION_IND_LEN`].
    pub fn buffer_len(&self) -> usize {
        ADAPTATION_IND_LEN
    }

    /// The 8-octet parameter: type, length, indication.
    pub fn to_bytes(&self) -> [u8; ADAPTATION_IND_LEN] {
        let mut b = [0; ADAPTATION_IND_LEN];
        b[..2].copy_from_slice(&ADAPTATION_IND_PARAM.to_be_bytes());
        b[2..4].copy_from_slice(&(ADAPTATION_IND_LEN as u16).to_be_bytes());
        b[4..].copy_from_slice(&self.indication.to_be_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn adaptation_indication() {
        let b = AdaptationIndication::DDP.to_bytes();
        assert_eq!(b, [0xC0, 0x06, 0, 8, 0, 0, 0, 1]);
        assert!(AdaptationIndication::parse(&b).unwrap().is_ddp());
        assert!(AdaptationIndication::parse(&b[..7]).is_err());
        let mut bad = b;
        bad[3] = 12;
        assert!(AdaptationIndication::parse(&bad).is_err());
    }

    #[test]
    fn session_control_rules() {
        let init = SessionControl::parse(&[0, 0, 0, 1]).unwrap();
        assert_eq!(init.function, SessionFunction::Initiate);
        assert!(init.private_data.is_empty());
        assert!(SessionControl::parse(&[0, 5, 0, 4]).is_ok());
        assert!(matches!(
            SessionControl::parse(&[0, 5, 0, 4, 1]),
            Err(WireError::Trailing { .. })
        ));
        assert!(SessionControl::parse(&[0, 5, 0, 5]).is_err());
        assert!(SessionControl::parse(&[0, 5, 0, 0]).is_err());
        let mut long = vec![0, 1, 0, 2];
        long.extend_from_slice(&[0; 513]);
        assert_eq!(
            SessionControl::parse(&long),
            Err(WireError::PrivateDataTooLong { len: 513, max: 512 })
        );
        long.pop();
        assert!(SessionControl::parse(&long).is_ok());
        assert!(SctpPayload::parse(18, &long).is_err());
        assert_eq!(SctpPayload::parse(17, &long).unwrap().ssn(), 1);
    }

    #[test]
    fn segment_chunk() {
        let mut b = vec![0x12, 0x34];
        b.extend_from_slice(&[0xC1; 14]);
        let c = DdpSegmentChunk::parse(&b).unwrap();
        assert_eq!((c.ssn, c.segment.len()), (0x1234, 14));
        assert!(DdpSegmentChunk::parse(&b[..15]).is_err());
        let p = SctpPayload::parse(PPID_DDP_SEGMENT, &b).unwrap();
        assert_eq!(p.ppid(), 16);
    }

    fn any_function() -> impl Strategy<Value = SessionFunction> {
        (1u16..=4).prop_map(|c| SessionFunction::from_code(c).unwrap())
    }

    proptest! {
        #[test]
        fn control_roundtrip(ssn in any::<u16>(), f in any_function(),
                             pd in proptest::collection::vec(any::<u8>(), 0..=512)) {
            let pd = if f == SessionFunction::Terminate { vec![] } else { pd };
            let c = SessionControl { ssn, function: f, private_data: pd };
            prop_assert_eq!(SessionControl::parse(&c.to_vec().unwrap()), Ok(c));
        }

        #[test]
        fn bytes_roundtrip(ssn in any::<u16>(), code in 0u16..6,
                           pd in proptest::collection::vec(any::<u8>(), 0..520),
                           ppid in 15u32..19) {
            let mut b = ssn.to_be_bytes().to_vec();
            b.extend_from_slice(&code.to_be_bytes());
            b.extend_from_slice(&pd);
            if let Ok(c) = SessionControl::parse(&b) {
                prop_assert_eq!(c.to_vec().unwrap(), b.clone());
            }
            if let Ok(s) = DdpSegmentChunk::parse(&b) {
                let mut v = Vec::new();
                s.emit(&mut v);
                prop_assert_eq!(v, b.clone());
            }
            let _ = SctpPayload::parse(ppid, &b);
        }

        #[test]
        fn indication_roundtrip(v in any::<u32>(), raw in any::<[u8; 8]>()) {
            let a = AdaptationIndication { indication: v };
            prop_assert_eq!(AdaptationIndication::parse(&a.to_bytes()), Ok(a));
            if let Ok(p) = AdaptationIndication::parse(&raw) {
                prop_assert_eq!(p.to_bytes(), raw);
            }
        }
    }
}
