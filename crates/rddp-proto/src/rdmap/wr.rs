//! Work requests in, completions and asynchronous events out (the verbs vocabulary).

use crate::ddp::Payload;
use rddp_wire::{ReceivedTerminate, Terminate, TerminateCode};

/// A local request on a stream's send side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkRequest {
    /// Send (RFC 5040 §5.3), optionally with Solicited Event and/or Invalidate STag.
    Send {
        /// The ULP's identifier, returned in the completion.
        wr_id: u64,
        /// Owned octets or a lease on a region (read when the LLP writes it).
        payload: Payload,
        /// Send with Solicited Event: the peer's ULP is to be notified of its arrival.
        solicited: bool,
        /// Send with Invalidate: the peer's STag to invalidate on delivery (RFC 5042).
        invalidate: Option<u32>,
        /// Wait until every earlier RDMA Read has completed (the Read fence).
        fence: bool,
    },
    /// RDMA Write of `payload` to the peer's (`remote_stag`, `remote_to`).
    Write {
        /// The ULP's identifier, returned in the completion.
        wr_id: u64,
        /// The octets: owned, or a lease on a region (read when the LLP writes it).
        payload: Payload,
        /// The peer's STag; its region must allow remote write (RFC 5042).
        remote_stag: u32,
        /// The peer's TO of the first octet.
        remote_to: u64,
        /// Wait until every earlier RDMA Read has completed (the Read fence).
        fence: bool,
    },
    /// RDMA Read of `len` octets at the peer's (`remote_stag`, `remote_to`) into our
    /// own region (`local_stag`, `local_to`), which must allow remote write: the Read
    /// Response is a tagged placement like any other (RFC 5040 §5.2).
    Read {
        /// The ULP's identifier, returned in the completion.
        wr_id: u64,
        /// STag of our region the Read Response is placed in.
        local_stag: u32,
        /// Our TO of the first octet read.
        local_to: u64,
        /// Octets to read.
        len: u32,
        /// The peer's STag; its region must allow remote read (RFC 5042).
        remote_stag: u32,
        /// The peer's TO of the first octet.
        remote_to: u64,
        /// Wait until every earlier RDMA Read has completed (the Read fence).
        fence: bool,
    },
}

impl WorkRequest {
    /// The ULP's identifier of the request.
    pub fn wr_id(&self) -> u64 {
        match self {
            Self::Send { wr_id, .. } | Self::Write { wr_id, .. } | Self::Read { wr_id, .. } => {
                *wr_id
            }
        }
    }

    /// Whether the request waits until every earlier RDMA Read has completed.
    pub fn fenced(&self) -> bool {
        match self {
            Self::Send { fence, .. } | Self::Write { fence, .. } | Self::Read { fence, .. } => {
                *fence
            }
        }
    }

    pub(crate) fn opcode(&self) -> WcOpcode {
        match self {
            Self::Send { .. } => WcOpcode::Send,
            Self::Write { .. } => WcOpcode::RdmaWrite,
            Self::Read { .. } => WcOpcode::RdmaRead,
        }
    }
}

/// Completion status, as ibverbs users know them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcStatus {
    /// The work completed (IBV_WC_SUCCESS).
    Success,
    /// The message did not fit the posted receive buffer (IBV_WC_LOC_LEN_ERR).
    LocalLength,
    /// A local STag was not usable for the operation (IBV_WC_LOC_PROT_ERR).
    LocalProtection,
    /// The peer refused an access to its memory (IBV_WC_REM_ACCESS_ERR).
    RemoteAccess,
    /// The peer reported another error (IBV_WC_REM_OP_ERR).
    RemoteOperation,
    /// The request cannot run on this stream (IBV_WC_LOC_QP_OP_ERR): an RDMA Read
    /// when connection setup agreed ORD 0.
    LocalQpOperation,
    /// The stream failed or closed before the request ran (IBV_WC_WR_FLUSH_ERR).
    Flushed,
    /// A local catastrophic error (IBV_WC_FATAL_ERR).
    Fatal,
}

/// What a completion completes (ibverbs' `ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcOpcode {
    /// A Send of any kind (IBV_WC_SEND).
    Send,
    /// An RDMA Write (IBV_WC_RDMA_WRITE).
    RdmaWrite,
    /// An RDMA Read (IBV_WC_RDMA_READ).
    RdmaRead,
    /// A received Send (IBV_WC_RECV).
    Recv,
}

/// The outcome of one work request or one received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The request's wr_id, or the receive buffer's for a Recv.
    pub wr_id: u64,
    /// What completed.
    pub opcode: WcOpcode,
    /// How it ended.
    pub status: WcStatus,
    /// Octets moved: the message's length for a Recv, the request's length for a
    /// successful Send, Write or Read; 0 when the work failed or was flushed.
    pub byte_len: u32,
    /// Recv of a Send with Solicited Event.
    pub solicited: bool,
    /// Recv of a Send with Invalidate: the STag now invalid.
    pub invalidated_stag: Option<u32>,
    /// Recv: the receive buffer, handed back.
    pub buffer: Option<Vec<u8>>,
    /// Recv: the message's queue number and MSN (RFC 5041 §4.3).
    pub qn_msn: Option<(u32, u32)>,
    /// False only for the success of a Send, Write or Read posted unsignaled
    /// ([`super::RdmapStream::post_as`]): the verbs layer returns its
    /// send-queue slot and gives the ULP no completion, as a verbs queue pair
    /// does for a work request without `IBV_SEND_SIGNALED`. A failed or
    /// flushed request always completes.
    pub signaled: bool,
}

impl Completion {
    pub(crate) fn new(wr_id: u64, opcode: WcOpcode, status: WcStatus, byte_len: u32) -> Self {
        Self {
            wr_id,
            opcode,
            status,
            byte_len,
            solicited: false,
            invalidated_stag: None,
            buffer: None,
            qn_msn: None,
            signaled: true,
        }
    }
}

/// Asynchronous events: the stream's fatal errors, never answered by the ULP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsyncEvent {
    /// We found a fatal error on the peer's data and queued a Terminate as the last
    /// message; the LLP should close once it has left.
    TerminateSent {
        /// The Terminate's Layer, Error Type and Error Code.
        code: TerminateCode,
        /// What exactly was wrong, for people.
        detail: String,
    },
    /// The peer sent a Terminate; the stream is dead. `code` and `terminate` are
    /// what the peer meant, when the body could be decoded (in the RFC layout or
    /// siw's); `received` keeps the raw octets, the layout and a note for reports.
    TerminateReceived {
        /// The peer's Layer, Error Type and Error Code, when the body decoded.
        code: Option<TerminateCode>,
        /// The whole decoded Terminate (RFC 5040 §4.8), when the body decoded.
        terminate: Option<Terminate>,
        /// The octets as received, the layout they were read in, and a note.
        received: Box<ReceivedTerminate>,
    },
    /// The stream is closed.
    Closed {
        /// Whether the teardown was graceful (RFC 5040 §6).
        graceful: bool,
    },
}
