//! A received message as usrsctp holds it: its mbuf chain, handed over by
//! `sctp_sorecvmsg` (what `usrsctp_recvv` calls) instead of copied out, so its
//! length, stream and PPID are known before any octet is copied. The caller
//! copies the octets out once, where they belong ([`Chain::copy_to`]); the
//! chain goes back to usrsctp's allocator when dropped (`m_freem`).
//!
//! Invariants (the `unsafe` below relies on them):
//! * `sctp_sorecvmsg` with a non-null `mp` detaches the whole chain from the
//!   socket's read queue (usrsctplib/netinet/sctputil.c 0.9.5.0: `*mp =
//!   control->data; control->data = NULL`, each mbuf already taken off the
//!   socket buffer's count), so the chain is ours alone until `m_freem`.
//! * Every mbuf starts with `struct m_hdr` (user_mbuf.h), whose layout
//!   `sys::m_hdr` repeats (checked at compile time); `mh_data` points at
//!   `mh_len` readable octets for as long as the mbuf lives.
//! * A `Chain` frees its chain exactly once (Drop) and hands out no pointer
//!   into it: slices borrow the `Chain`.

use crate::error::Error;
use crate::socket::{RecvInfo, Socket};
use crate::sys::*;
use libc::c_int;

/// One message (or notification) taken from a socket with [`Socket::recv_chain`].
pub struct Chain {
    head: *mut m_hdr,
    len: usize,
    eor: bool,
    notification: bool,
    info: RecvInfo,
    free: MFreemFn,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("len", &self.len)
            .field("eor", &self.eor)
            .field("notification", &self.notification)
            .field("info", &self.info)
            .finish()
    }
}

impl Chain {
    /// Octets of the message held (all of it once [`Self::eor`]).
    pub fn len(&self) -> usize {
        self.len
    }

    /// No octet held (a notification or message of length 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The message ends here (MSG_EOR); false only while usrsctp delivers a
    /// message in parts (above its partial delivery point).
    pub fn eor(&self) -> bool {
        self.eor
    }

    /// The message is a notification.
    pub fn notification(&self) -> bool {
        self.notification
    }

    /// The message's stream, PPID and sequence numbers.
    pub fn info(&self) -> RecvInfo {
        self.info
    }

    /// The octets, in order, one slice per mbuf.
    pub fn slices(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut m = self.head;
        std::iter::from_fn(move || {
            while !m.is_null() {
                // SAFETY: `m` is an mbuf of our chain (module invariants);
                // its data lives as long as the chain, which `self` borrows.
                let (data, len, next) = unsafe { ((*m).mh_data, (*m).mh_len, (*m).mh_next) };
                m = next;
                let len = usize::try_from(len).unwrap_or(0);
                if len > 0 && !data.is_null() {
                    // SAFETY: as above: `len` readable octets at `data`.
                    return Some(unsafe { std::slice::from_raw_parts(data, len) });
                }
            }
            None
        })
    }

    /// Copy octets `offset..offset + dst.len()` of the message into `dst`;
    /// false (nothing promised of `dst`) if the message is shorter.
    #[must_use]
    pub fn copy_to(&self, offset: usize, dst: &mut [u8]) -> bool {
        let mut skip = offset;
        let mut at = 0;
        for s in self.slices() {
            if at == dst.len() {
                break;
            }
            if skip >= s.len() {
                skip -= s.len();
                continue;
            }
            let s = &s[skip..];
            skip = 0;
            let n = s.len().min(dst.len() - at);
            dst[at..at + n].copy_from_slice(&s[..n]);
            at += n;
        }
        at == dst.len()
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        if !self.head.is_null() {
            // SAFETY: the chain is ours alone and freed only here (invariants).
            unsafe { (self.free)(self.head) };
        }
    }
}

impl Socket {
    /// Whether [`Self::recv_chain`] can be used (the library exports
    /// `sctp_sorecvmsg` and `m_freem`).
    #[must_use]
    pub fn can_recv_chain(&self) -> bool {
        self.api.sorecvmsg.is_some()
    }

    /// Take the next message (or notification) without waiting, as the mbuf
    /// chain usrsctp holds it: `would_block` when nothing is there. Without
    /// the symbols ([`Self::can_recv_chain`] false) this fails with EOPNOTSUPP.
    pub fn recv_chain(&self) -> Result<Chain, Error> {
        let Some((sorecvmsg, free)) = self.api.sorecvmsg else {
            return Err(Error::Io {
                op: "sctp_sorecvmsg",
                err: std::io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            });
        };
        // No octet is copied through the uio (the chain is handed over); its
        // residual count comes back as the chain's length.
        let mut one = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: one.as_mut_ptr().cast(),
            iov_len: 0,
        };
        let mut auio = uio {
            uio_iov: &mut iov,
            uio_iovcnt: 1,
            uio_offset: 0,
            uio_resid: c_int::MAX as libc::ssize_t,
            uio_segflg: UIO_USERSPACE,
            uio_rw: UIO_READ,
        };
        let mut head: *mut m_hdr = core::ptr::null_mut();
        let mut flags: c_int = 0;
        let mut info = sctp_extrcvinfo::default();
        let rx = self.rx.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: as `usrsctp_recvv` (user_socket.c 0.9.5.0) calls it, with
        // `mp` given: `self.so` is a live socket; `auio`, `iov`, `flags`,
        // `info` and `head` live on this frame through the call, their
        // layouts checked in sys.rs; no address is asked for (fromlen 0);
        // `filling_sinfo` 1 fills `info`. usrsctp keeps none of the pointers.
        // `rx` is held: no other receive of this socket runs meanwhile.
        let err = unsafe {
            sorecvmsg(
                self.so,
                &mut auio,
                &mut head,
                core::ptr::null_mut(),
                0,
                &mut flags,
                &mut info,
                1,
            )
        };
        drop(rx);
        // Ours from here on, whatever else happened (freed on drop).
        let len = usize::try_from(auio.uio_resid).unwrap_or(0);
        let chain = Chain {
            head,
            len: if head.is_null() { 0 } else { len },
            eor: flags & libc::MSG_EOR != 0,
            notification: flags & MSG_NOTIFICATION != 0,
            info: RecvInfo {
                sid: info.sinfo_stream,
                ssn: info.sinfo_ssn,
                unordered: info.sinfo_flags & SCTP_UNORDERED != 0,
                ppid: u32::from_be(info.sinfo_ppid),
                tsn: info.sinfo_tsn,
            },
            free,
        };
        if err != 0 {
            return Err(Error::Io {
                op: "sctp_sorecvmsg",
                err: std::io::Error::from_raw_os_error(err),
            });
        }
        if chain.head.is_null() && flags == 0 {
            // Nothing and no flag: the peer shut the association down.
            return Err(Error::Io {
                op: "sctp_sorecvmsg",
                err: std::io::ErrorKind::UnexpectedEof.into(),
            });
        }
        Ok(chain)
    }
}
