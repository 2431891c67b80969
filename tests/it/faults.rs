//! Faults against the real `capfs serve`: a server killed mid-write, a client gone mid-upload,
//! many clients at once with the server's memory watched, and the connection limit under 500
//! idle connections. Every wait is bounded; nothing sleeps to synchronise.

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::serve::{RawPeer, ServerProcess, WAIT, workspace};
use capfs::protocol::{DATA_CHUNK_BYTES, data_frame_header};
use capfs::{
    AbsolutePathBuf, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, RemoteFileSystem,
    RemoteOptions, RemoveOptions, RenameOptions,
};

fn abs(p: &Path) -> AbsolutePathBuf {
    AbsolutePathBuf::new(p).unwrap()
}

fn names_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

async fn connect(url: &str) -> RemoteFileSystem {
    RemoteFileSystem::connect(url, RemoteOptions::default())
        .await
        .unwrap()
}

/// Version `version` of file `file`: the record `<f{file} v{version:06}>` repeated to a length
/// that differs per version, so a mix of two versions or a torn write never matches any one.
/// Odd files are large enough to travel as data frames, even ones as one JSON message.
fn version_contents(file: usize, version: u64) -> Vec<u8> {
    let base = if file % 2 == 1 { 300_000 } else { 2_000 };
    let len = base + (version as usize % 97) * 131;
    let record = format!("<f{file} v{version:06}>");
    record.bytes().cycle().take(len).collect()
}

