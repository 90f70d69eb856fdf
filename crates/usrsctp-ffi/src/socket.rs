//! A safe one-to-one (SOCK_STREAM) usrsctp socket. Sockets are non-blocking; an
//! upcall wakes waiters, so every wait has a timeout and no thread is left behind.

use crate::api::{Api, api};
use crate::error::Error;
use crate::notify::Notification;
use crate::sys::*;
use libc::{c_int, c_uint, c_void, sockaddr, socklen_t};
use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Where a socket binds or connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// IPv4 (over UDP encapsulation or raw IP, per the stack).
    Inet(SocketAddrV4),
    /// An AF_CONN address and SCTP port.
    Conn {
        /// The address's tag ([`crate::ConnAddress::id`]).
        id: usize,
        /// The SCTP port.
        port: u16,
    },
}

/// `SCTP_STATUS` fields the adaptation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// `sstat_state`: the association's state (`SCTP_ESTABLISHED`, ...,
    /// usrsctp.h; [`SCTP_COOKIE_WAIT`] and [`SCTP_COOKIE_ECHOED`] while it
    /// is set up).
    pub state: i32,
    /// Streams the peer may send on.
    pub instrms: u16,
    /// Streams this end may send on.
    pub outstrms: u16,
    /// The largest user message SCTP sends unfragmented, octets.
    pub fragmentation_point: u32,
    /// The primary path's MTU, octets.
    pub mtu: u32,
    /// The peer's primary address (IPv4 only; `None` for AF_CONN or IPv6).
    pub primary: Option<std::net::SocketAddrV4>,
}

/// Failure detection settings ([`Socket::set_failure_detection`]). Each
/// duration is set in whole milliseconds, at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureDetection {
    /// RTO.Initial, the first retransmission timeout (RFC 4960 §6.3.1).
    pub rto_initial: Duration,
    /// RTO.Min: the retransmission timeout never falls below this.
    pub rto_min: Duration,
    /// RTO.Max: nor rises above this (it doubles at each retransmission).
    pub rto_max: Duration,
    /// The heartbeat interval of an idle path (RFC 4960 §8.3).
    pub heartbeat: Duration,
    /// Unanswered retransmissions (of data or heartbeats) that end the
    /// association, per path and for the association.
    pub max_retrans: u16,
}

/// `struct sctp_rcvinfo` of a received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvInfo {
    /// The stream it arrived on.
    pub sid: u16,
    /// Its stream sequence number (meaningless when `unordered`).
    pub ssn: u16,
    /// Sent unordered (the U bit of its DATA chunks).
    pub unordered: bool,
    /// Its Payload Protocol Identifier, in host order.
    pub ppid: u32,
    /// A TSN of its DATA chunks (`rcv_tsn`, RFC 6458 §5.3.5).
    pub tsn: u32,
}

/// What SCTP knew of the next message when a receive returned
/// (`SCTP_RECVNXTINFO`, see [`Socket::set_recv_nxtinfo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextInfo {
    /// The stream it arrives on.
    pub sid: u16,
    /// Its Payload Protocol Identifier, in host order.
    pub ppid: u32,
    /// Its length so far: the whole message once `complete`.
    pub len: usize,
    /// All of it is there.
    pub complete: bool,
    /// It is a notification.
    pub notification: bool,
    /// It was sent unordered.
    pub unordered: bool,
}

/// One part of a message read by [`Socket::recv_part`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// Octets read into the caller's buffer.
    pub len: usize,
    /// This part ends the message (MSG_EOR).
    pub eor: bool,
    /// The message is a notification.
    pub notification: bool,
    /// The message's stream, PPID and sequence numbers.
    pub info: RecvInfo,
    /// The message after this one, if SCTP has one.
    pub next: Option<NextInfo>,
}

/// What one receive returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// `len` octets in the caller's buffer; `complete` is false if the message did
    /// not fit (no MSG_EOR).
    Data {
        /// Octets written to the buffer.
        len: usize,
        /// The message's stream, PPID and sequence numbers.
        info: RecvInfo,
        /// The message ended in the buffer (MSG_EOR).
        complete: bool,
    },
    /// A notification (it was received with MSG_NOTIFICATION).
    Notification(Notification),
}

/// Wake-ups from usrsctp upcalls, by socket tag (never a pointer: a late upcall
/// after close finds nothing).
#[derive(Default)]
struct Signal {
    count: Mutex<u64>,
    cv: Condvar,
    /// Called on an upcall too (an event loop's wake), see [`Socket::set_wake`].
    wake: Mutex<Option<Wake>>,
    /// A send was refused for want of space: the next upcall that finds the
    /// socket writable calls `wake`. (Otherwise writable alone does not: a
    /// sender's socket is writable at nearly every SACK, and a wake per SACK
    /// was an eventfd write and a switch to the loop's thread each.)
    want_write: AtomicBool,
    /// Octets SCTP held for sending when that send was refused
    /// (`SCTP_GET_SNDBUF_USE`); `u32::MAX` where the library cannot say.
    held_at_refusal: AtomicU32,
}

