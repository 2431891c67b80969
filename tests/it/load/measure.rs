//! What the load test measures: the server's threads and resident memory, from /proc, and
//! the well-behaved client's latency percentiles.

use std::time::Duration;

/// The server's thread count and resident memory (KiB), from /proc; `None` once it is gone.
pub fn threads_and_rss(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    Some((field("Threads:")?, field("VmRSS:")?))
}

/// Latencies of one run of the well-behaved workload.
pub struct Latencies(pub Vec<Duration>);

impl Latencies {
    pub fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[rank]
    }
}
