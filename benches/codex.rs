//! capfs serve against codex's own `codex exec-server` (the pinned `@openai/codex` of
//! `tests/codex/`), the same client and the same requests to each in one run, alternated, with
//! the ratios printed: one `fs/getMetadata` at a time, 64 in flight, `fs/readFile` of 4 KiB and
//! 16 MiB, and 256 MiB read the way codex streams files (`fs/open`, then `fs/readBlock` of
//! 1 MiB), with each server's peak memory; beside them a bare echo of a `getMetadata` reply (one
//! at a time and 64 in flight) and one of the same 1 MiB blocks, and the targets of issue #32
//! printed as met or not met.
//!
//! Run with `cargo bench --bench codex` after `npm ci` in `tests/codex` (or with `CODEX_BIN`
//! naming a codex binary). Scratch files go under `$CAPFS_BENCH_DIR` (default `/tmp`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

#[path = "codex/echo.rs"]
mod echo;
#[path = "shared/exec_server.rs"]
mod exec_server;

use exec_server::{Spawned, Ws, codex_bin, connect, text};

const ROUNDS: usize = 3;
const ONE_AT_A_TIME: usize = 2_000;
const PIPELINED: usize = 20_000;
const DEPTH: usize = 64;
const BLOCK: usize = 1 << 20;

/// A server process, with the root it serves.
struct Server {
    name: &'static str,
    process: Spawned,
    root: PathBuf,
}

impl Server {
    fn start(name: &'static str, command: Command, root: PathBuf) -> Self {
        Self {
            name,
            process: Spawned::start(name, command),
            root,
        }
    }

    /// The server's peak resident memory so far, in MiB (`VmHWM`).
    fn peak_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.child.id()))
            .unwrap_or_default();
        let kib: f64 = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        kib / 1024.0
    }

    fn uri(&self, name: &str) -> String {
        format!("file://{}/{name}", self.root.display())
    }
}

async fn next(ws: &mut Ws) -> Value {
    serde_json::from_str(&text(ws).await).expect("JSON")
}

fn request(id: u64, method: &str, params: Value) -> Message {
    Message::text(json!({"id": id, "method": method, "params": params}).to_string())
}

async fn call(ws: &mut Ws, method: &str, params: Value) -> Value {
    ws.send(request(1, method, params)).await.unwrap();
    let reply = next(ws).await;
    assert!(reply.get("result").is_some(), "{method}: {reply}");
    reply
}

/// The median of `n` calls of `method` one at a time.
async fn median(ws: &mut Ws, n: usize, method: &str, params: &Value) -> Duration {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        call(ws, method, params.clone()).await;
        times.push(started.elapsed());
    }
    times.sort();
    times[n / 2]
}

/// Calls per second with `DEPTH` requests outstanding.
async fn pipelined(ws: &mut Ws, method: &str, params: &Value) -> f64 {
    let message = request(1, method, params.clone());
    let started = Instant::now();
    let (mut sent, mut received) = (0, 0);
    while sent < DEPTH {
        ws.feed(message.clone()).await.unwrap();
        sent += 1;
    }
    ws.flush().await.unwrap();
    while received < PIPELINED {
        let mut reply = Some(next(ws).await);
        while let Some(value) = reply.take() {
            assert!(value.get("result").is_some(), "{value}");
            received += 1;
            if sent < PIPELINED {
                ws.feed(message.clone()).await.unwrap();
                sent += 1;
            }
            if let Some(Some(Ok(Message::Text(more)))) = ws.next().now_or_never() {
                reply = Some(serde_json::from_str(&more).unwrap());
            }
        }
        ws.flush().await.unwrap();
    }
    PIPELINED as f64 / started.elapsed().as_secs_f64()
}

/// MB/s reading `name` whole through a read handle, one 1 MiB block at a time. The client
/// only finds the chunk's length and `eof` in each reply's text, so that what is measured is
/// the server.
async fn read_blocks(ws: &mut Ws, server: &Server, name: &str, size: usize) -> f64 {
    let open =
        json!({"handleId": "bench", "path": server.uri(name), "mode": "read", "sandbox": null});
    let started = Instant::now();
    call(ws, "fs/open", open).await;
    let mut offset = 0;
    loop {
        let block = json!({"handleId": "bench", "offset": offset, "len": BLOCK});
        ws.send(request(1, "fs/readBlock", block)).await.unwrap();
        let (read, eof) = block_reply(ws).await;
        offset += read;
        if eof {
            break;
        }
    }
    call(ws, "fs/close", json!({"handleId": "bench"})).await;
    assert_eq!(offset, size, "{}: read all of {name}", server.name);
    size as f64 / 1e6 / started.elapsed().as_secs_f64()
}

