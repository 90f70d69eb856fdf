//! The LLP a queue-pair test runs over, as a parameter: the same test body
//! over MPA on loopback TCP (with any options each side) and over DDP/SCTP
//! on usrsctp (UDP encapsulation on 127.0.0.1).

use crate::common::sctp_llp;
use rddp::transport::{Connection, mpa, sctp};
use rddp::{PreparedQueuePair, QueuePair};
use rddp_mpa::MpaOptions;
use std::net::SocketAddr;
use std::time::Duration;

/// An LLP with its settings. (A few of these live at a time, on the stack
/// of a test: their size does not matter.)
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Llp {
    /// MPA over TCP, the passive side's options and the active side's.
    Mpa {
        server: MpaOptions,
        client: MpaOptions,
    },
    /// DDP over SCTP with the default options (its test runs in a process of
    /// its own: `sctp_llp::own_process`).
    Sctp,
}

/// A passive endpoint of an [`Llp`] and the private data it answers with.
pub(crate) struct Passive {
    listener: Listener,
    private: Vec<u8>,
}

#[allow(clippy::large_enum_variant)] // One per test, as `Llp`.
enum Listener {
    Mpa(mpa::Listener),
    Sctp(sctp::Listener),
}

impl Llp {
    /// MPA with the same options on both sides.
    pub(crate) fn mpa(both: MpaOptions) -> Self {
        Llp::Mpa {
            server: both.clone(),
            client: both,
        }
    }

    /// What `QueuePair::llp_info` calls it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Llp::Mpa { .. } => "mpa",
            Llp::Sctp => "sctp",
        }
    }

    /// A listener at a free loopback address, answering with `private`, and
    /// that address; `None` when the LLP is missing here (libusrsctp: a loud
    /// skip, a failure under CI).
    pub(crate) fn listen(&self, private: &[u8]) -> Option<(SocketAddr, Passive)> {
        let (addr, listener) = match self {
            Llp::Mpa { server, .. } => {
                let opts = MpaOptions {
                    private_data: private.to_vec(),
                    ..server.clone()
                };
                let l = mpa::Listener::bind("127.0.0.1:0", opts).unwrap();
                (l.local_addr().unwrap(), Listener::Mpa(l))
            }
            Llp::Sctp => {
                let (addr, l) = sctp_llp::listening()?;
                (addr.into(), Listener::Sctp(l))
            }
        };
        let private = private.to_vec();
        Some((addr, Passive { listener, private }))
    }

    /// A connection to `addr`, offering `private`, for a queue pair to
    /// attach.
    pub(crate) fn connection(&self, addr: SocketAddr, private: &[u8]) -> Connection {
        match self {
            Llp::Mpa { client, .. } => {
                let opts = MpaOptions {
                    private_data: private.to_vec(),
                    ..client.clone()
                };
                mpa::connect(addr, &opts).unwrap()
            }
            Llp::Sctp => {
                let SocketAddr::V4(a) = addr else {
                    panic!("DDP over SCTP is IPv4 only: {addr}")
                };
                sctp::connect(a, sctp::SctpOptions::default(), private).unwrap()
            }
        }
    }

    /// `prep` connected to `addr`, offering `private` (over MPA negotiating
    /// the builder's IRD and ORD).
    pub(crate) fn connect(
        &self,
        prep: PreparedQueuePair,
        addr: SocketAddr,
        private: &[u8],
    ) -> QueuePair {
        match self {
            Llp::Mpa { client, .. } => {
                let opts = MpaOptions {
                    private_data: private.to_vec(),
                    ..client.clone()
                };
                prep.connect_mpa(addr, opts).unwrap()
            }
            Llp::Sctp => prep.attach(self.connection(addr, private)).unwrap(),
        }
    }
}

impl Passive {
    /// The next connection, for a queue pair to attach.
    pub(crate) fn connection(&self) -> Connection {
        match &self.listener {
            // (The private data is in the listener's options.)
            Listener::Mpa(l) => l.accept().unwrap(),
            Listener::Sctp(l) => l.accept(Duration::from_secs(10), &self.private).unwrap(),
        }
    }

    /// The next connection, attached to `prep`.
    pub(crate) fn accept(&self, prep: PreparedQueuePair) -> QueuePair {
        prep.attach(self.connection()).unwrap()
    }
}
