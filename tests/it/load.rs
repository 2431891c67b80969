//! The load test (`.ci/run`, release): the hostile connection shapes all at once against one
//! `capfs serve`, while a well-behaved client keeps working: half-open handshakes, streamed
//! writes that never get data, streamed reads never read, and whole-file reads, walks and
//! listings whose replies are never read (`unread.rs`). Every well-behaved call must succeed,
//! the server's threads and resident memory must stay under the bounds below (the memory bound
//! is the outgoing budget plus a stated margin), and the well-behaved client's latency is
//! printed next to a run without the hostile load.
//!
//! `cargo test --release --test it -- --ignored --nocapture load::`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use capfs::{AbsolutePathBuf, CopyOptions, ExecutorFileSystem, RemoveOptions};
use capfs_wire::{RemoteFileSystem, RemoteOptions};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::serve::{ServerProcess, Socket, WAIT, workspace};

mod measure;
mod unread;
use measure::{Latencies, threads_and_rss};
use unread::{UNREAD_CONNECTIONS, UnreadTargets, unread_peer};

/// The server's bound on requests doing file work at once (`--max-blocking`, its default).
const MAX_BLOCKING: u64 = 128;
/// Bound on the server's threads while the hostile load runs: `capfs serve` caps tokio's
/// blocking pools (one per connection thread, sharing the cap) at the file-work bound plus a
/// margin of 16 (a pool would otherwise run past the permit count under churn: a finished
/// task's thread is not idle yet when the next task is spawned), plus the connection threads,
/// the main thread and a few more. Without the work
/// bound, the 576 hostile streams below would each pin a thread, up to the pool's 512.
const MAX_SERVER_THREADS: u64 = MAX_BLOCKING + 16 + 16;
/// Bound on the server's resident memory while the hostile load runs: the outgoing budget
/// (`--max-outgoing-bytes`, 512 MiB by default) and the 1 MiB each connection has besides,
/// which the peers that never read their replies fill; what the stalled readers hold outside it
/// by design (their files are on a local disk and they came over TCP, so per connection the
/// writer's one frame buffer of 256 KiB); plus 320 MiB for everything else: the binary, the
/// runtimes, socket buffers, the walks' and listings' entries before they are cut, and what
/// the allocator keeps of memory given back (its arenas keep freed pages: the whole-file
/// readers alone peak about 100 MiB higher than with a fixed `mmap` threshold). Without the
/// budget, the whole-file readers alone would hold 600 MiB per connection.
const MAX_SERVER_RSS_KIB: u64 = (capfs_wire::server::DEFAULT_MAX_OUTGOING_BYTES >> 10)
    + MAX_CONNECTIONS_HERE * 1024
    + HOSTILE_CONNECTIONS as u64 * 256
    + 320 * 1024;
/// Connections open at once while the load runs: the stream shapes, the unread shapes, the two
/// single-shape peers and the well-behaved client.
const MAX_CONNECTIONS_HERE: u64 = (2 * HOSTILE_CONNECTIONS + 3 * UNREAD_CONNECTIONS + 3) as u64;
/// Rounds of the well-behaved client's workload (six calls each).
const ROUNDS: usize = 100;
/// A well-behaved call that takes longer than this counts as hung.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections of each hostile stream shape, and requests each of them keeps open.
const HOSTILE_CONNECTIONS: usize = 9;
const HOSTILE_STREAMS: usize = 64;
/// Peers that keep half an HTTP request open, dialling again whenever the server cuts them.
const HALF_OPEN_PEERS: usize = 32;
/// Size of the files the hostile readers stream.
const HOSTILE_READ_BYTES: u64 = 4 << 20;

fn abs(path: &std::path::Path) -> AbsolutePathBuf {
    AbsolutePathBuf::try_from(path).unwrap()
}

