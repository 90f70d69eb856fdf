//! Run-time loading of libusrsctp (libloading): the workspace builds and `rddp demo`
//! runs on a machine without the library; only SCTP use then fails, with an error
//! naming the Debian package to install.

use crate::sys::*;
use std::sync::OnceLock;

/// Names tried, in order: the runtime package's soname, then the -dev symlink.
pub const LIBRARY_NAMES: [&str; 2] = ["libusrsctp.so.2", "libusrsctp.so"];

/// The library is missing or lacks a symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError(
    /// What was tried and why it failed, with the package to install.
    pub String,
);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for LoadError {}

/// Function pointers resolved once; the library stays loaded for the process.
#[derive(Debug)]
pub(crate) struct Api {
    _lib: libloading::Library,
    pub init: InitFn,
    pub socket: SocketFn,
    pub setsockopt: SetsockoptFn,
    pub getsockopt: GetsockoptFn,
    pub sendv: SendvFn,
    pub recvv: RecvvFn,
    pub bind: BindFn,
    pub listen: ListenFn,
    pub accept: AcceptFn,
    pub connect: BindFn,
    pub close: CloseFn,
    pub shutdown: ShutdownFn,
    pub conninput: ConninputFn,
    pub set_non_blocking: SetNonBlockingFn,
    pub register_address: AddressFn,
    pub deregister_address: AddressFn,
    pub set_upcall: SetUpcallFn,
    pub get_events: GetEventsFn,
    pub sysctl_blackhole: SysctlFn,
    pub sysctl_no_csum_on_loopback: SysctlFn,
    pub sysctl_get_blackhole: SysctlGetFn,
    pub sysctl_get_no_csum_on_loopback: SysctlGetFn,
    /// The one symbol outside usrsctp.h (see the crate docs); optional: a
    /// library without it still loads, and sends are then not gathered.
    pub lower_sosend: Option<LowerSosendFn>,
    /// Likewise optional: receive a message as usrsctp's mbuf chain (see
    /// [`crate::Chain`]); both or neither are used.
    pub sorecvmsg: Option<(SoRecvmsgFn, MFreemFn)>,
}

static API: OnceLock<Result<Api, LoadError>> = OnceLock::new();

/// The loaded library, or why it could not be loaded.
pub(crate) fn api() -> Result<&'static Api, LoadError> {
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Whether libusrsctp can be loaded on this machine.
pub fn available() -> Result<(), LoadError> {
    api().map(|_| ())
}

/// Whether the loaded library sends a message gathered from several buffers
/// (it exports `sctp_lower_sosend`); see [`crate::Socket::send_gather`].
#[must_use]
pub fn gather_available() -> bool {
    api().is_ok_and(|a| a.lower_sosend.is_some())
}

/// Whether the loaded library hands a received message over as its mbuf
/// chain (it exports `sctp_sorecvmsg` and `m_freem`); see
/// [`crate::Socket::recv_chain`].
#[must_use]
pub fn chain_available() -> bool {
    api().is_ok_and(|a| a.sorecvmsg.is_some())
}

fn open(names: &[&str]) -> Result<libloading::Library, LoadError> {
    let mut why = Vec::new();
    for &name in names {
        // SAFETY: loading runs the library's ELF initialisers; libusrsctp's
        // need nothing of this process (its stack starts at `usrsctp_init`,
        // not at load), and no other code of ours runs meanwhile.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => return Ok(lib),
            Err(e) => why.push(e.to_string()),
        }
    }
    Err(LoadError(format!(
        "SCTP transport unavailable: libusrsctp not found (tried {}). Install it with \
         `apt-get install libusrsctp2` (or libusrsctp-dev). Details: {}",
        names.join(", "),
        why.join("; ")
    )))
}

/// Set (to anything): the symbols outside usrsctp.h are not used, only its
/// API (tests of the fallbacks; a libusrsctp whose internals differ).
pub const API_ONLY_ENV: &str = "RDDP_USRSCTP_API_ONLY";

fn load() -> Result<Api, LoadError> {
    let lib = open(&LIBRARY_NAMES)?;
    let api_only = std::env::var_os(API_ONLY_ENV).is_some();
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the type given at each use (a field of `Api`) is the C
            // prototype from usrsctp.h. The pointer copied out stays valid for
            // the process: `Api` keeps the `Library`, and `Api` lives in a
            // static that is never dropped.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| LoadError(format!("libusrsctp lacks {}: {e}", $name)))?
        };
    }
    Ok(Api {
        init: sym!("usrsctp_init"),
        socket: sym!("usrsctp_socket"),
        setsockopt: sym!("usrsctp_setsockopt"),
        getsockopt: sym!("usrsctp_getsockopt"),
        sendv: sym!("usrsctp_sendv"),
        recvv: sym!("usrsctp_recvv"),
        bind: sym!("usrsctp_bind"),
        listen: sym!("usrsctp_listen"),
        accept: sym!("usrsctp_accept"),
        connect: sym!("usrsctp_connect"),
        close: sym!("usrsctp_close"),
        shutdown: sym!("usrsctp_shutdown"),
        conninput: sym!("usrsctp_conninput"),
        set_non_blocking: sym!("usrsctp_set_non_blocking"),
        register_address: sym!("usrsctp_register_address"),
        deregister_address: sym!("usrsctp_deregister_address"),
        set_upcall: sym!("usrsctp_set_upcall"),
        get_events: sym!("usrsctp_get_events"),
        sysctl_blackhole: sym!("usrsctp_sysctl_set_sctp_blackhole"),
        sysctl_no_csum_on_loopback: sym!("usrsctp_sysctl_set_sctp_no_csum_on_loopback"),
        sysctl_get_blackhole: sym!("usrsctp_sysctl_get_sctp_blackhole"),
        sysctl_get_no_csum_on_loopback: sym!("usrsctp_sysctl_get_sctp_no_csum_on_loopback"),
        // SAFETY: the type is the `__Userspace__` prototype of sctp_output.c
        // (0.9.5.0), see `LowerSosendFn`; the pointer lives as long as the
        // library, loaded for the process (as in `sym!`).
        lower_sosend: unsafe { lib.get::<LowerSosendFn>(b"sctp_lower_sosend\0") }
            .ok()
            .map(|f| *f)
            .filter(|_| !api_only),
        // SAFETY: the types are the prototypes of sctputil.c and user_mbuf.c
        // (0.9.5.0), see `SoRecvmsgFn` and `MFreemFn`; the pointers live as
        // long as the library, loaded for the process (as in `sym!`).
        sorecvmsg: unsafe {
            lib.get::<SoRecvmsgFn>(b"sctp_sorecvmsg\0")
                .ok()
                .map(|f| *f)
                .zip(lib.get::<MFreemFn>(b"m_freem\0").ok().map(|f| *f))
                .filter(|_| !api_only)
        },
        _lib: lib,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_names_the_package_to_install() {
        let e = open(&["libusrsctp-missing.so.99"]).unwrap_err();
        assert!(e.0.contains("apt-get install libusrsctp2"), "{e}");
        assert!(e.0.contains("libusrsctp-missing.so.99"), "{e}");
    }
}
