//! A port is listened on again at once after its listener and the associations
//! it accepted are dropped. A dropped socket whose association is still up is
//! closed by usrsctp-ffi's reaper only once that association has ended (the
//! usrsctp close race, docs/usrsctp-close-race.md), and until then it holds
//! the port: `Listener::bind` waits for the reaper rather than fail.

use crate::common::*;
use rddp_sctp::driver::{Listener, Options, connect};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::thread;
use std::time::Duration;

#[test]
fn a_port_is_listened_on_again_while_its_dropped_association_closes() {
    if !own_process(
        module_path!(),
        "a_port_is_listened_on_again_while_its_dropped_association_closes",
    ) {
        return;
    }
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, free_port());
    for round in 0..3 {
        let l = Listener::bind(addr, Options::default())
            .unwrap_or_else(|e| panic!("round {round}: listening again at {addr}: {e}"));
        let server = thread::spawn(move || {
            let c = l.accept(Duration::from_secs(5));
            (l, c)
        });
        // The client stays connected while the server drops its end: the
        // accepted socket goes to the reaper with its association up.
        let client = connect(addr, Options::default()).expect("the association");
        let (l, accepted) = server.join().unwrap();
        drop(accepted.expect("accepted"));
        drop(l);
        let again = Listener::bind(addr, Options::default());
        assert!(
            again.is_ok(),
            "round {round}: the port was not free for a new listener: {}",
            again.unwrap_err()
        );
        drop(again);
        drop(client);
    }
}
