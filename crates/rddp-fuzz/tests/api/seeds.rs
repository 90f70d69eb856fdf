//! The seed corpora (built from real traffic by `rddp_fuzz::seeds`) still reach
//! the protocol paths they were made for: setup completes, messages are
//! delivered, segments placed, work requests complete successfully. If the
//! input format of a target changes and its seeds rot into inputs refused at
//! once, this fails.

use rddp_fuzz::reach::{Reach, reach};

fn target(name: &str) -> fn(&[u8]) {
    rddp_fuzz::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .expect("listed target")
}

#[test]
fn seeds_reach_the_real_paths() {
    let mut total: std::collections::BTreeMap<&str, Reach> = Default::default();
    for (name, seed, data) in rddp_fuzz::seeds::all() {
        let r = reach(target(name), &data);
        let t = total.entry(name).or_default();
        t.established += r.established;
        t.delivered += r.delivered;
        t.placed += r.placed;
        t.completed_ok += r.completed_ok;
        match name {
            // Setup, then the peer's two Sends complete on the product's
            // receive path (after the RTR, as agreed).
            "mpa_setup" => assert!(r.established > 0 && r.delivered >= 2, "{seed}: {r:?}"),
            "ddp_sink" => {
                assert!(r.placed >= 5 && r.delivered >= 3, "{seed}: {r:?}");
                if seed.starts_with("region-") {
                    assert!(r.into_region >= 1, "{seed}: {r:?}");
                }
            }
            "rdmap_stream" => assert!(r.placed >= 5 && r.completed_ok >= 3, "{seed}: {r:?}"),
            // Three Sends complete; the Writes place into region 0.
            "mpa_rx" => assert!(r.completed_ok >= 3, "{seed}: {r:?}"),
            "sctp_adaptation" => assert!(
                r.established > 0 && r.placed + r.delivered > 0,
                "{seed}: {r:?}"
            ),
            // Write, Read and Send complete at A, the receive at B; a Read may still
            // be in flight at teardown on a loaded machine (then it is flushed).
            "verbs_ops" => assert!(r.completed_ok >= 3, "{seed}: {r:?}"),
            _ => {}
        }
    }
    assert!(total["mpa_setup"].delivered > 0, "{total:?}");
    assert!(total["sctp_adaptation"].delivered > 0, "{total:?}");
    println!("{total:#?}");
}