/// A sender refused for want of send space is woken once 1/`SEND_WAKE_SHARE`
/// of what SCTP held at the refusal has left (been acknowledged). usrsctp has
/// no send low-water mark to set (no `SO_SNDLOWAT`; its writable test is 2,048
/// free octets) and calls the upcall at every SACK, which frees about two
/// segments. Woken at the first of them, an event-driven sender handed over a
/// few segments a wake and met usrsctp's receive thread on the association's
/// lock at each, and DDP over SCTP fell well short of plain usrsctp
/// (docs/journal.md, the entry on a wake per SACK). Half, as Linux TCP wakes
/// a writer once half of what it queued is free (`sk_stream_min_wspace`);
/// the other half keeps the path busy meanwhile.
const SEND_WAKE_SHARE: u32 = 2;

/// Read an IPPROTO_SCTP option of `so` into `v`: `usrsctp_getsockopt`'s
/// return value. For [`Socket::getopt`] and the upcall, which has the
/// socket's pointer only.
///
/// # Safety
/// `so` is a live usrsctp socket for the whole call.
pub(crate) unsafe fn getopt_of<T: Copy>(
    api: &Api,
    so: *mut socket,
    opt: c_int,
    v: &mut T,
) -> c_int {
    let mut len = core::mem::size_of::<T>() as socklen_t;
    // SAFETY: `so` is live (the caller's promise); `v` is valid and writable
    // for `len` octets, and usrsctp writes at most `len` (it refuses a
    // shorter buffer than the option's C type with EINVAL). The callers pass
    // an all-integer `#[repr(C)]` type of sys.rs, so any octets written make
    // a valid `T`. usrsctp keeps no pointer after returning.
    unsafe { (api.getsockopt)(so, IPPROTO_SCTP, opt, (v as *mut T).cast(), &mut len) }
}

/// Octets SCTP holds for sending on `so`: queued, or sent and not yet
/// acknowledged. `None` where the library does not answer.
///
/// # Safety
/// As [`getopt_of`]: `so` is live for the whole call.
unsafe fn send_held(api: &Api, so: *mut socket) -> Option<u32> {
    let mut ss = sctp_sockstat::default();
    // SAFETY: `so` is live (the caller's promise).
    let r = unsafe { getopt_of(api, so, SCTP_GET_SNDBUF_USE, &mut ss) };
    (r == 0).then_some(ss.ss_total_sndbuf)
}

/// One `usrsctp_sendv` of `data` on stream `sid` with `ppid` and `flags`
/// (`SCTP_UNORDERED`, `SCTP_ABORT`...). An empty message still passes a
/// valid pointer (usrsctp refuses a null one even for 0 octets).
///
/// # Safety
/// As [`getopt_of`]: `so` is live for the whole call.
pub(crate) unsafe fn sendv_on(
    api: &Api,
    so: *mut socket,
    sid: u16,
    ppid: u32,
    flags: u16,
    data: &[u8],
) -> Result<usize, Error> {
    let empty = [0u8; 1];
    let ptr = if data.is_empty() {
        empty.as_ptr()
    } else {
        data.as_ptr()
    };
    let mut info = sctp_sndinfo {
        snd_sid: sid,
        snd_flags: flags,
        snd_ppid: ppid.to_be(),
        ..Default::default()
    };
    // SAFETY: `so` is live (the caller's promise); `ptr` is valid for
    // `data.len()` octets; `info` is a sctp_sndinfo of the length given.
    let n = unsafe {
        (api.sendv)(
            so,
            ptr.cast(),
            data.len(),
            core::ptr::null_mut(),
            0,
            (&mut info as *mut sctp_sndinfo).cast(),
            core::mem::size_of::<sctp_sndinfo>() as socklen_t,
            SCTP_SENDV_SNDINFO,
            0,
        )
    };
    if n < 0 {
        Err(Error::last("sendv"))
    } else {
        Ok(n as usize)
    }
}

impl Signal {
    /// Whether a refused sender should be woken now: enough of what SCTP
    /// held at the refusal has left (see [`SEND_WAKE_SHARE`]), or it cannot
    /// be told.
    ///
    /// # Safety
    /// As [`getopt_of`]: `so` is live for the whole call.
    unsafe fn room_for_sender(&self, api: &Api, so: *mut socket) -> bool {
        let at = self.held_at_refusal.load(Ordering::Acquire);
        if at == u32::MAX {
            return true;
        }
        // SAFETY: `so` is live (the caller's promise).
        unsafe { send_held(api, so) }.is_none_or(|now| now <= at - at / SEND_WAKE_SHARE)
    }
}

/// What an upcall calls besides waking the socket's own waiters.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

fn signals() -> &'static Mutex<HashMap<usize, Arc<Signal>>> {
    static S: OnceLock<Mutex<HashMap<usize, Arc<Signal>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// The upcall of a dropped socket: nothing to wake (see `Drop for Socket`).
unsafe extern "C" fn silent(_so: *mut socket, _arg: *mut c_void, _flags: c_int) {}

