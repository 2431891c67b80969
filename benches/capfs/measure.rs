//! Timing, statistics and table printing shared by every section, and commands run under GNU
//! time.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

pub(crate) fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

pub(crate) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub(crate) fn per_op(elapsed: Duration, ops: usize) -> f64 {
    us(elapsed) / ops as f64
}

pub(crate) fn mbps(bytes: usize, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64() / 1e6
}

/// User + system CPU time process `pid` (or `"self"`) has used so far, all its threads:
/// `/proc/PID/stat` counts in the kernel's USER_HZ, 100 a second on Linux.
pub(crate) fn cpu_of(pid: impl std::fmt::Display) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

pub(crate) fn header(title: &str, columns: &[&str]) {
    println!("\n## {title}\n");
    println!("| {} |", columns.join(" | "));
    println!("|{}", "---|".repeat(columns.len()));
}

/// The best of `rounds` timings of `f` (each round already does many operations).
pub(crate) async fn best_of<F, Fut>(rounds: usize, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut best = Duration::MAX;
    for _ in 0..rounds {
        let started = Instant::now();
        f().await;
        best = best.min(started.elapsed());
    }
    best
}

pub(crate) fn random_bytes(len: usize) -> Vec<u8> {
    // A xorshift stream: incompressible enough, and the same in every run.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Runs `command` to completion and returns its wall time; panics when it fails.
pub(crate) fn run(command: &mut Command) -> Duration {
    let started = Instant::now();
    let output = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let elapsed = started.elapsed();
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    elapsed
}

/// What GNU time saw of one command: wall time, peak RSS in KiB, user + system CPU time (its
/// children's included).
pub(crate) struct Measured {
    pub(crate) elapsed: Duration,
    pub(crate) peak_kib: u64,
    pub(crate) cpu: Duration,
}

/// Runs `program` under GNU time.
pub(crate) fn run_measured(program: &str, args: &[&str], stdin: Option<&str>) -> Measured {
    let started = Instant::now();
    let mut child = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M %U %S")
        .arg(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("/usr/bin/time {program}: {e}"));
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        std::io::Write::write_all(&mut pipe, input.as_bytes()).expect("write stdin");
    }
    let output = child.wait_with_output().expect("wait");
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {stderr}"
    );
    let fields: Vec<f64> = stderr
        .lines()
        .last()
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let [peak, user, system] = fields[..] else {
        panic!("unexpected output of GNU time: {stderr}");
    };
    Measured {
        elapsed,
        peak_kib: peak as u64,
        cpu: Duration::from_secs_f64(user + system),
    }
}
