//! The peer's Adaptation Layer Indication is verified before any DDP procedure
//! (RFC 5043): absent or any value but 1 means no DDP and a clear error,
//! on either side of the association. Real usrsctp over UDP encapsulation.

use crate::common::*;
use rddp_sctp::driver::{DriverError, Listener, Options, connect};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::thread;
use std::time::Duration;

#[test]
fn peers_without_the_ddp_indication_are_refused() {
    if !own_process(
        module_path!(),
        "peers_without_the_ddp_indication_are_refused",
    ) {
        return;
    }
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, free_port());
    // The listener announces nothing, then 2: our client refuses both.
    for announce in [None, Some(2)] {
        let l = Listener::bind(
            addr,
            Options {
                announce,
                ..Options::default()
            },
        )
        .unwrap();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let server = thread::spawn(move || {
            let c = l.accept(Duration::from_secs(5));
            let _ = wait.recv_timeout(Duration::from_secs(5)); // keep it until checked
            drop(c);
            l
        });
        let r = connect(addr, Options::default());
        let _ = done.send(());
        let err = r.expect_err("association without the DDP indication was used");
        assert!(matches!(err, DriverError::NotDdp(_)), "{err}");
        eprintln!("announce {announce:?}: {err}");
        drop(server.join().unwrap());
    }
    // A client that announces nothing is refused by our listener.
    let l = Listener::bind(addr, Options::default()).unwrap();
    let server = thread::spawn(move || l.accept(Duration::from_secs(5)).map(|_| ()));
    let _client = connect(
        addr,
        Options {
            announce: None,
            ..Options::default()
        },
    );
    let err = server
        .join()
        .unwrap()
        .expect_err("listener accepted a non-DDP peer");
    assert!(matches!(err, DriverError::NotDdp(_)), "{err}");
}
