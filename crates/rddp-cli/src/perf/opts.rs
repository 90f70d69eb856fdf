//! What a run measures: operation, sizes, how long, how deep.

use std::time::Duration;

/// The operation measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Op {
    /// RDMA Write into the server's buffer (ib_write_bw, ib_write_lat).
    Write,
    /// RDMA Read of the server's buffer (ib_read_bw).
    Read,
    /// Send into the server's posted receives (ib_send_bw; ib_send_lat with --pingpong).
    Send,
    /// Writes, Reads and Sends of random sizes mixed, each checked (soak test;
    /// see perf/mixed.rs): --size is the largest, --duration the whole run.
    Mixed,
}

impl Op {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Read => "read",
            Self::Send => "send",
            Self::Mixed => "mixed",
        }
    }
}

/// Smallest and largest size of --sweep.
pub(crate) const SWEEP_MIN: u32 = 64;
pub(crate) const SWEEP_MAX: u32 = 4 << 20;
/// Largest message the tool accepts for --size.
pub(crate) const MAX_SIZE: u32 = 64 << 20;

/// 64 B, 128 B, ... 4 MiB.
pub(crate) fn sweep_sizes() -> Vec<u32> {
    std::iter::successors(Some(SWEEP_MIN), |s| s.checked_mul(2))
        .take_while(|&s| s <= SWEEP_MAX)
        .collect()
}

/// How long each size runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Stop {
    Iters(u64),
    Duration(Duration),
}

/// Options of the client side of a run (the server learns them from the client).
#[derive(Debug, Clone)]
pub(crate) struct ClientOpts {
    pub op: Op,
    pub sizes: Vec<u32>,
    pub stop: Stop,
    pub pingpong: bool,
    pub verify: bool,
    /// Work requests in flight at most (perftest's -t).
    pub tx_depth: usize,
    /// Sends posted as one list at most (perftest's --post_list).
    pub post_list: usize,
    /// Tests of Write bandwidth with --verify (`--plant-wrong write`): one
    /// wrong octet in a Write in the middle of each size, which the server's
    /// checks must find.
    pub plant_write: bool,
}

impl ClientOpts {
    pub(crate) fn max_size(&self) -> u32 {
        self.sizes.iter().copied().max().unwrap_or(SWEEP_MIN)
    }
}

/// Options of the server side.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerOpts {
    /// Receive buffers kept posted (perftest's -r).
    pub rx_depth: usize,
}

/// "65536", "64K", "64KiB", "4M", "1MiB": a message size in octets.
pub(crate) fn parse_size(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (try 65536, 64K or 4M)"))?;
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use K or M)")),
    };
    let v = n.saturating_mul(mul);
    if v == 0 || v > u64::from(MAX_SIZE) {
        return Err(format!(
            "size {s} is out of range: 1 octet to {} MiB",
            MAX_SIZE >> 20
        ));
    }
    Ok(v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_is_64_to_4mib_in_powers_of_two() {
        let s = sweep_sizes();
        assert_eq!(s.first(), Some(&64));
        assert_eq!(s.last(), Some(&(4 << 20)));
        assert_eq!(s.len(), 17);
        assert!(s.windows(2).all(|w| w[1] == 2 * w[0]));
    }

    #[test]
    fn sizes_parse_with_units_and_refuse_nonsense() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("4m"), Ok(4 << 20));
        for bad in ["", "0", "-1", "12Q", "x", "65M", "99999999999999999999"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
