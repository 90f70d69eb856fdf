//! Unsignaled Sends and RDMA Writes (`SendFlags::unsignaled`,
//! `WriteFlags::unsignaled`: verbs' work requests without `IBV_SEND_SIGNALED`)
//! over a real MPA/TCP queue pair (the test bodies: `common/unsignaled_run.rs`).

use crate::common::unsignaled_run;

use rddp::transport::mpa::{Listener, connect};
use rddp_mpa::MpaOptions;

#[test]
fn unsignaled_sends_free_their_slots_without_a_completion() {
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::rev1()).unwrap();
    let addr = listener.local_addr().unwrap();
    unsignaled_run::run(
        move || listener.accept().unwrap(),
        || connect(addr, &MpaOptions::rev1()).unwrap(),
    );
}

#[test]
fn unsignaled_writes_free_their_slots_without_a_completion() {
    let listener = Listener::bind("127.0.0.1:0", MpaOptions::rev1()).unwrap();
    let addr = listener.local_addr().unwrap();
    unsignaled_run::run_writes(
        move || listener.accept().unwrap(),
        || connect(addr, &MpaOptions::rev1()).unwrap(),
    );
}
