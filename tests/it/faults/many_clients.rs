//! Many clients at once: mixed operations, the server's memory, and idle connections.

use super::*;

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
/// The requests a whole-file read of `len` bytes makes: one range, and a stream after it
/// when the file holds more than the range's 16 KiB.
fn reads(len: usize) -> u64 {
    if len > 16 * 1024 { 2 } else { 1 }
}

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
    fs.create_directory(dir, CreateDirectoryOptions::default().with_recursive(true))
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
                count(1 + reads(contents.len()));
                model.insert(name, contents);
            }
            3 | 4 => {
                let name = pick(&mut rng);
                assert_eq!(fs.read_file(&path(&name)).await.unwrap(), model[&name]);
                count(reads(model[&name].len()));
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
                fs.rename(
                    &path(&from),
                    &path(&to),
                    RenameOptions::default().with_overwrite(true),
                )
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
                    RemoveOptions::default()
                        .with_recursive(false)
                        .with_force(false),
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
        count(reads(contents.len()));
    }
    fs.remove(
        dir,
        RemoveOptions::default()
            .with_recursive(true)
            .with_force(false),
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
