//! The one usrsctp stack of the process (`usrsctp_init` once,
//! one UDP encapsulation port per process, never `usrsctp_finish` while in use), and
//! AF_CONN addresses: in-process links whose packets the caller carries.

use crate::api::api;
use crate::error::Error;
use libc::{c_int, c_void, size_t};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// How the stack reaches the network (fixed for the life of the process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encapsulation {
    /// SCTP over UDP (RFC 6951) on this local UDP port; no privileges needed.
    Udp(u16),
    /// SCTP directly over IP (protocol 132): needs root.
    RawIp,
}

static STACK: OnceLock<Encapsulation> = OnceLock::new();

/// Start the process-wide stack, or check that it already runs with `encaps`.
/// Checksums are always computed, on loopback too (a corrupted packet must be
/// dropped by SCTP, RFC 4960 §6.8, whatever path it took), and out-of-the-blue
/// packets are never answered with ABORT (RFC 4960 §8.4 leaves that to the
/// stack's policy; with raw IP another process's SCTP stack sees our packets
/// and its ABORTs would kill our associations). See [`protections`].
///
/// A stack over UDP gets no raw socket. `usrsctp_init` opens one for IP
/// protocol 132 whenever the process may (root), and a raw socket receives
/// every SCTP packet of the host: such a stack would answer other processes'
/// raw IP associations as out of the blue, with ABORT until the sysctls
/// below are set (`usrsctp_init` resets them, so they can only follow it,
/// and its receive threads run by then). So the stack is started on a
/// thread of its own without `CAP_NET_RAW` in its effective set, which the
/// raw socket needs and the threads usrsctp starts there inherit; the rest
/// of the process keeps its capabilities.
pub fn init(encaps: Encapsulation) -> Result<Encapsulation, Error> {
    let api = api()?;
    let got = *STACK.get_or_init(|| {
        let start = |port: u16| {
            // SAFETY: runs once per process (OnceLock); conn_output matches
            // the prototype. The sysctls are set after `usrsctp_init`, which
            // resets every sysctl to its default (`sctp_init_sysctls` in
            // 0.9.5.0): set before it, they did not hold.
            unsafe {
                (api.init)(port, Some(conn_output), core::ptr::null());
                (api.sysctl_no_csum_on_loopback)(0);
                (api.sysctl_blackhole)(2);
            }
        };
        match encaps {
            Encapsulation::RawIp => start(0),
            Encapsulation::Udp(port) => std::thread::scope(|s| {
                s.spawn(|| {
                    // Only a process that has CAP_NET_RAW can lose it; one
                    // that cannot drop it has no raw socket to open either.
                    let _ =
                        caps::drop(None, caps::CapSet::Effective, caps::Capability::CAP_NET_RAW);
                    start(port);
                });
            }),
        }
        encaps
    });
    if got == encaps {
        Ok(got)
    } else {
        Err(Error::StackMismatch {
            running: got,
            wanted: encaps,
        })
    }
}

/// The stack's encapsulation, if started.
#[must_use]
pub fn running() -> Option<Encapsulation> {
    STACK.get().copied()
}

/// The stack-wide settings [`init`] makes, as the library reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protections {
    /// `sctp_blackhole`: 2 = no ABORT for any out-of-the-blue packet.
    pub blackhole: u32,
    /// `sctp_no_csum_on_loopback`: 0 = the CRC32c is computed on loopback too.
    pub no_csum_on_loopback: u32,
}

/// Read back the settings [`init`] makes (see [`Protections`]).
pub fn protections() -> Result<Protections, Error> {
    let api = api()?;
    running().ok_or(Error::NotInitialized)?;
    // SAFETY: the stack runs (checked above); both calls take no argument and
    // read one global setting each.
    unsafe {
        Ok(Protections {
            blackhole: (api.sysctl_get_blackhole)(),
            no_csum_on_loopback: (api.sysctl_get_no_csum_on_loopback)(),
        })
    }
}

type Output = Arc<dyn Fn(&[u8]) + Send + Sync>;

fn outputs() -> &'static Mutex<HashMap<usize, Output>> {
    static O: OnceLock<Mutex<HashMap<usize, Output>>> = OnceLock::new();
    O.get_or_init(Default::default)
}

/// Called by usrsctp (its own threads, its locks held) for every AF_CONN packet.
unsafe extern "C" fn conn_output(
    addr: *mut c_void,
    buf: *mut c_void,
    len: size_t,
    _tos: u8,
    _df: u8,
) -> c_int {
    let out = outputs()
        .lock()
        .ok()
        .and_then(|m| m.get(&(addr as usize)).cloned());
    if let Some(out) = out {
        // SAFETY: usrsctp hands a valid, non-null buffer of `len` octets (the
        // packet it just built), unchanged until this call returns; the slice
        // is only lent to `out` and does not outlive the call.
        let pkt = unsafe { core::slice::from_raw_parts(buf as *const u8, len) };
        out(pkt);
    }
    0
}

/// A registered AF_CONN address: one end of an in-process link. usrsctp names a
/// link by one address used as local and remote (bind and connect to the same id);
/// it calls `output` with each packet sent on the link from this end; `output` must not call back into usrsctp (queue the packet and
/// deliver it from another thread with [`ConnAddress::input`] of the peer's address).
#[derive(Debug)]
pub struct ConnAddress {
    id: usize,
}

impl ConnAddress {
    /// Register a new address whose outgoing packets go to `output`; the
    /// address is deregistered when dropped. Fails with
    /// [`Error::NotInitialized`] before [`init`].
    pub fn register(output: impl Fn(&[u8]) + Send + Sync + 'static) -> Result<Self, Error> {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        let api = api()?;
        running().ok_or(Error::NotInitialized)?;
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut m) = outputs().lock() {
            m.insert(id, Arc::new(output));
        }
        // SAFETY: the id is an opaque tag, never dereferenced by usrsctp.
        unsafe { (api.register_address)(id as *mut c_void) };
        Ok(Self { id })
    }

    /// The opaque tag that names this address in `sockaddr_conn`.
    pub fn id(&self) -> usize {
        self.id
    }

    /// A packet arrived at this address.
    pub fn input(&self, packet: &[u8]) -> Result<(), Error> {
        conn_input(self.id, packet)
    }
}

/// Hand `packet` to the stack as received on the AF_CONN address `id`.
pub fn conn_input(id: usize, packet: &[u8]) -> Result<(), Error> {
    let api = api()?;
    // SAFETY: `packet` is valid for `packet.len()` octets, and usrsctp copies
    // it before returning. `id` is an opaque tag, compared with the
    // registered ones and never dereferenced by usrsctp.
    unsafe { (api.conninput)(id as *mut c_void, packet.as_ptr().cast(), packet.len(), 0) };
    Ok(())
}

impl Drop for ConnAddress {
    fn drop(&mut self) {
        if let Ok(api) = api() {
            // SAFETY: deregisters the tag registered in `register`.
            unsafe { (api.deregister_address)(self.id as *mut c_void) };
        }
        if let Ok(mut m) = outputs().lock() {
            m.remove(&self.id);
        }
    }
}