/// A raw connection past `initialize`, split so that a task can read while another writes.
async fn raw_ready(url: &str) -> (SplitSink<Socket, WsMessage>, SplitStream<Socket>) {
    let (ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .expect("connect");
    let (mut sink, mut stream) = ws.split();
    let init = json!({"id": 0, "method": "initialize", "params": {"clientName": "load"}});
    sink.send(WsMessage::text(init.to_string())).await.unwrap();
    loop {
        let frame = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("initialize answered in time")
            .expect("open")
            .expect("frame");
        if let WsMessage::Text(text) = frame {
            let reply: Value = serde_json::from_str(&text).unwrap();
            assert!(reply.get("result").is_some(), "{reply}");
            break;
        }
    }
    let initialized = json!({"method": "initialized"});
    sink.send(WsMessage::text(initialized.to_string()))
        .await
        .unwrap();
    (sink, stream)
}

fn request(id: u64, method: &str, params: Value) -> WsMessage {
    WsMessage::text(json!({"id": id, "method": method, "params": params}).to_string())
}

fn data_frame(stream_id: u64, payload: &[u8]) -> WsMessage {
    let mut frame = Vec::with_capacity(9 + payload.len());
    frame.push(0u8);
    frame.extend_from_slice(&stream_id.to_be_bytes());
    frame.extend_from_slice(payload);
    WsMessage::Binary(Bytes::from(frame))
}

/// The next JSON reply on `stream`, skipping data frames; `None` when the connection ends.
async fn next_reply(stream: &mut SplitStream<Socket>) -> Option<Value> {
    while let Some(Ok(frame)) = stream.next().await {
        match frame {
            WsMessage::Text(text) => return Some(serde_json::from_str(&text).unwrap()),
            WsMessage::Close(_) => return None,
            _ => {}
        }
    }
    None
}

/// Shape: a peer that sends half an HTTP upgrade request and then nothing, dialling again
/// whenever the server cuts it at its handshake deadline.
async fn half_open_peer(url: String, ready: Arc<AtomicUsize>, stop: Arc<AtomicBool>) {
    let address = url.strip_prefix("ws://").unwrap().to_string();
    let mut first = true;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut peer) = TcpStream::connect(&address).await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = peer
            .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n")
            .await;
        if std::mem::take(&mut first) {
            ready.fetch_add(1, Ordering::Relaxed);
        }
        let mut byte = [0u8; 1];
        while !stop.load(Ordering::Relaxed) {
            let read = tokio::time::timeout(Duration::from_millis(100), peer.read(&mut byte));
            if read.await.is_ok() {
                break;
            }
        }
    }
}

/// Shape: `HOSTILE_STREAMS` streamed writes of 10 bytes that never get their data; each one
/// the server ends (idle timeout, refusal) is replaced by a new one.
async fn silent_writer(
    url: String,
    dir: std::path::PathBuf,
    n: usize,
    ready: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) {
    let (mut sink, mut stream) = raw_ready(&url).await;
    let mut next = 1u64;
    let write = |id: u64| {
        let path = dir.join(format!("silent-{n}-{}", id % HOSTILE_STREAMS as u64));
        request(
            id,
            "capfs/writeFileStream",
            json!({"path": path, "streamId": id, "size": 10}),
        )
    };
    for _ in 0..HOSTILE_STREAMS {
        let _ = sink.send(write(next)).await;
        next += 1;
    }
    ready.fetch_add(1, Ordering::Relaxed);
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_millis(100), next_reply(&mut stream)).await {
            Ok(Some(_)) => {
                let _ = sink.send(write(next)).await;
                next += 1;
            }
            Ok(None) => return,
            Err(_) => {}
        }
    }
}

/// Shape: `HOSTILE_STREAMS` streamed reads of a 4 MiB file on a connection whose socket is
/// never read again.
async fn stalled_reader(
    url: String,
    file: std::path::PathBuf,
    ready: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) {
    let (mut sink, stream) = raw_ready(&url).await;
    for id in 1..=HOSTILE_STREAMS as u64 {
        let read = request(
            id,
            "capfs/readFileStream",
            json!({"path": file, "streamId": id}),
        );
        if sink.send(read).await.is_err() {
            return;
        }
    }
    ready.fetch_add(1, Ordering::Relaxed);
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop((sink, stream));
}