unsafe extern "C" fn upcall(so: *mut socket, arg: *mut c_void, _flags: c_int) {
    let sig = signals()
        .lock()
        .ok()
        .and_then(|m| m.get(&(arg as usize)).cloned());
    if let Some(s) = sig {
        if let Ok(mut g) = s.count.lock() {
            *g += 1;
        }
        s.cv.notify_all();
        // usrsctp 0.9.5 calls upcalls with no lock of its own held and a
        // reference on `so` (its programs/*_upcall.c call into usrsctp from
        // them), so asking which events are pending is allowed here.
        let api = crate::api::api().ok();
        let events = match api {
            // SAFETY: `so` is live for the upcall's duration (see above).
            Some(api) => unsafe { (api.get_events)(so) },
            None => SCTP_EVENT_READ,
        };
        let wanted = events & (SCTP_EVENT_READ | SCTP_EVENT_ERROR) != 0
            || events <= 0
            || (events & SCTP_EVENT_WRITE != 0
                && s.want_write.load(Ordering::Acquire)
                // SAFETY: `so` is live for the upcall's duration (see above).
                && api.is_none_or(|api| unsafe { s.room_for_sender(api, so) })
                && s.want_write.swap(false, Ordering::AcqRel));
        if !wanted {
            return;
        }
        let wake = s.wake.lock().ok().and_then(|w| w.clone());
        if let Some(w) = wake {
            w();
        }
    }
}

/// Parts of a gathered send whose iovecs live on the stack (see
/// [`Socket::send_gather`]).
const GATHER_ON_STACK: usize = 4;

/// An SCTP socket of the process's usrsctp stack.
pub struct Socket {
    pub(crate) so: *mut socket,
    pub(crate) api: &'static Api,
    tag: usize,
    signal: Arc<Signal>,
    /// Held around every receive: usrsctp's receive path takes no lock of its
    /// own while it hands a message over (`sctp_sorecvmsg` in 0.9.5.0 drops
    /// its read lock before the copy or the mbuf hand-over, userspace has no
    /// `sblock`), so two readers at once could both take one message, and
    /// with [`Socket::recv_chain`] both free its chain.
    pub(crate) rx: Mutex<()>,
}

// SAFETY: usrsctp sockets are locked internally and may be used from any
// thread; receives, which are not, are serialized by `rx`.
unsafe impl Send for Socket {}
// SAFETY: as above; every method takes the socket's own locks inside usrsctp,
// and a receive also `rx`.
unsafe impl Sync for Socket {}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "usrsctp::Socket#{}", self.tag)
    }
}

fn ret(r: c_int, op: &'static str) -> Result<(), Error> {
    if r < 0 { Err(Error::last(op)) } else { Ok(()) }
}

/// A `sockaddr` for `t`, as storage plus length.
/// The IPv4 address in `ss`, if it holds one.
fn inet_of(ss: &libc::sockaddr_storage) -> Option<std::net::SocketAddrV4> {
    if i32::from(ss.ss_family) != libc::AF_INET {
        return None;
    }
    // SAFETY: the family says `ss` holds a sockaddr_in, which it is large and
    // aligned enough for; read_unaligned copies it out.
    let sin: libc::sockaddr_in =
        unsafe { core::ptr::read_unaligned((ss as *const libc::sockaddr_storage).cast()) };
    Some(std::net::SocketAddrV4::new(
        u32::from_be(sin.sin_addr.s_addr).into(),
        u16::from_be(sin.sin_port),
    ))
}

fn sockaddr_of(t: Target) -> (libc::sockaddr_storage, socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
    let len = match t {
        Target::Inet(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `ss` is a sockaddr_storage, larger than a sockaddr_in
            // (128 octets, 16) and aligned for it (8, 4); the rest stays zero.
            unsafe { core::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            core::mem::size_of::<libc::sockaddr_in>()
        }
        Target::Conn { id, port } => {
            let sc = sockaddr_conn {
                sconn_family: AF_CONN as u16,
                sconn_port: port.to_be(),
                sconn_addr: id as *mut c_void,
            };
            // SAFETY: sockaddr_conn (16 octets, aligned to 8, checked in
            // sys.rs) fits in a sockaddr_storage (128 octets, aligned to 8).
            unsafe { core::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sc) };
            core::mem::size_of::<sockaddr_conn>()
        }
    };
    (ss, len as socklen_t)
}

impl Socket {
    /// A new one-to-one socket for IPv4 targets, or for AF_CONN targets
    /// when `conn` is true; non-blocking, its upcall set.
    pub fn new(conn: bool) -> Result<Self, Error> {
        let api = api()?;
        crate::stack::running().ok_or(Error::NotInitialized)?;
        let domain = if conn { AF_CONN } else { libc::AF_INET };
        // SAFETY: the stack runs (checked above). No receive or send callback
        // and no ulp_info (null pointers, allowed: the socket is then read
        // with recvv and written with sendv); usrsctp keeps no pointer of ours.
        let so = unsafe {
            (api.socket)(
                domain,
                libc::SOCK_STREAM,
                IPPROTO_SCTP,
                core::ptr::null(),
                core::ptr::null(),
                0,
                core::ptr::null_mut(),
            )
        };
        if so.is_null() {
            return Err(Error::last("socket"));
        }
        Self::wrap(api, so)
    }