/// The next text message, a `fs/readBlock` reply: the bytes its chunk holds (found in the
/// text, not decoded) and whether it said `eof`.
async fn block_reply(ws: &mut Ws) -> (usize, bool) {
    let text = loop {
        match ws.next().await.expect("open").expect("frame") {
            Message::Text(text) => break text,
            _ => continue,
        }
    };
    let start = text.find(r#""chunk":""#).expect("a chunk") + 9;
    let chunk = &text[start..start + text[start..].find('"').expect("its end")];
    let bytes = chunk.len() / 4 * 3 - chunk.bytes().rev().take_while(|b| *b == b'=').count();
    (bytes, text.contains(r#""eof":true"#))
}

fn plant(root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    let mut seed = 0x9e37_79b9_u32;
    let mut bytes = |len: usize| -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                seed as u8
            })
            .collect()
    };
    std::fs::write(root.join("small"), bytes(4096)).unwrap();
    std::fs::write(root.join("medium"), bytes(16 << 20)).unwrap();
    let huge = bytes(1 << 20);
    let mut file = std::fs::File::create(root.join("huge")).unwrap();
    for _ in 0..256 {
        std::io::Write::write_all(&mut file, &huge).unwrap();
    }
}

#[derive(Default)]
struct Figures {
    metadata: Vec<Duration>,
    in_flight: Vec<f64>,
    small: Vec<Duration>,
    medium: Vec<Duration>,
    blocks: Vec<f64>,
    peak_mib: f64,
}

async fn measure(server: &Server, figures: &mut Figures) {
    let mut ws = connect(&server.process.url).await;
    let stat = json!({"path": server.uri("small"), "sandbox": null});
    figures
        .metadata
        .push(median(&mut ws, ONE_AT_A_TIME, "fs/getMetadata", &stat).await);
    figures
        .in_flight
        .push(pipelined(&mut ws, "fs/getMetadata", &stat).await);
    let small = json!({"path": server.uri("small"), "sandbox": null});
    figures
        .small
        .push(median(&mut ws, ONE_AT_A_TIME / 2, "fs/readFile", &small).await);
    let medium = json!({"path": server.uri("medium"), "sandbox": null});
    figures
        .medium
        .push(median(&mut ws, 9, "fs/readFile", &medium).await);
    figures
        .blocks
        .push(read_blocks(&mut ws, server, "huge", 256 << 20).await);
    figures.peak_mib = server.peak_mib();
}

fn best_duration(values: &[Duration]) -> Duration {
    *values.iter().min().unwrap()
}

fn best_rate(values: &[f64]) -> f64 {
    values.iter().copied().fold(0.0, f64::max)
}

fn range_us(values: &[Duration]) -> String {
    let us = |d: &Duration| d.as_secs_f64() * 1e6;
    let min = values.iter().map(us).fold(f64::MAX, f64::min);
    let max = values.iter().map(us).fold(0.0, f64::max);
    format!("{min:.0}-{max:.0}")
}

