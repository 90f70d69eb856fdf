//! What the posting verbs take: the flags of a Send, a Write and a Read, a
//! work request of a posted list, and the error of a list posted in part.

use super::*;

/// Options of a Send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendFlags {
    /// Send with Solicited Event.
    pub solicited: bool,
    /// Send with Invalidate: the peer invalidates this STag of its own.
    pub invalidate: Option<u32>,
    /// Wait until every earlier RDMA Read has completed.
    pub fence: bool,
    /// No completion when it succeeds (a work request without
    /// `IBV_SEND_SIGNALED` on a queue pair created with `sq_sig_all` 0): its
    /// send-queue slot is free again once its last octet was accepted by the
    /// LLP. A failed or flushed one still completes, with its `wr_id`. Sends
    /// complete in posting order, so a signaled one's completion says every
    /// Send posted before it has completed too.
    pub unsignaled: bool,
}

/// Options of an RDMA Write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteFlags {
    /// Wait until every earlier RDMA Read has completed (RFC 5040 §5.5: a
    /// Write posted after a Read of the same remote octets may otherwise be
    /// placed before the peer has read them for the Read Response).
    pub fence: bool,
    /// No completion when it succeeds, as [`SendFlags::unsignaled`]: its
    /// send-queue slot is free again once its last octet was accepted by the
    /// LLP; a failed or flushed one still completes. A send queue completes
    /// in posting order, so a later signaled request's completion covers it.
    pub unsignaled: bool,
}

/// Options of an RDMA Read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadFlags {
    /// Its Read Request leaves only once every earlier Read has its
    /// response (IBV_SEND_FENCE).
    pub fence: bool,
    /// No completion when it succeeds (a Read without IBV_SEND_SIGNALED):
    /// its send-queue slot and its outstanding-Read charge come back once
    /// its response was placed; a failed or flushed one still completes. A
    /// send queue completes in posting order, so a later signaled request's
    /// completion says the Read's data is in place.
    pub unsignaled: bool,
}

/// One Send or RDMA Write of a list posted at once ([`QueuePair::post_list`]).
#[derive(Clone, Copy)]
pub enum PostWr<'a> {
    /// [`QueuePair::post_send`]'s arguments.
    Send {
        /// Returned in the completion (`Completion::wr_id`).
        wr_id: u64,
        /// The region the payload is taken from.
        mr: &'a MemoryRegion,
        /// Where in `mr` the payload starts.
        offset: u64,
        /// Payload octets.
        len: u64,
        /// Solicited Event, Invalidate, fence, unsignaled.
        flags: SendFlags,
    },
    /// [`QueuePair::post_write`]'s arguments.
    Write {
        /// Returned in the completion (`Completion::wr_id`).
        wr_id: u64,
        /// The region the payload is taken from.
        mr: &'a MemoryRegion,
        /// Where in `mr` the payload starts.
        offset: u64,
        /// Payload octets.
        len: u64,
        /// The peer's advertised buffer.
        remote: RemoteBuf,
        /// Where in `remote` the payload lands.
        remote_offset: u64,
        /// Fence, unsignaled.
        flags: WriteFlags,
    },
}

/// A Send's work request, and whether it is signaled.
pub(super) fn send_wr(wr_id: u64, payload: Payload, flags: SendFlags) -> (WorkRequest, bool) {
    let wr = WorkRequest::Send {
        wr_id,
        payload,
        solicited: flags.solicited,
        invalidate: flags.invalidate,
        fence: flags.fence,
    };
    (wr, !flags.unsignaled)
}

/// An RDMA Write's work request, and whether it is signaled.
pub(super) fn write_wr(
    wr_id: u64,
    payload: Payload,
    remote: RemoteBuf,
    remote_offset: u64,
    flags: WriteFlags,
) -> (WorkRequest, bool) {
    let wr = WorkRequest::Write {
        wr_id,
        payload,
        remote_stag: remote.stag,
        remote_to: remote.to.wrapping_add(remote_offset),
        fence: flags.fence,
    };
    (wr, !flags.unsignaled)
}

/// A list stopped at a refused work request ([`QueuePair::post_list`]), as
/// `ibv_post_send`'s `bad_wr`: the ones before it are posted, it and the rest
/// are not.
#[derive(Debug, thiserror::Error)]
#[error("work request {posted} of the list refused: {error}")]
pub struct PostListError {
    /// How many of the list were posted (the index of the refused one).
    pub posted: usize,
    /// Why the refused one was refused.
    pub error: Box<Error>,
}