    fn wrap(api: &'static Api, so: *mut socket) -> Result<Self, Error> {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        let tag = NEXT.fetch_add(1, Ordering::Relaxed);
        let signal = Arc::new(Signal::default());
        if let Ok(mut m) = signals().lock() {
            m.insert(tag, signal.clone());
        }
        let s = Self {
            so,
            api,
            tag,
            signal,
            rx: Mutex::new(()),
        };
        // SAFETY: `so` was just returned by `usrsctp_socket` or
        // `usrsctp_accept`; `s` owns it from here (an error below drops `s`,
        // which closes it). No pointer is passed.
        ret(unsafe { (api.set_non_blocking)(so, 1) }, "set_non_blocking")?;
        ret(
            // SAFETY: `so` as above; `upcall` has the `Upcall` prototype. The
            // argument is the tag, an integer usrsctp hands back to `upcall`
            // unread: `upcall` looks it up in `signals`, never dereferences it.
            unsafe { (api.set_upcall)(so, Some(upcall), tag as *mut c_void) },
            "set_upcall",
        )?;
        Ok(s)
    }

    /// Set an IPPROTO_SCTP option from a `#[repr(C)]` value.
    pub fn setopt<T: Copy>(&self, opt: c_int, v: &T) -> Result<(), Error> {
        // SAFETY: `self.so` is live until the socket is dropped; `v` is a live
        // `T`, read for `size_of::<T>()` octets at most (usrsctp refuses a
        // value shorter than the option's C type with EINVAL) and not kept
        // after the call.
        let r = unsafe {
            (self.api.setsockopt)(
                self.so,
                IPPROTO_SCTP,
                opt,
                (v as *const T).cast(),
                core::mem::size_of::<T>() as socklen_t,
            )
        };
        ret(r, "setsockopt")
    }

    /// Read an IPPROTO_SCTP option into `v` (which may carry an assoc id in).
    ///
    /// `T` must be the option's C type from [`crate::sys`] (integers and
    /// arrays of them): usrsctp writes raw octets into `v`, which for a type
    /// with invalid bit patterns (`bool`, a reference, an enum) is undefined
    /// behaviour that this safe signature does not rule out.
    pub fn getopt<T: Copy>(&self, opt: c_int, v: &mut T) -> Result<(), Error> {
        // SAFETY: `self.so` is live until the socket is dropped; `v` is
        // writable for `size_of::<T>()` octets, all usrsctp writes. That they
        // make a valid `T` rests on the caller passing the option's C type
        // (see the docs above).
        ret(
            unsafe { getopt_of(self.api, self.so, opt, v) },
            "getsockopt",
        )
    }

    /// `SCTP_ADAPTATION_LAYER`: the Adaptation Layer Indication this end
    /// sends in INIT or INIT ACK (RFC 5061 §4.2.6), set before connect or
    /// listen.
    pub fn set_adaptation_layer(&self, indication: u32) -> Result<(), Error> {
        self.setopt(
            SCTP_ADAPTATION_LAYER,
            &sctp_setadaptation {
                ssb_adaptation_ind: indication,
            },
        )
    }

    /// Outbound and maximum inbound stream counts offered in INIT (equal).
    pub fn set_init_streams(&self, streams: u16) -> Result<(), Error> {
        self.set_init_msg(streams, streams)
    }

    /// `SCTP_INITMSG` with any counts (tests of peers with unequal counts).
    pub fn set_init_msg(&self, ostreams: u16, max_instreams: u16) -> Result<(), Error> {
        self.setopt(
            SCTP_INITMSG,
            &sctp_initmsg {
                sinit_num_ostreams: ostreams,
                sinit_max_instreams: max_instreams,
                ..Default::default()
            },
        )
    }

    /// `SCTP_EVENT`: deliver notifications of type `kind`
    /// ([`SCTP_ASSOC_CHANGE`], ...) as messages with MSG_NOTIFICATION, for
    /// the associations this socket makes or accepts.
    pub fn subscribe(&self, kind: u16) -> Result<(), Error> {
        self.setopt(
            SCTP_EVENT,
            &sctp_event {
                se_assoc_id: SCTP_FUTURE_ASSOC,
                se_type: kind,
                se_on: 1,
            },
        )
    }

    /// `SCTP_RECVRCVINFO`: fill [`RecvInfo`] with each receive (without it
    /// usrsctp reports none, and the info reads as zeros).
    pub fn set_recv_rcvinfo(&self, on: bool) -> Result<(), Error> {
        self.setopt(SCTP_RECVRCVINFO, &c_int::from(on))
    }

    /// Report the next message's length and kind with each receive
    /// ([`Part::next`]): a reader can then read a message's header first and
    /// its payload straight into place.
    pub fn set_recv_nxtinfo(&self, on: bool) -> Result<(), Error> {
        self.setopt(SCTP_RECVNXTINFO, &c_int::from(on))
    }

    /// `SCTP_NODELAY`: send small messages at once instead of holding them
    /// while data is unacknowledged (Nagle's algorithm off).
    pub fn set_nodelay(&self, on: bool) -> Result<(), Error> {
        self.setopt(SCTP_NODELAY, &c_int::from(on))
    }

