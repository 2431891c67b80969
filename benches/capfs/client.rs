//! `RemoteFileSystem` against the raw client on the same server: the library's own client's
//! cost per call over a plain tokio-tungstenite client's, one call at a time and 64 in flight,
//! for `fs/getMetadata`, a 4 KiB `fs/readFile` and a 100-entry `fs/readDirectory`, with the
//! target of issue #32 (at most 1.3x) printed as met or not met. `CAPFS_BENCH_SERVER_THREADS`
//! sets the server's `--threads` (default 1: see `client_section`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capfs::AbsolutePathBuf;
use capfs_wire::RemoteFileSystem;
use tokio_tungstenite::tungstenite::Message;

use crate::measure::{current_thread, header, multi_thread, percentile, us};
use crate::raw::{
    call_once, raw_capfs, raw_pipelined, raw_round_trips, trait_call, trait_call_pipelined,
    trait_round_trips,
};
use crate::servers::{Server, remote};
use crate::small::small_files;

/// The most `RemoteFileSystem` may take per call over the raw client.
const TARGET: f64 = 1.3;
const ROUNDS: usize = 10;
const PER_ROUND: usize = 300;
const PIPELINED_ROUNDS: usize = 5;
const PIPELINED_CALLS: usize = 12_800;
const DEPTH: usize = 64;

const SHAPES: [(&str, &str, &str); 3] = [
    ("fs/getMetadata", "fs/getMetadata", "f.txt"),
    ("fs/readFile 4 KiB", "fs/readFile", "small.bin"),
    ("fs/readDirectory 100 entries", "fs/readDirectory", "dir100"),
];

/// Per-call times of the three contenders for one shape and depth, one entry per round (one at
/// a time: every call; in flight: each round's mean).
#[derive(Default)]
struct Samples {
    raw: Vec<Duration>,
    current: Vec<Duration>,
    multi: Vec<Duration>,
}

impl Samples {
    fn medians(&mut self) -> [f64; 3] {
        [&mut self.raw, &mut self.current, &mut self.multi].map(|list| {
            list.sort();
            us(percentile(list, 0.5))
        })
    }
}

fn per_call(calls_per_second: f64) -> Duration {
    Duration::from_secs_f64(1.0 / calls_per_second)
}

