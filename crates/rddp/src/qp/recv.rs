//! Posting receives on a queue pair: buffers of the application's own, or
//! octets of a registered region (as an `ibv_recv_wr` with one SGE), one at a
//! time or as a list under one lock of the queue pair (as `ibv_post_recv`
//! takes a chain).

use super::{PostListError, QueuePair, State};
use crate::device::lock;
use crate::error::Error;
use crate::mr::MemoryRegion;
use crate::quota::Resource;
use rddp_proto::ddp::{StreamError, StreamState};
use rddp_proto::rdmap::RdmapStream;

/// One receive of a list posted at once ([`QueuePair::post_recv_list`]): its
/// Send lands in `len` octets of `mr` at `offset`, as
/// [`QueuePair::post_recv_mr`]'s arguments.
#[derive(Clone, Copy)]
pub struct RecvWr<'a> {
    /// Returned in the receive's completion.
    pub wr_id: u64,
    /// The region the Send is placed in.
    pub mr: &'a MemoryRegion,
    /// Where in `mr` the span starts.
    pub offset: u64,
    /// The span's length: the longest Send it takes.
    pub len: u64,
}

impl QueuePair {
    /// Post a receive buffer of `len` octets for one incoming Send
    /// (`ibv_post_recv`); the completion hands it back filled. It counts
    /// against the receive queue's depth until its completion is polled.
    ///
    /// Refused: [`Error::QueueFull`] (`max_recv_wr` posted and not polled),
    /// [`Error::Quota`] (the consumer's receive buffers), [`Error::Stream`]
    /// (the stream is closed or dead).
    pub fn post_recv(&self, wr_id: u64, len: usize) -> Result<(), Error> {
        self.post_recv_buffer(wr_id, vec![0; len])
    }

    /// Post `buf` itself as the receive buffer of one incoming Send (its length is
    /// the most it takes); the completion hands the same allocation back (in
    /// `Completion::buffer`, at its full length), so a receiver can repost it
    /// without allocating and zeroing a new buffer per message.
    /// It counts against the receive queue's depth until its completion is polled.
    pub fn post_recv_buffer(&self, wr_id: u64, buf: Vec<u8>) -> Result<(), Error> {
        self.post_recv_buffers(&mut vec![(wr_id, buf)])
    }

    /// Post several receive buffers (`(wr_id, buffer)`, in order) under one lock
    /// of the queue pair, as `ibv_post_recv` takes a list. Those posted are taken
    /// out of `bufs`. On an error the ones before the refused one stay posted,
    /// the refused one is dropped, and `bufs` keeps those after it, not posted.
    pub fn post_recv_buffers(&self, bufs: &mut Vec<(u64, Vec<u8>)>) -> Result<(), Error> {
        let mut st = lock(&self.shared.state);
        let mut res = Ok(());
        let mut posted = 0;
        for (wr_id, buf) in bufs.iter_mut() {
            let buf = std::mem::take(buf);
            if let Err(e) = self.post_one_recv(&mut st, *wr_id, |r| r.post_recv(*wr_id, buf)) {
                res = Err(e);
                break;
            }
            posted += 1;
        }
        bufs.drain(..(posted + usize::from(res.is_err())).min(bufs.len()));
        if posted > 0 {
            self.after_recv_posts(&mut st);
        }
        res
    }

    /// Post a receive whose Send lands in `len` octets of `mr` at `offset`, as
    /// `ibv_post_recv` with one SGE in an MR: the payload goes from the LLP
    /// straight there, and the completion's `byte_len` says how much it
    /// filled (its `buffer` is an empty `Vec`; read the region). Receives may
    /// name the same octets (perftest posts every receive of a bandwidth test
    /// on one buffer): the application reads a message before the next one
    /// that names them can arrive. The queue pair holds the region's memory
    /// until the receive completes. With credits or a shared receive queue
    /// it goes to the pool, as [`Self::post_recv_buffer`]'s buffer does (and
    /// [`crate::SharedReceiveQueue::post_recv_mr`] posts to that directly); it
    /// counts against the receive queue's depth as [`Self::post_recv_buffer`].
    pub fn post_recv_mr(
        &self,
        wr_id: u64,
        mr: &MemoryRegion,
        offset: u64,
        len: u64,
    ) -> Result<(), Error> {
        let wr = RecvWr {
            wr_id,
            mr,
            offset,
            len,
        };
        self.post_recv_list(&[wr]).map_err(|e| *e.error)
    }

    /// Post receives into regions as one list ([`RecvWr`], in order) under
    /// one lock of the queue pair, as `ibv_post_recv` takes a chain. Each is
    /// checked and counts as if posted alone ([`Self::post_recv_mr`]); on a
    /// refused one, those before it stay posted and it and the rest are not.
    pub fn post_recv_list(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostListError> {
        let mut st = lock(&self.shared.state);
        let mut res = Ok(());
        let mut posted = 0;
        for wr in wrs {
            let one = wr
                .mr
                .span(&self.shared.pd, wr.offset, wr.len)
                .and_then(|place| {
                    self.post_one_recv(&mut st, wr.wr_id, |r| {
                        r.post_recv_in_region(wr.wr_id, place)
                    })
                });
            if let Err(e) = one {
                res = Err(PostListError {
                    posted,
                    error: Box::new(e),
                });
                break;
            }
            posted += 1;
        }
        if posted > 0 {
            self.after_recv_posts(&mut st);
        }
        res
    }

    /// Posting receives on an open stream sends nothing and completes
    /// nothing: there is nothing to pump (the pump found nothing to do in
    /// 211 of a ping-pong client's 9,447 instructions a round trip). A dead
    /// stream completes a receive at once as flushed (`RdmapStream::post_recv`),
    /// and a closing one may close: those are pumped, as any post is.
    fn after_recv_posts(&self, st: &mut State) {
        if st.rdmap.is_terminated() || *st.rdmap.ddp().state() != StreamState::Open {
            self.shared.pump(st);
        }
    }

    /// One receive: charged to the consumer, a slot of the receive queue (or
    /// its pool's), then `post` to the engine; on a refusal each is given back.
    fn post_one_recv(
        &self,
        st: &mut State,
        wr_id: u64,
        post: impl FnOnce(&mut RdmapStream) -> Result<(), StreamError>,
    ) -> Result<(), Error> {
        let consumer = &self.shared.pd.inner.consumer;
        consumer.charge(Resource::ReceiveBuffers, 1)?;
        if let Err(e) = st.wq.post_recv(wr_id) {
            consumer.refund(Resource::ReceiveBuffers, 1);
            return Err(e.into());
        }
        if let Err(e) = post(&mut st.rdmap) {
            st.wq.unpost_recv(wr_id);
            consumer.refund(Resource::ReceiveBuffers, 1);
            return Err(Error::Stream(e));
        }
        Ok(())
    }
}