    /// `SCTP_MAXSEG`: lower the fragmentation point (0 = path MTU).
    pub fn set_maxseg(&self, octets: u32) -> Result<(), Error> {
        self.setopt(
            SCTP_MAXSEG,
            &sctp_assoc_value {
                assoc_id: SCTP_FUTURE_ASSOC,
                assoc_value: octets,
            },
        )
    }

    /// How soon a dead peer or a cut path is noticed, for the associations
    /// this socket makes or accepts (set before connect or listen): the
    /// retransmission timeout between `rto_min` and `rto_max` (first
    /// `rto_initial`), a heartbeat every `heartbeat` on an idle path, and
    /// the association ended after `max_retrans` consecutive unanswered
    /// retransmissions or heartbeats (RFC 4960 §8.1, §8.2, §8.3).
    pub fn set_failure_detection(&self, f: FailureDetection) -> Result<(), Error> {
        let ms = |d: Duration| d.as_millis().clamp(1, u128::from(u32::MAX)) as u32;
        self.setopt(
            SCTP_RTOINFO,
            &sctp_rtoinfo {
                srto_assoc_id: SCTP_FUTURE_ASSOC,
                srto_initial: ms(f.rto_initial),
                srto_max: ms(f.rto_max),
                srto_min: ms(f.rto_min),
            },
        )?;
        self.setopt(
            SCTP_ASSOCINFO,
            &sctp_assocparams {
                sasoc_assoc_id: SCTP_FUTURE_ASSOC,
                sasoc_asocmaxrxt: f.max_retrans,
                ..Default::default()
            },
        )?;
        // SAFETY: all-zero is a valid sctp_paddrparams (a zero address: every
        // path's default).
        let mut p: sctp_paddrparams = unsafe { core::mem::zeroed() };
        p.spp_assoc_id = SCTP_FUTURE_ASSOC;
        p.spp_hbinterval = ms(f.heartbeat);
        p.spp_pathmaxrxt = f.max_retrans;
        p.spp_flags = SPP_HB_ENABLE;
        self.setopt(SCTP_PEER_ADDR_PARAMS, &p)
    }

    /// The peer's UDP encapsulation port (RFC 6951), before connect.
    pub fn set_remote_udp_encaps_port(&self, port: u16) -> Result<(), Error> {
        // SAFETY: all-zero is a valid sctp_udpencaps (wildcard address = all paths).
        let mut e: sctp_udpencaps = unsafe { core::mem::zeroed() };
        e.sue_assoc_id = SCTP_FUTURE_ASSOC;
        e.sue_port = port.to_be();
        self.setopt(SCTP_REMOTE_UDP_ENCAPS_PORT, &e)
    }

    /// `SCTP_STATUS`; EINVAL once the peer aborted comes back as `Io`.
    pub fn status(&self) -> Result<Status, Error> {
        // SAFETY: all-zero is a valid sctp_status.
        let mut s: sctp_status = unsafe { core::mem::zeroed() };
        self.getopt(SCTP_STATUS, &mut s)?;
        Ok(Status {
            state: s.sstat_state,
            instrms: s.sstat_instrms,
            outstrms: s.sstat_outstrms,
            fragmentation_point: s.sstat_fragmentation_point,
            mtu: s.sstat_primary.spinfo_mtu,
            primary: inet_of(&s.sstat_primary.spinfo_address),
        })
    }

    /// Bind to a local address and port (`usrsctp_bind`).
    pub fn bind(&self, t: Target) -> Result<(), Error> {
        let (mut ss, len) = sockaddr_of(t);
        // SAFETY: `self.so` is live until the socket is dropped; `ss` holds a
        // valid address of `len` octets, which usrsctp copies before returning.
        let r = unsafe {
            (self.api.bind)(
                self.so,
                (&mut ss as *mut libc::sockaddr_storage).cast(),
                len,
            )
        };
        ret(r, "bind")
    }

    /// Accept associations, at most `backlog` waiting (`usrsctp_listen`).
    pub fn listen(&self, backlog: i32) -> Result<(), Error> {
        // SAFETY: `self.so` is live until the socket is dropped; no pointer.
        ret(unsafe { (self.api.listen)(self.so, backlog) }, "listen")
    }

    /// Start association setup; completion arrives as `AssocChange { COMM_UP }`.
    pub fn connect(&self, t: Target) -> Result<(), Error> {
        let (mut ss, len) = sockaddr_of(t);
        // SAFETY: `self.so` is live until the socket is dropped; `ss` holds a
        // valid address of `len` octets, which usrsctp copies before returning.
        let r = unsafe {
            (self.api.connect)(
                self.so,
                (&mut ss as *mut libc::sockaddr_storage).cast(),
                len,
            )
        };
        match ret(r, "connect") {
            Err(e) if e.would_block() => Ok(()),
            other => other,
        }
    }

