//! Results: one measurement per size, printed as perftest's table or as JSON lines.

use super::copies::RunCopies;
use super::opts::Op;
use super::stats::{LatStats, lat_stats};
use std::time::Instant;

/// What one size measured (over all queue pairs of the run).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Measurement {
    pub op: Op,
    pub size: u32,
    /// Messages (round trips with --pingpong), summed over queue pairs.
    pub iters: u64,
    pub qps: usize,
    /// The timed interval: from the first queue pair's first data work request
    /// to the last queue pair's end of data (see `Client::data`). Connection
    /// setup, Hello, Begin and Ack are outside it.
    pub seconds: f64,
    /// The longest of the queue pairs' own data phases.
    pub qp_seconds_max: f64,
    /// Best message rate over short stretches, summed over queue pairs.
    pub peak_msgs_per_s: f64,
    /// Octets that differed from the pattern (with --verify).
    pub corrupt: Option<u64>,
    /// One-way latencies (half the round trip) in microseconds, with --pingpong.
    pub samples_us: Vec<f64>,
    pub pingpong: bool,
    /// The client queue pairs' counters over this size (control messages
    /// included), summed over queue pairs.
    pub counters: Option<rddp::QpStats>,
    /// This queue pair's data phase (one queue pair's measurement; the
    /// aggregate keeps the earliest start and the latest end).
    pub data_start: Option<Instant>,
    pub data_end: Option<Instant>,
    /// When the client's control messages of the size were sent or received.
    pub ctrl_at: Vec<Instant>,
    /// The aggregate: how many of those fell inside the timed interval.
    pub ctrl_timed: u64,
    /// Payload octets copied in user space at either end over the size.
    pub copies: Option<RunCopies>,
}

impl Measurement {
    /// Payload octets moved one way.
    pub(crate) fn bytes(&self) -> u64 {
        u64::from(self.size) * self.iters
    }

    pub(crate) fn gbit_per_s(&self) -> f64 {
        rate(self.bytes() as f64 * 8.0 / 1e9, self.seconds)
    }

    pub(crate) fn msgs_per_s(&self) -> f64 {
        rate(self.iters as f64, self.seconds)
    }

    pub(crate) fn peak_gbit_per_s(&self) -> f64 {
        self.peak_msgs_per_s * f64::from(self.size) * 8.0 / 1e9
    }

    pub(crate) fn latency(&self) -> Option<LatStats> {
        lat_stats(&self.samples_us)
    }

    /// The measurements of the queue pairs of one size, as one: traffic summed,
    /// timed from the earliest data start to the latest data end (the queue
    /// pairs' data phases running at the same time, as perftest times its
    /// queue pairs), or the longest queue pair's time where a part has no
    /// data phase.
    pub(crate) fn aggregate(parts: Vec<Measurement>) -> Option<Measurement> {
        let mut it = parts.into_iter();
        let mut m = it.next()?;
        m.qp_seconds_max = m.seconds;
        let mut spans = m.data_start.zip(m.data_end).is_some();
        for p in it {
            m.iters += p.iters;
            m.qps += p.qps;
            m.seconds = m.seconds.max(p.seconds);
            m.qp_seconds_max = m.qp_seconds_max.max(p.seconds);
            match (p.data_start, p.data_end) {
                (Some(s), Some(e)) => {
                    m.data_start = m.data_start.map(|a| a.min(s));
                    m.data_end = m.data_end.map(|a| a.max(e));
                }
                _ => spans = false,
            }
            m.ctrl_at.extend(p.ctrl_at);
            m.peak_msgs_per_s += p.peak_msgs_per_s;
            m.corrupt = match (m.corrupt, p.corrupt) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            };
            m.samples_us.extend(p.samples_us);
            m.copies = match (m.copies, p.copies) {
                (Some(a), Some(b)) => Some(a.add(b)),
                (a, b) => a.or(b),
            };
            m.counters = match (m.counters, p.counters) {
                (Some(mut a), Some(b)) => {
                    a.add(&b);
                    Some(a)
                }
                (a, b) => a.or(b),
            };
        }
        if spans && let (Some(s), Some(e)) = (m.data_start, m.data_end) {
            m.seconds = (e - s).as_secs_f64();
            m.ctrl_timed = m.ctrl_at.iter().filter(|&&t| s < t && t <= e).count() as u64;
        } else {
            (m.data_start, m.data_end) = (None, None);
        }
        // The peak cannot be below the average.
        m.peak_msgs_per_s = m.peak_msgs_per_s.max(m.msgs_per_s());
        Some(m)
    }
}

