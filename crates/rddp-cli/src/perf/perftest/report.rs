//! perftest's bandwidth report: what crosses the wire in step 11
//! (xchg_bw_reports: be64 size, be64 iterations, BE doubles peak, average and
//! message rate, each its own exchange) and how perftest prints it (REPORT_FMT,
//! MB/sec = 2^20 octets per second, Mpps).

use super::ctrl::Ctrl;
use std::time::{Duration, Instant};

pub(super) const RULE: &str =
    "---------------------------------------------------------------------------------------";
pub(super) const HEADER: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct BwReport {
    pub size: u64,
    pub iters: u64,
    /// MB/sec (2^20).
    pub peak: f64,
    pub avg: f64,
    /// Million messages per second.
    pub msg_rate: f64,
}

impl BwReport {
    /// From the start of the test and each message's completion time.
    pub(super) fn measure(size: u64, start: Instant, done: &[Instant]) -> Self {
        let iters = done.len() as u64;
        let mb =
            |octets: f64, d: Duration| octets / (1u64 << 20) as f64 / d.as_secs_f64().max(1e-9);
        let Some(&last) = done.last() else {
            return Self {
                size,
                ..Self::default()
            };
        };
        let total = last.duration_since(start);
        // The best stretch of a tenth of the run's time stands for the peak
        // (completions come in bursts: single gaps say nothing).
        let span = total / 10;
        let mut peak = mb((size * iters) as f64, total);
        let mut j = 0;
        for i in 0..done.len() {
            while j + 1 < i && done[i].duration_since(done[j + 1]) >= span {
                j += 1;
            }
            let d = done[i].duration_since(done[j]);
            if d >= span && i > j && !span.is_zero() {
                peak = peak.max(mb((size * (i - j) as u64) as f64, d));
            }
        }
        Self {
            size,
            iters,
            peak,
            avg: mb((size * iters) as f64, total),
            msg_rate: iters as f64 / total.as_secs_f64().max(1e-9) / 1e6,
        }
    }

    /// perftest's report line.
    pub(super) fn line(&self) -> String {
        format!(
            " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
            self.size, self.iters, self.peak, self.avg, self.msg_rate
        )
    }

    /// Step 11: ours for theirs, field by field.
    pub(super) fn exchange(&self, c: &Ctrl) -> Result<Self, String> {
        let u = |b: Vec<u8>| -> Result<[u8; 8], String> {
            b.try_into()
                .map_err(|b: Vec<u8>| format!("a report field of {} octets, 8 expected", b.len()))
        };
        let size = u64::from_be_bytes(u(c.xchg(&self.size.to_be_bytes())?)?);
        let iters = u64::from_be_bytes(u(c.xchg(&self.iters.to_be_bytes())?)?);
        let mut f = [0f64; 3];
        for (i, v) in [self.peak, self.avg, self.msg_rate].into_iter().enumerate() {
            f[i] = f64::from_bits(u64::from_be_bytes(u(c.xchg(&v.to_bits().to_be_bytes())?)?));
        }
        Ok(Self {
            size,
            iters,
            peak: f[0],
            avg: f[1],
            msg_rate: f[2],
        })
    }
}

/// The lines perftest prints before a test (ctx_print_test_info), ours.
pub(super) fn banner(test: &str, role: &str) -> Vec<String> {
    vec![
        RULE.to_string(),
        format!("                    {test}"),
        format!(" rddp perf --perftest ({role}) over MPA/TCP\t\tTransport type : IW"),
        " Number of qps   : 1\t\tConnection type : RC".to_string(),
        " Data ex. method : rdma_cm\t\tperftest version : 6.06".to_string(),
        RULE.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measure_and_print() {
        let t0 = Instant::now();
        let done: Vec<Instant> = (1..=10)
            .map(|i| t0 + Duration::from_millis(i * 10))
            .collect();
        let r = BwReport::measure(1 << 20, t0, &done);
        // 10 MiB in 100 ms: 100 MB/sec, 100000 messages per second.
        assert!((r.avg - 100.0).abs() < 1e-6, "{r:?}");
        assert!((r.peak - 100.0).abs() < 1e-6, "{r:?}");
        assert!((r.msg_rate - 0.0001).abs() < 1e-9, "{r:?}");
        assert!(
            r.line().starts_with(" 1048576    10               100.00"),
            "{:?}",
            r.line()
        );
    }
}
