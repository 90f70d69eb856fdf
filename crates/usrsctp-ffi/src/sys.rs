//! Hand-written declarations from `usrsctp.h` (Debian libusrsctp-dev 0.9.5.0), only
//! what the RFC 5043 adaptation needs. Every struct is checked at compile time
//! against the sizes and offsets measured on x86_64.
//!
//! The constants, `#[repr(C)]` structs and their fields mirror usrsctp.h
//! (and, where said, usrsctp's internal headers) name for name and field for
//! field, so they carry no docs of their own here. Their meaning is that of
//! the SCTP sockets API, RFC 6458 (the structures in §5.3, the notifications
//! in §6.1, the socket options in §8), and of usrsctp's own
//! `Manual.md`; UDP encapsulation (`SCTP_REMOTE_UDP_ENCAPS_PORT`) is RFC 6951
//! §5. What differs from those, or is not in usrsctp.h, is said at the item.

#![allow(non_camel_case_types)]
#![allow(missing_docs)]

use core::mem::{offset_of, size_of};
use libc::{c_int, c_uint, c_void, size_t, sockaddr, sockaddr_storage, socklen_t, ssize_t};

pub type sctp_assoc_t = u32;

/// Opaque `struct socket` of usrsctp.
#[repr(C)]
pub struct socket {
    _private: [u8; 0],
}

pub const AF_CONN: c_int = 123;
pub const IPPROTO_SCTP: c_int = 132;
pub const MSG_NOTIFICATION: c_int = 0x2000;
pub const SCTP_FUTURE_ASSOC: sctp_assoc_t = 0;
pub const SCTP_ALL_ASSOC: sctp_assoc_t = 2;

// Socket options (level IPPROTO_SCTP).
pub const SCTP_RTOINFO: c_int = 0x01;
pub const SCTP_ASSOCINFO: c_int = 0x02;
pub const SCTP_INITMSG: c_int = 0x03;
pub const SCTP_PEER_ADDR_PARAMS: c_int = 0x0a;
/// `spp_flags`: heartbeats on.
pub const SPP_HB_ENABLE: u32 = 0x0000_0001;
pub const SCTP_NODELAY: c_int = 0x04;
pub const SCTP_ADAPTATION_LAYER: c_int = 0x08;
pub const SCTP_MAXSEG: c_int = 0x0e;
pub const SCTP_EVENT: c_int = 0x1e;
pub const SCTP_RECVRCVINFO: c_int = 0x1f;
pub const SCTP_RECVNXTINFO: c_int = 0x20;
pub const SCTP_REMOTE_UDP_ENCAPS_PORT: c_int = 0x24;
pub const SCTP_STATUS: c_int = 0x100;
/// `sstat_state` values (usrsctp.h) of an association still being set up.
pub const SCTP_COOKIE_WAIT: i32 = 0x0002;
pub const SCTP_COOKIE_ECHOED: i32 = 0x0004;
/// Not in usrsctp.h: netinet/sctp.h of usrsctp 0.9.5.0 (the FreeBSD socket
/// API's number). Answers `struct sctp_sockstat`; a library without it
/// answers an error, and the caller must then do without.
pub const SCTP_GET_SNDBUF_USE: c_int = 0x1101;

// sendv/recvv info types.
pub const SCTP_SENDV_SNDINFO: c_uint = 1;
pub const SCTP_RECVV_RCVINFO: c_uint = 1;
pub const SCTP_RECVV_RN: c_uint = 3;

// nxt_flags.
pub const SCTP_NOTIFICATION: u16 = 0x0010;
pub const SCTP_COMPLETE: u16 = 0x0020;

// snd_flags / rcv_flags.
pub const SCTP_UNORDERED: u16 = 0x0400;
pub const SCTP_ABORT: u16 = 0x0200;

// Notification types.
pub const SCTP_ASSOC_CHANGE: u16 = 0x0001;
pub const SCTP_SHUTDOWN_EVENT: u16 = 0x0005;
pub const SCTP_ADAPTATION_INDICATION: u16 = 0x0006;
pub const SCTP_SENDER_DRY_EVENT: u16 = 0x000a;
pub const SCTP_SEND_FAILED_EVENT: u16 = 0x000e;

