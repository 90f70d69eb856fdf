//! Peer death (docs/reliability.md): the peer process killed with SIGKILL in the
//! middle of a transfer, and the link cut (a veth end set down between two
//! network namespaces). Every posted work request completes, flushed or with an
//! error, within a stated bound; no completion is invented or doubled; the
//! consumer's quota usage returns to where it started.
//!
//! Bounds: SIGKILL: the kernel closes the peer's sockets as it exits, so the
//! survivor sees a FIN or RST at once: [`KILL_BOUND`]. A cut link is silent: the
//! survivor notices through `MpaOptions::dead_peer_timeout` (TCP_USER_TIMEOUT and
//! keepalive), within `rddp_mpa::tcp::dead_peer_bound(timeout)` =
//! 2 x timeout + max(1 s, timeout / 10); here 5 s for 2 s, checked with [`SLACK`]
//! for a loaded machine.
//!
//! The link-cut tests run the survivor inside namespace A: this test binary runs
//! itself there (`ip netns exec A <this binary> netns_survivor`), with the
//! scenario in `RDDP_PEER_DEATH_NETNS`.

mod cycles;
mod netns;
mod peer;
mod procstat;
mod survivor;

use netns::NetnsPair;
use peer::Peer;
use rddp::transport::sctp::dead_peer_bound;
use rddp::{Device, Usage};
use std::process::Command;
use std::time::{Duration, Instant};
use survivor::{Llp, Load, Outcome, Survivor};

/// SIGKILL to last completion.
const KILL_BOUND: Duration = Duration::from_secs(3);
/// The dead-peer timeout the link-cut tests set.
const CUT_TIMEOUT: Duration = Duration::from_secs(2);
/// Scheduling slack on a shared 2-core machine.
const SLACK: Duration = Duration::from_secs(1);

const ENV: &str = "RDDP_PEER_DEATH_NETNS";

/// 8 Writes and 48 Reads of 1 MiB and 8 Sends: with ORD 16, tens of MiB are
/// still to come when the first Read completes and the peer dies.
const BIG: Load = Load {
    writes: 8,
    reads: 48,
    sends: 8,
    size: 1 << 20,
};

fn check(what: &str, o: &Outcome, bound: Duration, usage: (Usage, Usage)) {
    println!(
        "{what}: {} work requests posted, completed {:?} within {:?} of the death \
         ({} Reads were in flight), events {:?}",
        o.posted, o.by_status, o.elapsed, o.reads_in_flight_at_death, o.events
    );
    assert_eq!(o.missing, 0, "{what}: work requests never completed: {o:?}");
    assert_eq!(o.unexpected, 0, "{what}: completions invented: {o:?}");
    assert!(
        o.elapsed <= bound,
        "{what}: took {:?} > {bound:?}",
        o.elapsed
    );
    assert!(o.not_success() >= 1, "{what}: nothing was flushed: {o:?}");
    let (live, after) = usage;
    // With the queue pair still there, no receive or Read is charged any more.
    assert_eq!(
        (live.receive_buffers, live.outstanding_reads),
        (0, 0),
        "{what}: quota still charged after every completion: {live:?}"
    );
    assert_eq!(after, Usage::default(), "{what}: quota not returned");
}

#[test]
fn sigkill_mid_transfer_completes_every_work_request() {
    let dev = Device::new();
    let mut peer = Peer::start(&[], "127.0.0.1:0", &["--recv-count", "64"]);
    let mut s = Survivor::connect(&dev, peer.addr, None);
    s.start(BIG);
    let in_flight = s.reads_in_flight();
    let died = peer.kill();
    let o = s.collect(died, KILL_BOUND + Duration::from_secs(10), in_flight);
    assert!(o.reads_in_flight_at_death >= 1, "not mid-transfer: {o:?}");
    check("SIGKILL", &o, KILL_BOUND, s.close());
}

/// Run `scenario` in a survivor inside namespace A against a target in B.
/// SCTP's dead-peer timeout in these tests (`SctpOptions::dead_peer_timeout`).
const SCTP_DEAD: Duration = Duration::from_secs(2);

/// What a survivor over SCTP keeps in flight: Reads of 64 KiB (a debug build's
/// usrsctp moves megabytes slowly enough to hold a test up).
const SCTP_LOAD: Load = Load {
    writes: 8,
    reads: 24,
    sends: 8,
    size: 64 << 10,
};

/// A killed peer over SCTP sends nothing (no FIN or RST as TCP's kernel
/// does): the survivor's association ends by SCTP's failure detection, within
/// `dead_peer_bound` of the death.
#[test]
fn sctp_sigkill_mid_transfer_completes_every_work_request_within_the_bound() {
    if !sctp_library() {
        return;
    }
    let dev = Device::new();
    let mut peer = Peer::start(
        &[],
        "127.0.0.1:0",
        &["--transport", "sctp", "--recv-count", "64"],
    );
    let mut s = Survivor::connect_over(&dev, peer.addr, Llp::Sctp, Some(SCTP_DEAD));
    s.start(SCTP_LOAD);
    let in_flight = s.reads_in_flight();
    let died = peer.kill();
    let bound = dead_peer_bound(SCTP_DEAD) + SLACK;
    let o = s.collect(died, bound + Duration::from_secs(20), in_flight);
    check("SCTP SIGKILL", &o, bound, s.close());
}