fn rate(x: f64, secs: f64) -> f64 {
    if secs > 0.0 { x / secs } else { 0.0 }
}

pub(crate) const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// Column header of a bandwidth table (perftest's ib_*_bw).
pub(crate) fn bw_header() -> String {
    format!(
        " {:<10} {:<14} {:<18} {:<20} {}",
        "#bytes", "#iterations", "BW peak[Gb/sec]", "BW average[Gb/sec]", "MsgRate[Mpps]"
    )
}

pub(crate) fn bw_row(m: &Measurement) -> String {
    format!(
        " {:<10} {:<14} {:<18.2} {:<20.2} {:.6}",
        m.size,
        m.iters,
        m.peak_gbit_per_s(),
        m.gbit_per_s(),
        m.msgs_per_s() / 1e6
    )
}

/// Column header of a latency table (perftest's ib_write_lat).
pub(crate) fn lat_header() -> String {
    format!(
        " {:<10} {:<14} {:<13} {:<13} {:<17} {:<13} {:<15} {}",
        "#bytes",
        "#iterations",
        "t_min[usec]",
        "t_max[usec]",
        "t_typical[usec]",
        "t_avg[usec]",
        "t_stdev[usec]",
        "99% percentile[usec]"
    )
}

pub(crate) fn lat_row(m: &Measurement) -> String {
    let Some(s) = m.latency() else {
        return format!(" {:<10} {:<14} (no samples)", m.size, m.iters);
    };
    format!(
        " {:<10} {:<14} {:<13.2} {:<13.2} {:<17.2} {:<13.2} {:<15.2} {:.2}",
        m.size, m.iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99
    )
}

pub(crate) fn header(pingpong: bool) -> String {
    if pingpong { lat_header() } else { bw_header() }
}

pub(crate) fn row(m: &Measurement) -> String {
    if m.pingpong { lat_row(m) } else { bw_row(m) }
}

