//! Results: one measurement per size, printed as perftest's table or as JSON lines.

use super::opts::Op;
use super::stats::{LatStats, lat_stats};

/// What one size measured (over all queue pairs of the run).
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub op: Op,
    pub size: u32,
    /// Messages (round trips with --pingpong), summed over queue pairs.
    pub iters: u64,
    pub qps: usize,
    /// Wall time of the size: the longest queue pair's.
    pub seconds: f64,
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
}

impl Measurement {
    /// Payload octets moved one way.
    pub fn bytes(&self) -> u64 {
        u64::from(self.size) * self.iters
    }

    pub fn gbit_per_s(&self) -> f64 {
        rate(self.bytes() as f64 * 8.0 / 1e9, self.seconds)
    }

    pub fn msgs_per_s(&self) -> f64 {
        rate(self.iters as f64, self.seconds)
    }

    pub fn peak_gbit_per_s(&self) -> f64 {
        self.peak_msgs_per_s * f64::from(self.size) * 8.0 / 1e9
    }

    pub fn latency(&self) -> Option<LatStats> {
        lat_stats(&self.samples_us)
    }

    /// The measurements of the queue pairs of one size, as one.
    pub fn aggregate(parts: Vec<Measurement>) -> Option<Measurement> {
        let mut it = parts.into_iter();
        let mut m = it.next()?;
        for p in it {
            m.iters += p.iters;
            m.qps += p.qps;
            m.seconds = m.seconds.max(p.seconds);
            m.peak_msgs_per_s += p.peak_msgs_per_s;
            m.corrupt = match (m.corrupt, p.corrupt) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            };
            m.samples_us.extend(p.samples_us);
            m.counters = match (m.counters, p.counters) {
                (Some(mut a), Some(b)) => {
                    a.add(&b);
                    Some(a)
                }
                (a, b) => a.or(b),
            };
        }
        // The peak cannot be below the average.
        m.peak_msgs_per_s = m.peak_msgs_per_s.max(m.msgs_per_s());
        Some(m)
    }
}

fn rate(x: f64, secs: f64) -> f64 {
    if secs > 0.0 { x / secs } else { 0.0 }
}

pub const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// Column header of a bandwidth table (perftest's ib_*_bw).
pub fn bw_header() -> String {
    format!(
        " {:<10} {:<14} {:<18} {:<20} {}",
        "#bytes", "#iterations", "BW peak[Gb/sec]", "BW average[Gb/sec]", "MsgRate[Mpps]"
    )
}

pub fn bw_row(m: &Measurement) -> String {
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
pub fn lat_header() -> String {
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

pub fn lat_row(m: &Measurement) -> String {
    let Some(s) = m.latency() else {
        return format!(" {:<10} {:<14} (no samples)", m.size, m.iters);
    };
    format!(
        " {:<10} {:<14} {:<13.2} {:<13.2} {:<17.2} {:<13.2} {:<15.2} {:.2}",
        m.size, m.iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99
    )
}

pub fn header(pingpong: bool) -> String {
    if pingpong { lat_header() } else { bw_header() }
}

pub fn row(m: &Measurement) -> String {
    if m.pingpong { lat_row(m) } else { bw_row(m) }
}

/// One JSON object (one line) for one size.
pub fn json_line(m: &Measurement) -> String {
    let mut o = serde_json::json!({
        "op": m.op.name(),
        "size": m.size,
        "iterations": m.iters,
        "qps": m.qps,
        "bytes": m.bytes(),
        "seconds": m.seconds,
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
}
