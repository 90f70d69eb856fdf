//! Unsignaled RDMA Writes over DDP/SCTP (RFC 5043) on usrsctp: the same test as
//! `unsignaled.rs`'s Writes over MPA (`common/unsignaled_run.rs`). One test in
//! this file: one usrsctp stack per process.

use crate::common::sctp_llp as llp;
use crate::common::unsignaled_run;

use rddp::transport::sctp::{SctpOptions, connect};
use std::time::Duration;

#[test]
fn unsignaled_writes_free_their_slots_without_a_completion_over_sctp() {
    if !llp::own_process(
        module_path!(),
        "unsignaled_writes_free_their_slots_without_a_completion_over_sctp",
    ) {
        return;
    }
    let Some((addr, listener)) = llp::listening() else {
        return;
    };
    unsignaled_run::run_writes(
        move || listener.accept(Duration::from_secs(10), b"").unwrap(),
        || connect(addr, SctpOptions::default(), b"").unwrap(),
    );
}