/// The version a file holds, if its whole contents are exactly one version's.
fn version_of(file: usize, contents: &[u8]) -> Option<u64> {
    let prefix = format!("<f{file} v");
    let digits = contents.get(prefix.len()..prefix.len() + 6)?;
    let version: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    (contents.starts_with(prefix.as_bytes()) && version_contents(file, version) == contents)
        .then_some(version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_overwrite_leaves_old_or_new_files_never_a_mix() {
    const FILES: usize = 8;
    let (_dir, ws) = workspace();
    for file in 0..FILES {
        std::fs::write(ws.join(format!("f{file}")), version_contents(file, 0)).unwrap();
    }
    let mut server = ServerProcess::start(&ws).await;
    let fs = Arc::new(connect(&server.url).await);
    // The highest version each file was ever asked to hold.
    let issued: Arc<Vec<AtomicU64>> = Arc::new((0..FILES).map(|_| AtomicU64::new(0)).collect());
    let (written_tx, mut written) = tokio::sync::mpsc::unbounded_channel();
    let mut writers = Vec::new();
    for file in 0..FILES {
        let fs = Arc::clone(&fs);
        let issued = Arc::clone(&issued);
        let written = written_tx.clone();
        let path = abs(&ws.join(format!("f{file}")));
        writers.push(tokio::spawn(async move {
            for version in 1.. {
                issued[file].store(version, Ordering::SeqCst);
                if let Err(e) = fs.write_file(&path, version_contents(file, version)).await {
                    return e;
                }
                let _ = written.send(());
            }
            unreachable!("the server dies first")
        }));
    }
    // Kill once the overwrites are well under way: 40 of them have completed.
    for _ in 0..40 {
        tokio::time::timeout(WAIT, written.recv())
            .await
            .expect("overwrites complete in time");
    }
    server.child.start_kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    for writer in writers {
        let err = tokio::time::timeout_at((killed + Duration::from_secs(1)).into(), writer)
            .await
            .expect("a pending write failed within a second of the kill")
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err}");
    }
    tokio::time::timeout(WAIT, server.child.wait())
        .await
        .expect("the killed server was reaped")
        .unwrap();

    // A write's temporary file is anonymous (O_TMPFILE) while it is filled, but Linux cannot
    // rename an anonymous file over a name: cap-tempfile links it under a random name and then
    // renames that. A kill between those two calls leaves the linked name behind. It always
    // holds a whole new version (it is linked only once filled); nothing else may be there.
    let expected_names: BTreeSet<String> = (0..FILES).map(|f| format!("f{f}")).collect();
    let leftovers: Vec<String> = names_in(&ws).difference(&expected_names).cloned().collect();
    assert!(leftovers.len() <= FILES, "{leftovers:?}");
    for name in &leftovers {
        let contents = std::fs::read(ws.join(name)).unwrap();
        let whole = (0..FILES).any(|file| version_of(file, &contents).is_some());
        assert!(whole, "{name} is not a whole version of any file");
        std::fs::remove_file(ws.join(name)).unwrap();
    }
    for file in 0..FILES {
        assert!(
            names_in(&ws).contains(&format!("f{file}")),
            "f{file} is gone"
        );
    }
    let mut versions = Vec::new();
    for file in 0..FILES {
        let contents = std::fs::read(ws.join(format!("f{file}"))).unwrap();
        let version = version_of(file, &contents).unwrap_or_else(|| {
            panic!(
                "f{file} holds no single version ({} bytes, starts {:?})",
                contents.len(),
                String::from_utf8_lossy(&contents[..contents.len().min(40)])
            )
        });
        assert!(version <= issued[file].load(Ordering::SeqCst));
        versions.push(version);
    }
    assert!(versions.iter().any(|&v| v > 0), "no overwrite landed");

    // A new server on the same root serves the files as they are, and takes new writes.
    let server = ServerProcess::start(&ws).await;
    let fs = connect(&server.url).await;
    for (file, &version) in versions.iter().enumerate() {
        let path = abs(&ws.join(format!("f{file}")));
        assert_eq!(
            fs.read_file(&path).await.unwrap(),
            version_contents(file, version)
        );
        let next = version_contents(file, version + 1);
        fs.write_file(&path, next.clone()).await.unwrap();
        assert_eq!(fs.read_file(&path).await.unwrap(), next);
    }
    server.stop().await;
}

/// File descriptors of process `pid` that point at a deleted file under `dir`: an unfinished
/// O_TMPFILE temporary file is one.
fn deleted_files_open_under(pid: u32, dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .map(|target| target.display().to_string())
        .filter(|target| target.starts_with(&prefix) && target.ends_with(" (deleted)"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_upload_leaves_the_old_file_and_no_temporary() {
    let (_dir, ws) = workspace();
    let destination = ws.join("dest.bin");
    std::fs::write(&destination, b"old contents").unwrap();
    let (server, mut stderr) = ServerProcess::start_with_stderr(&[
        "--root".as_ref(),
        ws.as_os_str(),
        "--audit-log".as_ref(),
        "-".as_ref(),
    ])
    .await;

    let mut peer = RawPeer::ready(&server.url).await;
    let size = 4 * DATA_CHUNK_BYTES as u64;
    peer.send(json!({"id": 1, "method": "capfs/writeFileStream",
                     "params": {"path": destination, "streamId": 7, "size": size}}))
        .await;
    // Half of the data, then the socket goes away without a close frame.
    for _ in 0..2 {
        let mut frame = data_frame_header(7).to_vec();
        frame.extend(std::iter::repeat_n(b'N', DATA_CHUNK_BYTES));
        peer.ws.send(WsMessage::binary(frame)).await.unwrap();
    }
    let server_side_temporaries_before = deleted_files_open_under(server.pid(), &ws);
    drop(peer);

    // The server notices: the upload ends, and its audit line says how.
    let line = tokio::time::timeout(WAIT, async {
        loop {
            let line = stderr.recv().await.expect("the server is still running");
            if line.contains("capfs/writeFileStream") {
                return serde_json::from_str::<Value>(&line).unwrap();
            }
        }
    })
    .await
    .expect("the upload was given up in time");
    assert_ne!(line["outcome"], "ok", "{line}");
    assert_eq!(line["paths"], json!([destination]));

    assert_eq!(std::fs::read(&destination).unwrap(), b"old contents");
    assert_eq!(names_in(&ws), BTreeSet::from(["dest.bin".to_string()]));
    assert_eq!(
        deleted_files_open_under(server.pid(), &ws),
        Vec::<String>::new(),
        "the temporary file was closed (open before the disconnect: {server_side_temporaries_before:?})"
    );
    let fs = connect(&server.url).await;
    assert_eq!(
        fs.read_file(&abs(&destination)).await.unwrap(),
        b"old contents"
    );
    drop(fs);
    server.stop().await;
}

/// A small deterministic generator, so a failing run can be replayed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// One client's share of a round: `ops` mixed operations in its own directory, checked against
/// a model of what the directory must hold. Returns the number of requests it sent.
async fn mixed_operations(
    fs: &RemoteFileSystem,
    dir: &AbsolutePathBuf,
    seed: u64,
    ops: usize,
) -> u64 {
    let mut rng = Lcg(seed);
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let path = |name: &str| dir.join(name).unwrap();
    let mut requests = 0u64;
    let mut count = |n: u64| requests += n;
    fs.create_directory(dir, CreateDirectoryOptions { recursive: true })
        .await
        .unwrap();
    count(1);
    for op in 0..ops {
        let names: Vec<String> = model.keys().cloned().collect();
        let pick = |rng: &mut Lcg| names[rng.below(names.len() as u64) as usize].clone();
        let choice = if names.is_empty() { 0 } else { rng.below(10) };
        match choice {
            0..=2 => {
                let name = format!("n{}", rng.below(24));
                // One write in 40 is large enough for data frames.
                let len = if rng.below(40) == 0 {
                    70_000 + rng.below(50_000) as usize
                } else {
                    rng.below(3_000) as usize
                };
                let contents: Vec<u8> =
                    format!("<{seed}:{op}>").bytes().cycle().take(len).collect();
                fs.write_file(&path(&name), contents.clone()).await.unwrap();
                assert_eq!(fs.read_file(&path(&name)).await.unwrap(), contents);
                count(2);
                model.insert(name, contents);
            }
            3 | 4 => {
                let name = pick(&mut rng);
                assert_eq!(fs.read_file(&path(&name)).await.unwrap(), model[&name]);
                count(1);
            }
            5 => {
                let name = pick(&mut rng);
                let metadata = fs.get_metadata(&path(&name)).await.unwrap();
                assert!(metadata.is_file);
                assert_eq!(metadata.size, model[&name].len() as u64);
                count(1);
            }
            6 => {
                let listed: BTreeSet<String> = fs
                    .read_directory(dir)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|e| e.file_name)
                    .collect();
                let expected: BTreeSet<String> = model.keys().cloned().collect();
                assert_eq!(listed, expected);
                count(1);
            }
            7 => {
                let (from, to) = (pick(&mut rng), format!("n{}", rng.below(24)));
                if from == to {
                    continue; // a copy onto itself is refused by design
                }
                fs.copy(&path(&from), &path(&to), CopyOptions::default())
                    .await
                    .unwrap();
                count(1);
                let contents = model[&from].clone();
                model.insert(to, contents);
            }
            8 => {
                let (from, to) = (pick(&mut rng), format!("n{}", rng.below(24)));
                if from == to {
                    continue; // a copy onto itself is refused by design
                }
                fs.rename(&path(&from), &path(&to), RenameOptions { overwrite: true })
                    .await
                    .unwrap();
                count(1);
                let contents = model.remove(&from).unwrap();
                model.insert(to, contents);
            }
            _ => {
                let name = pick(&mut rng);
                fs.remove(
                    &path(&name),
                    RemoveOptions {
                        recursive: false,
                        force: false,
                    },
                )
                .await
                .unwrap();
                count(1);
                model.remove(&name);
            }
        }
    }
    // Every file the model holds reads back intact, then the directory goes.
    for (name, contents) in &model {
        assert_eq!(&fs.read_file(&path(name)).await.unwrap(), contents);
        count(1);
    }
    fs.remove(
        dir,
        RemoveOptions {
            recursive: true,
            force: false,
        },
    )
    .await
    .unwrap();
    count(1);
    requests
}

/// The server's resident set size in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/PID/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Runs a warm-up round and three measured rounds of `clients` concurrent clients (each on its own new connection) doing
/// `ops` mixed operations, then checks the audit log holds one whole JSON line per request.
async fn rounds_of_mixed_clients(clients: u64, ops: usize) {
    let (dir, ws) = workspace();
    let audit = dir.path().join("audit.jsonl");
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--audit-log".as_ref(),
            audit.as_os_str(),
        ],
        // glibc keeps freed memory where it was freed, which hides what the server holds:
        // - each thread that allocates under contention gets an arena of its own (up to 8 per
        //   core), each keeping its free memory;
        // - the mmap threshold rises to the largest block freed so far, after which 256 KiB
        //   data frames and file buffers come from the heaps and their peak stays resident;
        // - every thread keeps a cache of freed small blocks (tcache), and the blocking pool
        //   grows to hundreds of threads here, each filling its cache a little more per round.
        // Measured at full size in release: with two arenas alone RSS went 56 -> 80 -> 80 MiB;
        // adding the fixed threshold it rose 4-5 MiB per round for six rounds, even with one
        // arena (anonymous memory; no descriptor growth); with the thread caches off as well
        // it stayed at 16.5, 17.0, 16.6 MiB. So the test switches all three
        // off, and what remains is what the server holds.
        &[
            ("MALLOC_ARENA_MAX", "2"),
            ("MALLOC_MMAP_THRESHOLD_", "131072"),
            ("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0"),
        ],
    )
    .await;
    let root = abs(&ws);
    let mut rss = Vec::new();
    let mut requests = 0u64;
    // Round 0 warms up and is not measured; rounds 1 to 3 are.
    for round in 0..4u64 {
        let mut tasks = Vec::new();
        for client in 0..clients {
            let url = server.url.clone();
            let dir = root.join(format!("r{round}c{client}")).unwrap();
            tasks.push(tokio::spawn(async move {
                let fs = connect(&url).await;
                // `initialize` is a request too.
                1 + mixed_operations(&fs, &dir, round * 1_000 + client + 1, ops).await
            }));
        }
        for task in tasks {
            requests += task.await.unwrap();
        }
        assert_eq!(names_in(&ws), BTreeSet::new());
        if round > 0 {
            rss.push(rss_kib(server.pid()));
        }
    }
    // The warm-up round grows what is allocated once and kept: the blocking thread pool and its
    // stacks, the malloc arenas, tokio's and tracing's buffers. With the allocator settings
    // above, the full-size rounds measured 16.5, 17.0 and 16.6 MiB. Rounds 1 to 3 repeat the same work on new connections, so anything
    // that grows with requests or connections (a buffer kept per request, an upload or download
    // entry never removed, a connection's tasks) shows up as steady growth. 8 MiB leaves room
    // for the allocator's wandering; at full size (64 x 1,000 per round, about 150,000 requests
    // over two rounds) a leak of 64 bytes per request would exceed it.
    eprintln!("server VmRSS after measured rounds 1, 2, 3: {rss:?} KiB");
    assert!(
        rss[2] <= rss[0] + 8 * 1024,
        "server RSS grew across rounds: {rss:?} KiB"
    );
    server.stop().await;
    let text = std::fs::read_to_string(&audit).unwrap();
    let mut lines = 0u64;
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).expect("whole JSON lines only");
        assert_eq!(record["outcome"], "ok", "{record}");
        lines += 1;
    }
    assert_eq!(lines, requests, "one audit line per request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_see_no_errors_and_server_memory_stays_flat() {
    rounds_of_mixed_clients(16, 150).await;
}

