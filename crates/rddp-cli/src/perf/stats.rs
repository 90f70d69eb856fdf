//! Percentiles and the other figures of a latency run; the peak rate of a
//! bandwidth run.

use std::time::Duration;

/// Nearest-rank percentile of ascending `sorted` values: the smallest value with
/// at least `p` percent of the values at or below it. `None` when empty.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.max(1) - 1).copied()
}

/// Latency figures in microseconds (perftest's t_min .. 99% percentile).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LatStats {
    pub min: f64,
    pub max: f64,
    /// The median (perftest's t_typical).
    pub typical: f64,
    pub avg: f64,
    /// Population standard deviation.
    pub stdev: f64,
    pub p99: f64,
}

/// Summarize samples; `None` when there are none.
pub(crate) fn lat_stats(samples: &[f64]) -> Option<LatStats> {
    let mut s: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    let n = s.len() as f64;
    let avg = s.iter().sum::<f64>() / n;
    let var = s.iter().map(|v| (v - avg) * (v - avg)).sum::<f64>() / n;
    Some(LatStats {
        min: *s.first()?,
        max: *s.last()?,
        typical: percentile(&s, 50.0)?,
        avg,
        stdev: var.sqrt(),
        p99: percentile(&s, 99.0)?,
    })
}

/// Best message rate over consecutive stretches of at least `min_msgs`
/// completions. `marks` are (completed so far, time since start), ascending.
pub(crate) fn peak_rate(marks: &[(u64, Duration)], min_msgs: u64) -> f64 {
    let mut best: f64 = 0.0;
    let (mut c0, mut t0) = (0u64, Duration::ZERO);
    for &(c, t) in marks {
        if c - c0 >= min_msgs.max(1) && t > t0 {
            best = best.max((c - c0) as f64 / (t - t0).as_secs_f64());
            (c0, t0) = (c, t);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        let w = [3.0, 7.0, 9.0];
        assert_eq!(percentile(&w, 50.0), Some(7.0));
        assert_eq!(percentile(&w, 99.0), Some(9.0));
        assert_eq!(percentile(&[5.0], 99.0), Some(5.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&w, 101.0), None);
    }

    #[test]
    fn latency_summary() {
        let s = lat_stats(&[4.0, 2.0, 6.0, 8.0]).unwrap();
        assert_eq!((s.min, s.max, s.typical, s.p99), (2.0, 8.0, 4.0, 8.0));
        assert_eq!(s.avg, 5.0);
        assert!((s.stdev - 5f64.sqrt()).abs() < 1e-12);
        assert!(lat_stats(&[]).is_none());
    }

    #[test]
    fn peak_is_the_best_stretch() {
        let ms = Duration::from_millis;
        // 100 messages in the first 10 ms, then 100 in the next 100 ms.
        let marks = [(50, ms(5)), (100, ms(10)), (150, ms(60)), (200, ms(110))];
        assert!((peak_rate(&marks, 100) - 10_000.0).abs() < 1e-6);
        assert_eq!(peak_rate(&marks, 1000), 0.0);
    }
}