pub(crate) fn client_section(scratch: &Path) {
    let root = small_files(&scratch.join("client"));
    // One connection thread: the raw client's connection and both of `RemoteFileSystem`'s are
    // served by the same thread, so that only the client differs between them (with a thread
    // per core, where the kernel keeps each connection's thread beside the client or not would
    // decide the round trip; see the placement table).
    let threads = std::env::var("CAPFS_BENCH_SERVER_THREADS").unwrap_or_else(|_| "1".into());
    let server = Server::start_with_args(&root, &["--threads", &threads]);
    let paths: Vec<AbsolutePathBuf> = SHAPES
        .iter()
        .map(|(_, _, name)| AbsolutePathBuf::new(root.join(name)).unwrap())
        .collect();
    let requests: Vec<Message> = SHAPES
        .iter()
        .zip(&paths)
        .map(|((_, method, _), path)| {
            Message::text(format!(
                r#"{{"id":123456,"method":"{method}","params":{{"path":"{path}"}}}}"#
            ))
        })
        .collect();
    let current = current_thread();
    let multi = multi_thread();
    let (mut raw, reply_lens, current_fs) = current.block_on(async {
        let mut raw = raw_capfs(&server.url).await;
        let mut lens = Vec::new();
        for request in &requests {
            lens.push(call_once(&mut raw, request).await.len());
        }
        (raw, lens, Arc::new(remote(&server.url).await))
    });
    let multi_fs = Arc::new(multi.block_on(remote(&server.url)));
    let mut one: Vec<Samples> = SHAPES.iter().map(|_| Samples::default()).collect();
    let mut many: Vec<Samples> = SHAPES.iter().map(|_| Samples::default()).collect();
    // The server's CPU time at 64 in flight and the calls it served, summed over the rounds:
    // raw, current_thread, multi_thread.
    let mut server_cpu: Vec<[(Duration, usize); 3]> =
        SHAPES.iter().map(|_| Default::default()).collect();
    // Warm-up first, then the contenders alternated in rounds so that drift in the machine's
    // load hits them alike.
    for round in 0..=ROUNDS {
        let n = if round == 0 { 100 } else { PER_ROUND };
        for (index, samples) in one.iter_mut().enumerate() {
            let mut taken = Samples::default();
            let (request, len, path) = (&requests[index], reply_lens[index], &paths[index]);
            current.block_on(async {
                raw_round_trips(&mut raw, request, len, n, &mut taken.raw).await;
                trait_round_trips(n, &mut taken.current, || {
                    trait_call(&current_fs, index, path)
                })
                .await;
            });
            taken.multi = on_multi(&multi, &multi_fs, index, path, move |fs, index, path| {
                Box::pin(async move {
                    let mut out = Vec::with_capacity(n);
                    trait_round_trips(n, &mut out, || trait_call(&fs, index, &path)).await;
                    out
                })
            });
            if round > 0 {
                samples.raw.append(&mut taken.raw);
                samples.current.append(&mut taken.current);
                samples.multi.append(&mut taken.multi);
            }
        }
    }
    for _ in 0..PIPELINED_ROUNDS {
        for (index, samples) in many.iter_mut().enumerate() {
            let (request, len, path) = (&requests[index], reply_lens[index], &paths[index]);
            let total = PIPELINED_CALLS / if index == 2 { 4 } else { 1 };
            let cpu = &mut server_cpu[index];
            let mut count = |contender: usize, before: Duration| {
                cpu[contender].0 += server.cpu().saturating_sub(before);
                cpu[contender].1 += total / DEPTH * DEPTH;
            };
            let before = server.cpu();
            let ops = current.block_on(raw_pipelined(&mut raw, request, len, total, DEPTH));
            samples.raw.push(per_call(ops));
            count(0, before);
            let before = server.cpu();
            let ops =
                current.block_on(trait_call_pipelined(&current_fs, index, path, total, DEPTH));
            samples.current.push(per_call(ops));
            count(1, before);
            let before = server.cpu();
            let ops = on_multi(&multi, &multi_fs, index, path, move |fs, index, path| {
                Box::pin(async move { trait_call_pipelined(&fs, index, &path, total, DEPTH).await })
            });
            samples.multi.push(per_call(ops));
            count(2, before);
        }
    }
    current.block_on(async { drop(current_fs) });
    multi.block_on(async { drop(multi_fs) });
    drop(server);
    let server_cpu: Vec<[f64; 3]> = server_cpu
        .iter()
        .map(|per| per.map(|(cpu, calls)| us(cpu) / calls.max(1) as f64))
        .collect();

    header(
        "RemoteFileSystem against the raw client, same server (microseconds per call, medians)",
        &[
            "call",
            "in flight",
            "raw client",
            "RemoteFileSystem, current_thread",
            "/ raw",
            "RemoteFileSystem, multi_thread",
            "/ raw",
        ],
    );
    let mut worst = (0f64, String::new());
    let mut worst_multi = (0f64, String::new());
    for (depth, table) in [(1, &mut one), (DEPTH, &mut many)] {
        for ((name, _, _), samples) in SHAPES.iter().zip(table.iter_mut()) {
            let [raw, current, multi] = samples.medians();
            let (c, m) = (current / raw, multi / raw);
            println!(
                "| {name} | {depth} | {raw:.1} | {current:.1} | {c:.2} | {multi:.1} | {m:.2} |"
            );
            if c > worst.0 {
                worst = (c, format!("{name}, {depth} in flight"));
            }
            if m > worst_multi.0 {
                worst_multi = (m, format!("{name}, {depth} in flight"));
            }
        }
    }
    header(
        "The server's CPU time per call at 64 in flight (microseconds, user + system)",
        &[
            "call",
            "raw client",
            "RemoteFileSystem, current_thread",
            "RemoteFileSystem, multi_thread",
        ],
    );
    for ((name, _, _), [raw, current, multi]) in SHAPES.iter().zip(&server_cpu) {
        println!("| {name} | {raw:.1} | {current:.1} | {multi:.1} |");
    }
    let verdict = |ratio: f64| if ratio <= TARGET { "met" } else { "NOT met" };
    println!(
        "\n`capfs serve --threads 1` (every connection on one thread, so the raw client's and \
         both RemoteFileSystems' alike); one at a time: {} calls each, alternated in rounds of \
         {PER_ROUND}; {DEPTH} in flight: the median of {PIPELINED_ROUNDS} alternated rounds (of \
         {PIPELINED_CALLS} calls, a quarter of that for fs/readDirectory), 64 tasks sharing one \
         RemoteFileSystem against one raw task. The raw client sends each request as prebuilt \
         text and only checks each reply's length; RemoteFileSystem builds the request and \
         decodes the reply into what the trait returns (a 4 KiB file by one \
         `capfs/readFileRange`, as it reads any file of at most 16 KiB).",
        ROUNDS * PER_ROUND
    );
    println!(
        "\ntarget {TARGET}x, current_thread: {} (worst {:.2}x: {})",
        verdict(worst.0),
        worst.0,
        worst.1
    );
    println!(
        "target {TARGET}x, multi_thread: {} (worst {:.2}x: {})",
        verdict(worst_multi.0),
        worst_multi.0,
        worst_multi.1
    );
}

/// Runs `f` on the multi-thread runtime as a spawned task, the caller a task on a worker as in
/// an agent.
fn on_multi<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    fs: &Arc<RemoteFileSystem>,
    index: usize,
    path: &AbsolutePathBuf,
    f: impl FnOnce(
        Arc<RemoteFileSystem>,
        usize,
        AbsolutePathBuf,
    ) -> std::pin::Pin<Box<dyn Future<Output = T> + Send>>,
) -> T {
    let future = f(Arc::clone(fs), index, path.clone());
    runtime.block_on(async move { tokio::spawn(future).await.unwrap() })
}