    /// Wait up to `timeout` for an incoming association.
    pub fn accept(&self, timeout: Duration) -> Result<Socket, Error> {
        self.wait(timeout, "accept", || {
            // SAFETY: `self.so` is live until the socket is dropped; null
            // address out-pointers are allowed (no peer address is asked
            // for). A socket returned is ours, owned by `wrap`'s result.
            let so =
                unsafe { (self.api.accept)(self.so, core::ptr::null_mut(), core::ptr::null_mut()) };
            if so.is_null() {
                Err(Error::last("accept"))
            } else {
                Socket::wrap(self.api, so)
            }
        })
    }

    /// Send one message on stream `sid` with `ppid`, unordered or not. An empty
    /// message still passes a valid pointer (`usrsctp_sendv` rejects a NULL one).
    pub fn send(&self, sid: u16, ppid: u32, unordered: bool, data: &[u8]) -> Result<usize, Error> {
        self.sendv(sid, ppid, if unordered { SCTP_UNORDERED } else { 0 }, data)
    }

    /// Abort the association (ABORT chunk).
    pub fn abort(&self) -> Result<(), Error> {
        self.sendv(0, 0, SCTP_ABORT, &[]).map(|_| ())
    }

    fn sendv(&self, sid: u16, ppid: u32, flags: u16, data: &[u8]) -> Result<usize, Error> {
        // SAFETY: `self.so` is live until the socket is dropped.
        self.retry_send(|| unsafe { sendv_on(self.api, self.so, sid, ppid, flags, data) })
    }

    /// Run `send`; if it would block, ask for the upcall's wake once there is
    /// room, then try once more: room made between the refusal and the flag is
    /// not missed.
    fn retry_send(&self, mut send: impl FnMut() -> Result<usize, Error>) -> Result<usize, Error> {
        match send() {
            Err(e) if e.would_block() => {
                // SAFETY: `self.so` is live until the socket is dropped.
                let held = unsafe { send_held(self.api, self.so) }.unwrap_or(u32::MAX);
                self.signal.held_at_refusal.store(held, Ordering::Release);
                self.signal.want_write.store(true, Ordering::Release);
                send()
            }
            other => other,
        }
    }

    /// Whether [`Self::send_gather`] gathers (the library has `sctp_lower_sosend`)
    /// rather than concatenating.
    #[must_use]
    pub fn can_gather(&self) -> bool {
        self.api.lower_sosend.is_some()
    }

    /// Send one message, the concatenation of `parts`, like [`Self::send`]: all
    /// of it or nothing (a would-block queues none of it). usrsctp copies the
    /// parts into its buffers; no user-space copy is made first. Without
    /// `sctp_lower_sosend` ([`Self::can_gather`] false) the parts are
    /// concatenated into one buffer and sent with `usrsctp_sendv`.
    pub fn send_gather(
        &self,
        sid: u16,
        ppid: u32,
        unordered: bool,
        parts: &[&[u8]],
    ) -> Result<usize, Error> {
        let flags = if unordered { SCTP_UNORDERED } else { 0 };
        let Some(lower_sosend) = self.api.lower_sosend else {
            return self.sendv(sid, ppid, flags, &parts.concat());
        };
        let invalid = |op| Error::Io {
            op,
            err: std::io::Error::from_raw_os_error(libc::EINVAL),
        };
        let total = parts
            .iter()
            .try_fold(0usize, |t, p| t.checked_add(p.len()))
            .filter(|&t| t <= isize::MAX as usize)
            .ok_or_else(|| invalid("sctp_lower_sosend"))?;
        // Empty parts are left out; an empty message still passes one valid
        // pointer (`usrsctp_sendv` rejects NULL), as `sendv` does.
        let empty = [0u8; 1];
        let to_iov = |p: &[u8]| libc::iovec {
            iov_base: p.as_ptr().cast_mut().cast(),
            iov_len: p.len(),
        };
        let entries = parts.iter().filter(|p| !p.is_empty()).count().max(1);
        let count = c_int::try_from(entries).map_err(|_| invalid("sctp_lower_sosend"))?;
        // A DDP segment is two parts (header, payload): on the stack, no
        // allocation per segment; more parts than that in a vector.
        let mut few = [to_iov(&empty[..0]); GATHER_ON_STACK];
        let mut many = Vec::new();
        self.retry_send(|| {
            // Fresh each try: uiomove advances the entries it copies from.
            let iov: &mut [libc::iovec] = if entries <= GATHER_ON_STACK {
                &mut few[..entries]
            } else {
                many.resize(entries, to_iov(&empty[..0]));
                &mut many[..]
            };
            let nonempty = parts.iter().filter(|p| !p.is_empty());
            for (slot, p) in iov.iter_mut().zip(nonempty) {
                *slot = to_iov(p);
            }
            if parts.iter().all(|p| p.is_empty()) {
                iov[0] = to_iov(&empty[..0]);
            }
            let mut auio = uio {
                uio_iov: iov.as_mut_ptr(),
                uio_iovcnt: count,
                uio_offset: 0,
                uio_resid: total as libc::ssize_t,
                uio_segflg: UIO_USERSPACE,
                uio_rw: UIO_WRITE,
            };
            // As usrsctp_sendv fills it from a sctp_sndinfo: zeroed, then the
            // stream, flags and PPID (network order, as the caller's sndinfo).
            let mut sinfo = sctp_sndrcvinfo {
                sinfo_stream: sid,
                sinfo_flags: flags,
                sinfo_ppid: ppid.to_be(),
                ..Default::default()
            };
            // SAFETY: this is what usrsctp_sendv (user_socket.c, 0.9.5.0) does
            // with its own one-entry iovec, with several entries instead:
            // * `uio` and `sctp_sndrcvinfo` are the 0.9.5.0 layouts, checked
            //   at compile time in sys.rs; `LowerSosendFn` is its prototype.
            // * `self.so` is a live socket (closed only in Drop).
            // * `auio`, `iov` and `sinfo` live on this frame or in `iov`'s
            //   buffer until the call returns; each iovec points into one of
            //   `parts` (or `empty`), borrowed for the whole call. The iovec
            //   memory is only read (UIO_WRITE: copyin into mbufs), the uio
            //   and iovec entries are written (advanced) by uiomove.
            // * usrsctp keeps no pointer to any of them after returning: the
            //   data is in its mbufs by then (a non-blocking socket never
            //   sleeps in the call), so `parts` may be released afterwards.
            // * No address (connected one-to-one socket), no mbufs, flags 0.
            let err = unsafe {
                lower_sosend(
                    self.so,
                    core::ptr::null_mut(),
                    &mut auio,
                    core::ptr::null_mut(),
                    core::ptr::null_mut(),
                    0,
                    &mut sinfo,
                )
            };
            if err == 0 {
                Ok(total - auio.uio_resid.max(0) as usize)
            } else {
                Err(Error::Io {
                    op: "sctp_lower_sosend",
                    err: std::io::Error::from_raw_os_error(err),
                })
            }
        })
    }