/// One JSON object (one line) for one size.
pub(crate) fn json_line(m: &Measurement) -> String {
    let mut o = serde_json::json!({
        "op": m.op.name(),
        "size": m.size,
        "iterations": m.iters,
        "qps": m.qps,
        "bytes": m.bytes(),
        "seconds": m.seconds,
        "qp_seconds_max": m.qp_seconds_max,
        "control_messages_timed": m.ctrl_timed,
        "gbit_per_s": m.gbit_per_s(),
        "msgs_per_s": m.msgs_per_s(),
        "peak_gbit_per_s": m.peak_gbit_per_s(),
        "pingpong": m.pingpong,
    });
    if let Some(c) = m.corrupt {
        o["corrupt_bytes"] = c.into();
    }
    if let Some(c) = &m.counters {
        o["counters"] = crate::observe::stats_json(c);
    }
    if let Some(c) = &m.copies {
        o["payload_copied_octets"] = c.total().into();
        o["payload_copies"] = serde_json::json!({
            "client_rx": c.client.rx,
            "client_tx": c.client.tx,
            "server_rx": c.server.rx,
            "server_tx": c.server.tx,
        });
    }
    if let Some(s) = m.latency() {
        o["p50_us"] = s.typical.into();
        o["p99_us"] = s.p99.into();
        o["max_us"] = s.max.into();
        o["min_us"] = s.min.into();
        o["avg_us"] = s.avg.into();
        o["stdev_us"] = s.stdev.into();
    }
    o.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pingpong: bool) -> Measurement {
        Measurement {
            op: Op::Write,
            size: 65536,
            iters: 1000,
            qps: 1,
            seconds: 0.5,
            peak_msgs_per_s: 4000.0,
            corrupt: Some(0),
            samples_us: if pingpong {
                vec![1.0, 2.0, 3.0]
            } else {
                vec![]
            },
            pingpong,
            counters: None,
            data_start: None,
            data_end: None,
            ctrl_at: Vec::new(),
            ctrl_timed: 0,
            qp_seconds_max: 0.0,
            copies: None,
        }
    }

    /// Every column of the row starts where its header does.
    fn starts(s: &str) -> Vec<usize> {
        let b = s.as_bytes();
        (1..b.len())
            .filter(|&i| b[i] != b' ' && b[i - 1] == b' ')
            .collect()
    }

    #[test]
    fn bandwidth_table_has_perftests_shape() {
        let h = bw_header();
        assert!(h.contains("#bytes") && h.contains("BW peak[Gb/sec]"));
        assert!(h.contains("BW average[Gb/sec]") && h.ends_with("MsgRate[Mpps]"));
        let r = bw_row(&m(false));
        // 65536 B * 1000 in 0.5 s = 1.048576 Gbit/s; 2000 msg/s; peak 4000 msg/s.
        assert_eq!(
            r.split_whitespace().collect::<Vec<_>>(),
            ["65536", "1000", "2.10", "1.05", "0.002000"]
        );
        let hs = starts(&h);
        for c in starts(&r) {
            assert!(
                hs.contains(&c),
                "column at {c} not under a header:\n{h}\n{r}"
            );
        }
    }

    #[test]
    fn latency_table_has_perftests_shape() {
        let h = lat_header();
        for col in [
            "t_min[usec]",
            "t_typical[usec]",
            "t_stdev[usec]",
            "99% percentile[usec]",
        ] {
            assert!(h.contains(col), "{col}");
        }
        let r = lat_row(&m(true));
        assert_eq!(
            r.split_whitespace().collect::<Vec<_>>(),
            [
                "65536", "1000", "1.00", "3.00", "2.00", "2.00", "0.82", "3.00"
            ]
        );
        let hs = starts(&h);
        for c in starts(&r) {
            assert!(hs.contains(&c), "column at {c}:\n{h}\n{r}");
        }
    }

    #[test]
    fn json_is_one_consistent_line() {
        let line = json_line(&m(true));
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["op"], "write");
        assert_eq!(v["bytes"], 65_536_000);
        assert_eq!(v["p50_us"], 2.0);
        assert_eq!(v["max_us"], 3.0);
        assert_eq!(v["corrupt_bytes"], 0);
        let g = v["gbit_per_s"].as_f64().unwrap();
        assert!((g - 65_536_000.0 * 8.0 / 0.5 / 1e9).abs() < 1e-9);
        assert!(json_line(&m(false)).find("p50_us").is_none());
    }

    #[test]
    fn aggregate_sums_traffic_and_takes_the_longest_time() {
        let mut b = m(false);
        b.seconds = 1.0;
        b.corrupt = Some(3);
        let a = Measurement::aggregate(vec![m(false), b]).unwrap();
        assert_eq!(
            (a.iters, a.qps, a.seconds, a.corrupt),
            (2000, 2, 1.0, Some(3))
        );
        assert!(Measurement::aggregate(vec![]).is_none());
    }

    #[test]
    fn aggregate_times_from_the_first_start_to_the_last_end() {
        use std::time::Duration;
        let t0 = Instant::now();
        let part = |from: u64, to: u64, ctrl: &[u64]| {
            let at = |ms| t0 + Duration::from_millis(ms);
            let mut p = m(false);
            (p.data_start, p.data_end) = (Some(at(from)), Some(at(to)));
            p.seconds = (to - from) as f64 / 1e3;
            p.ctrl_at = ctrl.iter().map(|&ms| at(ms)).collect();
            p
        };
        // Two queue pairs, 0..1000 ms and 500..2000 ms: 2 s, not the longest
        // one's 1.5 s; the control messages at 0 (the first start, not inside)
        // and 2100 ms are outside, those at 1, 900 and 2000 ms inside.
        let a = Measurement::aggregate(vec![
            part(0, 1000, &[0, 1, 900]),
            part(500, 2000, &[2000, 2100]),
        ])
        .unwrap();
        assert_eq!((a.seconds, a.qp_seconds_max, a.ctrl_timed), (2.0, 1.5, 3));
        assert!((a.gbit_per_s() - 65_536.0 * 2000.0 * 8.0 / 2.0 / 1e9).abs() < 1e-9);
        // A part without a data phase: the longest queue pair's time.
        let mut b = m(false);
        b.seconds = 3.0;
        let a = Measurement::aggregate(vec![part(0, 1000, &[]), b]).unwrap();
        assert_eq!((a.seconds, a.data_start, a.ctrl_timed), (3.0, None, 0));
    }
}
