//! capfs benchmarks, each against a baseline measured in the same run, printed as tables with
//! ratios. Run with `cargo bench --bench capfs` (optionally `-- local remote bulk` to choose
//! sections). The bulk section needs `sftp` and `/usr/lib/openssh/sftp-server` (Debian packages
//! openssh-client and openssh-sftp-server) and `/usr/bin/time` for the client's peak memory.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capfs::{
    AbsolutePathBuf, Access, ExecutorFileSystem, LocalFileSystem, RemoteFileSystem, RemoteOptions,
    Sandbox,
};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

const BULK_BYTES: usize = 256 << 20;

fn main() {
    let sections: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |name: &str| sections.is_empty() || sections.iter().any(|s| s == name);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let scratch = tempfile::tempdir_in(
            std::env::var_os("CAPFS_BENCH_DIR").unwrap_or_else(|| "/tmp".into()),
        )
        .expect("scratch directory");
        if wants("local") {
            local_section(scratch.path()).await;
        }
        if wants("remote") {
            remote_section(scratch.path()).await;
        }
        if wants("bulk") {
            bulk_section(scratch.path()).await;
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn per_op(elapsed: Duration, ops: usize) -> f64 {
    elapsed.as_secs_f64() * 1e6 / ops as f64
}

fn mbps(bytes: usize, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64() / 1e6
}

/// The best of `rounds` timings of `f` (each round already does many operations).
async fn best_of<F, Fut>(rounds: usize, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut best = Duration::MAX;
    for _ in 0..rounds {
        let started = Instant::now();
        f().await;
        best = best.min(started.elapsed());
    }
    best
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn header(title: &str, columns: &[&str]) {
    println!("\n## {title}\n");
    println!("| {} |", columns.join(" | "));
    println!("|{}", "---|".repeat(columns.len()));
}

/// A running `capfs serve` over `root`, killed when dropped.
struct Server {
    child: std::process::Child,
    url: String,
}

impl Server {
    fn start(root: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_capfs"))
            .arg("serve")
            .arg("--root")
            .arg(root)
            .env("RUST_LOG", "capfs=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn capfs serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("read URL");
        Self {
            child,
            url: line.trim().to_string(),
        }
    }

    fn rss_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn remote(url: &str) -> RemoteFileSystem {
    RemoteFileSystem::connect(url, RemoteOptions::default())
        .await
        .expect("connect")
}

fn random_bytes(len: usize) -> Vec<u8> {
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

// ---------------------------------------------------------------------------------------------
// 3 and 4. Remote bulk transfers and peak memory

struct BulkRow {
    name: &'static str,
    elapsed: Duration,
    server_peak_over_idle_kib: Option<u64>,
    client_peak_kib: Option<u64>,
}

/// Runs `f` against a fresh server over `ws` and reports its time and the server's peak RSS
/// above its idle RSS.
async fn with_fresh_server<F, Fut>(ws: &Path, f: F) -> (Duration, u64, Option<u64>)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Option<u64>>,
{
    let server = Server::start(ws);
    let idle = server.rss_kib("VmRSS:");
    let started = Instant::now();
    let client_peak = f(server.url.clone()).await;
    let elapsed = started.elapsed();
    let peak = server.rss_kib("VmHWM:");
    (elapsed, peak.saturating_sub(idle), client_peak)
}

/// Runs a command under GNU time; returns its peak RSS in KiB.
fn run_timed(program: &str, args: &[&str]) -> Option<u64> {
    let output = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .output()
        .expect("run /usr/bin/time");
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .last()?
        .trim()
        .parse()
        .ok()
}

fn sftp(batch: &str) {
    let mut child = Command::new("sftp")
        .args(["-q", "-D", "/usr/lib/openssh/sftp-server", "-b", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("run sftp (install openssh-client and openssh-sftp-server)");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), batch.as_bytes()).unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success(), "sftp {batch}");
}

async fn raw_tcp_copy(bytes: usize) -> Duration {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let receiver = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0;
        while total < bytes {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0);
            total += n;
        }
    });
    let started = Instant::now();
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let chunk = vec![7u8; 256 * 1024];
    let mut sent = 0;
    while sent < bytes {
        socket.write_all(&chunk).await.unwrap();
        sent += chunk.len();
    }
    receiver.await.unwrap();
    started.elapsed()
}

async fn bulk_section(scratch: &Path) {
    let ws = scratch.join("bulk-ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let local_src = scratch.join("src.bin");
    std::fs::write(&local_src, random_bytes(BULK_BYTES)).unwrap();
    std::fs::copy(&local_src, ws.join("data.bin")).unwrap();
    let remote_data = AbsolutePathBuf::new(ws.join("data.bin")).unwrap();
    let capfs_bin = env!("CARGO_BIN_EXE_capfs");
    let local_back = scratch.join("back.bin");
    let rounds = 3;
    let mut rows = Vec::new();
    let mut best = |name: &'static str, runs: Vec<(Duration, Option<u64>, Option<u64>)>| {
        let fastest = runs.iter().map(|r| r.0).min().unwrap();
        rows.push(BulkRow {
            name,
            elapsed: fastest,
            server_peak_over_idle_kib: runs.iter().filter_map(|r| r.1).max(),
            client_peak_kib: runs.iter().filter_map(|r| r.2).max(),
        });
    };

    let mut runs = Vec::new();
    for _ in 0..rounds {
        let (t, _) = (raw_tcp_copy(BULK_BYTES).await, ());
        runs.push((t, None, None));
    }
    best("raw loopback TCP copy (baseline)", runs);

    let mut runs = Vec::new();
    for _ in 0..rounds {
        let _ = std::fs::remove_file(&local_back);
        let started = Instant::now();
        sftp(&format!("get {} {}\n", remote_data, local_back.display()));
        runs.push((started.elapsed(), None, None));
    }
    best("sftp-server get (baseline)", runs);

    let mut runs = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        sftp(&format!(
            "put {} {}\n",
            local_src.display(),
            ws.join("sftp.bin").display()
        ));
        runs.push((started.elapsed(), None, None));
    }
    best("sftp-server put (baseline)", runs);

    let mut runs = Vec::new();
    for _ in 0..rounds {
        let path = remote_data.clone();
        let (t, server, _) = with_fresh_server(&ws, |url| async move {
            let fs = remote(&url).await;
            let data = fs.read_file(&path).await.unwrap();
            assert_eq!(data.len(), BULK_BYTES);
            None
        })
        .await;
        runs.push((t, Some(server), None));
    }
    best("RemoteFileSystem::read_file", runs);

    let mut runs = Vec::new();
    let payload = std::fs::read(&local_src).unwrap();
    for _ in 0..rounds {
        let path = AbsolutePathBuf::new(ws.join("written.bin")).unwrap();
        let payload = payload.clone();
        let (t, server, _) = with_fresh_server(&ws, |url| async move {
            let fs = remote(&url).await;
            fs.write_file(&path, payload).await.unwrap();
            None
        })
        .await;
        runs.push((t, Some(server), None));
    }
    best("RemoteFileSystem::write_file", runs);

    let mut runs = Vec::new();
    for _ in 0..rounds {
        let _ = std::fs::remove_file(&local_back);
        let source = remote_data.to_string();
        let back = local_back.display().to_string();
        let (t, server, client) = with_fresh_server(&ws, |url| async move {
            run_timed(capfs_bin, &["--remote", &url, "get", &source, &back])
        })
        .await;
        runs.push((t, Some(server), client));
    }
    best("capfs get", runs);
    assert_eq!(
        std::fs::metadata(&local_back).unwrap().len() as usize,
        BULK_BYTES
    );

    let mut runs = Vec::new();
    for _ in 0..rounds {
        let source = local_src.display().to_string();
        let destination = ws.join("put.bin").display().to_string();
        let (t, server, client) = with_fresh_server(&ws, |url| async move {
            run_timed(capfs_bin, &["--remote", &url, "put", &source, &destination])
        })
        .await;
        runs.push((t, Some(server), client));
    }
    best("capfs put", runs);

    header(
        "Remote bulk: 256 MiB over loopback (best of 3)",
        &[
            "transfer",
            "seconds",
            "MB/s",
            "speed vs sftp",
            "server peak RSS above idle",
            "client peak RSS",
        ],
    );
    let find = |name: &str| rows.iter().find(|r| r.name == name).map(|r| r.elapsed);
    let sftp_get = find("sftp-server get (baseline)").unwrap();
    let sftp_put = find("sftp-server put (baseline)").unwrap();
    for row in &rows {
        let versus = if row.name.contains("get") || row.name.contains("read") {
            format!("{:.2}x", sftp_get.as_secs_f64() / row.elapsed.as_secs_f64())
        } else if row.name.contains("put") || row.name.contains("write") {
            format!("{:.2}x", sftp_put.as_secs_f64() / row.elapsed.as_secs_f64())
        } else {
            "-".to_string()
        };
        let kib =
            |v: Option<u64>| v.map_or("-".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        println!(
            "| {} | {:.3} | {:.0} | {} | {} | {} |",
            row.name,
            row.elapsed.as_secs_f64(),
            mbps(BULK_BYTES, row.elapsed),
            versus,
            kib(row.server_peak_over_idle_kib),
            kib(row.client_peak_kib),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Local operations: capfs's confined backend against tokio::fs and std::fs

struct LocalRow {
    name: &'static str,
    capfs: Duration,
    tokio: Duration,
    std: Duration,
    ops: usize,
}

async fn local_section(scratch: &Path) {
    let root = scratch.join("local-ws");
    std::fs::create_dir_all(root.join("many")).unwrap();
    let root = root.canonicalize().unwrap();
    let small = root.join("small.bin");
    std::fs::write(&small, random_bytes(4096)).unwrap();
    for i in 0..1000 {
        std::fs::write(root.join("many").join(format!("entry-{i:04}")), b"x").unwrap();
    }
    let big = root.join("big.bin");
    std::fs::write(&big, random_bytes(BULK_BYTES)).unwrap();
    let fs = Arc::new(LocalFileSystem::new(
        Sandbox::new().with_root(&root, Access::ReadWrite).unwrap(),
    ));
    let abs = |p: &Path| AbsolutePathBuf::new(p).unwrap();
    let (small_abs, many_abs, big_abs) = (abs(&small), abs(&root.join("many")), abs(&big));
    let four_k = random_bytes(4096);
    let rounds = 5;
    let n = 2000;
    let mut rows = Vec::new();

    macro_rules! row {
        ($name:expr, $ops:expr, capfs: $capfs:expr, tokio: $tokio:expr, std: $std:expr) => {{
            let ops = $ops;
            let capfs = best_of(rounds, || async {
                for _ in 0..ops {
                    $capfs;
                }
            })
            .await;
            let tokio = best_of(rounds, || async {
                for _ in 0..ops {
                    $tokio;
                }
            })
            .await;
            let std = best_of(rounds, || async {
                for _ in 0..ops {
                    $std;
                }
            })
            .await;
            rows.push(LocalRow {
                name: $name,
                capfs,
                tokio,
                std,
                ops,
            });
        }};
    }

    row!("stat", n,
        capfs: fs.get_metadata(&small_abs).await.unwrap(),
        tokio: tokio::fs::metadata(&small).await.unwrap(),
        std: std::fs::metadata(&small).unwrap());
    row!("read 4 KiB", n,
        capfs: fs.read_file(&small_abs).await.unwrap(),
        tokio: tokio::fs::read(&small).await.unwrap(),
        std: std::fs::read(&small).unwrap());
    row!("overwrite 4 KiB (capfs: atomic replace)", n,
        capfs: fs.write_file(&small_abs, four_k.clone()).await.unwrap(),
        tokio: tokio::fs::write(&small, &four_k).await.unwrap(),
        std: std::fs::write(&small, &four_k).unwrap());
    row!("list 1,000 entries", 50,
    capfs: assert_eq!(fs.read_directory(&many_abs).await.unwrap().len(), 1000),
    tokio: {
        let mut dir = tokio::fs::read_dir(root.join("many")).await.unwrap();
        let mut count = 0;
        while let Some(entry) = dir.next_entry().await.unwrap() {
            let _ = entry.file_type().await.unwrap();
            count += 1;
        }
        assert_eq!(count, 1000);
    },
    std: {
        let mut count = 0;
        for entry in std::fs::read_dir(root.join("many")).unwrap() {
            let _ = entry.unwrap().file_type().unwrap();
            count += 1;
        }
        assert_eq!(count, 1000);
    });
    row!("read 256 MiB", 1,
        capfs: assert_eq!(fs.read_file(&big_abs).await.unwrap().len(), BULK_BYTES),
        tokio: assert_eq!(tokio::fs::read(&big).await.unwrap().len(), BULK_BYTES),
        std: assert_eq!(std::fs::read(&big).unwrap().len(), BULK_BYTES));

    header(
        "Local operations (best of 5 rounds, microseconds per operation)",
        &[
            "operation",
            "capfs LocalFileSystem",
            "tokio::fs",
            "std::fs (blocking)",
            "capfs / tokio::fs",
            "capfs / std::fs",
        ],
    );
    for r in &rows {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} |",
            r.name,
            per_op(r.capfs, r.ops),
            per_op(r.tokio, r.ops),
            per_op(r.std, r.ops),
            r.capfs.as_secs_f64() / r.tokio.as_secs_f64(),
            r.capfs.as_secs_f64() / r.std.as_secs_f64(),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Remote small operations against a bare WebSocket echo of the same size

/// An in-process WebSocket server that echoes every text message.
async fn echo_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                let (mut sink, mut stream) = ws.split();
                while let Some(Ok(message)) = stream.next().await {
                    if message.is_text() && sink.send(message).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// Round-trip latencies of `n` sequential echoes of `payload`.
async fn echo_latencies(url: &str, payload: &str, n: usize) -> Vec<Duration> {
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
        .await
        .unwrap();
    let mut latencies = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        ws.send(Message::text(payload.to_string())).await.unwrap();
        loop {
            if let Message::Text(_) = ws.next().await.unwrap().unwrap() {
                break;
            }
        }
        latencies.push(started.elapsed());
    }
    latencies
}

/// Echo throughput with `depth` messages outstanding on one connection.
async fn echo_pipelined(url: &str, payload: &str, n: usize, depth: usize) -> Duration {
    let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
        .await
        .unwrap();
    let (mut sink, mut stream) = ws.split();
    let window = Arc::new(tokio::sync::Semaphore::new(depth));
    let started = Instant::now();
    let sender = {
        let window = Arc::clone(&window);
        let payload = payload.to_string();
        tokio::spawn(async move {
            for _ in 0..n {
                window.acquire().await.unwrap().forget();
                sink.send(Message::text(payload.clone())).await.unwrap();
            }
            sink
        })
    };
    let mut received = 0;
    while received < n {
        if let Message::Text(_) = stream.next().await.unwrap().unwrap() {
            received += 1;
            window.add_permits(1);
        }
    }
    let _sink = sender.await.unwrap();
    started.elapsed()
}

async fn remote_section(scratch: &Path) {
    let root = scratch.join("remote-ws");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(root.join("f.txt"), b"hello").unwrap();
    let server = Server::start(&root);
    let fs = Arc::new(remote(&server.url).await);
    let path = AbsolutePathBuf::new(root.join("f.txt")).unwrap();
    let request_text =
        format!(r#"{{"id":123456,"method":"fs/getMetadata","params":{{"path":"{path}"}}}}"#);
    let echo_url = echo_server().await;
    let n = 5000;

    // Warm both up.
    for _ in 0..200 {
        fs.get_metadata(&path).await.unwrap();
    }
    let _ = echo_latencies(&echo_url, &request_text, 200).await;

    let mut capfs_latencies = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        fs.get_metadata(&path).await.unwrap();
        capfs_latencies.push(started.elapsed());
    }
    capfs_latencies.sort();
    let mut echo = echo_latencies(&echo_url, &request_text, n).await;
    echo.sort();

    let depth = 64;
    let total = 100_000;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..depth {
        let fs = Arc::clone(&fs);
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..total / depth {
                fs.get_metadata(&path).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let capfs_pipelined = started.elapsed();
    let done = (total / depth) * depth;
    let echo_pipelined = echo_pipelined(&echo_url, &request_text, done, depth).await;

    header(
        "Remote small operations: fs/getMetadata against a bare WebSocket echo of the request",
        &["measure", "capfs", "WebSocket echo", "capfs / echo"],
    );
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for (name, p) in [
        ("round trip, median (us)", 0.5),
        ("round trip, p99 (us)", 0.99),
    ] {
        let (c, e) = (percentile(&capfs_latencies, p), percentile(&echo, p));
        println!(
            "| {name} | {:.1} | {:.1} | {:.2} |",
            us(c),
            us(e),
            us(c) / us(e)
        );
    }
    let ops = |d: Duration| done as f64 / d.as_secs_f64();
    println!(
        "| ops/s with {depth} in flight, one connection | {:.0} | {:.0} | {:.2} |",
        ops(capfs_pipelined),
        ops(echo_pipelined),
        ops(capfs_pipelined) / ops(echo_pipelined),
    );
}
