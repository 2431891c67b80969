//! Small calls: capfs against the cheapest WebSocket server with the same traffic.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capfs::AbsolutePathBuf;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::measure::{current_thread, header, multi_thread, percentile, random_bytes, us};
use crate::placement::placement_table;
use crate::raw::{
    call_once, canned_server, raw_capfs, raw_connect, raw_pipelined, raw_round_trips, trait_call,
    trait_pipelined, trait_round_trips,
};
use crate::servers::{Server, WORK_STEALING, remote, work_stealing_server};

/// One call shape of the small-call table: the request, the reply capfs sends, and the bare
/// server answering with a message of that size.
pub(crate) struct Shape {
    pub(crate) name: &'static str,
    pub(crate) request: Message,
    pub(crate) reply: Utf8Bytes,
    pub(crate) reply_len: usize,
    pub(crate) echo_url: String,
}

/// Latency samples of one shape, one at a time.
#[derive(Default)]
pub(crate) struct Latencies {
    pub(crate) raw: Vec<Duration>,
    pub(crate) echo: Vec<Duration>,
    pub(crate) trait_current: Vec<Duration>,
    pub(crate) trait_multi: Vec<Duration>,
}

pub(crate) const ROUNDS: usize = 10;
pub(crate) const PER_ROUND: usize = 500;
pub(crate) const DEPTH: usize = 64;
pub(crate) const PIPELINED_CALLS: usize = 64_000;

/// The files of the small-call shapes under `root`: `f.txt`, `small.bin` (4 KiB) and
/// `dir100` (100 entries). Returns the canonical root.
pub(crate) fn small_files(root: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(root.join("dir100")).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(root.join("f.txt"), b"hello").unwrap();
    std::fs::write(root.join("small.bin"), random_bytes(4096)).unwrap();
    for i in 0..100 {
        std::fs::write(root.join("dir100").join(format!("entry-{i:03}.txt")), b"x").unwrap();
    }
    root
}

pub(crate) fn small_section(scratch: &Path) {
    let root = small_files(&scratch.join("small-ws"));
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
