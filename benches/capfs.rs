//! capfs benchmarks. Every figure is printed beside a baseline measured in the same run, with
//! the ratio, as markdown tables:
//!
//! - `small`: one remote call at a time and 64 in flight on one connection, from a plain
//!   tokio-tungstenite client and through `RemoteFileSystem`, against the cheapest WebSocket
//!   server tokio-tungstenite allows (one task, `current_thread` runtime) answering every message
//!   with a message of the size capfs answers; then the default server against `--threads 1`
//!   and a work-stealing runtime, and every call with the client and the server pinned to one
//!   CPU and to two (where the scheduler leaves them decides a round trip on a virtual machine).
//! - `client`: `RemoteFileSystem` against the raw client on one `capfs serve --threads 1`, one
//!   call at a time and 64 in flight, `getMetadata`, a 4 KiB `readFile` and a 100-entry
//!   `readDirectory`, alternated in rounds, with the ratio of the medians and the target of
//!   issue #32 (1.3x) printed as met or not met.
//! - `bulk`: 256 MiB through the `capfs get`/`capfs put` binary against OpenSSH's sftp-server
//!   reached through a Unix socket pair (`sftp -D`, no encryption), alternated in one run,
//!   beside the floors (a raw loopback TCP copy, the file through loopback TCP and through a
//!   Unix socket pair with no protocol, a local `cp`); the peak memory of both ends, and the
//!   target of issue #32 (1.3x sftp-server's speed) printed as met or not met.
//! - `local`: the local backend against `std::fs` and `tokio::fs`, and `capfs cp` against `cp`.
//!
//! Run with `cargo bench --bench capfs` (all sections) or `cargo bench --bench capfs -- small`
//! (any of `small`, `client`, `bulk`, `local`). `cargo bench --bench capfs -- calls` runs one
//! contender's calls alone, for a profiler (`capfs/profile.rs` says how). Scratch files go under `$CAPFS_BENCH_DIR` (default `/tmp`).
//! The bulk section needs `sftp` and `/usr/lib/openssh/sftp-server` (Debian packages
//! openssh-client and openssh-sftp-server) and GNU `/usr/bin/time` for the client's peak memory.

#[path = "capfs/bulk.rs"]
mod bulk;
#[path = "capfs/client.rs"]
mod client;
#[path = "capfs/local.rs"]
mod local;
#[path = "capfs/measure.rs"]
mod measure;
#[path = "capfs/placement.rs"]
mod placement;
#[path = "capfs/profile.rs"]
mod profile;
#[path = "capfs/raw.rs"]
mod raw;
#[path = "capfs/servers.rs"]
mod servers;
#[path = "capfs/small.rs"]
mod small;

use std::path::Path;
use std::time::Instant;

use crate::bulk::bulk_section;
use crate::client::client_section;
use crate::local::local_section;
use crate::measure::multi_thread;
use crate::profile::calls_section;
use crate::small::small_section;

fn main() {
    let sections: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |name: &str| sections.is_empty() || sections.iter().any(|s| s == name);
    let scratch_parent = std::env::var_os("CAPFS_BENCH_DIR").unwrap_or_else(|| "/tmp".into());
    let scratch = tempfile::tempdir_in(&scratch_parent).expect("scratch directory");
    println!(
        "# capfs benchmark\n\nReproduce with: `cargo bench --bench capfs{}{}` \
         (scratch files under {}; {} cores)",
        if sections.is_empty() { "" } else { " --" },
        sections.iter().map(|s| format!(" {s}")).collect::<String>(),
        Path::new(&scratch_parent).display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    let started = Instant::now();
    // Only when asked for by name: one contender's calls alone, for a profiler.
    if sections.iter().any(|s| s == "calls") {
        calls_section(scratch.path());
        return;
    }
    if wants("small") || wants("remote") {
        small_section(scratch.path());
    }
    if wants("client") {
        client_section(scratch.path());
    }
    if wants("bulk") {
        bulk_section(scratch.path());
    }
    if wants("local") {
        multi_thread().block_on(local_section(scratch.path()));
    }
    println!(
        "\n(benchmark took {:.0} s)",
        started.elapsed().as_secs_f64()
    );
}