/// Shape: `HOSTILE_STREAMS` streamed writes, then an ordinary request, then the writes' data.
/// Every one of them must be answered: no arrangement of requests may deadlock a connection.
async fn writes_then_ordinary_request(url: String, dir: std::path::PathBuf) -> Result<(), String> {
    let (mut sink, mut stream) = raw_ready(&url).await;
    let count = HOSTILE_STREAMS as u64;
    for id in 1..=count {
        let path = dir.join(format!("queued-{id}"));
        let write = json!({"path": path, "streamId": id, "size": 10});
        sink.send(request(id, "capfs/writeFileStream", write))
            .await
            .unwrap();
    }
    let ordinary = request(count + 1, "fs/getMetadata", json!({"path": dir}));
    sink.send(ordinary).await.unwrap();
    for id in 1..=count {
        sink.send(data_frame(id, b"0123456789")).await.unwrap();
    }
    let mut answered = 0;
    while answered < count + 1 {
        match tokio::time::timeout(WAIT, next_reply(&mut stream)).await {
            Ok(Some(_)) => answered += 1,
            Ok(None) => return Err(format!("closed after {answered} replies")),
            Err(_) => {
                return Err(format!("deadlocked: {answered} of {} replies", count + 1));
            }
        }
    }
    Ok(())
}

/// Shape: an empty data frame after 5 of 10 bytes must fail the write at once, leaving the old
/// file as it was.
async fn empty_frame_mid_write(url: String, dir: std::path::PathBuf) -> Result<(), String> {
    let path = dir.join("aborted");
    std::fs::write(&path, b"old contents").unwrap();
    let (mut sink, mut stream) = raw_ready(&url).await;
    let write = json!({"path": path, "streamId": 7, "size": 10});
    sink.send(request(1, "capfs/writeFileStream", write))
        .await
        .unwrap();
    sink.send(data_frame(7, b"01234")).await.unwrap();
    sink.send(data_frame(7, b"")).await.unwrap();
    let reply = tokio::time::timeout(WAIT, next_reply(&mut stream))
        .await
        .map_err(|_| "no reply to a write aborted by an empty data frame".to_string())?
        .ok_or("closed")?;
    if reply.get("error").is_none() {
        return Err(format!("an aborted write succeeded: {reply}"));
    }
    let now = std::fs::read(&path).unwrap();
    if now != b"old contents" {
        return Err(format!("the old file changed: {now:?}"));
    }
    Ok(())
}