fn main() {
    let Some(codex) = codex_bin() else {
        println!("codex bench skipped: run `npm ci` in tests/codex (or set CODEX_BIN)");
        return;
    };
    let parent = std::env::var_os("CAPFS_BENCH_DIR").unwrap_or_else(|| "/tmp".into());
    let scratch = tempfile::tempdir_in(&parent).expect("scratch");
    let base = std::fs::canonicalize(scratch.path()).unwrap();
    let home = base.join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut servers = Vec::new();
    for (name, args) in [
        ("capfs serve", vec![]),
        ("codex exec-server", vec![]),
        (
            "codex exec-server --concurrent-requests 64",
            vec!["--concurrent-requests", "64"],
        ),
    ] {
        let root = base.join(name.replace(' ', "_"));
        plant(&root);
        let mut command = if name.starts_with("capfs") {
            let mut c = Command::new(env!("CARGO_BIN_EXE_capfs"));
            c.args(["serve", "--listen", "ws://127.0.0.1:0", "--root"])
                .arg(&root);
            c.env("RUST_LOG", "capfs=warn");
            c
        } else {
            let mut c = Command::new(&codex);
            c.args(["exec-server", "--listen", "ws://127.0.0.1:0"])
                .args(&args);
            c.env("CODEX_HOME", &home);
            c
        };
        command.current_dir(&base);
        servers.push(Server::start(name, command, root));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut figures: Vec<Figures> = servers.iter().map(|_| Figures::default()).collect();
    let mut block_echo = runtime.block_on(echo::BlockEcho::start());
    let mut metadata_echo = runtime.block_on(echo::MetadataEcho::start(&servers[0]));
    let (mut echo_rates, mut echo_in_flight) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for (server, figures) in servers.iter().zip(&mut figures) {
            runtime.block_on(measure(server, figures));
        }
        echo_rates.push(runtime.block_on(block_echo.round()));
        echo_in_flight.push(runtime.block_on(metadata_echo.round()));
    }
    let bare = runtime.block_on(echo::round_trip(&servers[0]));
    let echo_blocks = best_rate(&echo_rates);
    println!("# capfs serve against codex exec-server\n");
    println!(
        "Reproduce with: `cargo bench --bench codex` ({} cores; best of {ROUNDS} alternated rounds, ranges in brackets)\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "| server | getMetadata (us) | 64 in flight (calls/s) | readFile 4 KiB (us) | readFile 16 MiB (ms) | 256 MiB by readBlock (MB/s) | peak RSS (MiB) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (server, f) in servers.iter().zip(&figures) {
        println!(
            "| {} | {:.0} [{}] | {:.0} | {:.0} [{}] | {:.1} | {:.0} | {:.0} |",
            server.name,
            best_duration(&f.metadata).as_secs_f64() * 1e6,
            range_us(&f.metadata),
            best_rate(&f.in_flight),
            best_duration(&f.small).as_secs_f64() * 1e6,
            range_us(&f.small),
            best_duration(&f.medium).as_secs_f64() * 1e3,
            best_rate(&f.blocks),
            f.peak_mib,
        );
    }
    println!(
        "\nA bare tokio-tungstenite echo of the same reply, from the same client, took {:.0} us a \
         round trip in this run (half of codex's default: {:.0} us).",
        bare.as_secs_f64() * 1e6,
        best_duration(&figures[1].metadata).as_secs_f64() * 1e6 / 2.0,
    );
    let capfs = &figures[0];
    println!("\n| target | codex | ratio (codex / capfs, or capfs / codex for rates) | met? |");
    println!("|---|---|---|---|");
    for (codex_name, codex) in servers
        .iter()
        .zip(&figures)
        .skip(1)
        .map(|(s, f)| (s.name, f))
    {
        let latency = |name: &str, c: Duration, x: Duration| {
            let ratio = c.as_secs_f64() / x.as_secs_f64();
            let met = if ratio >= 2.0 { "met" } else { "not met" };
            println!("| {name} at most half codex's | {codex_name} | {ratio:.2}x | {met} |");
        };
        latency(
            "getMetadata",
            best_duration(&codex.metadata),
            best_duration(&capfs.metadata),
        );
        latency(
            "readFile 4 KiB",
            best_duration(&codex.small),
            best_duration(&capfs.small),
        );
        latency(
            "readFile 16 MiB",
            best_duration(&codex.medium),
            best_duration(&capfs.medium),
        );
        let rate = |name: &str, target: f64, c: f64, x: f64| {
            let ratio = x / c;
            let met = if ratio >= target { "met" } else { "not met" };
            println!("| {name} at least {target}x codex's | {codex_name} | {ratio:.2}x | {met} |");
        };
        rate(
            "64 in flight",
            4.0,
            best_rate(&codex.in_flight),
            best_rate(&capfs.in_flight),
        );
        rate(
            "256 MiB by readBlock",
            2.5,
            best_rate(&codex.blocks),
            best_rate(&capfs.blocks),
        );
    }
    let in_flight = best_rate(&capfs.in_flight);
    let met = |ok: bool| if ok { "met" } else { "not met" };
    println!(
        "| 64 in flight at least 200k calls/s | - | {:.0}k calls/s | {} |",
        in_flight / 1e3,
        met(in_flight >= 200e3)
    );
    // The cheapest tokio-tungstenite server (one task, one send per reply) with as many
    // calls in flight, from the same client: what the targets above ask of capfs beside it.
    let ceiling = best_rate(&echo_in_flight);
    let fastest_codex = figures[1..]
        .iter()
        .map(|f| best_rate(&f.in_flight))
        .fold(0.0, f64::max);
    println!(
        "| 64 in flight of the bare echo of the same reply | - | {:.0}k calls/s: capfs {:.2}x of it; 4x codex's best would be {:.0}k, {:.2}x of it | - |",
        ceiling / 1e3,
        in_flight / ceiling,
        4.0 * fastest_codex / 1e3,
        4.0 * fastest_codex / ceiling,
    );
    let blocks = echo_blocks / best_rate(&capfs.blocks);
    println!(
        "| 256 MiB by readBlock within 1.2x of a bare echo of the same 1 MiB blocks ({echo_blocks:.0} MB/s) | - | {blocks:.2}x | {} |",
        met(blocks <= 1.2)
    );
}