/// Skip loudly without libusrsctp, unless CI is set (then fail).
fn sctp_library() -> bool {
    rddp_testkit::usrsctp_present("the SCTP peer-death tests", usrsctp_ffi::available())
}

fn link_cut(scenario: &str) {
    let Some(ns) = netns::require() else { return };
    let exe = std::env::current_exe().unwrap();
    let env = format!("{scenario},{},{},{}", ns.a, ns.b, ns.dev_b);
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.a])
        .arg(exe)
        .args([
            "peer_death::netns_survivor",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(ENV, env)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the survivor in {} did not finish in 60 s", ns.a);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "the survivor in {} failed: {status}",
        ns.a
    );
}

#[test]
fn link_cut_mid_transfer_completes_within_the_dead_peer_bound() {
    link_cut("transfer");
}

#[test]
fn link_cut_on_an_idle_connection_flushes_its_receives_within_the_bound() {
    link_cut("idle");
}

/// The survivor side of [`link_cut`], run by it inside namespace A.
#[test]
fn sctp_link_cut_mid_transfer_completes_within_the_dead_peer_bound() {
    if sctp_library() {
        link_cut("sctp-transfer");
    }
}

#[test]
fn sctp_link_cut_on_an_idle_association_flushes_its_receives_within_the_bound() {
    if sctp_library() {
        link_cut("sctp-idle");
    }
}

#[test]
#[ignore = "run by the link_cut tests inside their network namespace"]
fn netns_survivor() {
    let Ok(env) = std::env::var(ENV) else {
        eprintln!("{ENV} is not set: this runs only inside a link_cut test");
        return;
    };
    let parts: Vec<&str> = env.split(',').collect();
    let [scenario, _a, b, dev_b] = parts[..] else {
        panic!("{ENV}={env:?}");
    };
    let dev = Device::new();
    let listen = format!("{}:0", netns::IP_B);
    let (sctp, scenario) = match scenario.strip_prefix("sctp-") {
        Some(rest) => (true, rest),
        None => (false, scenario),
    };
    let mut extra = vec!["--recv-count", "64"];
    if sctp {
        extra.extend(["--transport", "sctp"]);
    }
    let mut peer = Peer::start(&NetnsPair::exec(b), &listen, &extra);
    let (llp, load, dead_peer, bound) = if sctp {
        let bound = dead_peer_bound(SCTP_DEAD) + SLACK;
        (Llp::Sctp, SCTP_LOAD, SCTP_DEAD, bound)
    } else {
        let bound = rddp_mpa::tcp::dead_peer_bound(CUT_TIMEOUT) + SLACK;
        (Llp::Mpa, BIG, CUT_TIMEOUT, bound)
    };
    let mut s = Survivor::connect_over(&dev, peer.addr, llp, Some(dead_peer));
    let in_flight = if scenario == "transfer" {
        s.start(load);
        s.reads_in_flight()
    } else if sctp {
        // Let every chunk of the setup be acknowledged: only heartbeats can
        // notice. No kernel table shows usrsctp's queues; this pause is no
        // synchronisation either way: with a chunk unacknowledged the cut is
        // noticed by retransmission, within the same bound.
        std::thread::sleep(Duration::from_millis(300));
        0
    } else {
        // Every octet of the setup acknowledged: only keepalive can notice.
        let deadline = Instant::now() + Duration::from_secs(20);
        while unacknowledged_to(peer.addr) != Some(0) {
            assert!(
                Instant::now() < deadline,
                "octets to {} still unacknowledged after 20 s: {:?}",
                peer.addr,
                unacknowledged_to(peer.addr)
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        0
    };
    let cut = Instant::now();
    NetnsPair::cut(b, dev_b);
    let o = s.collect(cut, bound + Duration::from_secs(20), in_flight);
    if scenario == "transfer" {
        assert!(o.reads_in_flight_at_death >= 1, "not mid-transfer: {o:?}");
    }
    let what = if sctp { "SCTP link cut" } else { "link cut" };
    check(&format!("{what} ({scenario})"), &o, bound, s.close());
    peer.kill();
}

/// Octets sent and not yet acknowledged on the established TCP connection of
/// this network namespace to `peer` (IPv4), from /proc/net/tcp (state 01 =
/// ESTABLISHED; tx_queue counts octets from snd_una to write_seq).
fn unacknowledged_to(peer: std::net::SocketAddr) -> Option<u64> {
    let std::net::SocketAddr::V4(v4) = peer else {
        return None;
    };
    // The kernel prints the address's network-order word as a native u32,
    // and the port in host order.
    let ip = u32::from_ne_bytes(v4.ip().octets());
    let want = format!("{ip:08X}:{:04X}", v4.port());
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols.len() > 4 && cols[2] == want && cols[3] == "01" {
            let (tx, _) = cols[4].split_once(':')?;
            u64::from_str_radix(tx, 16).ok()
        } else {
            None
        }
    })
}
