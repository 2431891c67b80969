//! One contender's calls alone, for a profiler: `cargo bench --bench capfs -- calls` runs
//! `CAPFS_BENCH_CALLS` calls (default 2,000) of one shape from one client against `capfs serve`
//! (a child process, which `valgrind --tool=callgrind` leaves untraced by default) and prints
//! nothing but the time they took. Pick the contender with `CAPFS_BENCH_CLIENT` (`raw`: the
//! plain tokio-tungstenite client; `remote`: `RemoteFileSystem` on a current_thread runtime;
//! `remote-multi`: on a multi_thread one), the shape with `CAPFS_BENCH_SHAPE` (`getMetadata`,
//! `readFile`, `readDirectory`) and the calls in flight with `CAPFS_BENCH_DEPTH` (1 or more).
//!
//! The client's instructions per call are the difference of two runs' totals over the
//! difference of their call counts, which leaves out start-up:
//!
//! ```sh
//! for n in 1000 3000; do CAPFS_BENCH_CALLS=$n CAPFS_BENCH_CLIENT=remote \
//!   valgrind --tool=callgrind --callgrind-out-file=cg.$n target/release/deps/capfs-HASH calls
//! done
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use capfs::AbsolutePathBuf;
use tokio_tungstenite::tungstenite::Message;

use crate::measure::{current_thread, multi_thread};
use crate::raw::{
    call_once, raw_capfs, raw_pipelined, raw_round_trips, trait_call, trait_call_pipelined,
};
use crate::servers::{Server, remote};
use crate::small::small_files;

fn knob(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

pub(crate) fn calls_section(scratch: &Path) {
    let calls: usize = knob("CAPFS_BENCH_CALLS", "2000").parse().expect("a count");
    let depth: usize = knob("CAPFS_BENCH_DEPTH", "1").parse().expect("a count");
    let client = knob("CAPFS_BENCH_CLIENT", "remote");
    let shape = knob("CAPFS_BENCH_SHAPE", "getMetadata");
    let (index, method, name) = match shape.as_str() {
        "getMetadata" => (0, "fs/getMetadata", "f.txt"),
        "readFile" => (1, "fs/readFile", "small.bin"),
        "readDirectory" => (2, "fs/readDirectory", "dir100"),
        // What `RemoteFileSystem` asks for a whole file (raw client only, one at a time).
        "readFileStream" => (1, "capfs/readFileStream", "small.bin"),
        other => panic!("CAPFS_BENCH_SHAPE={other}: not a shape"),
    };
    let root = small_files(&scratch.join("calls"));
    let server = Server::start(&root);
    let path = AbsolutePathBuf::new(root.join(name)).unwrap();
    let request = Message::text(format!(
        r#"{{"id":123456,"method":"{method}","params":{{"path":"{path}"{stream}}}}}"#,
        stream = if method.contains("Stream") {
            r#","streamId":7"#
        } else {
            ""
        },
    ));
    let warm_up = 100;
    let elapsed = match client.as_str() {
        "raw" => current_thread().block_on(async {
            let mut ws = raw_capfs(&server.url).await;
            let len = call_once(&mut ws, &request).await.len();
            let mut samples = Vec::new();
            raw_round_trips(&mut ws, &request, len, warm_up, &mut samples).await;
            let started = Instant::now();
            if depth > 1 {
                raw_pipelined(&mut ws, &request, len, calls, depth).await;
            } else {
                raw_round_trips(&mut ws, &request, len, calls, &mut samples).await;
            }
            started.elapsed()
        }),
        "remote" | "remote-multi" => {
            let runtime = if client == "remote" {
                current_thread()
            } else {
                multi_thread()
            };
            runtime.block_on(async move {
                tokio::spawn(async move {
                    let fs = Arc::new(remote(&server.url).await);
                    for _ in 0..warm_up {
                        trait_call(&fs, index, &path).await;
                    }
                    let started = Instant::now();
                    if depth > 1 {
                        trait_call_pipelined(&fs, index, &path, calls, depth).await;
                    } else {
                        for _ in 0..calls {
                            trait_call(&fs, index, &path).await;
                        }
                    }
                    let elapsed = started.elapsed();
                    drop(server);
                    elapsed
                })
                .await
                .unwrap()
            })
        }
        other => panic!("CAPFS_BENCH_CLIENT={other}: not a client"),
    };
    println!(
        "{calls} calls of {shape}, {depth} in flight, client {client}: {:.1} us a call",
        elapsed.as_secs_f64() * 1e6 / calls as f64
    );
}