/// One well-behaved call, timed; a call that fails or hangs fails the test.
async fn timed<T>(
    what: &str,
    latencies: &mut Vec<Duration>,
    call: impl Future<Output = std::io::Result<T>>,
) -> T {
    let started = Instant::now();
    let result = tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| panic!("well-behaved {what} hung for {CALL_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("well-behaved {what} failed: {e}"));
    latencies.push(started.elapsed());
    result
}

/// The well-behaved client: connects (again every 20 rounds), then writes, reads, stats, lists,
/// copies and removes small files.
async fn well_behaved(url: &str, dir: &std::path::Path, rounds: usize) -> Latencies {
    let mut latencies = Vec::new();
    std::fs::create_dir_all(dir).unwrap();
    let base = abs(dir);
    let mut fs: Option<RemoteFileSystem> = None;
    for round in 0..rounds {
        if round % 20 == 0 {
            let connect = RemoteFileSystem::connect(url, RemoteOptions::default());
            fs = Some(timed("connect", &mut latencies, connect).await);
        }
        let fs = fs.as_ref().unwrap();
        let file = abs(&dir.join(format!("f{}", round % 8)));
        let copy = abs(&dir.join(format!("c{}", round % 8)));
        let data = vec![round as u8; 4096];
        timed(
            "writeFile",
            &mut latencies,
            fs.write_file(&file, data.clone()),
        )
        .await;
        let read = timed("readFile", &mut latencies, fs.read_file(&file)).await;
        assert_eq!(read, data);
        timed("getMetadata", &mut latencies, fs.get_metadata(&file)).await;
        timed("readDirectory", &mut latencies, fs.read_directory(&base)).await;
        let options = CopyOptions::default().with_recursive(false);
        timed("copy", &mut latencies, fs.copy(&file, &copy, options)).await;
        let options = RemoveOptions::default()
            .with_recursive(false)
            .with_force(false);
        timed("remove", &mut latencies, fs.remove(&copy, options)).await;
    }
    Latencies(latencies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "load test: run in release by .ci/run"]
async fn hostile_shapes_at_once_never_starve_a_well_behaved_client() {
    let (_dir, ws) = workspace();
    let server = ServerProcess::start(&ws).await;
    let pid = server.pid();
    let url = server.url.clone();

    // A warm-up first, so that the quiet run does not pay for first-time set-up alone.
    well_behaved(&url, &ws.join("warm-up"), ROUNDS / 10).await;
    let quiet = well_behaved(&url, &ws.join("good"), ROUNDS).await;
    let (quiet_threads, quiet_rss) = threads_and_rss(pid).expect("the server's /proc status");

    let hostile_dir = ws.join("hostile");
    std::fs::create_dir(&hostile_dir).unwrap();
    let big = hostile_dir.join("big");
    std::fs::write(&big, vec![0x5au8; HOSTILE_READ_BYTES as usize]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let mut hostile = JoinSet::new();
    for _ in 0..HALF_OPEN_PEERS {
        hostile.spawn(half_open_peer(
            url.clone(),
            Arc::clone(&ready),
            Arc::clone(&stop),
        ));
    }
    for n in 0..HOSTILE_CONNECTIONS {
        hostile.spawn(silent_writer(
            url.clone(),
            hostile_dir.clone(),
            n,
            Arc::clone(&ready),
            Arc::clone(&stop),
        ));
        hostile.spawn(stalled_reader(
            url.clone(),
            big.clone(),
            Arc::clone(&ready),
            Arc::clone(&stop),
        ));
    }
    let targets = Arc::new(UnreadTargets::plant(&hostile_dir));
    for kind in 0..3 {
        for _ in 0..UNREAD_CONNECTIONS {
            hostile.spawn(unread_peer(
                url.clone(),
                kind,
                Arc::clone(&targets),
                Arc::clone(&ready),
                Arc::clone(&stop),
            ));
        }
    }
    // The well-behaved client starts once every hostile peer has sent what it holds open.
    let hostile_peers = HALF_OPEN_PEERS + 2 * HOSTILE_CONNECTIONS + 3 * UNREAD_CONNECTIONS;
    let deadline = Instant::now() + WAIT;
    while ready.load(Ordering::Relaxed) < hostile_peers {
        assert!(
            Instant::now() < deadline,
            "the hostile peers did not set up"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let queued = tokio::spawn(writes_then_ordinary_request(
        url.clone(),
        hostile_dir.clone(),
    ));
    let aborted = tokio::spawn(empty_frame_mid_write(url.clone(), hostile_dir.clone()));

    // Samples the server while the well-behaved client works beside the hostile load.
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = Arc::clone(&sampling);
        tokio::spawn(async move {
            let mut peak = (0u64, 0u64);
            while sampling.load(Ordering::Relaxed) {
                let Some((threads, rss)) = threads_and_rss(pid) else {
                    break;
                };
                peak = (peak.0.max(threads), peak.1.max(rss));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            peak
        })
    };
    let loaded = well_behaved(&url, &ws.join("good-under-load"), ROUNDS).await;
    sampling.store(false, Ordering::Relaxed);
    let (peak_threads, peak_rss) = sampler.await.unwrap();

    let queued = queued.await.unwrap();
    let aborted = aborted.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    while hostile.join_next().await.is_some() {}

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "load: well-behaved client, {} calls per run: p50 {:.2} ms / p99 {:.2} ms without \
         hostile load; p50 {:.2} ms / p99 {:.2} ms with it",
        quiet.0.len(),
        ms(quiet.percentile(0.5)),
        ms(quiet.percentile(0.99)),
        ms(loaded.percentile(0.5)),
        ms(loaded.percentile(0.99)),
    );
    println!(
        "load: server threads {quiet_threads} idle, peak {peak_threads} under load (bound \
         {MAX_SERVER_THREADS}); RSS {} MiB idle, peak {} MiB under load (bound {} MiB)",
        quiet_rss / 1024,
        peak_rss / 1024,
        MAX_SERVER_RSS_KIB / 1024
    );
    queued.expect("64 streamed writes then an ordinary request");
    aborted.expect("an empty data frame mid-write");
    assert!(peak_threads <= MAX_SERVER_THREADS, "{peak_threads} threads");
    assert!(peak_rss <= MAX_SERVER_RSS_KIB, "{peak_rss} KiB resident");
    server.stop().await;
}
