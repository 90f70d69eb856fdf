//! Wire check over an in-process AF_CONN link (RFC 5043): every
//! packet of a scripted session goes into a pcap (link type 248, SCTP), checked by
//! tshark with the project's Lua dissector (common/wire.rs).

use crate::common::wire::{check_capture, session, tshark_present};
use crate::common::*;
use rddp_proto::mem::MemoryTable;
use rddp_sctp::driver::{Listener, Options, connect_conn};
use std::time::Duration;
use usrsctp_ffi::{Encapsulation, stack};

#[test]
fn tshark_sees_rfc5043_on_an_af_conn_capture() {
    if !own_process(module_path!(), "tshark_sees_rfc5043_on_an_af_conn_capture")
        || !tshark_present()
    {
        return;
    }
    stack::init(Encapsulation::Udp(free_port())).unwrap();
    let link = link::Link::new(false);
    let l = Listener::bind_conn(&link.b, 5002, Options::default()).unwrap();
    let mut a = connect_conn(&link.a, 5002, Options::default()).unwrap();
    let mut b = l.accept(Duration::from_secs(5)).unwrap();
    let (ma, mb) = (MemoryTable::with_seed(5), MemoryTable::with_seed(6));
    let sent = session(&mut a, &ma, &mut b, &mb);
    let pcap = std::env::temp_dir().join(format!("rddp-sctp-conn-{}.pcap", std::process::id()));
    std::fs::write(&pcap, link.pcap()).unwrap();
    drop((a, b, l, link));
    check_capture(pcap.to_str().unwrap(), &[], &sent);
    let _ = std::fs::remove_file(&pcap);
}
