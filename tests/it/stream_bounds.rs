//! What one client can hold on a server, and streams at their edges: no blocking thread waits
//! on a peer, file work is bounded per connection and per server, streams time out and abort
//! cleanly, data frames and requests never wait on each other, replies stay within the message
//! limit, and unsized writes work end to end.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{self, InProcessServer};
use crate::serve::{RawPeer, WAIT, error_of, workspace};
use async_trait::async_trait;
use capfs::protocol::{DATA_FRAME_LAST_TAG, data_frame_header};
use capfs::server::ServerConfig;
use capfs::{
    AbsolutePathBuf, Access, CopyOptions, CreateDirectoryOptions, ExecutorFileSystem, FileMetadata,
    FileSystemResult, LocalFileSystem, ReadDirectoryEntry, RemoteFileSystem, RemoteOptions,
    RemoveOptions, RenameOptions, Sandbox, WriteOptions,
};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// A local file system over `ws`, as the server takes it.
fn local(ws: &Path) -> Arc<dyn ExecutorFileSystem> {
    let sandbox = Sandbox::new().with_root(ws, Access::ReadWrite).unwrap();
    Arc::new(LocalFileSystem::new(sandbox))
}

fn abs(path: &Path) -> AbsolutePathBuf {
    AbsolutePathBuf::new(path).unwrap()
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

async fn client(url: &str) -> RemoteFileSystem {
    RemoteFileSystem::connect(url, RemoteOptions::default())
        .await
        .unwrap()
}

/// Sends a data frame of `stream_id` with the given tag.
async fn data_frame(peer: &mut RawPeer, tag: u8, stream_id: u64, payload: &[u8]) {
    let mut frame = data_frame_header(stream_id).to_vec();
    frame[0] = tag;
    frame.extend_from_slice(payload);
    peer.ws
        .send(WsMessage::Binary(frame.into()))
        .await
        .expect("send a data frame");
}

/// Sends a request with id `id` without waiting for its reply.
async fn send_request(peer: &mut RawPeer, id: i64, method: &str, params: Value) {
    peer.send(json!({"id": id, "method": method, "params": params}))
        .await;
}

/// Waits for the replies to every id in `ids`, in whatever order they come, and returns them.
async fn replies(peer: &mut RawPeer, ids: impl IntoIterator<Item = i64>) -> Vec<Value> {
    let mut waiting: std::collections::HashSet<i64> = ids.into_iter().collect();
    let mut got = Vec::new();
    while !waiting.is_empty() {
        let message = peer
            .next()
            .await
            .expect("a reply before the connection closed");
        if let Some(id) = message.get("id").and_then(Value::as_i64)
            && waiting.remove(&id)
        {
            got.push(message);
        }
    }
    got
}

/// A well-behaved client's everyday calls, each bounded in time.
async fn everyday_calls_succeed(url: &str, ws: &Path, tag: &str) {
    let calls = async {
        let fs = client(url).await;
        let file = abs(&ws.join(format!("ok-{tag}")));
        fs.write_file(&file, b"fine".to_vec()).await?;
        assert_eq!(fs.read_file(&file).await?, b"fine");
        fs.read_directory(&abs(ws)).await?;
        let copy = abs(&ws.join(format!("ok-{tag}-copy")));
        fs.copy(&file, &copy, CopyOptions::default()).await?;
        fs.remove(&copy, RemoveOptions::default()).await?;
        std::io::Result::Ok(())
    };
    tokio::time::timeout(WAIT, calls)
        .await
        .unwrap_or_else(|_| panic!("{tag}: a well-behaved client hung"))
        .unwrap_or_else(|e| panic!("{tag}: {e}"));
}

/// A runtime whose blocking pool has only `threads` threads, so that a server parking one per
/// waiting stream runs out at once.
fn small_pool_runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(threads)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn streamed_writes_waiting_for_data_hold_no_blocking_thread() {
    small_pool_runtime(4).block_on(async {
        let (_dir, ws) = workspace();
        let server = InProcessServer::start(local(&ws), ServerConfig::default()).await;
        // Twice as many stalled writes as the pool has threads, on two connections.
        let mut hostile = Vec::new();
        for c in 0..2 {
            let mut peer = RawPeer::ready(&server.url).await;
            for i in 0..4 {
                let path = text(&ws.join(format!("stalled-{c}-{i}")));
                let params = json!({"path": path, "streamId": i + 1, "size": 10});
                send_request(&mut peer, 100 + i, "capfs/writeFileStream", params).await;
                data_frame(&mut peer, 0, (i + 1) as u64, b"12345").await;
            }
            // Once this is answered, the connection has read the writes and started them.
            let stat = json!({"path": text(&ws)});
            let reply = peer.request("fs/getMetadata", stat).await;
            assert!(reply.get("result").is_some(), "{reply}");
            hostile.push(peer);
        }
        everyday_calls_succeed(&server.url, &ws, "writes").await;
        drop(hostile);
    });
}

#[test]
fn streamed_reads_to_a_peer_that_never_reads_hold_no_blocking_thread() {
    small_pool_runtime(4).block_on(async {
        let (_dir, ws) = workspace();
        // Larger than the connection's queue of frames and the socket buffers together.
        std::fs::write(ws.join("big"), vec![7u8; 48 << 20]).unwrap();
        let server = InProcessServer::start(local(&ws), ServerConfig::default()).await;
        let mut hostile = Vec::new();
        for c in 0..6 {
            let mut peer = RawPeer::ready(&server.url).await;
            let params = json!({"path": text(&ws.join("big")), "streamId": c + 1});
            send_request(&mut peer, 10, "capfs/readFileStream", params).await;
            // One frame shows the read is sending; then this peer never reads again.
            let first = tokio::time::timeout(WAIT, peer.ws.next()).await;
            let started = matches!(first, Ok(Some(Ok(WsMessage::Binary(_)))));
            assert!(
                started,
                "read {c} never sent a frame (no thread left for it?): {first:?}"
            );
            hostile.push(peer);
        }
        // Repeated: the reads fill their queues and socket buffers within moments, and a
        // server that parks a thread per read then has none left for these.
        for round in 0..20 {
            everyday_calls_succeed(&server.url, &ws, &format!("reads-{round}")).await;
        }
        drop(hostile);
    });
}

/// A file system whose `get_metadata` blocks until released, counting how many calls are in it
/// at once; everything else is answered at once.
struct Gate {
    inside: AtomicUsize,
    most: AtomicUsize,
    open: tokio::sync::Semaphore,
    entered: tokio::sync::Notify,
}

impl Gate {
    fn closed() -> Arc<Self> {
        Arc::new(Self {
            inside: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            open: tokio::sync::Semaphore::new(0),
            entered: tokio::sync::Notify::new(),
        })
    }
}

struct Gated(Arc<Gate>);

#[async_trait]
impl ExecutorFileSystem for Gated {
    async fn read_file(&self, _: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>> {
        Ok(Vec::new())
    }
    async fn write_file(&self, _: &AbsolutePathBuf, _: Vec<u8>) -> FileSystemResult<()> {
        Ok(())
    }
    async fn create_directory(
        &self,
        _: &AbsolutePathBuf,
        _: CreateDirectoryOptions,
    ) -> FileSystemResult<()> {
        Ok(())
    }
    async fn get_metadata(&self, _: &AbsolutePathBuf) -> FileSystemResult<FileMetadata> {
        let gate = &self.0;
        let now = gate.inside.fetch_add(1, Ordering::SeqCst) + 1;
        gate.most.fetch_max(now, Ordering::SeqCst);
        gate.entered.notify_waiters();
        let permit = gate.open.acquire().await.expect("gate open");
        permit.forget();
        gate.inside.fetch_sub(1, Ordering::SeqCst);
        Ok(FileMetadata::default())
    }
    async fn read_directory(
        &self,
        _: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>> {
        Ok(Vec::new())
    }
    async fn remove(&self, _: &AbsolutePathBuf, _: RemoveOptions) -> FileSystemResult<()> {
        Ok(())
    }
    async fn copy(
        &self,
        _: &AbsolutePathBuf,
        _: &AbsolutePathBuf,
        _: CopyOptions,
    ) -> FileSystemResult<()> {
        Ok(())
    }
    async fn rename(
        &self,
        _: &AbsolutePathBuf,
        _: &AbsolutePathBuf,
        _: RenameOptions,
    ) -> FileSystemResult<()> {
        Ok(())
    }
}

/// Waits (bounded) until `gate` has `n` calls inside.
async fn until_inside(gate: &Gate, n: usize) {
    tokio::time::timeout(WAIT, async {
        loop {
            let entered = gate.entered.notified();
            if gate.inside.load(Ordering::SeqCst) >= n {
                return;
            }
            entered.await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{n} calls never got inside"));
}

/// Starts `per_connection` getMetadata calls on each of `connections` connections of a server
/// over a gated file system, and returns the most calls that were inside at once.
async fn most_at_once(
    config: ServerConfig,
    connections: usize,
    per_connection: i64,
    expect: usize,
) {
    let gate = Gate::closed();
    let server = InProcessServer::start(Arc::new(Gated(Arc::clone(&gate))), config).await;
    let mut peers = Vec::new();
    for _ in 0..connections {
        let mut peer = RawPeer::ready(&server.url).await;
        for id in 0..per_connection {
            send_request(&mut peer, 10 + id, "fs/getMetadata", json!({"path": "/x"})).await;
        }
        peers.push(peer);
    }
    until_inside(&gate, expect).await;
    // Let every call through one at a time; at no point may more than `expect` be inside.
    let total = connections * per_connection as usize;
    gate.open.add_permits(total);
    for peer in &mut peers {
        for reply in replies(peer, (0..per_connection).map(|id| 10 + id)).await {
            assert!(reply.get("result").is_some(), "{reply}");
        }
    }
    assert_eq!(gate.most.load(Ordering::SeqCst), expect);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_work_is_bounded_per_connection() {
    let config = ServerConfig {
        max_blocking_per_connection: 3,
        ..ServerConfig::default()
    };
    most_at_once(config, 1, 12, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_work_is_bounded_across_the_server() {
    let config = ServerConfig {
        max_blocking: 4,
        ..ServerConfig::default()
    };
    most_at_once(config, 3, 6, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_file_system_call_does_not_stall_the_read_loop() {
    let gate = Gate::closed();
    let server =
        InProcessServer::start(Arc::new(Gated(Arc::clone(&gate))), ServerConfig::default()).await;
    let mut peer = RawPeer::ready(&server.url).await;
    send_request(&mut peer, 5, "fs/getMetadata", json!({"path": "/x"})).await;
    until_inside(&gate, 1).await;
    // The getMetadata hangs; the connection still reads and answers the next request.
    let reply = peer
        .request("fs/readDirectory", json!({"path": "/x"}))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
    gate.open.add_permits(1);
    let reply = peer.reply_to(&json!(5)).await;
    assert!(reply.get("result").is_some(), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_data_frame_aborts_a_write_at_once_and_leaves_the_old_file() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("f"), b"old contents").unwrap();
    let server = InProcessServer::start(local(&ws), ServerConfig::default()).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let params = json!({"path": text(&ws.join("f")), "streamId": 3, "size": 10});
    send_request(&mut peer, 7, "capfs/writeFileStream", params).await;
    data_frame(&mut peer, 0, 3, b"12345").await;
    data_frame(&mut peer, 0, 3, b"").await;
    let reply = peer.reply_to(&json!(7)).await;
    let (_, kind, message) = error_of(&reply);
    assert_eq!(kind, Some("ConnectionAborted"), "{reply}");
    assert!(message.contains("aborted"), "{message}");
    assert_eq!(std::fs::read(ws.join("f")).unwrap(), b"old contents");
    assert_eq!(names(&ws), ["f"]);
    // The connection carries on.
    let reply = peer
        .request("fs/getMetadata", json!({"path": text(&ws.join("f"))}))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_streamed_write_times_out_and_leaves_the_old_file() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("f"), b"old contents").unwrap();
    let config = ServerConfig {
        stream_idle_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let server = InProcessServer::start(local(&ws), config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    for (id, sent) in [(7, &b"12345"[..]), (8, &b""[..])] {
        let params = json!({"path": text(&ws.join("f")), "streamId": id, "size": 10});
        send_request(&mut peer, id, "capfs/writeFileStream", params).await;
        if !sent.is_empty() {
            data_frame(&mut peer, 0, id as u64, sent).await;
        }
        let reply = peer.reply_to(&json!(id)).await;
        let (_, kind, _) = error_of(&reply);
        assert_eq!(kind, Some("TimedOut"), "{reply}");
    }
    assert_eq!(std::fs::read(ws.join("f")).unwrap(), b"old contents");
    assert_eq!(names(&ws), ["f"]);
}

/// Wraps a file system and reports the outcome of every `read_file_to`.
struct Watched {
    inner: Arc<dyn ExecutorFileSystem>,
    reads: tokio::sync::mpsc::UnboundedSender<std::io::Result<u64>>,
}

#[async_trait]
impl ExecutorFileSystem for Watched {
    async fn read_file(&self, path: &AbsolutePathBuf) -> FileSystemResult<Vec<u8>> {
        self.inner.read_file(path).await
    }
    async fn read_file_to(
        &self,
        path: &AbsolutePathBuf,
        writer: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> FileSystemResult<u64> {
        let result = self.inner.read_file_to(path, writer, progress).await;
        let copy = match &result {
            Ok(n) => Ok(*n),
            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
        };
        let _ = self.reads.send(copy);
        result
    }
    async fn write_file(&self, path: &AbsolutePathBuf, data: Vec<u8>) -> FileSystemResult<()> {
        self.inner.write_file(path, data).await
    }
    async fn create_directory(
        &self,
        path: &AbsolutePathBuf,
        options: CreateDirectoryOptions,
    ) -> FileSystemResult<()> {
        self.inner.create_directory(path, options).await
    }
    async fn get_metadata(&self, path: &AbsolutePathBuf) -> FileSystemResult<FileMetadata> {
        self.inner.get_metadata(path).await
    }
    async fn read_directory(
        &self,
        path: &AbsolutePathBuf,
    ) -> FileSystemResult<Vec<ReadDirectoryEntry>> {
        self.inner.read_directory(path).await
    }
    async fn remove(&self, path: &AbsolutePathBuf, options: RemoveOptions) -> FileSystemResult<()> {
        self.inner.remove(path, options).await
    }
    async fn copy(
        &self,
        a: &AbsolutePathBuf,
        b: &AbsolutePathBuf,
        options: CopyOptions,
    ) -> FileSystemResult<()> {
        self.inner.copy(a, b, options).await
    }
    async fn rename(
        &self,
        a: &AbsolutePathBuf,
        b: &AbsolutePathBuf,
        options: RenameOptions,
    ) -> FileSystemResult<()> {
        self.inner.rename(a, b, options).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_read_to_a_peer_that_stops_reading_times_out() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("big"), vec![1u8; 48 << 20]).unwrap();
    let (reads, mut outcomes) = tokio::sync::mpsc::unbounded_channel();
    let fs = Arc::new(Watched {
        inner: local(&ws),
        reads,
    });
    let config = ServerConfig {
        stream_idle_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let server = InProcessServer::start(fs, config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let params = json!({"path": text(&ws.join("big")), "streamId": 1});
    send_request(&mut peer, 9, "capfs/readFileStream", params).await;
    let outcome = tokio::time::timeout(WAIT, outcomes.recv())
        .await
        .expect("the stalled read ended in time")
        .expect("an outcome");
    assert_eq!(outcome.unwrap_err().kind(), ErrorKind::TimedOut);
    drop(peer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_writes_filling_every_slot_never_block_the_data_they_wait_for() {
    let (_dir, ws) = workspace();
    let config = ServerConfig {
        max_in_flight: 8,
        ..ServerConfig::default()
    };
    let server = InProcessServer::start(local(&ws), config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    // Every in-flight slot taken by a streamed write waiting for its data...
    for id in 1..=8 {
        let params = json!({"path": text(&ws.join(format!("w{id}"))), "streamId": id, "size": 4});
        send_request(&mut peer, id, "capfs/writeFileStream", params).await;
    }
    // ...then ordinary requests, which must wait for a slot without stopping the reader...
    for id in 100..104 {
        send_request(
            &mut peer,
            id,
            "fs/readDirectory",
            json!({"path": text(&ws)}),
        )
        .await;
    }
    // ...then the data the writes wait for.
    for id in 1..=8 {
        data_frame(&mut peer, 0, id as u64, b"data").await;
    }
    for reply in replies(&mut peer, (1..=8).chain(100..104)).await {
        assert!(reply.get("result").is_some(), "{reply}");
    }
    for id in 1..=8 {
        assert_eq!(std::fs::read(ws.join(format!("w{id}"))).unwrap(), b"data");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_file_reply_over_the_message_limit_is_refused_with_the_streamed_method() {
    let (_dir, ws) = workspace();
    let limit = 1 << 20;
    let config = ServerConfig {
        max_message_bytes: limit,
        ..ServerConfig::default()
    };
    // Its base64 (4/3 of it) exceeds the limit; the smaller one's fits.
    std::fs::write(ws.join("big"), vec![1u8; 900 * 1024]).unwrap();
    std::fs::write(ws.join("small"), vec![2u8; 600 * 1024]).unwrap();
    let server = InProcessServer::start(local(&ws), config).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let reply = peer
        .request("fs/readFile", json!({"path": text(&ws.join("big"))}))
        .await;
    let (_, kind, message) = error_of(&reply);
    assert_eq!(kind, Some("InvalidInput"), "{reply}");
    assert!(message.contains(&limit.to_string()), "{message}");
    assert!(message.contains("capfs/readFileStream"), "{message}");
    let reply = peer
        .request("fs/readFile", json!({"path": text(&ws.join("small"))}))
        .await;
    let data = reply["result"]["dataBase64"].as_str().expect("contents");
    assert_eq!(data.len(), 600 * 1024 / 3 * 4);
    // The streamed read carries the big one whatever the message limit.
    let fs = client(&server.url).await;
    let mut back = Vec::new();
    let n = fs
        .read_file_to(&abs(&ws.join("big")), &mut back, &mut |_| {})
        .await
        .unwrap();
    assert_eq!((n, back.len()), (900 * 1024, 900 * 1024));
}

/// A reader that yields `data` in pieces of `piece` bytes, like a pipe.
struct Pipe {
    data: Vec<u8>,
    at: usize,
    piece: usize,
    fail_at: Option<usize>,
}

impl tokio::io::AsyncRead for Pipe {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.fail_at.is_some_and(|at| self.at >= at) {
            return std::task::Poll::Ready(Err(std::io::Error::other("the pipe broke")));
        }
        let n = self
            .piece
            .min(buf.remaining())
            .min(self.data.len() - self.at);
        let at = self.at;
        buf.put_slice(&self.data[at..at + n]);
        self.at += n;
        std::task::Poll::Ready(Ok(()))
    }
}

fn pipe(data: &[u8], fail_at: Option<usize>) -> Pipe {
    Pipe {
        data: data.to_vec(),
        at: 0,
        piece: 100_000,
        fail_at,
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 1000) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsized_writes_work_on_every_backend() {
    let data = pattern(3 * 256 * 1024 + 5);
    for backend in [
        common::Backend::Local,
        common::Backend::Remote,
        common::Backend::Relay,
    ] {
        let env = common::env(backend).await;
        for (name, data) in [("empty", &[][..]), ("big", &data[..])] {
            let path = env.p(name);
            let n = env
                .fs
                .write_file_from(
                    &path,
                    &mut pipe(data, None),
                    None,
                    WriteOptions::default(),
                    &mut |_| {},
                )
                .await
                .unwrap_or_else(|e| panic!("{backend:?} {name}: {e}"));
            assert_eq!(n, data.len() as u64);
            assert_eq!(
                std::fs::read(env.ws_host(name)).unwrap(),
                data,
                "{backend:?}"
            );
        }
        // A pipe that breaks leaves the old file and nothing else.
        let before = names(&env.ws_host(""));
        let err = env
            .fs
            .write_file_from(
                &env.p("big"),
                &mut pipe(&data, Some(300_000)),
                None,
                WriteOptions::default(),
                &mut |_| {},
            )
            .await
            .unwrap_err();
        assert_ne!(err.kind(), ErrorKind::NotFound, "{backend:?}: {err}");
        assert_eq!(
            std::fs::read(env.ws_host("big")).unwrap(),
            data,
            "{backend:?}"
        );
        assert_eq!(names(&env.ws_host("")), before, "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsized_write_ends_with_its_last_frame_even_an_empty_one() {
    let (_dir, ws) = workspace();
    let server = InProcessServer::start(local(&ws), ServerConfig::default()).await;
    let mut peer = RawPeer::ready(&server.url).await;
    let params = json!({"path": text(&ws.join("a")), "streamId": 1});
    send_request(&mut peer, 1, "capfs/writeFileStream", params).await;
    data_frame(&mut peer, 0, 1, b"hello ").await;
    data_frame(&mut peer, DATA_FRAME_LAST_TAG, 1, b"world").await;
    let reply = peer.reply_to(&json!(1)).await;
    assert_eq!(reply["result"]["size"], 11, "{reply}");
    assert_eq!(std::fs::read(ws.join("a")).unwrap(), b"hello world");

    let params = json!({"path": text(&ws.join("b")), "streamId": 2});
    send_request(&mut peer, 2, "capfs/writeFileStream", params).await;
    data_frame(&mut peer, 0, 2, b"bytes").await;
    data_frame(&mut peer, DATA_FRAME_LAST_TAG, 2, b"").await;
    let reply = peer.reply_to(&json!(2)).await;
    assert_eq!(reply["result"]["size"], 5, "{reply}");
    assert_eq!(std::fs::read(ws.join("b")).unwrap(), b"bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_options_set_the_mode_without_setuid_and_the_time() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for backend in [common::Backend::Local, common::Backend::Remote] {
        let env = common::env(backend).await;
        let options = WriteOptions {
            mode: Some(0o4751),
            modified_at_ms: Some(1_000_000_123),
        };
        let path = env.p("m");
        env.fs
            .write_file_from(&path, &mut &b"abc"[..], Some(3), options, &mut |_| {})
            .await
            .unwrap();
        let metadata = std::fs::metadata(env.ws_host("m")).unwrap();
        assert_eq!(metadata.permissions().mode() & 0o7777, 0o751, "{backend:?}");
        assert_eq!(metadata.mtime(), 1_000_000, "{backend:?}");
        assert_eq!(metadata.mtime_nsec(), 123_000_000, "{backend:?}");
        // An existing file keeps its bits when no mode is given.
        std::fs::set_permissions(env.ws_host("m"), std::fs::Permissions::from_mode(0o640)).unwrap();
        env.fs
            .write_file_from(
                &path,
                &mut &b"de"[..],
                Some(2),
                WriteOptions::default(),
                &mut |_| {},
            )
            .await
            .unwrap();
        let metadata = std::fs::metadata(env.ws_host("m")).unwrap();
        assert_eq!(metadata.permissions().mode() & 0o7777, 0o640, "{backend:?}");
        assert_eq!(std::fs::read(env.ws_host("m")).unwrap(), b"de");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_not_bound_by_the_read_limit_but_read_file_is() {
    for backend in [
        common::Backend::Local,
        common::Backend::Remote,
        common::Backend::Relay,
    ] {
        let env = common::env_with_read_limit(backend, 1000).await;
        env.mkfile("big", &pattern(5000));
        let path = env.p("big");
        let err = env.fs.read_file(&path).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{backend:?}");
        assert!(
            err.to_string().contains("limit is 1000 bytes"),
            "{backend:?}: {err}"
        );
        let mut back = Vec::new();
        env.fs
            .read_file_to(&path, &mut back, &mut |_| {})
            .await
            .unwrap();
        assert_eq!(back, pattern(5000), "{backend:?}");
    }
}