// sac_state values.
pub const SCTP_COMM_UP: u16 = 1;
pub const SCTP_COMM_LOST: u16 = 2;
pub const SCTP_RESTART: u16 = 3;
pub const SCTP_SHUTDOWN_COMP: u16 = 4;
pub const SCTP_CANT_STR_ASSOC: u16 = 5;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sockaddr_conn {
    pub sconn_family: u16,
    pub sconn_port: u16,
    pub sconn_addr: *mut c_void,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_sndinfo {
    pub snd_sid: u16,
    pub snd_flags: u16,
    pub snd_ppid: u32,
    pub snd_context: u32,
    pub snd_assoc_id: sctp_assoc_t,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_rcvinfo {
    pub rcv_sid: u16,
    pub rcv_ssn: u16,
    pub rcv_flags: u16,
    pub rcv_ppid: u32,
    pub rcv_tsn: u32,
    pub rcv_cumtsn: u32,
    pub rcv_context: u32,
    pub rcv_assoc_id: sctp_assoc_t,
}

/// What SCTP knows of the next message (`SCTP_RECVNXTINFO`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_nxtinfo {
    pub nxt_sid: u16,
    pub nxt_flags: u16,
    pub nxt_ppid: u32,
    pub nxt_length: u32,
    pub nxt_assoc_id: sctp_assoc_t,
}

/// `SCTP_RECVV_RN`: the received message's info and the next one's.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_recvv_rn {
    pub recvv_rcvinfo: sctp_rcvinfo,
    pub recvv_nxtinfo: sctp_nxtinfo,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_initmsg {
    pub sinit_num_ostreams: u16,
    pub sinit_max_instreams: u16,
    pub sinit_max_attempts: u16,
    pub sinit_max_init_timeo: u16,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_setadaptation {
    pub ssb_adaptation_ind: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_event {
    pub se_assoc_id: sctp_assoc_t,
    pub se_type: u16,
    pub se_on: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct sctp_udpencaps {
    pub sue_address: sockaddr_storage,
    pub sue_assoc_id: u32,
    pub sue_port: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct sctp_paddrinfo {
    pub spinfo_address: sockaddr_storage,
    pub spinfo_assoc_id: sctp_assoc_t,
    pub spinfo_state: i32,
    pub spinfo_cwnd: u32,
    pub spinfo_srtt: u32,
    pub spinfo_rto: u32,
    pub spinfo_mtu: u32,
}

/// `struct sctp_rtoinfo` (usrsctp.h): the retransmission timeout's bounds, ms.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_rtoinfo {
    pub srto_assoc_id: sctp_assoc_t,
    pub srto_initial: u32,
    pub srto_max: u32,
    pub srto_min: u32,
}

/// `struct sctp_assocparams` (usrsctp.h); 0 leaves a field as it is.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_assocparams {
    pub sasoc_assoc_id: sctp_assoc_t,
    pub sasoc_peer_rwnd: u32,
    pub sasoc_local_rwnd: u32,
    pub sasoc_cookie_life: u32,
    pub sasoc_asocmaxrxt: u16,
    pub sasoc_number_peer_destinations: u16,
}

/// `struct sctp_paddrparams` (usrsctp.h): a zero address sets the default of
/// every path.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct sctp_paddrparams {
    pub spp_address: sockaddr_storage,
    pub spp_assoc_id: sctp_assoc_t,
    pub spp_hbinterval: u32,
    pub spp_pathmtu: u32,
    pub spp_flags: u32,
    pub spp_ipv6_flowlabel: u32,
    pub spp_pathmaxrxt: u16,
    pub spp_dscp: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct sctp_status {
    pub sstat_assoc_id: sctp_assoc_t,
    pub sstat_state: i32,
    pub sstat_rwnd: u32,
    pub sstat_unackdata: u16,
    pub sstat_penddata: u16,
    pub sstat_instrms: u16,
    pub sstat_outstrms: u16,
    pub sstat_fragmentation_point: u32,
    pub sstat_primary: sctp_paddrinfo,
}

/// `struct sctp_sockstat` (netinet/sctp_uio.h, 0.9.5.0): octets SCTP holds
/// for sending (queued and not yet acknowledged) and received, not yet read.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_sockstat {
    pub ss_assoc_id: sctp_assoc_t,
    pub ss_total_sndbuf: u32,
    pub ss_total_recv_buf: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_assoc_value {
    pub assoc_id: sctp_assoc_t,
    pub assoc_value: u32,
}

/// `struct sctp_tlv`: the header every notification starts with.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_tlv {
    pub sn_type: u16,
    pub sn_flags: u16,
    pub sn_length: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_assoc_change {
    pub sac_type: u16,
    pub sac_flags: u16,
    pub sac_length: u32,
    pub sac_state: u16,
    pub sac_error: u16,
    pub sac_outbound_streams: u16,
    pub sac_inbound_streams: u16,
    pub sac_assoc_id: sctp_assoc_t,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct sctp_adaptation_event {
    pub sai_type: u16,
    pub sai_flags: u16,
    pub sai_length: u32,
    pub sai_adaptation_ind: u32,
    pub sai_assoc_id: sctp_assoc_t,
}

/// `struct uio` (usrsctplib/user_socketvar.h, usrsctp 0.9.5.0): the gather list
/// `sctp_lower_sosend` copies a message from. Not in usrsctp.h (see
/// [`LowerSosendFn`]). Both enums are C `int`s.
#[repr(C)]
#[derive(Debug)]
pub struct uio {
    pub uio_iov: *mut libc::iovec,
    pub uio_iovcnt: c_int,
    pub uio_offset: libc::off_t,
    pub uio_resid: ssize_t,
    /// `enum uio_seg`: [`UIO_USERSPACE`].
    pub uio_segflg: c_int,
    /// `enum uio_rw`: [`UIO_WRITE`].
    pub uio_rw: c_int,
}

/// `enum uio_seg` and `enum uio_rw` values (usrsctplib/user_socketvar.h, 0.9.5.0).
pub const UIO_USERSPACE: c_int = 0;
pub const UIO_READ: c_int = 0;
pub const UIO_WRITE: c_int = 1;

/// `struct sctp_sndrcvinfo` (usrsctplib/netinet/sctp_uio.h, usrsctp 0.9.5.0,
/// `SCTP_ALIGN_RESV_PAD` = 92): the send parameters `sctp_lower_sosend` takes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sctp_sndrcvinfo {
    pub sinfo_stream: u16,
    pub sinfo_ssn: u16,
    pub sinfo_flags: u16,
    pub sinfo_ppid: u32,
    pub sinfo_context: u32,
    pub sinfo_timetolive: u32,
    pub sinfo_tsn: u32,
    pub sinfo_cumtsn: u32,
    pub sinfo_assoc_id: sctp_assoc_t,
    pub sinfo_keynumber: u16,
    pub sinfo_keynumber_valid: u16,
    pub __reserve_pad: [u8; 92],
}

impl Default for sctp_sndrcvinfo {
    fn default() -> Self {
        Self {
            sinfo_stream: 0,
            sinfo_ssn: 0,
            sinfo_flags: 0,
            sinfo_ppid: 0,
            sinfo_context: 0,
            sinfo_timetolive: 0,
            sinfo_tsn: 0,
            sinfo_cumtsn: 0,
            sinfo_assoc_id: 0,
            sinfo_keynumber: 0,
            sinfo_keynumber_valid: 0,
            __reserve_pad: [0; 92],
        }
    }
}

/// `struct sctp_extrcvinfo` (usrsctplib/netinet/sctp_uio.h, usrsctp 0.9.5.0,
/// `SCTP_ALIGN_RESV_PAD_SHORT` = 76): what `sctp_sorecvmsg` fills about the
/// message it returns (and the next one, with `SCTP_RECVNXTINFO` on).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sctp_extrcvinfo {
    pub sinfo_stream: u16,
    pub sinfo_ssn: u16,
    pub sinfo_flags: u16,
    pub sinfo_ppid: u32,
    pub sinfo_context: u32,
    pub sinfo_timetolive: u32,
    pub sinfo_tsn: u32,
    pub sinfo_cumtsn: u32,
    pub sinfo_assoc_id: sctp_assoc_t,
    pub serinfo_next_flags: u16,
    pub serinfo_next_stream: u16,
    pub serinfo_next_aid: u32,
    pub serinfo_next_length: u32,
    pub serinfo_next_ppid: u32,
    pub sinfo_keynumber: u16,
    pub sinfo_keynumber_valid: u16,
    pub __reserve_pad: [u8; 76],
}

impl Default for sctp_extrcvinfo {
    fn default() -> Self {
        // SAFETY: every field is an integer or an array of them: all-zero is valid.
        unsafe { core::mem::zeroed() }
    }
}

/// The head of `struct mbuf`: `struct m_hdr` (usrsctplib/user_mbuf.h, usrsctp
/// 0.9.5.0, `M_HDR_PAD` = 6 with 64-bit pointers). Only read, through the
/// chain `sctp_sorecvmsg` hands over: the next mbuf, where its data lies, how
/// many octets.
#[repr(C)]
#[derive(Debug)]
pub struct m_hdr {
    pub mh_next: *mut m_hdr,
    pub mh_nextpkt: *mut m_hdr,
    pub mh_data: *mut u8,
    pub mh_len: c_int,
    pub mh_flags: c_int,
    pub mh_type: i16,
    pub pad: [u8; 6],
}

/// Size of `union sctp_notification` (its largest member), the receive buffer floor.
pub const SCTP_NOTIFICATION_SIZE: usize = 152;

/// The AF_CONN output function given to `usrsctp_init`: called with each
/// packet to send on an AF_CONN address.
pub type ConnOutput = unsafe extern "C" fn(
    addr: *mut c_void,
    buf: *mut c_void,
    len: size_t,
    tos: u8,
    df: u8,
) -> c_int;
/// The upcall given to `usrsctp_set_upcall`: called on readable, writable
/// and error events of a socket.
pub type Upcall = unsafe extern "C" fn(so: *mut socket, arg: *mut c_void, flags: c_int);

// Function types, resolved from the shared library at run time (see `api.rs`).
/// `usrsctp_init`: start the stack (UDP port, AF_CONN output, debug printf).
pub type InitFn = unsafe extern "C" fn(u16, Option<ConnOutput>, *const c_void);
/// `usrsctp_socket`: a new socket (domain, type, protocol, receive and send callbacks, send threshold, ulp_info).
pub type SocketFn = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    u32,
    *mut c_void,
) -> *mut socket;
/// `usrsctp_setsockopt`.
pub type SetsockoptFn =
    unsafe extern "C" fn(*mut socket, c_int, c_int, *const c_void, socklen_t) -> c_int;
/// `usrsctp_getsockopt`.
pub type GetsockoptFn =
    unsafe extern "C" fn(*mut socket, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int;
/// `usrsctp_sendv`: one message, with its info (RFC 6458 §9.12).
pub type SendvFn = unsafe extern "C" fn(
    *mut socket,
    *const c_void,
    size_t,
    *mut sockaddr,
    c_int,
    *mut c_void,
    socklen_t,
    c_uint,
    c_int,
) -> ssize_t;
/// `usrsctp_recvv`: one message or part of one, with its info (RFC 6458 §9.13).
pub type RecvvFn = unsafe extern "C" fn(
    *mut socket,
    *mut c_void,
    size_t,
    *mut sockaddr,
    *mut socklen_t,
    *mut c_void,
    *mut socklen_t,
    *mut c_uint,
    *mut c_int,
) -> ssize_t;
/// `usrsctp_bind`, and `usrsctp_connect` (the same prototype).
pub type BindFn = unsafe extern "C" fn(*mut socket, *mut sockaddr, socklen_t) -> c_int;
/// `usrsctp_listen`.
pub type ListenFn = unsafe extern "C" fn(*mut socket, c_int) -> c_int;
/// `usrsctp_accept`.
pub type AcceptFn = unsafe extern "C" fn(*mut socket, *mut sockaddr, *mut socklen_t) -> *mut socket;
/// `usrsctp_close`.
pub type CloseFn = unsafe extern "C" fn(*mut socket);
/// `usrsctp_shutdown`.
pub type ShutdownFn = unsafe extern "C" fn(*mut socket, c_int) -> c_int;
/// `usrsctp_conninput`: a packet received on an AF_CONN address.
pub type ConninputFn = unsafe extern "C" fn(*mut c_void, *const c_void, size_t, u8);
/// `usrsctp_set_non_blocking`.
pub type SetNonBlockingFn = unsafe extern "C" fn(*mut socket, c_int) -> c_int;
/// `usrsctp_register_address` and `usrsctp_deregister_address`.
pub type AddressFn = unsafe extern "C" fn(*mut c_void);
/// `usrsctp_set_upcall`: the function usrsctp calls on socket events.
pub type SetUpcallFn = unsafe extern "C" fn(*mut socket, Option<Upcall>, *mut c_void) -> c_int;
/// `usrsctp_sysctl_set_sctp_*`: set one stack-wide setting.
pub type SysctlFn = unsafe extern "C" fn(u32) -> c_int;
/// `usrsctp_sysctl_get_sctp_*`: read one stack-wide setting.
pub type SysctlGetFn = unsafe extern "C" fn() -> u32;
/// `usrsctp_get_events`: the pending `SCTP_EVENT_*` bits of a socket.
pub type GetEventsFn = unsafe extern "C" fn(*mut socket) -> c_int;
/// `sctp_lower_sosend` (usrsctplib/netinet/sctp_output.c, 0.9.5.0, the
/// `__Userspace__` prototype): what `usrsctp_sendv` calls with a one-entry
/// [`uio`]. Not part of usrsctp.h but exported by libusrsctp.so.2; returns an
/// errno value (0 = sent) and sets no errno. The mbuf arguments are null here.
pub type LowerSosendFn = unsafe extern "C" fn(
    *mut socket,
    *mut sockaddr,
    *mut uio,
    *mut c_void,
    *mut c_void,
    c_int,
    *mut sctp_sndrcvinfo,
) -> c_int;

/// `sctp_sorecvmsg` (usrsctplib/netinet/sctputil.c, 0.9.5.0): what
/// `usrsctp_recvv` calls. Not part of usrsctp.h but exported by
/// libusrsctp.so.2. Given `mp`, it hands over the next message's mbuf chain
/// instead of copying it, with the chain's length in `uio_resid`; returns an
/// errno value (0 = read) and sets no errno.
pub type SoRecvmsgFn = unsafe extern "C" fn(
    *mut socket,
    *mut uio,
    *mut *mut m_hdr,
    *mut sockaddr,
    c_int,
    *mut c_int,
    *mut sctp_extrcvinfo,
    c_int,
) -> c_int;
/// `m_freem` (usrsctplib/user_mbuf.c, 0.9.5.0): frees an mbuf chain.
pub type MFreemFn = unsafe extern "C" fn(*mut m_hdr);

/// `usrsctp_get_events` bits (usrsctp.h).
pub const SCTP_EVENT_READ: c_int = 0x0001;
pub const SCTP_EVENT_WRITE: c_int = 0x0002;
pub const SCTP_EVENT_ERROR: c_int = 0x0004;

// ---- Compile-time layout checks (x86_64 values, measured). ----
macro_rules! layout {
    ($t:ty, $size:expr, $align:expr $(, $f:ident = $off:expr)*) => {
        const _: () = assert!(size_of::<$t>() == $size);
        const _: () = assert!(core::mem::align_of::<$t>() == $align);
        $(const _: () = assert!(offset_of!($t, $f) == $off);)*
    };
}

#[cfg(target_pointer_width = "64")]
layout!(
    sockaddr_conn,
    16,
    8,
    sconn_family = 0,
    sconn_port = 2,
    sconn_addr = 8
);
layout!(
    sctp_sndinfo,
    16,
    4,
    snd_sid = 0,
    snd_flags = 2,
    snd_ppid = 4,
    snd_context = 8,
    snd_assoc_id = 12
);
layout!(
    sctp_rcvinfo,
    28,
    4,
    rcv_sid = 0,
    rcv_ssn = 2,
    rcv_flags = 4,
    rcv_ppid = 8,
    rcv_tsn = 12,
    rcv_cumtsn = 16,
    rcv_context = 20,
    rcv_assoc_id = 24
);
layout!(
    sctp_nxtinfo,
    16,
    4,
    nxt_sid = 0,
    nxt_flags = 2,
    nxt_ppid = 4,
    nxt_length = 8,
    nxt_assoc_id = 12
);
layout!(sctp_recvv_rn, 44, 4, recvv_rcvinfo = 0, recvv_nxtinfo = 28);
layout!(
    sctp_extrcvinfo,
    128,
    4,
    sinfo_flags = 4,
    sinfo_ppid = 8,
    sinfo_tsn = 20,
    serinfo_next_flags = 32,
    serinfo_next_length = 40,
    sinfo_keynumber = 48,
    __reserve_pad = 52
);
#[cfg(target_pointer_width = "64")]
layout!(m_hdr, 40, 8, mh_next = 0, mh_data = 16, mh_len = 24);
layout!(
    sctp_initmsg,
    8,
    2,
    sinit_num_ostreams = 0,
    sinit_max_instreams = 2,
    sinit_max_attempts = 4,
    sinit_max_init_timeo = 6
);
layout!(sctp_setadaptation, 4, 4, ssb_adaptation_ind = 0);
layout!(sctp_event, 8, 4, se_assoc_id = 0, se_type = 4, se_on = 6);
layout!(
    sctp_udpencaps,
    136,
    8,
    sue_address = 0,
    sue_assoc_id = 128,
    sue_port = 132
);
layout!(
    sctp_paddrinfo,
    152,
    8,
    spinfo_address = 0,
    spinfo_assoc_id = 128,
    spinfo_mtu = 148
);
layout!(
    sctp_rtoinfo,
    16,
    4,
    srto_initial = 4,
    srto_max = 8,
    srto_min = 12
);
layout!(
    sctp_assocparams,
    20,
    4,
    sasoc_cookie_life = 12,
    sasoc_asocmaxrxt = 16,
    sasoc_number_peer_destinations = 18
);
layout!(
    sctp_paddrparams,
    152,
    8,
    spp_assoc_id = 128,
    spp_hbinterval = 132,
    spp_flags = 140,
    spp_pathmaxrxt = 148,
    spp_dscp = 150
);
layout!(
    sctp_status,
    176,
    8,
    sstat_assoc_id = 0,
    sstat_state = 4,
    sstat_rwnd = 8,
    sstat_unackdata = 12,
    sstat_penddata = 14,
    sstat_instrms = 16,
    sstat_outstrms = 18,
    sstat_fragmentation_point = 20,
    sstat_primary = 24
);
layout!(sctp_assoc_value, 8, 4, assoc_id = 0, assoc_value = 4);
layout!(
    sctp_sockstat,
    12,
    4,
    ss_assoc_id = 0,
    ss_total_sndbuf = 4,
    ss_total_recv_buf = 8
);
layout!(sctp_tlv, 8, 4, sn_type = 0, sn_flags = 2, sn_length = 4);
layout!(
    sctp_assoc_change,
    20,
    4,
    sac_type = 0,
    sac_flags = 2,
    sac_length = 4,
    sac_state = 8,
    sac_error = 10,
    sac_outbound_streams = 12,
    sac_inbound_streams = 14,
    sac_assoc_id = 16
);
layout!(
    sctp_adaptation_event,
    16,
    4,
    sai_type = 0,
    sai_flags = 2,
    sai_length = 4,
    sai_adaptation_ind = 8,
    sai_assoc_id = 12
);
#[cfg(target_pointer_width = "64")]
layout!(
    uio,
    40,
    8,
    uio_iov = 0,
    uio_iovcnt = 8,
    uio_offset = 16,
    uio_resid = 24,
    uio_segflg = 32,
    uio_rw = 36
);
layout!(
    sctp_sndrcvinfo,
    128,
    4,
    sinfo_stream = 0,
    sinfo_ssn = 2,
    sinfo_flags = 4,
    sinfo_ppid = 8,
    sinfo_context = 12,
    sinfo_timetolive = 16,
    sinfo_tsn = 20,
    sinfo_cumtsn = 24,
    sinfo_assoc_id = 28,
    sinfo_keynumber = 32,
    sinfo_keynumber_valid = 34,
    __reserve_pad = 36
);
