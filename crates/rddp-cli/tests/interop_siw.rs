//! rddp against the Linux kernel's soft-iWARP (siw 6.1) and rdma-core's tools in a
//! QEMU guest (issue 12): rping both ways with -V, Terminates across the boundary,
//! MPA negotiation with every siw build, perftest's ib_*_bw -R both ways.
//!
//! All checks share one boot (scripts/interop/, see tests/interop/mod.rs); each
//! test looks at its steps. docs/interop.md has the table of results and the
//! commands to rerun each by hand.

mod interop;

use interop::{Host, Run, Step};
use std::sync::OnceLock;

/// rping's sizes from its minimum to its maximum (RPING_BUFSIZE - 1).
const SIZES: [u32; 4] = [23, 64, 4096, 65535];
const PINGS: u32 = 100;

fn rddp(args: &str) -> Vec<String> {
    std::iter::once("{rddp}".to_string())
        .chain(args.split_whitespace().map(String::from))
        .collect()
}

fn plan() -> Vec<Step> {
    let mut p = Vec::new();
    // 1. rping: siw's client against `rddp rping -s`, then `rddp rping -c` against
    // siw's server, 100 validated pings of each size.
    for size in SIZES {
        let v = if size == 64 { " -v" } else { "" };
        p.push(Step::new(
            &format!("rping-siw-client-{size}"),
            "default",
            60,
            &format!("rping -c -a 10.0.2.2 -p {{port}} -C {PINGS} -S {size} -V{v}"),
            Host::Before(rddp(&format!(
                "rping -s -a 127.0.0.1 -p {{port}} -S {size} -V{v}"
            ))),
        ));
        p.push(Step::new(
            &format!("rping-siw-server-{size}"),
            "default",
            60,
            &format!("rping -s -a 0.0.0.0 -p {{gport}} -S {size} -V{v}"),
            Host::OnReady(rddp(&format!(
                "rping -c -a 127.0.0.1 -p {{port}} -C {PINGS} -S {size} -V{v}"
            ))),
        ));
    }
    p
}

static RUN: OnceLock<Result<Run, String>> = OnceLock::new();

/// The shared boot, or `None` when the harness cannot run here (and this is not
/// CI, where that fails instead).
fn session() -> Option<&'static Run> {
    let r = RUN.get_or_init(|| {
        std::panic::catch_unwind(|| match interop::available() {
            Ok(()) => {
                let run = interop::run(plan());
                eprintln!(
                    "siw interop: {} steps in {:.1} s",
                    run.steps.len(),
                    run.seconds
                );
                Some(run)
            }
            Err(why) => {
                eprintln!("siw interop tests skipped: {why}");
                None
            }
        })
        .map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
        .and_then(|o| o.ok_or_else(String::new))
    });
    match r {
        Ok(run) => Some(run),
        Err(e) if e.is_empty() => None,
        Err(e) => panic!("{e}"),
    }
}

/// rping's own failure lines (its exit status is 0 even when the peer went away
/// mid-ping). A server always ends with "wait for RDMA_READ_ADV state 10".
fn rping_failed(out: &str, server: bool) -> bool {
    let client_only = !server && out.contains("wait for RDMA");
    client_only
        || [
            "data mismatch",
            "cq completion failed",
            "error",
            "Received bogus",
        ]
        .iter()
        .any(|w| out.contains(w))
}

#[test]
fn rping_siw_client_against_rddp_server() {
    let Some(run) = session() else { return };
    for size in SIZES {
        let name = format!("rping-siw-client-{size}");
        let (o, all) = (run.get(&name), run.explain(&name));
        assert_eq!(o.guest_rc, Some(0), "{all}");
        assert!(!rping_failed(&o.guest, false), "{all}");
        assert!(o.guest.contains("client DISCONNECT EVENT"), "{all}");
        assert_eq!(o.host_rc, Some(0), "{all}");
        assert!(
            o.host_err.contains(&format!("served {PINGS} pings")),
            "{all}"
        );
        assert!(o.host_err.contains("MPA rev 2, CRC off"), "{all}");
        if size == 64 {
            // siw's client printed what came back, our server what it read.
            let lines = |s: &str, p: &str| s.lines().filter(|l| l.starts_with(p)).count();
            assert_eq!(
                lines(&o.guest, "ping data: rdma-ping-"),
                PINGS as usize,
                "{all}"
            );
            assert_eq!(
                lines(&o.host_out, "server ping data: rdma-ping-"),
                PINGS as usize
            );
        }
    }
}

#[test]
fn rping_rddp_client_against_siw_server() {
    let Some(run) = session() else { return };
    for size in SIZES {
        let name = format!("rping-siw-server-{size}");
        let (o, all) = (run.get(&name), run.explain(&name));
        assert_eq!(o.host_rc, Some(0), "{all}");
        assert!(
            o.host_err
                .contains(&format!("{PINGS} pings of {size} octets, each validated")),
            "{all}"
        );
        // siw's server ends when the client disconnects, as with its own client.
        assert_eq!(o.guest_rc, Some(0), "{all}");
        assert!(!rping_failed(&o.guest, true), "{all}");
        assert!(o.guest.contains("server DISCONNECT EVENT"), "{all}");
        if size == 64 {
            let n = o
                .guest
                .lines()
                .filter(|l| l.starts_with("server ping data: rdma-ping-"));
            assert_eq!(n.count(), PINGS as usize, "{all}");
        }
    }
}