/// The full-size run (64 clients × 1,000 operations × 3 rounds); `.ci/run` runs it in release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size: run with cargo test --release --test it -- --ignored faults::"]
async fn sixty_four_clients_times_a_thousand_operations() {
    rounds_of_mixed_clients(64, 1_000).await;
}

/// Raises this process's open-file soft limit to its hard limit (children inherit it).
fn raise_open_file_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_idle_connections_and_a_clear_refusal_beyond() {
    raise_open_file_limit();
    let (_dir, ws) = workspace();
    let server = ServerProcess::start_with(
        &[
            "--root".as_ref(),
            ws.as_os_str(),
            "--max-connections".as_ref(),
            "500".as_ref(),
        ],
        &[],
    )
    .await;
    let mut idle = Vec::new();
    for _ in 0..499 {
        idle.push(RawPeer::connect(&server.url).await);
    }
    // The 500th works.
    let fs = connect(&server.url).await;
    assert!(fs.get_metadata(&abs(&ws)).await.unwrap().is_directory);
    // The 501st is refused, clearly.
    let refused = RemoteFileSystem::connect(&server.url, RemoteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");
    assert!(refused.to_string().contains("503"), "{refused}");
    assert!(
        refused.to_string().contains("too many connections"),
        "{refused}"
    );
    // The idle ones still work.
    let mut first = idle.swap_remove(0);
    let reply = first
        .request("initialize", json!({"clientName": "idle"}))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");

    // A slot freed is a slot the next client gets, once the server has seen the close.
    first.ws.close(None).await.unwrap();
    while first.next().await.is_some() {}
    let deadline = Instant::now() + WAIT;
    let again = loop {
        match RemoteFileSystem::connect(&server.url, RemoteOptions::default()).await {
            Ok(fs) => break fs,
            Err(e) if e.kind() == ErrorKind::ConnectionRefused && Instant::now() < deadline => {
                tokio::task::yield_now().await;
            }
            Err(e) => panic!("the freed slot was not given out: {e}"),
        }
    };
    assert!(again.get_metadata(&abs(&ws)).await.unwrap().is_directory);
    drop((idle, fs, again));
    server.stop().await;
}