    /// Send, waiting up to `timeout` while the send buffer is full.
    pub fn send_wait(
        &self,
        sid: u16,
        ppid: u32,
        unordered: bool,
        data: &[u8],
        timeout: Duration,
    ) -> Result<usize, Error> {
        self.wait(timeout, "send buffer space", || {
            self.send(sid, ppid, unordered, data)
        })
    }

    /// Call `wake` on every upcall of this socket (readable, writable, error), from
    /// usrsctp's own thread, with usrsctp's locks possibly held: it must only
    /// signal (e.g. an event loop's `TaskHandle::wake`), never call into usrsctp.
    pub fn set_wake(&self, wake: Option<Wake>) {
        if let Ok(mut w) = self.signal.wake.lock() {
            *w = wake;
        }
    }

    /// Receive one message or notification into `buf`, waiting up to `timeout`.
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> Result<Received, Error> {
        self.wait(timeout, "receive", || self.try_recv(buf))
    }

    fn try_recv(&self, buf: &mut [u8]) -> Result<Received, Error> {
        let mut info = sctp_rcvinfo::default();
        let mut infolen = core::mem::size_of::<sctp_rcvinfo>() as socklen_t;
        let mut infotype: c_uint = 0;
        let mut flags: c_int = 0;
        let mut from: libc::sockaddr_storage =
            // SAFETY: all-zero is a valid sockaddr_storage.
            unsafe { core::mem::zeroed() };
        let mut fromlen = core::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
        let _rx = self.rx.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: `self.so` is live until the socket is dropped, and `_rx`
        // keeps any other receive of it out; every pointer is valid for the
        // length passed with it (`buf`, `from`, `info`) or for one value
        // (`infotype`, `flags`), and usrsctp keeps none after returning.
        let n = unsafe {
            (self.api.recvv)(
                self.so,
                buf.as_mut_ptr().cast(),
                buf.len(),
                (&mut from as *mut libc::sockaddr_storage).cast::<sockaddr>(),
                &mut fromlen,
                (&mut info as *mut sctp_rcvinfo).cast(),
                &mut infolen,
                &mut infotype,
                &mut flags,
            )
        };
        if n < 0 {
            return Err(Error::last("recvv"));
        }
        let len = (n as usize).min(buf.len());
        if n == 0 && flags == 0 {
            return Err(Error::Io {
                op: "recvv",
                err: std::io::ErrorKind::UnexpectedEof.into(),
            });
        }
        if flags & MSG_NOTIFICATION != 0 {
            let n = Notification::parse(&buf[..len]).unwrap_or(Notification::Other { kind: 0 });
            return Ok(Received::Notification(n));
        }
        Ok(Received::Data {
            len,
            complete: flags & libc::MSG_EOR != 0,
            info: RecvInfo {
                sid: info.rcv_sid,
                ssn: info.rcv_ssn,
                unordered: info.rcv_flags & SCTP_UNORDERED != 0,
                ppid: u32::from_be(info.rcv_ppid),
                tsn: info.rcv_tsn,
            },
        })
    }

    /// [`Self::recv_part`], waiting up to `timeout` for something to read.
    pub fn recv_part_wait(&self, buf: &mut [u8], timeout: Duration) -> Result<Part, Error> {
        self.wait(timeout, "receive", || self.recv_part(buf))
    }

