//! capfs benchmarks. Every figure is printed beside a baseline measured in the same run, with
//! the ratio, as markdown tables:
//!
//! - `small`: one remote call at a time and 64 in flight on one connection, from a plain
//!   tokio-tungstenite client and through `RemoteFileSystem`, against the cheapest WebSocket
//!   server tokio-tungstenite allows (one task, `current_thread` runtime) answering every message
//!   with a message of the size capfs answers; then the default server against `--threads 1`
//!   and a work-stealing runtime, and every call with the client and the server pinned to one
//!   CPU and to two (where the scheduler leaves them decides a round trip on a virtual machine).
//! - `bulk`: 256 MiB through the `capfs get`/`capfs put` binary against OpenSSH's sftp-server
//!   reached through a pipe (`sftp -D`, no encryption), alternated in one run, beside a raw
//!   loopback TCP copy and a local `cp`; the peak memory of both ends.
//! - `local`: the local backend against `std::fs` and `tokio::fs`, and `capfs cp` against `cp`.
//!
//! Run with `cargo bench --bench capfs` (all sections) or `cargo bench --bench capfs -- small`
//! (any of `small`, `bulk`, `local`). Scratch files go under `$CAPFS_BENCH_DIR` (default `/tmp`).
//! The bulk section needs `sftp` and `/usr/lib/openssh/sftp-server` (Debian packages
//! openssh-client and openssh-sftp-server) and GNU `/usr/bin/time` for the client's peak memory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capfs::{
    AbsolutePathBuf, Access, ExecutorFileSystem, LocalFileSystem, RemoteFileSystem, RemoteOptions,
    Sandbox,
};
use futures_util::{FutureExt, SinkExt, StreamExt};
use rustix::thread::CpuSet;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const BULK_BYTES: usize = 256 << 20;
const SFTP_SERVER: &str = "/usr/lib/openssh/sftp-server";

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
    if wants("small") || wants("remote") {
        small_section(scratch.path());
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

// ---------------------------------------------------------------------------------------------
// Helpers

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn per_op(elapsed: Duration, ops: usize) -> f64 {
    us(elapsed) / ops as f64
}

fn mbps(bytes: usize, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64() / 1e6
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

/// The best of `rounds` timings of `f` (each round already does many operations).
async fn best_of<F, Fut>(rounds: usize, mut f: F) -> Duration
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

/// Runs `command` to completion and returns its wall time; panics when it fails.
fn run(command: &mut Command) -> Duration {
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
struct Measured {
    elapsed: Duration,
    peak_kib: u64,
    cpu: Duration,
}

/// Runs `program` under GNU time.
fn run_measured(program: &str, args: &[&str], stdin: Option<&str>) -> Measured {
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

/// A running `capfs serve` over `root`, killed when dropped.
struct Server {
    child: std::process::Child,
    url: String,
}

impl Server {
    fn start(root: &Path) -> Self {
        Self::start_with_args(root, &[])
    }

    /// Starts a server with extra arguments.
    fn start_with_args(root: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_capfs"))
            .arg("serve")
            .arg("--root")
            .arg(root)
            .args(args)
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

    /// A field of the server's `/proc/PID/status` in KiB (`VmRSS:` now, `VmHWM:` its peak).
    fn memory_kib(&self, field: &str) -> u64 {
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

impl Server {
    /// User + system CPU time the server has used so far (`/proc/PID/stat` counts in the
    /// kernel's USER_HZ, 100 a second on Linux).
    fn cpu(&self) -> Duration {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // The fields after the command name, which is in parentheses and may hold spaces.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let fields: Vec<u64> = rest
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|f| f.parse().ok())
            .collect();
        Duration::from_millis(fields.iter().sum::<u64>() * 10)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const WORK_STEALING: &str = "work-stealing runtime (in process)";

/// A capfs server over `root` on a multi_thread runtime of its own thread, in this process:
/// connections on the caller's runtime (`connection_threads` 0), as a library user may run it.
/// Returns its URL; it lives as long as the process.
fn work_stealing_server(root: &Path) -> String {
    let sandbox = Sandbox::new().with_root(root, Access::ReadWrite).unwrap();
    let fs: Arc<dyn ExecutorFileSystem> = Arc::new(LocalFileSystem::new(sandbox));
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        multi_thread().block_on(async move {
            let config = capfs::server::ServerConfig::default();
            let server = capfs::server::Server::bind(fs, config).await.unwrap();
            url_tx.send(server.url().to_string()).unwrap();
            server.run_until(std::future::pending()).await.unwrap();
        });
    });
    url_rx.recv().unwrap()
}

async fn remote(url: &str) -> RemoteFileSystem {
    RemoteFileSystem::connect(url, RemoteOptions::default())
        .await
        .expect("connect")
}

// ---------------------------------------------------------------------------------------------
// Small calls: capfs against the cheapest WebSocket server with the same traffic

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A plain tokio-tungstenite client connection (Nagle off), in one task: what any client of the
/// protocol can do without `RemoteFileSystem`.
async fn raw_connect(url: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
        .await
        .expect("connect");
    ws
}

async fn next_text(ws: &mut Ws) -> Utf8Bytes {
    loop {
        match ws.next().await.expect("connection open").expect("frame") {
            Message::Text(text) => return text,
            _ => continue,
        }
    }
}

/// A raw connection to capfs, past `initialize`/`initialized`.
async fn raw_capfs(url: &str) -> Ws {
    let mut ws = raw_connect(url).await;
    let initialize = r#"{"id":0,"method":"initialize","params":{"clientName":"bench"}}"#;
    ws.send(Message::text(initialize)).await.unwrap();
    let reply = next_text(&mut ws).await;
    assert!(reply.contains("\"result\""), "initialize failed: {reply}");
    ws.send(Message::text(r#"{"method":"initialized"}"#))
        .await
        .unwrap();
    ws
}

/// Sends `request` once and returns the reply, checking that it is a result.
async fn call_once(ws: &mut Ws, request: &Message) -> Utf8Bytes {
    ws.send(request.clone()).await.unwrap();
    let reply = next_text(ws).await;
    assert!(reply.contains("\"result\""), "call failed: {reply}");
    reply
}

/// The cheapest WebSocket server tokio-tungstenite allows: its own thread with a
/// `current_thread` runtime, one task per connection that reads a message and answers it with
/// `reply` (the same bytes every time), batching answers to messages that are already read into
/// one flush as capfs does. Returns its URL; it lives as long as the process.
fn canned_server(reply: Utf8Bytes) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        current_thread().block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let reply = Message::Text(reply.clone());
                tokio::spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                        return;
                    };
                    while let Some(Ok(message)) = ws.next().await {
                        if !message.is_text() {
                            continue;
                        }
                        if ws.feed(reply.clone()).await.is_err() {
                            return;
                        }
                        while let Some(Some(Ok(more))) = ws.next().now_or_never() {
                            if more.is_text() && ws.feed(reply.clone()).await.is_err() {
                                return;
                            }
                        }
                        if ws.flush().await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
    });
    url
}

/// `n` round trips of `request` one at a time, appended to `out`; every reply must be
/// `reply_len` bytes (a result, not an error).
async fn raw_round_trips(
    ws: &mut Ws,
    request: &Message,
    reply_len: usize,
    n: usize,
    out: &mut Vec<Duration>,
) {
    for _ in 0..n {
        let started = Instant::now();
        ws.send(request.clone()).await.unwrap();
        let reply = next_text(ws).await;
        out.push(started.elapsed());
        assert_eq!(reply.len(), reply_len, "unexpected reply: {reply}");
    }
}

/// Calls per second with `depth` copies of `request` outstanding on one raw connection, from
/// one task: replies that are already read are answered with new requests in one flush.
async fn raw_pipelined(
    ws: &mut Ws,
    request: &Message,
    reply_len: usize,
    total: usize,
    depth: usize,
) -> f64 {
    let started = Instant::now();
    let mut sent = 0;
    while sent < depth.min(total) {
        ws.feed(request.clone()).await.unwrap();
        sent += 1;
    }
    ws.flush().await.unwrap();
    let mut received = 0;
    while received < total {
        let mut reply = Some(next_text(ws).await);
        while let Some(text) = reply.take() {
            assert_eq!(text.len(), reply_len, "unexpected reply: {text}");
            received += 1;
            if sent < total {
                ws.feed(request.clone()).await.unwrap();
                sent += 1;
            }
            if let Some(Some(Ok(Message::Text(more)))) = ws.next().now_or_never() {
                reply = Some(more);
            }
        }
        ws.flush().await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

/// `n` calls of `call` one at a time, appended to `out`.
async fn trait_round_trips<F, Fut>(n: usize, out: &mut Vec<Duration>, mut call: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    for _ in 0..n {
        let started = Instant::now();
        call().await;
        out.push(started.elapsed());
    }
}

/// One call of the small-call shape `index` (0: getMetadata, 1: readFile, 2: readDirectory).
async fn trait_call(fs: &RemoteFileSystem, index: usize, path: &AbsolutePathBuf) {
    match index {
        0 => drop(fs.get_metadata(path).await.unwrap()),
        1 => assert_eq!(fs.read_file(path).await.unwrap().len(), 4096),
        _ => assert_eq!(fs.read_directory(path).await.unwrap().len(), 100),
    }
}

/// Calls per second of `get_metadata` from `depth` tasks sharing one `RemoteFileSystem`.
async fn trait_pipelined(
    fs: &Arc<RemoteFileSystem>,
    path: &AbsolutePathBuf,
    total: usize,
    depth: usize,
) -> f64 {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..depth {
        let fs = Arc::clone(fs);
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
    (total / depth * depth) as f64 / started.elapsed().as_secs_f64()
}

/// One call shape of the small-call table: the request, the reply capfs sends, and the bare
/// server answering with a message of that size.
struct Shape {
    name: &'static str,
    request: Message,
    reply: Utf8Bytes,
    reply_len: usize,
    echo_url: String,
}

/// Latency samples of one shape, one at a time.
#[derive(Default)]
struct Latencies {
    raw: Vec<Duration>,
    echo: Vec<Duration>,
    trait_current: Vec<Duration>,
    trait_multi: Vec<Duration>,
}

const ROUNDS: usize = 10;
const PER_ROUND: usize = 500;
const DEPTH: usize = 64;
const PIPELINED_CALLS: usize = 64_000;

fn small_section(scratch: &Path) {
    let root = scratch.join("small-ws");
    std::fs::create_dir_all(root.join("dir100")).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(root.join("f.txt"), b"hello").unwrap();
    std::fs::write(root.join("small.bin"), random_bytes(4096)).unwrap();
    for i in 0..100 {
        std::fs::write(root.join("dir100").join(format!("entry-{i:03}.txt")), b"x").unwrap();
    }
    let server = Server::start(&root);
    let abs = |name: &str| AbsolutePathBuf::new(root.join(name)).unwrap();
    let (meta_path, read_path, dir_path) = (abs("f.txt"), abs("small.bin"), abs("dir100"));
    let request = |method: &str, path: &AbsolutePathBuf| {
        Message::text(format!(
            r#"{{"id":123456,"method":"{method}","params":{{"path":"{path}"}}}}"#
        ))
    };

    // One client runtime with one thread for the one-at-a-time calls: the raw client is one task,
    // and `RemoteFileSystem`'s tasks share the caller's thread.
    let current = current_thread();
    let (shapes, raw_capfs_url) = current.block_on(async {
        let mut ws = raw_capfs(&server.url).await;
        let mut shapes = Vec::new();
        for (name, method, path) in [
            ("fs/getMetadata", "fs/getMetadata", &meta_path),
            ("fs/readFile 4 KiB", "fs/readFile", &read_path),
            (
                "fs/readDirectory 100 entries",
                "fs/readDirectory",
                &dir_path,
            ),
        ] {
            let request = request(method, path);
            let reply = call_once(&mut ws, &request).await;
            shapes.push(Shape {
                name,
                request,
                reply_len: reply.len(),
                echo_url: canned_server(reply.clone()),
                reply,
            });
        }
        (shapes, server.url.clone())
    });

    let mut latencies: Vec<Latencies> = shapes.iter().map(|_| Latencies::default()).collect();
    let paths = [meta_path.clone(), read_path.clone(), dir_path.clone()];
    let (mut capfs_ws, mut echo_ws, current_fs) = current.block_on(async {
        let mut echo_ws = Vec::new();
        for shape in &shapes {
            echo_ws.push(raw_connect(&shape.echo_url).await);
        }
        let fs = remote(&raw_capfs_url).await;
        (raw_capfs(&raw_capfs_url).await, echo_ws, fs)
    });
    let multi = multi_thread();
    let multi_fs = multi.block_on(remote(&raw_capfs_url));
    // Warm up every path once, then alternate the contenders in rounds so that drift in the
    // machine's load hits them alike.
    for round in 0..=ROUNDS {
        let n = if round == 0 { 200 } else { PER_ROUND };
        for (index, shape) in shapes.iter().enumerate() {
            let mut warm_up = Latencies::default();
            let samples = if round == 0 {
                &mut warm_up
            } else {
                &mut latencies[index]
            };
            let path = &paths[index];
            current.block_on(async {
                let capfs = &mut capfs_ws;
                raw_round_trips(capfs, &shape.request, shape.reply_len, n, &mut samples.raw).await;
                let echo = &mut echo_ws[index];
                raw_round_trips(echo, &shape.request, shape.reply_len, n, &mut samples.echo).await;
                trait_round_trips(n, &mut samples.trait_current, || {
                    trait_call(&current_fs, index, path)
                })
                .await;
            });
            // On the multi-thread runtime the caller is a task on a worker, as in an agent.
            let (fs, path) = (multi_fs.clone(), path.clone());
            let mut multi_samples = multi.block_on(async move {
                tokio::spawn(async move {
                    let mut out = Vec::with_capacity(n);
                    trait_round_trips(n, &mut out, || trait_call(&fs, index, &path)).await;
                    out
                })
                .await
                .unwrap()
            });
            samples.trait_multi.append(&mut multi_samples);
        }
    }
    let meta = &shapes[0];
    let (mut raw_pipelined_ops, mut echo_pipelined_ops) = (0f64, 0f64);
    let (mut current_pipelined_ops, mut multi_pipelined_ops) = (0f64, 0f64);
    let (current_fs, multi_fs) = (Arc::new(current_fs), Arc::new(multi_fs));
    for _ in 0..3 {
        current.block_on(async {
            let (request, len) = (&meta.request, meta.reply_len);
            let ops = raw_pipelined(&mut capfs_ws, request, len, PIPELINED_CALLS, DEPTH).await;
            raw_pipelined_ops = raw_pipelined_ops.max(ops);
            let ops = raw_pipelined(&mut echo_ws[0], request, len, PIPELINED_CALLS, DEPTH).await;
            echo_pipelined_ops = echo_pipelined_ops.max(ops);
            let ops = trait_pipelined(&current_fs, &meta_path, PIPELINED_CALLS, DEPTH).await;
            current_pipelined_ops = current_pipelined_ops.max(ops);
        });
        let (fs, path) = (Arc::clone(&multi_fs), meta_path.clone());
        let ops = multi.block_on(async move {
            tokio::spawn(async move { trait_pipelined(&fs, &path, PIPELINED_CALLS, DEPTH).await })
                .await
                .unwrap()
        });
        multi_pipelined_ops = multi_pipelined_ops.max(ops);
    }
    current.block_on(async { drop(current_fs) });
    multi.block_on(async { drop(multi_fs) });

    // The same raw calls against `capfs serve --threads 1` (every connection on one thread) and
    // against the same server on a work-stealing runtime with a worker per core, in this
    // process: what keeping each connection on one thread saves a call.
    let one_thread = Server::start_with_args(&root, &["--threads", "1"]);
    let stealing_url = work_stealing_server(&root);
    let names = [
        "default (--threads: one per core)",
        "--threads 1",
        WORK_STEALING,
    ];
    let mut samples: [Vec<Duration>; 3] = Default::default();
    let mut ops = [0f64; 3];
    let mut bare = Vec::new();
    current.block_on(async {
        let mut connections = [
            raw_capfs(&server.url).await,
            raw_capfs(&one_thread.url).await,
            raw_capfs(&stealing_url).await,
        ];
        let (request, len) = (&meta.request, meta.reply_len);
        for round in 0..=ROUNDS {
            let n = if round == 0 { 200 } else { PER_ROUND };
            for (ws, samples) in connections.iter_mut().zip(samples.iter_mut()) {
                let mut taken = Vec::with_capacity(n);
                raw_round_trips(ws, request, len, n, &mut taken).await;
                if round > 0 {
                    samples.append(&mut taken);
                }
            }
            let mut taken = Vec::with_capacity(n);
            raw_round_trips(&mut echo_ws[0], request, len, n, &mut taken).await;
            if round > 0 {
                bare.append(&mut taken);
            }
        }
        for _ in 0..3 {
            for (ws, best) in connections.iter_mut().zip(ops.iter_mut()) {
                let got = raw_pipelined(ws, request, len, PIPELINED_CALLS, DEPTH).await;
                *best = best.max(got);
            }
        }
    });
    drop(one_thread);

    header(
        "Remote small calls, one at a time (microseconds per round trip)",
        &[
            "call",
            "client",
            "capfs median",
            "bare median",
            "median / bare",
            "capfs p99",
            "bare p99",
            "p99 / bare",
        ],
    );
    for (shape, samples) in shapes.iter().zip(&mut latencies) {
        samples.echo.sort();
        for (client, capfs) in [
            ("raw tokio-tungstenite", &mut samples.raw),
            (
                "RemoteFileSystem, current_thread",
                &mut samples.trait_current,
            ),
            ("RemoteFileSystem, multi_thread", &mut samples.trait_multi),
        ] {
            capfs.sort();
            let (m, e) = (percentile(capfs, 0.5), percentile(&samples.echo, 0.5));
            let (p, q) = (percentile(capfs, 0.99), percentile(&samples.echo, 0.99));
            println!(
                "| {} | {client} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {:.2} |",
                shape.name,
                us(m),
                us(e),
                us(m) / us(e),
                us(p),
                us(q),
                us(p) / us(q),
            );
        }
    }
    println!(
        "\nbare: a tokio-tungstenite server in one task on a current_thread runtime answering each \
         message with one of the size capfs answers ({} B, {} B, {} B), reached by the raw client; \
         {} samples each, alternated in rounds of {PER_ROUND}.",
        shapes[0].reply_len,
        shapes[1].reply_len,
        shapes[2].reply_len,
        ROUNDS * PER_ROUND
    );

    header(
        "Remote small calls, 64 in flight on one connection (fs/getMetadata, best of 3)",
        &["client", "capfs calls/s", "bare calls/s", "capfs / bare"],
    );
    for (client, ops) in [
        ("raw tokio-tungstenite, one task", raw_pipelined_ops),
        (
            "RemoteFileSystem, 64 tasks, current_thread",
            current_pipelined_ops,
        ),
        (
            "RemoteFileSystem, 64 tasks, multi_thread",
            multi_pipelined_ops,
        ),
    ] {
        println!(
            "| {client} | {ops:.0} | {echo_pipelined_ops:.0} | {:.2} |",
            ops / echo_pipelined_ops
        );
    }
    header(
        "capfs serve's threads: fs/getMetadata from the raw client against the default server, \
         one connection thread, and a work-stealing runtime",
        &[
            "server",
            "median us",
            "median / bare",
            "p99 us",
            "calls/s, 64 in flight",
        ],
    );
    bare.sort();
    for ((name, samples), ops) in names.iter().zip(samples.iter_mut()).zip(ops) {
        samples.sort();
        let (m, p) = (percentile(samples, 0.5), percentile(samples, 0.99));
        println!(
            "| {name} | {:.1} | {:.2} | {:.1} | {ops:.0} |",
            us(m),
            us(m) / us(percentile(&bare, 0.5)),
            us(p),
        );
    }
    println!(
        "\n{WORK_STEALING}: the same server in this process, `Server::run_until` on a \
         multi_thread runtime with a worker per core, so each message may be read on one worker \
         and answered on the other."
    );
    placement_table(&root, &shapes, &paths, &current);
    drop(server);
}

/// Pins the calling thread to `cpus`; threads and processes it starts inherit the mask.
fn pin(cpus: &[usize]) {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    rustix::thread::sched_setaffinity(None, &set).expect("set the CPU affinity");
}

/// One call at a time with the client and the server pinned, on one CPU and on two: where the
/// scheduler leaves a client and its server thread decides the round trip on a virtual
/// machine (waking a sleeping CPU costs tens of microseconds), and unpinned it may keep them
/// together for one table and apart for the next. Pinned, capfs and the bare echo are compared
/// in the same placement.
fn placement_table(
    root: &Path,
    shapes: &[Shape],
    paths: &[AbsolutePathBuf; 3],
    current: &tokio::runtime::Runtime,
) {
    let allowed = rustix::thread::sched_getaffinity(None).expect("the CPU affinity");
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
        .filter(|&cpu| allowed.is_set(cpu))
        .collect();
    if cpus.len() < 2 {
        println!("\n(placement table left out: this process may use only one CPU)");
        return;
    }
    header(
        "Remote small calls one at a time, client and server pinned (median microseconds)",
        &[
            "placement",
            "call",
            "bare",
            "capfs, raw client",
            "raw / bare",
            "capfs, RemoteFileSystem",
            "RemoteFileSystem / bare",
        ],
    );
    for (placement, client_cpu, server_cpu) in [
        ("one CPU", cpus[0], cpus[0]),
        ("two CPUs", cpus[0], cpus[1]),
    ] {
        // The server process and the echo threads inherit the server's CPU.
        pin(&[server_cpu]);
        let server = Server::start(root);
        let echo_urls: Vec<String> = shapes
            .iter()
            .map(|s| canned_server(s.reply.clone()))
            .collect();
        pin(&[client_cpu]);
        let mut samples: Vec<[Vec<Duration>; 3]> =
            shapes.iter().map(|_| Default::default()).collect();
        current.block_on(async {
            let mut raw = raw_capfs(&server.url).await;
            let fs = remote(&server.url).await;
            let mut echoes = Vec::new();
            for url in &echo_urls {
                echoes.push(raw_connect(url).await);
            }
            for round in 0..=ROUNDS {
                let n = if round == 0 { 200 } else { PER_ROUND };
                for (index, shape) in shapes.iter().enumerate() {
                    let mut taken: [Vec<Duration>; 3] = Default::default();
                    let (request, len) = (&shape.request, shape.reply_len);
                    raw_round_trips(&mut echoes[index], request, len, n, &mut taken[0]).await;
                    raw_round_trips(&mut raw, request, len, n, &mut taken[1]).await;
                    trait_round_trips(n, &mut taken[2], || trait_call(&fs, index, &paths[index]))
                        .await;
                    if round > 0 {
                        for (all, new) in samples[index].iter_mut().zip(taken.iter_mut()) {
                            all.append(new);
                        }
                    }
                }
            }
        });
        for (shape, [bare, raw, remote]) in shapes.iter().zip(samples.iter_mut()) {
            for list in [&mut *bare, &mut *raw, &mut *remote] {
                list.sort();
            }
            let (b, r, t) = (
                us(percentile(bare, 0.5)),
                us(percentile(raw, 0.5)),
                us(percentile(remote, 0.5)),
            );
            println!(
                "| {placement} | {} | {b:.1} | {r:.1} | {:.2} | {t:.1} | {:.2} |",
                shape.name,
                r / b,
                t / b
            );
        }
        drop(server);
        pin(&cpus);
    }
    println!(
        "\nThe client (this process's thread, one current_thread runtime) is pinned to CPU {}; the \
         server (`capfs serve`, every thread) and the bare echo to CPU {} or {}.",
        cpus[0], cpus[0], cpus[1]
    );
}

// ---------------------------------------------------------------------------------------------
// Bulk: 256 MiB through the capfs binary against sftp-server, raw TCP and cp

/// One contender's timings, CPU time and peak memory over the rounds.
#[derive(Default)]
struct BulkRow {
    times: Vec<Duration>,
    cpu: Vec<Duration>,
    server_above_idle_kib: Option<u64>,
    client_peak_kib: Option<u64>,
}

impl BulkRow {
    fn record(
        &mut self,
        elapsed: Duration,
        cpu: Option<Duration>,
        server: Option<u64>,
        client: Option<u64>,
    ) {
        self.times.push(elapsed);
        self.cpu.extend(cpu);
        if let Some(s) = server {
            self.server_above_idle_kib = Some(self.server_above_idle_kib.unwrap_or(0).max(s));
        }
        if let Some(c) = client {
            self.client_peak_kib = Some(self.client_peak_kib.unwrap_or(0).max(c));
        }
    }

    fn best(&self) -> Duration {
        self.times.iter().copied().min().unwrap_or(Duration::MAX)
    }

    fn worst(&self) -> Duration {
        self.times.iter().copied().max().unwrap_or(Duration::MAX)
    }
}

/// What one transfer against a fresh server cost: the client as GNU time saw it, the server's
/// CPU time and its peak RSS above its idle RSS, in KiB.
struct Transfer {
    client: Measured,
    server_cpu: Duration,
    server_above_idle_kib: u64,
}

/// Runs `capfs --remote URL args...` against a fresh `capfs serve` over `ws`.
fn transfer(ws: &Path, args: &[&str]) -> Transfer {
    let server = Server::start(ws);
    let (idle, cpu_before) = (server.memory_kib("VmRSS:"), server.cpu());
    let mut full = vec!["--remote", &server.url];
    full.extend_from_slice(args);
    let client = run_measured(env!("CARGO_BIN_EXE_capfs"), &full, None);
    let server_cpu = server.cpu().saturating_sub(cpu_before);
    let peak = server.memory_kib("VmHWM:");
    Transfer {
        client,
        server_cpu,
        server_above_idle_kib: peak.saturating_sub(idle),
    }
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
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let chunk = vec![7u8; 256 * 1024];
    let mut sent = 0;
    while sent < bytes {
        socket.write_all(&chunk).await.unwrap();
        sent += chunk.len();
    }
    receiver.await.unwrap();
    started.elapsed()
}

/// Removes a transfer's destination and writes every dirty page back, so that no transfer
/// runs beside the write-back of the one before (a 256 MiB write leaves that much dirty).
fn settle(destination: &Path) {
    let _ = std::fs::remove_file(destination);
    rustix::fs::sync();
}

fn same_contents(a: &Path, b: &Path) -> bool {
    std::fs::read(a).unwrap() == std::fs::read(b).unwrap()
}

fn bulk_section(scratch: &Path) {
    let ws = scratch.join("bulk-ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let local_src = scratch.join("src.bin");
    std::fs::write(&local_src, random_bytes(BULK_BYTES)).unwrap();
    let remote_data = ws.join("data.bin");
    std::fs::copy(&local_src, &remote_data).unwrap();
    let local_back = scratch.join("back.bin");
    let remote_put = ws.join("put.bin");
    let has_sftp = Path::new(SFTP_SERVER).exists()
        && Command::new("sftp")
            .arg("-V")
            .stderr(Stdio::null())
            .status()
            .is_ok();
    let runtime = multi_thread();
    let names = [
        "raw loopback TCP copy",
        "local cp",
        "sftp-server get",
        "capfs get",
        "sftp-server put",
        "capfs put",
    ];
    let mut rows: Vec<BulkRow> = names.iter().map(|_| BulkRow::default()).collect();
    let sftp_args = ["-q", "-D", SFTP_SERVER, "-b", "-"];
    let (src, back, put) = (
        local_src.to_str().unwrap(),
        local_back.to_str().unwrap(),
        remote_put.to_str().unwrap(),
    );
    let data = remote_data.to_str().unwrap();
    for _ in 0..3 {
        rows[0].record(runtime.block_on(raw_tcp_copy(BULK_BYTES)), None, None, None);

        settle(&local_back);
        let cp = run_measured("cp", &[src, back], None);
        rows[1].record(cp.elapsed, Some(cp.cpu), None, None);

        if has_sftp {
            settle(&local_back);
            let batch = format!("get {data} {back}\n");
            let sftp = run_measured("sftp", &sftp_args, Some(&batch));
            rows[2].record(sftp.elapsed, Some(sftp.cpu), None, Some(sftp.peak_kib));
        }

        settle(&local_back);
        let t = transfer(&ws, &["get", data, back]);
        let cpu = t.client.cpu + t.server_cpu;
        rows[3].record(
            t.client.elapsed,
            Some(cpu),
            Some(t.server_above_idle_kib),
            Some(t.client.peak_kib),
        );
        assert!(
            same_contents(&local_src, &local_back),
            "capfs get corrupted"
        );

        if has_sftp {
            settle(&remote_put);
            let batch = format!("put {src} {put}\n");
            let sftp = run_measured("sftp", &sftp_args, Some(&batch));
            rows[4].record(sftp.elapsed, Some(sftp.cpu), None, Some(sftp.peak_kib));
        }

        settle(&remote_put);
        let t = transfer(&ws, &["put", src, put]);
        let cpu = t.client.cpu + t.server_cpu;
        rows[5].record(
            t.client.elapsed,
            Some(cpu),
            Some(t.server_above_idle_kib),
            Some(t.client.peak_kib),
        );
        assert!(
            same_contents(&local_src, &remote_put),
            "capfs put corrupted"
        );
    }

    header(
        "Remote bulk: 256 MiB over loopback, alternated, best of 3 (range over the 3)",
        &[
            "transfer",
            "seconds",
            "MB/s",
            "vs sftp-server",
            "vs local cp",
            "vs raw TCP",
            "CPU s, both ends",
            "server peak RSS above idle",
            "client peak RSS",
        ],
    );
    let ratio = |base: &BulkRow, row: &BulkRow| {
        if base.times.is_empty() {
            return "-".to_string();
        }
        let (b, r) = (base.best().as_secs_f64(), row.best().as_secs_f64());
        format!("{:.2}x", b / r)
    };
    for (index, (name, row)) in names.iter().zip(&rows).enumerate() {
        if row.times.is_empty() {
            println!("| {name} | skipped: {SFTP_SERVER} or sftp not installed | | | | | | | |");
            continue;
        }
        let versus_sftp = match index {
            3 => ratio(&rows[2], row),
            5 => ratio(&rows[4], row),
            2 | 4 => "1.00x".to_string(),
            _ => "-".to_string(),
        };
        let mib =
            |v: Option<u64>| v.map_or("-".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        println!(
            "| {name} | {:.3} ({:.3}-{:.3}) | {:.0} | {versus_sftp} | {} | {} | {} | {} | {} |",
            row.best().as_secs_f64(),
            row.best().as_secs_f64(),
            row.worst().as_secs_f64(),
            mbps(BULK_BYTES, row.best()),
            ratio(&rows[1], row),
            ratio(&rows[0], row),
            row.cpu
                .iter()
                .min()
                .map_or("-".to_string(), |c| format!("{:.2}", c.as_secs_f64())),
            mib(row.server_above_idle_kib),
            mib(row.client_peak_kib),
        );
    }
    println!(
        "\nspeed ratios: the baseline's time over the row's (above 1 is faster than the baseline). \
         sftp: `sftp -q -D {SFTP_SERVER} -b -` (a pipe, no encryption); capfs: the release \
         binary against a fresh `capfs serve` per transfer. CPU: the least user + system time of the \
         3 (sftp's includes its sftp-server; capfs's adds the server's); peak RSS of the client \
         from GNU time."
    );
}

// ---------------------------------------------------------------------------------------------
// Local operations: capfs's confined backend against tokio::fs and std::fs, and copy against cp

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
    copy_rows(&root, &big);
}

/// `capfs --root R cp` (the binary, so both sides pay one process start) against `cp`, for a
/// 256 MiB file and a tree of 1,000 small files, alternated over 3 rounds.
fn copy_rows(root: &Path, big: &Path) {
    let tree = root.join("tree");
    for d in 0..10 {
        let dir = tree.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(
                dir.join(format!("f{f:03}.txt")),
                random_bytes(1000 + f * 10),
            )
            .unwrap();
        }
    }
    let capfs = env!("CARGO_BIN_EXE_capfs");
    let clear = |p: &PathBuf| {
        let _ = std::fs::remove_file(p);
        let _ = std::fs::remove_dir_all(p);
    };
    let mut results = Vec::new();
    for (name, source, recursive) in [
        ("copy a 256 MiB file", big.to_path_buf(), false),
        ("copy a tree of 1,000 files", tree.clone(), true),
    ] {
        let destination = root.join("copy-destination");
        let (mut ours, mut theirs) = (Duration::MAX, Duration::MAX);
        let (mut ours_worst, mut theirs_worst) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..3 {
            clear(&destination);
            let mut command = Command::new(capfs);
            command.arg("--root").arg(root).arg("cp");
            if recursive {
                command.arg("-r");
            }
            let t = run(command.arg(&source).arg(&destination));
            (ours, ours_worst) = (ours.min(t), ours_worst.max(t));
            if !recursive {
                assert!(same_contents(&source, &destination), "capfs cp corrupted");
            }
            clear(&destination);
            let mut command = Command::new("cp");
            if recursive {
                command.arg("-r");
            }
            let t = run(command.arg(&source).arg(&destination));
            (theirs, theirs_worst) = (theirs.min(t), theirs_worst.max(t));
        }
        clear(&destination);
        results.push((name, ours, ours_worst, theirs, theirs_worst));
    }
    header(
        "Local copy: `capfs --root R cp` against `cp` (best of 3, alternated; range over the 3)",
        &["copy", "capfs ms", "cp ms", "capfs speed / cp"],
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (name, ours, ours_worst, theirs, theirs_worst) in results {
        println!(
            "| {name} | {:.1} ({:.1}-{:.1}) | {:.1} ({:.1}-{:.1}) | {:.2}x |",
            ms(ours),
            ms(ours),
            ms(ours_worst),
            ms(theirs),
            ms(theirs),
            ms(theirs_worst),
            theirs.as_secs_f64() / ours.as_secs_f64(),
        );
    }
}