    /// Read up to `buf.len()` octets of the current message without waiting
    /// (`would_block` when nothing is there). A message is read in parts by
    /// successive calls, never two messages in one; `eor` marks its last part.
    pub fn recv_part(&self, buf: &mut [u8]) -> Result<Part, Error> {
        let mut rn = sctp_recvv_rn::default();
        let mut infolen = core::mem::size_of::<sctp_recvv_rn>() as socklen_t;
        let mut infotype: c_uint = 0;
        let mut flags: c_int = 0;
        let mut from: libc::sockaddr_storage =
            // SAFETY: all-zero is a valid sockaddr_storage.
            unsafe { core::mem::zeroed() };
        let mut fromlen = core::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
        // An empty buffer still passes a valid pointer.
        let mut one = [0u8; 1];
        let (ptr, len) = if buf.is_empty() {
            (one.as_mut_ptr(), 0)
        } else {
            (buf.as_mut_ptr(), buf.len())
        };
        let _rx = self.rx.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: `self.so` is live until the socket is dropped, and `_rx`
        // keeps any other receive of it out; every pointer is valid for the
        // length passed with it (`ptr`, `from`, `rn`) or for one value
        // (`infotype`, `flags`), and usrsctp keeps none after returning. `rn`
        // is the sctp_recvv_rn usrsctp writes for SCTP_RECVV_RN (or only its
        // leading sctp_rcvinfo).
        let n = unsafe {
            (self.api.recvv)(
                self.so,
                ptr.cast(),
                len,
                (&mut from as *mut libc::sockaddr_storage).cast::<sockaddr>(),
                &mut fromlen,
                (&mut rn as *mut sctp_recvv_rn).cast(),
                &mut infolen,
                &mut infotype,
                &mut flags,
            )
        };
        if n < 0 {
            return Err(Error::last("recvv"));
        }
        if n == 0 && flags == 0 {
            return Err(Error::Io {
                op: "recvv",
                err: std::io::ErrorKind::UnexpectedEof.into(),
            });
        }
        let info = rn.recvv_rcvinfo;
        let next = (infotype == SCTP_RECVV_RN).then(|| {
            let x = rn.recvv_nxtinfo;
            NextInfo {
                sid: x.nxt_sid,
                ppid: u32::from_be(x.nxt_ppid),
                len: x.nxt_length as usize,
                complete: x.nxt_flags & SCTP_COMPLETE != 0,
                notification: x.nxt_flags & SCTP_NOTIFICATION != 0,
                unordered: x.nxt_flags & SCTP_UNORDERED != 0,
            }
        });
        Ok(Part {
            len: (n as usize).min(len),
            eor: flags & libc::MSG_EOR != 0,
            notification: flags & MSG_NOTIFICATION != 0,
            info: RecvInfo {
                sid: info.rcv_sid,
                ssn: info.rcv_ssn,
                unordered: info.rcv_flags & SCTP_UNORDERED != 0,
                ppid: u32::from_be(info.rcv_ppid),
                tsn: info.rcv_tsn,
            },
            next,
        })
    }

    /// Retry `op` until it stops saying "would block", sleeping on the upcall signal.
    fn wait<T>(
        &self,
        timeout: Duration,
        what: &'static str,
        mut op: impl FnMut() -> Result<T, Error>,
    ) -> Result<T, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.signal.count.lock().map(|g| *g).unwrap_or(0);
            match op() {
                Err(e) if e.would_block() => {}
                other => return other,
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout(what));
            }
            let g = self.signal.count.lock().map_err(|_| Error::Timeout(what))?;
            // A short cap guards against an upcall that never comes (e.g. send space).
            let cap = (deadline - now).min(Duration::from_millis(20));
            let _ = self.signal.cv.wait_timeout_while(g, cap, |g| *g == seen);
        }
    }

    /// Graceful SHUTDOWN of the association (SHUT_WR).
    pub fn shutdown(&self) -> Result<(), Error> {
        // SAFETY: `self.so` is live until the socket is dropped; no pointer.
        ret(
            unsafe { (self.api.shutdown)(self.so, libc::SHUT_WR) },
            "shutdown",
        )
    }
}

impl Drop for Socket {
    /// Never blocks: a socket whose association is still up is closed by
    /// the reaper once the association is gone (see `reaper.rs` for why).
    fn drop(&mut self) {
        // The upcall is replaced by one that does nothing, never by NULL:
        // usrsctp's input tests `so_upcall` and then loads it again to call
        // it, without the socket lock (0.9.5.0 `sctp_input.c` 6232-6236), so
        // a NULL written between the two is called (a jump to address 0 on
        // usrsctp's receive thread). A late call of either function is
        // harmless: `upcall` finds no signal for a removed tag.
        //
        // SAFETY: the socket is live until closed, and `&mut self` means no
        // call of this socket runs; its upcall is silenced first (as
        // `reaper::close` requires), and nothing uses `self.so` after the
        // hand-over. `silent` has the `Upcall` prototype and lives as long
        // as the process.
        unsafe {
            (self.api.set_upcall)(self.so, Some(silent), core::ptr::null_mut());
            crate::reaper::close(self.api, self.so);
        }
        if let Ok(mut m) = signals().lock() {
            m.remove(&self.tag);
        }
    }
}
